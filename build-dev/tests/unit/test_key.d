build-dev/tests/unit/test_key.o: tests/unit/test_key.c user/lib/key.h \
 user/lib/http.h include/pg_frame.h include/prefixgate.h
user/lib/key.h:
user/lib/http.h:
include/pg_frame.h:
include/prefixgate.h:
