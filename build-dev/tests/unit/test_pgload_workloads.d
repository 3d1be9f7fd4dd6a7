build-dev/tests/unit/test_pgload_workloads.o: \
 tests/unit/test_pgload_workloads.c user/lib/json.h \
 tests/unit/../../tools/pgload/pgload.h \
 tests/unit/../../tools/pgload/workload.h \
 tests/unit/../../tools/pgload/pgload.h
user/lib/json.h:
tests/unit/../../tools/pgload/pgload.h:
tests/unit/../../tools/pgload/workload.h:
tests/unit/../../tools/pgload/pgload.h:
