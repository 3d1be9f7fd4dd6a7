build-prof/tools/pgload/report.o: tools/pgload/report.c \
 tools/pgload/pgload.h
tools/pgload/pgload.h:
