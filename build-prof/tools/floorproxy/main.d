build-prof/tools/floorproxy/main.o: tools/floorproxy/main.c \
 tools/floorproxy/floorproxy.h
tools/floorproxy/floorproxy.h:
