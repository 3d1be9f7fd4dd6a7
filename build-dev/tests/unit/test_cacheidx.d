build-dev/tests/unit/test_cacheidx.o: tests/unit/test_cacheidx.c \
 user/lib/balancer.h include/prefixgate.h user/lib/cacheidx.h \
 user/lib/key.h user/lib/http.h include/pg_frame.h
user/lib/balancer.h:
include/prefixgate.h:
user/lib/cacheidx.h:
user/lib/key.h:
user/lib/http.h:
include/pg_frame.h:
