build-prof/user/main.o: user/main.c user/control/accesslog.h \
 user/gateway.h user/lib/balancer.h include/prefixgate.h \
 user/config/config.h user/lib/balancer.h user/state/maps.h \
 user/lib/cacheidx.h user/control/control.h user/datapath/datapath.h \
 user/proxy/worker.h user/proxy/conn.h include/pg_frame.h user/lib/http.h \
 user/lib/key.h user/proxy/sock.h user/control/health.h \
 user/sys/lifecycle.h user/sys/log.h user/sys/privilege.h \
 user/proxy/worker.h
user/control/accesslog.h:
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
user/lib/cacheidx.h:
user/control/control.h:
user/datapath/datapath.h:
user/proxy/worker.h:
user/proxy/conn.h:
include/pg_frame.h:
user/lib/http.h:
user/lib/key.h:
user/proxy/sock.h:
user/control/health.h:
user/sys/lifecycle.h:
user/sys/log.h:
user/sys/privilege.h:
user/proxy/worker.h:
