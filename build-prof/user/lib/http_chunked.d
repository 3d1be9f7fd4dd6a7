build-prof/user/lib/http_chunked.o: user/lib/http_chunked.c \
 user/lib/http.h include/pg_frame.h
user/lib/http.h:
include/pg_frame.h:
