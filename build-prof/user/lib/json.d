build-prof/user/lib/json.o: user/lib/json.c user/lib/hexval.h \
 include/pg_frame.h user/lib/json.h
user/lib/hexval.h:
include/pg_frame.h:
user/lib/json.h:
