build-dev/tests/unit/test_pgload_units.o: tests/unit/test_pgload_units.c \
 tests/unit/../../tools/pgload/rng.h tests/unit/../../tools/pgload/sse.h \
 tests/unit/../../tools/pgload/timer.h \
 tests/unit/../../tools/pgload/workload.h \
 tests/unit/../../tools/pgload/pgload.h
tests/unit/../../tools/pgload/rng.h:
tests/unit/../../tools/pgload/sse.h:
tests/unit/../../tools/pgload/timer.h:
tests/unit/../../tools/pgload/workload.h:
tests/unit/../../tools/pgload/pgload.h:
