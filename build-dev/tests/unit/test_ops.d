build-dev/tests/unit/test_ops.o: tests/unit/test_ops.c \
 user/control/admin.h user/lib/buf.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/lib/http.h include/pg_frame.h \
 user/config/config.h user/sys/lifecycle.h user/sys/privilege.h
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
user/sys/lifecycle.h:
user/sys/privilege.h:
