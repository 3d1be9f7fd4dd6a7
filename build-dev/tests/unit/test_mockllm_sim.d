build-dev/tests/unit/test_mockllm_sim.o: tests/unit/test_mockllm_sim.c \
 tests/unit/../../tools/mockllm/sim.h \
 tests/unit/../../tools/mockllm/heap.h \
 tests/unit/../../tools/mockllm/kvcache.h
tests/unit/../../tools/mockllm/sim.h:
tests/unit/../../tools/mockllm/heap.h:
tests/unit/../../tools/mockllm/kvcache.h:
