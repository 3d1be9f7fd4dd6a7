build-dev/tests/unit/test_forward.o: tests/unit/test_forward.c \
 user/lib/boundary.h user/lib/http.h include/pg_frame.h user/lib/buf.h \
 user/lib/forward.h
user/lib/boundary.h:
user/lib/http.h:
include/pg_frame.h:
user/lib/buf.h:
user/lib/forward.h:
