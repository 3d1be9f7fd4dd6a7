build-prof/user/lib/balancer.o: user/lib/balancer.c user/lib/balancer.h \
 include/prefixgate.h
user/lib/balancer.h:
include/prefixgate.h:
