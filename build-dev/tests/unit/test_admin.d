build-dev/tests/unit/test_admin.o: tests/unit/test_admin.c \
 user/control/admin.h user/lib/buf.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/lib/http.h include/pg_frame.h \
 user/control/control.h user/sys/log.h user/control/metrics.h \
 user/lib/ring.h user/state/route.h user/lib/cacheidx.h user/lib/key.h
user/control/admin.h:
user/lib/buf.h:
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
user/lib/http.h:
include/pg_frame.h:
user/control/control.h:
user/sys/log.h:
user/control/metrics.h:
user/lib/ring.h:
user/state/route.h:
user/lib/cacheidx.h:
user/lib/key.h:
