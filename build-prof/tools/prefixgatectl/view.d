build-prof/tools/prefixgatectl/view.o: tools/prefixgatectl/view.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h \
 tools/prefixgatectl/ctl.h user/control/metrics.h user/control/admin.h \
 user/lib/buf.h user/gateway.h user/lib/balancer.h user/config/config.h \
 user/state/maps.h user/lib/http.h include/pg_frame.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
tools/prefixgatectl/ctl.h:
user/control/metrics.h:
user/control/admin.h:
user/lib/buf.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/lib/http.h:
include/pg_frame.h:
