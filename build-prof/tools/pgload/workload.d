build-prof/tools/pgload/workload.o: tools/pgload/workload.c \
 tools/pgload/workload.h tools/pgload/pgload.h tools/pgload/rng.h
tools/pgload/workload.h:
tools/pgload/pgload.h:
tools/pgload/rng.h:
