build-prof/tools/mockllm/prompt.o: tools/mockllm/prompt.c user/lib/json.h \
 tools/mockllm/prompt.h
user/lib/json.h:
tools/mockllm/prompt.h:
