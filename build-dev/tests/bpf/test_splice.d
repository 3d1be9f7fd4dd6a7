build-dev/tests/bpf/test_splice.o: tests/bpf/test_splice.c \
 tests/bpf/sockpair.h user/datapath/splice.h include/pg_splice.h \
 include/pg_frame.h
tests/bpf/sockpair.h:
user/datapath/splice.h:
include/pg_splice.h:
include/pg_frame.h:
