build-prof/user/sys/log.o: user/sys/log.c user/sys/log.h
user/sys/log.h:
