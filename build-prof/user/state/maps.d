build-prof/user/state/maps.o: user/state/maps.c user/sys/log.h \
 user/state/maps.h include/prefixgate.h user/lib/ring.h \
 build-prof/prefixgate.skel.h
user/sys/log.h:
user/state/maps.h:
include/prefixgate.h:
user/lib/ring.h:
build-prof/prefixgate.skel.h:
