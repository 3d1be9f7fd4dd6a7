build-prof/user/control/metrics.o: user/control/metrics.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 user/control/accesslog.h user/gateway.h user/lib/balancer.h \
 user/config/config.h user/state/maps.h user/control/metrics.h \
 user/control/admin.h user/lib/buf.h user/lib/http.h include/pg_frame.h \
 user/state/route.h user/lib/cacheidx.h user/lib/key.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
user/control/accesslog.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/control/metrics.h:
user/control/admin.h:
user/lib/buf.h:
user/lib/http.h:
include/pg_frame.h:
user/state/route.h:
user/lib/cacheidx.h:
user/lib/key.h:
