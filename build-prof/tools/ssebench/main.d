build-prof/tools/ssebench/main.o: tools/ssebench/main.c
