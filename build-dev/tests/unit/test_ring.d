build-dev/tests/unit/test_ring.o: tests/unit/test_ring.c user/lib/ring.h \
 include/prefixgate.h
user/lib/ring.h:
include/prefixgate.h:
