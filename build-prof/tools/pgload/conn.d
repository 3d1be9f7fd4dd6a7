build-prof/tools/pgload/conn.o: tools/pgload/conn.c tools/pgload/engine.h \
 user/lib/http.h include/pg_frame.h tools/pgload/pgload.h \
 tools/pgload/rng.h tools/pgload/sse.h tools/pgload/timer.h \
 tools/pgload/workload.h
tools/pgload/engine.h:
user/lib/http.h:
include/pg_frame.h:
tools/pgload/pgload.h:
tools/pgload/rng.h:
tools/pgload/sse.h:
tools/pgload/timer.h:
tools/pgload/workload.h:
