build-prof/tools/mockllm/kvcache.o: tools/mockllm/kvcache.c \
 tools/mockllm/kvcache.h
tools/mockllm/kvcache.h:
