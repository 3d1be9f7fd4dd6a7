build-prof/user/proxy/reply.o: user/proxy/reply.c user/proxy/reply.h \
 user/proxy/conn.h include/pg_frame.h user/lib/balancer.h \
 include/prefixgate.h user/lib/http.h user/lib/key.h user/proxy/sock.h \
 user/proxy/worker.h user/gateway.h user/lib/balancer.h \
 user/config/config.h user/state/maps.h user/sys/lifecycle.h
user/proxy/reply.h:
user/proxy/conn.h:
include/pg_frame.h:
user/lib/balancer.h:
include/prefixgate.h:
user/lib/http.h:
user/lib/key.h:
user/proxy/sock.h:
user/proxy/worker.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/sys/lifecycle.h:
