build-prof/user/config/config.o: user/config/config.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 user/config/config_internal.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config_internal.h:
