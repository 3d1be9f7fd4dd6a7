build-prof/user/lib/http.o: user/lib/http.c user/lib/http.h \
 include/pg_frame.h user/lib/http_internal.h user/lib/hexval.h
user/lib/http.h:
include/pg_frame.h:
user/lib/http_internal.h:
user/lib/hexval.h:
