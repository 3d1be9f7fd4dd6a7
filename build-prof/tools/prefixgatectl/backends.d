build-prof/tools/prefixgatectl/backends.o: tools/prefixgatectl/backends.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 tools/prefixgatectl/ctl.h user/lib/json.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
tools/prefixgatectl/ctl.h:
user/lib/json.h:
