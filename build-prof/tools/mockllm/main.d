build-prof/tools/mockllm/main.o: tools/mockllm/main.c \
 tools/mockllm/mockllm.h tools/mockllm/heap.h user/lib/http.h \
 include/pg_frame.h tools/mockllm/prompt.h tools/mockllm/sim.h \
 tools/mockllm/kvcache.h
tools/mockllm/mockllm.h:
tools/mockllm/heap.h:
user/lib/http.h:
include/pg_frame.h:
tools/mockllm/prompt.h:
tools/mockllm/sim.h:
tools/mockllm/kvcache.h:
