build-dev/tools/ssebench/main.o: tools/ssebench/main.c
