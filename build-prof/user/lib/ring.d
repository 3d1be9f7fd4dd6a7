build-prof/user/lib/ring.o: user/lib/ring.c user/lib/ring.h \
 include/prefixgate.h
user/lib/ring.h:
include/prefixgate.h:
