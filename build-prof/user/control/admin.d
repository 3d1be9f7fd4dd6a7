build-prof/user/control/admin.o: user/control/admin.c \
 user/control/admin.h user/lib/buf.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/lib/http.h include/pg_frame.h \
 user/config/config.h user/control/control.h user/lib/json.h \
 user/lib/key.h user/control/metrics.h user/state/route.h \
 user/lib/cacheidx.h
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
user/config/config.h:
user/control/control.h:
user/lib/json.h:
user/lib/key.h:
user/control/metrics.h:
user/state/route.h:
user/lib/cacheidx.h:
