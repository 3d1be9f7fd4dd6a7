build-prof/user/control/metrics_ops.o: user/control/metrics_ops.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 user/control/metrics.h user/control/admin.h user/lib/buf.h \
 user/gateway.h user/lib/balancer.h user/config/config.h \
 user/state/maps.h user/lib/http.h include/pg_frame.h \
 user/state/routestats.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
user/control/metrics.h:
user/control/admin.h:
user/lib/buf.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/lib/http.h:
include/pg_frame.h:
user/state/routestats.h:
