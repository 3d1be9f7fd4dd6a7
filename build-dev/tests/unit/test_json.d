build-dev/tests/unit/test_json.o: tests/unit/test_json.c user/lib/json.h
user/lib/json.h:
