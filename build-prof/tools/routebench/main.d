build-prof/tools/routebench/main.o: tools/routebench/main.c \
 user/lib/cacheidx.h include/prefixgate.h user/config/config.h \
 user/lib/balancer.h user/control/control.h user/gateway.h \
 user/lib/balancer.h user/config/config.h user/state/maps.h \
 user/sys/log.h user/state/maps.h user/state/route.h user/lib/key.h \
 user/lib/http.h include/pg_frame.h
user/lib/cacheidx.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/control/control.h:
user/gateway.h:
user/lib/balancer.h:
user/config/config.h:
user/state/maps.h:
user/sys/log.h:
user/state/maps.h:
user/state/route.h:
user/lib/key.h:
user/lib/http.h:
include/pg_frame.h:
