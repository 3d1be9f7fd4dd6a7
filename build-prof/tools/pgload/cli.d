build-prof/tools/pgload/cli.o: tools/pgload/cli.c tools/pgload/pgload.h
tools/pgload/pgload.h:
