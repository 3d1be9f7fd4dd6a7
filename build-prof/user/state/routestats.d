build-prof/user/state/routestats.o: user/state/routestats.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 user/state/routestats.h user/gateway.h user/lib/balancer.h \
 user/config/config.h user/state/maps.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
user/state/routestats.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
