build-prof/tools/prefixgatectl/cmds.o: tools/prefixgatectl/cmds.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 tools/prefixgatectl/ctl.h user/lib/json.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
tools/prefixgatectl/ctl.h:
user/lib/json.h:
