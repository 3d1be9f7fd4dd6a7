build-prof/user/state/route.o: user/state/route.c user/state/routestats.h \
 user/gateway.h user/lib/balancer.h include/prefixgate.h \
 user/config/config.h user/lib/balancer.h user/state/maps.h \
 user/state/route.h user/lib/cacheidx.h user/lib/key.h user/lib/http.h \
 include/pg_frame.h
user/state/routestats.h:
user/gateway.h:
user/lib/balancer.h:
include/prefixgate.h:
user/config/config.h:
user/lib/balancer.h:
user/state/maps.h:
user/state/route.h:
user/lib/cacheidx.h:
user/lib/key.h:
user/lib/http.h:
include/pg_frame.h:
