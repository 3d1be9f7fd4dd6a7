build-dev/tests/unit/test_scrape.o: tests/unit/test_scrape.c \
 user/lib/balancer.h include/prefixgate.h user/control/health.h \
 user/gateway.h user/lib/balancer.h user/config/config.h \
 user/state/maps.h user/lib/scrape.h
user/lib/balancer.h:
include/prefixgate.h:
user/control/health.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/lib/scrape.h:
