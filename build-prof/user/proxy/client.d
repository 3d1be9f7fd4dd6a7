build-prof/user/proxy/client.o: user/proxy/client.c \
 user/datapath/datapath.h user/proxy/worker.h user/gateway.h \
 user/lib/balancer.h include/prefixgate.h user/config/config.h \
 user/lib/balancer.h user/state/maps.h user/proxy/conn.h \
 include/pg_frame.h user/lib/http.h user/lib/key.h user/proxy/sock.h \
 user/lib/boundary.h user/lib/buf.h user/lib/forward.h user/proxy/reply.h \
 user/state/route.h user/lib/cacheidx.h user/sys/lifecycle.h
user/datapath/datapath.h:
user/proxy/worker.h:
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
user/proxy/conn.h:
include/pg_frame.h:
user/lib/http.h:
user/lib/key.h:
user/proxy/sock.h:
user/lib/boundary.h:
user/lib/buf.h:
user/lib/forward.h:
user/proxy/reply.h:
user/state/route.h:
user/lib/cacheidx.h:
user/sys/lifecycle.h:
