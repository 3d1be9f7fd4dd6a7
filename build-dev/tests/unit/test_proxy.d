build-dev/tests/unit/test_proxy.o: tests/unit/test_proxy.c \
 user/control/control.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/proxy/worker.h user/proxy/conn.h \
 include/pg_frame.h user/lib/http.h user/lib/key.h user/proxy/sock.h \
 user/state/maps.h user/sys/log.h
user/control/control.h:
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
user/proxy/worker.h:
user/proxy/conn.h:
include/pg_frame.h:
user/lib/http.h:
user/lib/key.h:
user/proxy/sock.h:
user/state/maps.h:
user/sys/log.h:
