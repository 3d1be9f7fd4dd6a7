build-dev/tests/unit/test_pgload_cli.o: tests/unit/test_pgload_cli.c \
 tests/unit/../../tools/pgload/pgload.h
tests/unit/../../tools/pgload/pgload.h:
