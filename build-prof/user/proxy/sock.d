build-prof/user/proxy/sock.o: user/proxy/sock.c user/proxy/sock.h \
 user/proxy/worker.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/proxy/conn.h include/pg_frame.h user/lib/http.h \
 user/lib/key.h
user/proxy/sock.h:
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
