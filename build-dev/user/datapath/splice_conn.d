build-dev/user/datapath/splice_conn.o: user/datapath/splice_conn.c \
 user/datapath/splice_internal.h user/datapath/splice.h \
 include/pg_splice.h include/pg_frame.h build-dev/splice.skel.h
user/datapath/splice_internal.h:
user/datapath/splice.h:
include/pg_splice.h:
include/pg_frame.h:
build-dev/splice.skel.h:
