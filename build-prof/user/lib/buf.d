build-prof/user/lib/buf.o: user/lib/buf.c user/lib/buf.h
user/lib/buf.h:
