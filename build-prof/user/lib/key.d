build-prof/user/lib/key.o: user/lib/key.c user/lib/json.h user/lib/key.h \
 user/lib/http.h include/pg_frame.h include/prefixgate.h
user/lib/json.h:
user/lib/key.h:
user/lib/http.h:
include/pg_frame.h:
include/prefixgate.h:
