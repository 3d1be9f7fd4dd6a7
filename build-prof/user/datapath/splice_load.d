build-prof/user/datapath/splice_load.o: user/datapath/splice_load.c \
 user/datapath/splice_internal.h user/datapath/splice.h \
 include/pg_splice.h include/pg_frame.h build-prof/splice.skel.h
user/datapath/splice_internal.h:
user/datapath/splice.h:
include/pg_splice.h:
include/pg_frame.h:
build-prof/splice.skel.h:
