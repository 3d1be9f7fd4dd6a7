build-prof/user/sys/privilege.o: user/sys/privilege.c user/sys/log.h \
 user/sys/privilege.h
user/sys/log.h:
user/sys/privilege.h:
