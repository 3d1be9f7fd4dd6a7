build-dev/tests/unit/test_config.o: tests/unit/test_config.c \
 user/config/config.h user/lib/balancer.h include/prefixgate.h
user/config/config.h:
user/lib/balancer.h:
include/prefixgate.h:
