build-prof/user/lib/boundary.o: user/lib/boundary.c user/lib/boundary.h \
 user/lib/http.h include/pg_frame.h
user/lib/boundary.h:
user/lib/http.h:
include/pg_frame.h:
