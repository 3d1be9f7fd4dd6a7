build-prof/user/control/control.o: user/control/control.c \
 user/control/admin.h user/lib/buf.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/lib/http.h include/pg_frame.h \
 user/config/config.h user/control/control.h \
 user/control/control_internal.h user/sys/log.h user/control/metrics.h
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
user/control/control_internal.h:
user/sys/log.h:
user/control/metrics.h:
