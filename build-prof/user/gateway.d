build-prof/user/gateway.o: user/gateway.c user/gateway.h \
 user/lib/balancer.h include/prefixgate.h user/config/config.h \
 user/lib/balancer.h user/state/maps.h
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
