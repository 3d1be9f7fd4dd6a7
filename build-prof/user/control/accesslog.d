build-prof/user/control/accesslog.o: user/control/accesslog.c \
 user/control/accesslog.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/control/metrics.h user/control/admin.h \
 user/lib/buf.h user/lib/http.h include/pg_frame.h user/sys/log.h
user/control/accesslog.h:
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
user/control/metrics.h:
user/control/admin.h:
user/lib/buf.h:
user/lib/http.h:
include/pg_frame.h:
user/sys/log.h:
