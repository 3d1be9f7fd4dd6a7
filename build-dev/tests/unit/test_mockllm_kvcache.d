build-dev/tests/unit/test_mockllm_kvcache.o: \
 tests/unit/test_mockllm_kvcache.c \
 tests/unit/../../tools/mockllm/kvcache.h
tests/unit/../../tools/mockllm/kvcache.h:
