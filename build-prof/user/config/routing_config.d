build-prof/user/config/routing_config.o: user/config/routing_config.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 user/config/config_internal.h user/lib/json.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config_internal.h:
user/lib/json.h:
