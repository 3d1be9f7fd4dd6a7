build-prof/user/lib/cacheidx.o: user/lib/cacheidx.c user/lib/cacheidx.h \
 include/prefixgate.h
user/lib/cacheidx.h:
include/prefixgate.h:
