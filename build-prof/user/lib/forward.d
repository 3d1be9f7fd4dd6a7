build-prof/user/lib/forward.o: user/lib/forward.c user/lib/buf.h \
 user/lib/forward.h user/lib/http.h include/pg_frame.h
user/lib/buf.h:
user/lib/forward.h:
user/lib/http.h:
include/pg_frame.h:
