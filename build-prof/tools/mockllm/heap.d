build-prof/tools/mockllm/heap.o: tools/mockllm/heap.c \
 tools/mockllm/heap.h
tools/mockllm/heap.h:
