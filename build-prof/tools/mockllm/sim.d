build-prof/tools/mockllm/sim.o: tools/mockllm/sim.c tools/mockllm/sim.h \
 tools/mockllm/heap.h tools/mockllm/kvcache.h
tools/mockllm/sim.h:
tools/mockllm/heap.h:
tools/mockllm/kvcache.h:
