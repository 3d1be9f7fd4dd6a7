build-prof/user/sys/lifecycle.o: user/sys/lifecycle.c \
 user/sys/lifecycle.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/sys/log.h
user/sys/lifecycle.h:
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
user/sys/log.h:
