build-prof/tools/pgload/rng.o: tools/pgload/rng.c tools/pgload/rng.h
tools/pgload/rng.h:
