// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over the configuration parsers (user/config/config.c and the
 * routing config parser): each input is parsed as a RoutingConfig JSON
 * document, as a backends file, as one address (up to its first NUL), and
 * as a command line (argv = "prefixgate" and the input split on NUL bytes).
 *
 * Invariants: accepted values are in range; a failure leaves *io untouched
 * and says why; an accepted RoutingConfig re-parses to itself from its
 * canonical form; every accepted address formats to a canonical form that
 * parses to the same address; a backends file yields canonical, distinct
 * addresses; pg_config_parse answers the same twice (it keeps no state),
 * and pg_config_free releases everything (LeakSanitizer checks).
 *
 * File arguments: an argument holding a '/' has everything from its first
 * '/' replaced by one of three fixture files (valid routing config, valid
 * backends file, a missing file), so the fuzzer never opens a device or
 * FIFO that could block.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include "config/config.h"
#include "fuzz.h"

#define MAX_ARGS 64

static FILE *devnull;
static char dir[64], fixture[3][96];

static void cleanup(void)
{
	unlink(fixture[0]);
	unlink(fixture[1]);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	devnull = fopen("/dev/null", "w");
	FUZZ_CHECK(devnull);
	snprintf(dir, sizeof(dir), "/tmp/pg-fuzz-config-XXXXXX");
	FUZZ_CHECK(mkdtemp(dir));
	snprintf(fixture[0], sizeof(fixture[0]), "%s/routing.json", dir);
	snprintf(fixture[1], sizeof(fixture[1]), "%s/backends", dir);
	snprintf(fixture[2], sizeof(fixture[2]), "%s/missing", dir);
	fuzz_write_file(fixture[0],
	                "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	                "{\"PrefixLength\":2048,\"ConcurrencyThreshold\":4}}\n");
	fuzz_write_file(fixture[1],
	                "# fleet\n10.0.0.1:8000\n10.0.0.2:8000  # b\n\nlocalhost:9000\n");
	atexit(cleanup);
	return 0;
}

static void check_err(const char *err, size_t errlen)
{
	FUZZ_CHECK(memchr(err, 0, errlen) != NULL && err[0] != 0);
}

static bool route_valid(const struct pg_route_cfg *rc)
{
	return rc->strategy < PG_STRATEGY_COUNT && rc->prefix_length >= PG_PREFIX_LENGTH_MIN &&
	       rc->prefix_length <= PG_PREFIX_LENGTH_MAX &&
	       rc->concurrency_threshold >= PG_CONCURRENCY_MIN &&
	       rc->concurrency_threshold <= PG_CONCURRENCY_MAX && rc->new_choices >= 1 &&
	       rc->new_choices <= PG_RING_CANDIDATES;
}

static void check_routing(const char *s, size_t n)
{
	struct pg_route_cfg sentinel, rc, again;
	char err[256], canon[256];
	enum pg_strategy st;
	int len;

	memset(&sentinel, 0xa5, sizeof(sentinel));
	rc = again = sentinel;
	memset(err, 0x55, sizeof(err));
	if (pg_routing_config_parse(s, n, &rc, err, sizeof(err))) {
		check_err(err, sizeof(err));
		FUZZ_CHECK(!memcmp(&rc, &sentinel, sizeof(rc)));
		return;
	}
	FUZZ_CHECK(route_valid(&rc));
	len = snprintf(canon, sizeof(canon),
	               "{\"RoutingStrategy\":\"%s\",\"PrefixAwareRoutingConfig\":"
	               "{\"PrefixLength\":%u,\"ConcurrencyThreshold\":%u},\"CacheAwareConfig\":"
	               "{\"NewConversationChoices\":%u}}",
	               pg_strategy_name(rc.strategy), rc.prefix_length, rc.concurrency_threshold,
	               rc.new_choices);
	FUZZ_CHECK(pg_routing_config_parse(canon, (size_t)len, &again, err, sizeof(err)) == 0);
	/* the fields the canonical form names (others may take defaults) */
	FUZZ_CHECK(rc.strategy == again.strategy && rc.prefix_length == again.prefix_length &&
	           rc.concurrency_threshold == again.concurrency_threshold &&
	           rc.new_choices == again.new_choices);
	FUZZ_CHECK(pg_strategy_parse(pg_strategy_name(rc.strategy),
	                             strlen(pg_strategy_name(rc.strategy)), &st) == 0);
	FUZZ_CHECK(st == rc.strategy);
}

/* Length of the address of a backends-file entry ("ADDR:PORT" or
 * "ADDR:PORT pool=NAME"). */
static size_t addr_len(const char *s)
{
	return strcspn(s, " ");
}

/* s is a canonical address: it parses, and formats back to itself. */
static void check_canonical(const char *s)
{
	union pg_sockaddr a;
	char buf[PG_ADDR_STRLEN], err[160], *z = strndup(s, addr_len(s));

	FUZZ_CHECK(z);
	if (s[addr_len(s)])
		FUZZ_CHECK(!strncmp(s + addr_len(s), " pool=", 6) && s[addr_len(s) + 6]);
	FUZZ_CHECK(pg_addr_parse(z, &a, err, sizeof(err)) == 0);
	FUZZ_CHECK(!strcmp(pg_addr_format(&a, buf), z));
	free(z);
}

/* s is a canonical backend (address or NAME:PORT, maybe " pool=NAME"
 * after it): it formats back to itself. */
static void check_canonical_backend(const char *s)
{
	char buf[PG_HOSTPORT_STRLEN], err[PG_HOSTPORT_STRLEN + 100], *z = strndup(s, addr_len(s));
	struct pg_hostport h;

	FUZZ_CHECK(z);
	if (s[addr_len(s)])
		FUZZ_CHECK(!strncmp(s + addr_len(s), " pool=", 6) && s[addr_len(s) + 6]);
	FUZZ_CHECK(pg_hostport_parse(z, &h, false, err, sizeof(err)) == 0);
	FUZZ_CHECK(!strcmp(pg_hostport_format(&h, buf), z));
	free(z);
}

static void check_addr(const char *s, size_t n)
{
	char *z = strndup(s, n), buf[PG_ADDR_STRLEN], err[160];
	char hbuf[PG_HOSTPORT_STRLEN], herr[PG_HOSTPORT_STRLEN + 100];
	union pg_sockaddr a, b;
	struct pg_hostport h, h2;

	FUZZ_CHECK(z);
	memset(err, 0x55, sizeof(err));
	if (pg_addr_parse(z, &a, err, sizeof(err))) {
		check_err(err, sizeof(err));
	} else {
		FUZZ_CHECK((a.sa.sa_family == AF_INET || a.sa.sa_family == AF_INET6) &&
		           pg_sockaddr_port(&a) != 0);
		pg_addr_format(&a, buf);
		FUZZ_CHECK(pg_addr_parse(buf, &b, err, sizeof(err)) == 0);
		FUZZ_CHECK(pg_sockaddr_equal(&a, &b));
		check_canonical(buf);
	}
	/* a backend (names too): canonical spelling is a fixed point */
	if (pg_hostport_parse(z, &h, false, herr, sizeof(herr))) {
		check_err(herr, sizeof(herr));
	} else {
		pg_hostport_format(&h, hbuf);
		FUZZ_CHECK(pg_hostport_parse(hbuf, &h2, false, herr, sizeof(herr)) == 0);
		FUZZ_CHECK(!strcmp(pg_hostport_format(&h2, herr), hbuf));
	}
	free(z);
}

static void check_backends(const char *s, size_t n)
{
	char **v = NULL, err[256];
	size_t nv = 0;

	memset(err, 0x55, sizeof(err));
	if (pg_backends_parse(s, n, &v, &nv, err, sizeof(err))) {
		check_err(err, sizeof(err));
		return;
	}
	FUZZ_CHECK(nv <= PG_MAX_BACKENDS - 1);
	for (size_t i = 0; i < nv; i++) {
		check_canonical_backend(v[i]);
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(addr_len(v[i]) != addr_len(v[j]) ||
			           memcmp(v[i], v[j], addr_len(v[i])) != 0);
	}
	pg_backends_free(v, nv);
}

static int parse_argv(int argc, char **argv, struct pg_config *cfg, char *err, size_t errlen)
{
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	memset(err, 0x55, errlen);
	rc = pg_config_parse(cfg, argc, argv, devnull, err, errlen);
	FUZZ_CHECK(rc >= 0 && rc <= 2);
	if (rc == 2)
		check_err(err, errlen);
	return rc;
}

static void check_cmdline(const char *s, size_t n)
{
	char *copy = malloc(n + 1), *argv[MAX_ARGS + 2], *owned[MAX_ARGS];
	char err1[256], err2[256];
	int argc = 0, nowned = 0, rc1, rc2;
	struct pg_config c1, c2;
	size_t i = 0;

	FUZZ_CHECK(copy);
	memcpy(copy, s, n);
	copy[n] = 0;
	argv[argc++] = "prefixgate";
	while (i <= n && argc <= MAX_ARGS) {
		char *arg = copy + i, *slash = strchr(arg, '/');
		size_t l = strlen(arg);

		if (slash) {
			const char *fx = fixture[(unsigned char)slash[1] % 3];
			char *r = malloc((size_t)(slash - arg) + strlen(fx) + 1);

			FUZZ_CHECK(r);
			memcpy(r, arg, (size_t)(slash - arg));
			strcpy(r + (slash - arg), fx);
			owned[nowned++] = r;
			arg = r;
		}
		argv[argc++] = arg;
		i += l + 1;
	}
	argv[argc] = NULL;

	rc1 = parse_argv(argc, argv, &c1, err1, sizeof(err1));
	if (rc1 == 0) {
		FUZZ_CHECK(route_valid(&c1.route));
		FUZZ_CHECK(c1.workers <= PG_WORKERS_MAX);
		FUZZ_CHECK(c1.data_path <= PG_DATA_SOCKMSG);
		FUZZ_CHECK(c1.pin_path != NULL);
		FUZZ_CHECK(c1.listen.sa.sa_family == AF_INET || c1.listen.sa.sa_family == AF_INET6);
		FUZZ_CHECK(c1.admin.sa.sa_family == AF_INET || c1.admin.sa.sa_family == AF_INET6);
		for (size_t b = 0; b < c1.nbackends; b++)
			check_canonical_backend(c1.backends[b]);
	}
	rc2 = parse_argv(argc, argv, &c2, err2, sizeof(err2));
	FUZZ_CHECK(rc1 == rc2);
	if (rc1 == 2)
		FUZZ_CHECK(!strcmp(err1, err2));
	if (rc1 == 0) {
		FUZZ_CHECK(!memcmp(&c1.route, &c2.route, sizeof(c1.route)));
		FUZZ_CHECK(c1.nbackends == c2.nbackends && c1.workers == c2.workers);
	}
	pg_config_free(&c1);
	pg_config_free(&c2);
	for (int k = 0; k < nowned; k++)
		free(owned[k]);
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;

	check_routing(s, size);
	check_backends(s, size);
	check_addr(s, size);
	check_cmdline(s, size);
	return 0;
}
