build-prof/user/control/members.o: user/control/members.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 user/control/control.h user/gateway.h user/lib/balancer.h \
 user/config/config.h user/state/maps.h user/control/control_internal.h \
 user/control/admin.h user/lib/buf.h user/lib/http.h include/pg_frame.h \
 user/sys/log.h user/control/metrics.h user/lib/ring.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
user/control/control.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/control/control_internal.h:
user/control/admin.h:
user/lib/buf.h:
user/lib/http.h:
include/pg_frame.h:
user/sys/log.h:
user/control/metrics.h:
user/lib/ring.h:
