build-prof/user/control/health.o: user/control/health.c \
 user/lib/balancer.h include/prefixgate.h user/control/health.h \
 user/gateway.h user/lib/balancer.h user/config/config.h \
 user/state/maps.h user/sys/log.h user/lib/scrape.h
user/lib/balancer.h:
include/prefixgate.h:
user/control/health.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/sys/log.h:
user/lib/scrape.h:
