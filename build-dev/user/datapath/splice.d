build-dev/user/datapath/splice.o: user/datapath/splice.c \
 user/datapath/splice.h include/pg_splice.h include/pg_frame.h \
 build-dev/splice.skel.h
user/datapath/splice.h:
include/pg_splice.h:
include/pg_frame.h:
build-dev/splice.skel.h:
