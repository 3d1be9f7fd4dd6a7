build-dev/tests/unit/test_http.o: tests/unit/test_http.c user/lib/http.h \
 include/pg_frame.h
user/lib/http.h:
include/pg_frame.h:
