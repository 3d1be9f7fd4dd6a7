build-prof/user/proxy/upstream.o: user/proxy/upstream.c \
 user/control/metrics.h user/control/admin.h user/lib/buf.h \
 user/gateway.h user/lib/balancer.h include/prefixgate.h \
 user/config/config.h user/lib/balancer.h user/state/maps.h \
 user/lib/http.h include/pg_frame.h user/datapath/datapath.h \
 user/proxy/worker.h user/proxy/conn.h user/lib/key.h user/proxy/sock.h \
 user/lib/boundary.h user/lib/forward.h user/sys/lifecycle.h
user/control/metrics.h:
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
user/datapath/datapath.h:
user/proxy/worker.h:
user/proxy/conn.h:
user/lib/key.h:
user/proxy/sock.h:
user/lib/boundary.h:
user/lib/forward.h:
user/sys/lifecycle.h:
