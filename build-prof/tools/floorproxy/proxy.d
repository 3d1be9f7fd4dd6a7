build-prof/tools/floorproxy/proxy.o: tools/floorproxy/proxy.c \
 tools/floorproxy/floorproxy.h
tools/floorproxy/floorproxy.h:
