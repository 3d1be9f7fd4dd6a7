build-prof/tools/prefixgatectl/main.o: tools/prefixgatectl/main.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 tools/prefixgatectl/ctl.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
tools/prefixgatectl/ctl.h:
