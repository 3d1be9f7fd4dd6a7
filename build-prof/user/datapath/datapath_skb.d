build-prof/user/datapath/datapath_skb.o: user/datapath/datapath_skb.c \
 user/datapath/datapath_internal.h user/datapath/datapath.h \
 user/proxy/worker.h user/gateway.h user/lib/balancer.h \
 include/prefixgate.h user/config/config.h user/lib/balancer.h \
 user/state/maps.h user/proxy/conn.h include/pg_frame.h user/lib/http.h \
 user/lib/key.h user/proxy/sock.h user/datapath/splice.h \
 include/pg_splice.h include/pg_frame.h user/sys/log.h
user/datapath/datapath_internal.h:
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
user/datapath/splice.h:
include/pg_splice.h:
include/pg_frame.h:
user/sys/log.h:
