build-dev/tests/unit/test_balancer.o: tests/unit/test_balancer.c \
 user/lib/balancer.h include/prefixgate.h
user/lib/balancer.h:
include/prefixgate.h:
