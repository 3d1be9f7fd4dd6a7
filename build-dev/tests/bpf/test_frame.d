build-dev/tests/bpf/test_frame.o: tests/bpf/test_frame.c \
 tests/bpf/sockpair.h user/datapath/splice.h include/pg_splice.h \
 include/pg_frame.h user/lib/http.h include/pg_frame.h
tests/bpf/sockpair.h:
user/datapath/splice.h:
include/pg_splice.h:
include/pg_frame.h:
user/lib/http.h:
include/pg_frame.h:
