build-prof/tools/prefixgatectl/http.o: tools/prefixgatectl/http.c \
 tools/prefixgatectl/ctl.h include/prefixgate.h user/lib/http.h \
 include/pg_frame.h user/lib/json.h
tools/prefixgatectl/ctl.h:
include/prefixgate.h:
user/lib/http.h:
include/pg_frame.h:
user/lib/json.h:
