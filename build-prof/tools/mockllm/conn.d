build-prof/tools/mockllm/conn.o: tools/mockllm/conn.c \
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
