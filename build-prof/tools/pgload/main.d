build-prof/tools/pgload/main.o: tools/pgload/main.c tools/pgload/pgload.h
tools/pgload/pgload.h:
