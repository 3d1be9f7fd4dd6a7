build-prof/tools/pgload/timer.o: tools/pgload/timer.c \
 tools/pgload/timer.h
tools/pgload/timer.h:
