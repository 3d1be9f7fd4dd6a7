build-prof/tools/pgload/sse.o: tools/pgload/sse.c tools/pgload/sse.h
tools/pgload/sse.h:
