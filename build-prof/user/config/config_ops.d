build-prof/user/config/config_ops.o: user/config/config_ops.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 user/config/config_internal.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config_internal.h:
