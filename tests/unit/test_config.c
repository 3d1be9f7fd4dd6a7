// SPDX-License-Identifier: MIT
/*
 * Command line tests: tables of command lines (valid ones checked field by
 * field, invalid ones by their exact message), --help and its ranges, and
 * the files the flags name. The parsers of values and files alone are in
 * test_config_parse.c.
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "config/config.h"
#include "config_args.h"

static char dir[] = "/tmp/pg-test-config-XXXXXX";
static char rc_ok[64], rc_bad[64], rc_lower[64], be_ok[64], be_bad[64];

static void put(char *path, const char *name, const char *text)
{
	FILE *f;

	snprintf(path, 64, "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	put(rc_ok, "rc.json",
	    "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	    "{\"PrefixLength\":8192,\"ConcurrencyThreshold\":20}}");
	put(rc_bad, "bad.json",
	    "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	    "{\"ConcurrencyThreshold\":0}}");
	put(rc_lower, "lower.json", "{\"RoutingConfig\":{\"RoutingStrategy\":\"random\"}}");
	put(be_ok, "backends", "# fleet\n127.0.0.1:8001\n\n  10.0.0.2:8002  # gpu\n");
	put(be_bad, "backends-bad", "127.0.0.1:8001\n\n127.0.0.1:80x\n");
	return 0;
}

static int teardown(void **state)
{
	const char *names[] = {rc_ok, rc_bad, rc_lower, be_ok, be_bad};

	(void)state;
	for (size_t i = 0; i < 5; i++)
		unlink(names[i]);
	rmdir(dir);
	return 0;
}

/* Parse a NULL-terminated argument list; output text into out_text. */
static int run(struct pg_config *cfg, const char *const *args, char *err, size_t errlen,
               char *out_text, size_t out_cap)
{
	return config_args_parse(cfg, args, err, errlen, out_text, out_cap);
}

static void test_defaults(void **state)
{
	struct pg_config cfg;
	char err[256], out[64];
	const char *const none[] = {NULL};

	(void)state;
	assert_int_equal(run(&cfg, none, err, sizeof(err), out, sizeof(out)), 0);
	assert_int_equal(cfg.listen.in.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_equal(pg_sockaddr_port(&cfg.listen), 8080);
	assert_int_equal(pg_sockaddr_port(&cfg.admin), 9090);
	assert_null(cfg.resolver);
	assert_int_equal(cfg.resolve_ms, PG_RESOLVE_MS_DEFAULT);
	assert_int_equal(cfg.nbackends, 0);
	assert_null(cfg.backends_file);
	assert_null(cfg.routing_config);
	assert_int_equal(cfg.route.strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(cfg.route.prefix_length, 4096);
	assert_int_equal(cfg.route.concurrency_threshold, 10);
	assert_int_equal(cfg.workers, 0);
	assert_int_equal(cfg.data_path, PG_DATA_AUTO);
	assert_false(cfg.no_bpf);
	assert_string_equal(cfg.pin_path, "/sys/fs/bpf/prefixgate");
	assert_string_equal(cfg.health.path, "/health");
	assert_int_equal(cfg.health.interval_ms, 2000);
	assert_int_equal(cfg.health.timeout_ms, 1000);
	assert_int_equal(cfg.health.rise, 2);
	assert_int_equal(cfg.health.fall, 3);
	assert_int_equal(cfg.metrics_scrape_ms, 250);
	assert_int_equal(cfg.predict_window_ms, 60000);
	assert_int_equal(cfg.load_signal, PG_LOAD_INFLIGHT);
	assert_int_equal(cfg.route.load_signal, PG_LOAD_INFLIGHT);
	assert_int_equal(cfg.cache_capacity, 262144);
	assert_int_equal(cfg.shutdown_timeout_s, 10);
	assert_int_equal(cfg.max_in_flight, 0);
	assert_int_equal(cfg.max_connections, 65536);
	assert_int_equal(cfg.max_body, 64u << 20);
	assert_int_equal(cfg.timeouts.header_ms, 10000);
	assert_int_equal(cfg.timeouts.body_ms, 30000);
	assert_int_equal(cfg.timeouts.idle_ms, 60000);
	assert_int_equal(cfg.timeouts.connect_ms, 3000);
	assert_int_equal(cfg.timeouts.first_byte_ms, 300000);
	assert_int_equal(cfg.splice_budget, 4u << 20);
	assert_null(cfg.user);
	assert_null(cfg.admin_token);
	assert_null(cfg.access_log);
	assert_false(cfg.shadow || cfg.route_header);
	pg_config_free(&cfg);
}

static void test_valid(void **state)
{
	struct pg_config cfg;
	char err[256], out[64], addr[PG_ADDR_STRLEN];

	(void)state;
	assert_int_equal(
	    run(&cfg,
	        ARGS("--listen", "0.0.0.0:80", "--admin=:9999", "--backend", "localhost:8001",
	             "--backend=10.1.2.3:8002", "--strategy", "LEAST_OUTSTANDING_REQUESTS",
	             "--prefix-length=65536", "--concurrency-threshold", "1024", "--workers", "64",
	             "--data-path=SockMap", "--bpf-pin-path", "/sys/fs/bpf/x", "--admin-token",
	             "0123456789abcdef"),
	        err, sizeof(err), out, sizeof(out)),
	    0);
	assert_string_equal(pg_addr_format(&cfg.listen, addr), "0.0.0.0:80");
	assert_string_equal(pg_addr_format(&cfg.admin, addr), "0.0.0.0:9999");
	assert_int_equal(cfg.nbackends, 2);
	assert_string_equal(cfg.backends[0], "127.0.0.1:8001");
	assert_string_equal(cfg.backends[1], "10.1.2.3:8002");
	assert_int_equal(cfg.route.strategy, PG_STRATEGY_LEAST_OUTSTANDING);
	assert_int_equal(cfg.route.prefix_length, 65536);
	assert_int_equal(cfg.route.concurrency_threshold, 1024);
	assert_int_equal(cfg.workers, 64);
	assert_int_equal(cfg.data_path, PG_DATA_SOCKMAP);
	assert_string_equal(cfg.pin_path, "/sys/fs/bpf/x");
	pg_config_free(&cfg);
	assert_null(cfg.backends);

	/* minimums, --no-bpf, lowercase strategy, last value wins */
	assert_int_equal(
	    run(&cfg,
	        ARGS("--prefix-length", "1024", "--concurrency-threshold=1", "--workers=1",
	             "--no-bpf", "--data-path", "copy", "--strategy", "random", "--strategy",
	             "Prefix_Aware", "--listen", "1.2.3.4:1", "--listen", "1.2.3.4:2"),
	        err, sizeof(err), out, sizeof(out)),
	    0);
	assert_int_equal(cfg.route.prefix_length, 1024);
	assert_int_equal(cfg.route.concurrency_threshold, 1);
	assert_int_equal(cfg.workers, 1);
	assert_true(cfg.no_bpf);
	assert_int_equal(cfg.data_path, PG_DATA_COPY);
	assert_int_equal(cfg.route.strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(pg_sockaddr_port(&cfg.listen), 2);
	pg_config_free(&cfg);
}

/* Operations flags: load signal, metrics scraping, shadow, predict window. */
static void test_ops_flags(void **state)
{
	static const struct {
		const char *args[3];
		int rc;
		enum pg_load_signal sig;
		unsigned scrape, window;
		bool shadow;
		const char *err;
	} cases[] = {
	    {{NULL}, 0, PG_LOAD_INFLIGHT, 250, 60000, false, NULL},
	    {{"--load-signal", "BOTH"}, 0, PG_LOAD_BOTH, 250, 60000, false, NULL},
	    {{"--load-signal=backend"}, 0, PG_LOAD_BACKEND, 250, 60000, false, NULL},
	    {{"--metrics-scrape-interval", "0"}, 0, PG_LOAD_INFLIGHT, 0, 60000, false, NULL},
	    {{"--metrics-scrape-interval=250", "--shadow"},
	     0,
	     PG_LOAD_INFLIGHT,
	     250,
	     60000,
	     true,
	     NULL},
	    {{"--predict-window", "1000"}, 0, PG_LOAD_INFLIGHT, 250, 1000, false, NULL},
	    {{"--load-signal", "queue"},
	     2,
	     0,
	     0,
	     0,
	     false,
	     "--load-signal: \"queue\" is not one of inflight, backend, both"},
	    {{"--metrics-scrape-interval", "40"},
	     2,
	     0,
	     0,
	     0,
	     false,
	     "--metrics-scrape-interval: 40 is out of range 50-600000"},
	    {{"--predict-window", "999"},
	     2,
	     0,
	     0,
	     0,
	     false,
	     "--predict-window: 999 is out of range 1000-3600000"},
	    {{"--shadow=1"}, 2, 0, 0, 0, false, "--shadow takes no value"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_config cfg;
		char err[256] = "", out[64];
		const char *argv[4] = {cases[i].args[0], cases[i].args[1], cases[i].args[2], NULL};
		int rc = run(&cfg, argv, err, sizeof(err), out, sizeof(out));

		if (rc != cases[i].rc)
			fail_msg("case %zu: rc %d (%s)", i, rc, err);
		if (rc) {
			assert_string_equal(err, cases[i].err);
			continue;
		}
		assert_int_equal(cfg.load_signal, cases[i].sig);
		assert_int_equal(cfg.metrics_scrape_ms, cases[i].scrape);
		assert_int_equal(cfg.predict_window_ms, cases[i].window);
		assert_int_equal(cfg.shadow, cases[i].shadow);
		pg_config_free(&cfg);
	}
}

static void test_routing_config_file(void **state)
{
	struct pg_config cfg;
	char err[256], out[64];

	(void)state;
	assert_int_equal(
	    run(&cfg, ARGS("--routing-config", rc_ok), err, sizeof(err), out, sizeof(out)), 0);
	assert_string_equal(cfg.routing_config, rc_ok);
	assert_int_equal(cfg.route.prefix_length, 8192);
	assert_int_equal(cfg.route.concurrency_threshold, 20);
	/* explicit flags override the file, before or after it */
	assert_int_equal(
	    run(&cfg,
	        ARGS("--prefix-length", "2048", "--routing-config", rc_ok, "--strategy", "random"),
	        err, sizeof(err), out, sizeof(out)),
	    0);
	assert_int_equal(cfg.route.prefix_length, 2048);
	assert_int_equal(cfg.route.concurrency_threshold, 20);
	assert_int_equal(cfg.route.strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(run(&cfg,
	                     ARGS("--routing-config", rc_lower, "--concurrency-threshold", "3"),
	                     err, sizeof(err), out, sizeof(out)),
	                 0);
	assert_int_equal(cfg.route.strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(cfg.route.prefix_length, 4096);
	assert_int_equal(cfg.route.concurrency_threshold, 3);
	/* the flags are kept: a re-read file is overridden as at start-up, a
	 * pool's own fields over both, a pool's own file out of reach */
	{
		const struct pg_route_cfg reread = {.strategy = PG_STRATEGY_LEAST_OUTSTANDING,
		                                    .prefix_length = 1024,
		                                    .concurrency_threshold = 7,
		                                    .new_choices = 2};
		struct pg_route_cfg rc;
		char own_file[96];

		snprintf(own_file, sizeof(own_file), "b:routing-config=%s", rc_lower);
		assert_int_equal(
		    run(&cfg,
		        ARGS("--concurrency-threshold", "20", "--routing-config", rc_ok, "--pool",
		             "a:model=x", "--pool", "a:prefix-length=2048", "--pool", "b:model=y",
		             "--pool", own_file),
		        err, sizeof(err), out, sizeof(out)),
		    0);
		assert_int_equal(cfg.route.concurrency_threshold, 20);
		assert_int_equal(cfg.route.prefix_length, 8192);
		assert_true(pg_route_of_pool(&cfg, 0, &reread, &rc));
		assert_int_equal(rc.strategy, PG_STRATEGY_LEAST_OUTSTANDING);
		assert_int_equal(rc.prefix_length, 1024);
		assert_int_equal(rc.concurrency_threshold, 20); /* the flag, not the file's 7 */
		assert_int_equal(rc.new_choices, 2);
		assert_true(pg_route_of_pool(&cfg, 1, &reread, &rc));
		assert_int_equal(rc.prefix_length, 2048); /* pool a's own */
		assert_int_equal(rc.concurrency_threshold, 20);
		rc.prefix_length = 0;
		assert_false(pg_route_of_pool(&cfg, 2, &reread, &rc)); /* pool b's own file */
		assert_int_equal(rc.prefix_length, 0);
		assert_true(pg_route_of_pool(&cfg, 0, NULL, &rc)); /* no file: the defaults */
		assert_int_equal(rc.prefix_length, PG_PREFIX_LENGTH_DEFAULT);
		assert_int_equal(rc.concurrency_threshold, 20);
		pg_config_free(&cfg);
	}
	/* a valid backends file is accepted but not merged into --backend */
	assert_int_equal(run(&cfg, ARGS("--backends-file", be_ok, "--backend", "127.0.0.1:8001"),
	                     err, sizeof(err), out, sizeof(out)),
	                 0);
	assert_string_equal(cfg.backends_file, be_ok);
	assert_int_equal(cfg.nbackends, 1);
	pg_config_free(&cfg);
}

static void test_invalid(void **state)
{
	static const struct {
		const char *args[6];
		const char *err;
	} cases[] = {
	    {{"--prefix-length", "100"}, "--prefix-length: 100 is out of range 1024-65536"},
	    {{"--prefix-length=65537"}, "--prefix-length: 65537 is out of range 1024-65536"},
	    {{"--prefix-length", "99999999999999999999999"},
	     "--prefix-length: 99999999999999999999999 is out of range 1024-65536"},
	    {{"--concurrency-threshold", "0"}, "--concurrency-threshold: 0 is out of range 1-1024"},
	    {{"--concurrency-threshold", "1025"},
	     "--concurrency-threshold: 1025 is out of range 1-1024"},
	    {{"--workers", "0"}, "--workers: 0 is out of range 1-64"},
	    {{"--workers", "65"}, "--workers: 65 is out of range 1-64"},
	    {{"--workers", "4x"}, "--workers: \"4x\" is not a decimal number"},
	    {{"--workers", "-1"}, "--workers: \"-1\" is not a decimal number"},
	    {{"--workers", "0x10"}, "--workers: \"0x10\" is not a decimal number"},
	    {{"--workers="}, "--workers: \"\" is not a decimal number"},
	    {{"--prefix-length", " 2048"}, "--prefix-length: \" 2048\" is not a decimal number"},
	    {{"--prefix-length"}, "--prefix-length: missing value N"},
	    {{"--listen", "1.2.3.4"}, "--listen: \"1.2.3.4\": expected ADDR:PORT"},
	    {{"--listen", "1.2.3.4:0"},
	     "--listen: \"1.2.3.4:0\": port must be a decimal number 1-65535"},
	    {{"--admin", "1.2.3.4:65536"},
	     "--admin: \"1.2.3.4:65536\": port must be a decimal number 1-65535"},
	    {{"--admin", "example.com:80"},
	     "--admin: \"example.com:80\": host must be an IPv4 address A.B.C.D, [IPV6] or "
	     "localhost (not a name)"},
	    {{"--backend", "::1:80"},
	     "--backend: \"::1:80\": an IPv6 address needs brackets: [IPV6]:PORT"},
	    {{"--backend", "[::1]:80", "--backend", "[0::1]:80"},
	     "--backend [0::1]:80: given twice"},
	    {{"--backend", "a..b:80"},
	     "--backend: \"a..b:80\": host must be an IPv4 address A.B.C.D, [IPV6], localhost or a "
	     "DNS name"},
	    {{"--resolver", "127.0.0.1"},
	     "--resolver: \"127.0.0.1\" is not an IP:PORT of a DNS server"},
	    {{"--resolver", "127.0.0.1:53,dns.example:53"},
	     "--resolver: \"dns.example:53\" is not an IP:PORT of a DNS server"},
	    {{"--resolver", ":53"}, "--resolver: \":53\" is not an IP:PORT of a DNS server"},
	    {{"--resolve-interval", "50"}, "--resolve-interval: 50 is out of range 100-3600000"},
	    {{"--backend", "1.2.3.4:80", "--backend", "1.2.3.4:80"},
	     "--backend 1.2.3.4:80: given twice"},
	    {{"--backend", "127.0.0.1:80", "--backend", "localhost:80"},
	     "--backend localhost:80: given twice"},
	    {{"--strategy", "fastest"},
	     "--strategy: \"fastest\" is not one of random, least_outstanding_requests, "
	     "prefix_aware, cache_aware"},
	    {{"--data-path", "zero-copy"},
	     "--data-path: \"zero-copy\" is not one of auto, copy, sockmap, sockmsg"},
	    {{"--no-bpf", "--data-path", "sockmsg"},
	     "--data-path sockmsg needs BPF: drop --no-bpf or use copy"},
	    {{"--no-bpf=yes"}, "--no-bpf takes no value"},
	    {{"--bpf-pin-path="}, "--bpf-pin-path: empty directory"},
	    /* the admin API and the clients' listener on one port */
	    {{"--listen", "127.0.0.1:8080", "--admin", "127.0.0.1:8080"},
	     "--admin 127.0.0.1:8080: --listen 127.0.0.1:8080 takes the same port: give each its "
	     "own"},
	    {{"--listen", "0.0.0.0:9090"},
	     "--admin 127.0.0.1:9090: --listen 0.0.0.0:9090 takes the same port: give each its "
	     "own"},
	    {{"--frobnicate"}, "unknown option --frobnicate"},
	    {{"--list", "1.2.3.4:5"}, "unknown option --list"},
	    {{"-h"}, "unexpected argument \"-h\""},
	    {{"extra"}, "unexpected argument \"extra\""},
	    {{"--"}, "unexpected argument \"--\""},
	    {{"--otlp-endpoint", "https://c:4318"},
	     "--otlp-endpoint: \"https://c:4318\": only http:// is spoken (a collector beside the "
	     "gateway)"},
	    {{"--otlp-endpoint", "http://c"},
	     "--otlp-endpoint: \"http://c\" is not http://HOST:PORT[/PATH]"},
	    {{"--otlp-endpoint", "http://c:0/x"},
	     "--otlp-endpoint: \"http://c:0/x\" is not http://HOST:PORT[/PATH]"},
	    {{"--otlp-sample", "1.5"}, "--otlp-sample: \"1.5\" is not a ratio from 0 to 1"},
	    {{"--otlp-sample", "1%"}, "--otlp-sample: \"1%\" is not a ratio from 0 to 1"},
	    {{"--otlp-timeout", "5"}, "--otlp-timeout: 5 is out of range 10-60000"},
	};
	struct pg_config cfg;
	char err[256], out[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = run(&cfg, cases[i].args, err, sizeof(err), out, sizeof(out));

		if (rc != 2 || strcmp(err, cases[i].err))
			fail_msg("case %zu: rc %d err \"%s\", expected \"%s\"", i, rc, err,
			         cases[i].err);
		assert_null(cfg.backends);
	}
}

static void test_invalid_files(void **state)
{
	struct pg_config cfg;
	char err[256], out[64], want[256];

	(void)state;
	assert_int_equal(
	    run(&cfg, ARGS("--routing-config", rc_bad), err, sizeof(err), out, sizeof(out)), 2);
	snprintf(want, sizeof(want),
	         "--routing-config %s: PrefixAwareRoutingConfig.ConcurrencyThreshold: 0 is out "
	         "of range 1-1024",
	         rc_bad);
	assert_string_equal(err, want);
	/* an explicit flag does not excuse a bad file */
	assert_int_equal(run(&cfg, ARGS("--routing-config", rc_bad, "--concurrency-threshold", "5"),
	                     err, sizeof(err), out, sizeof(out)),
	                 2);
	assert_int_equal(run(&cfg, ARGS("--routing-config", "/nonexistent/rc.json"), err,
	                     sizeof(err), out, sizeof(out)),
	                 2);
	assert_string_equal(err,
	                    "--routing-config /nonexistent/rc.json: No such file or directory");
	assert_int_equal(
	    run(&cfg, ARGS("--backends-file", be_bad), err, sizeof(err), out, sizeof(out)), 2);
	snprintf(want, sizeof(want),
	         "--backends-file %s: line 3: \"127.0.0.1:80x\": port must be a decimal number "
	         "1-65535",
	         be_bad);
	assert_string_equal(err, want);
}

static void test_help_version(void **state)
{
	static const char *const flags[] = {
	    "--listen ADDR:PORT",
	    "--admin ADDR:PORT",
	    "--backend HOST:PORT",
	    "--resolver IP:PORT[,...]",
	    "--resolve-interval MS",
	    "--backends-file FILE",
	    "--strategy S",
	    "--prefix-length N",
	    "--concurrency-threshold N",
	    "--routing-config FILE",
	    "--workers N",
	    "--data-path auto|copy|sockmap|sockmsg",
	    "--no-bpf",
	    "--bpf-pin-path DIR",
	    "--bpf-cgroup PATH",
	    "--help",
	    "--version",
	    "127.0.0.1:8080",
	    "127.0.0.1:9090",
	    "1024-65536",
	    "(default 4096)",
	    "1-1024",
	    "(default 10)",
	    "1-64",
	    "/sys/fs/bpf/prefixgate",
	    "prefix_aware",
	    "Admin API",
	};
	struct pg_config cfg;
	char err[256], out[16384]; /* the whole --help, which grows with each flag */

	(void)state;
	memset(out, 0, sizeof(out));
	assert_int_equal(run(&cfg, ARGS("--workers", "2", "--help", "--bogus"), err, sizeof(err),
	                     out, sizeof(out)),
	                 1);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (!strstr(out, flags[i]))
			fail_msg("--help lacks \"%s\"", flags[i]);
	memset(out, 0, sizeof(out));
	assert_int_equal(run(&cfg, ARGS("--version"), err, sizeof(err), out, sizeof(out)), 1);
	assert_string_equal(out, "prefixgate " PG_VERSION "\n");
	assert_int_equal(run(&cfg, ARGS("--help=x"), err, sizeof(err), out, sizeof(out)), 2);
}

/* Every range --help states is the one the parser enforces: both ends
 * accepted, one past each end refused with the message naming the range;
 * and every numeric default it states is accepted. */
static void test_help_ranges(void **state)
{
	static char help[16384];
	char err[256], out[64], arg[96], want[96];
	struct pg_config cfg;
	unsigned checked = 0;

	(void)state;
	memset(help, 0, sizeof(help));
	assert_int_equal(run(&cfg, ARGS("--help"), err, sizeof(err), help, sizeof(help)), 1);
	for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
		static char flag[64];
		unsigned long lo, hi, def;
		const char *p;

		if (!strncmp(line, "  --", 4)) /* else the help of the flag above */
			sscanf(line + 2, "%63s", flag);
		p = strstr(line, " (default ");
		for (const char *c = line; (c = strchr(c, ',')); c++) {
			if (sscanf(c, ", %lu-%lu", &lo, &hi) == 2 ||
			    sscanf(c, ", 0 or %lu-%lu", &lo, &hi) == 2) {
				snprintf(want, sizeof(want), "%s: %lu is out of range %lu-%lu",
				         flag, hi + 1, lo, hi);
				snprintf(arg, sizeof(arg), "%s=%lu", flag, hi + 1);
				assert_int_equal(run(&cfg, ARGS(arg), err, sizeof(err), out, 64),
				                 2);
				assert_string_equal(err, want);
				if (lo > 1 || (lo == 1 && !strstr(line, "0 or "))) {
					snprintf(arg, sizeof(arg), "%s=%lu", flag, lo - 1);
					assert_int_equal(
					    run(&cfg, ARGS(arg), err, sizeof(err), out, 64), 2);
				}
				snprintf(arg, sizeof(arg), "%s=%lu", flag, lo);
				assert_int_equal(run(&cfg, ARGS(arg), err, sizeof(err), out, 64),
				                 0);
				pg_config_free(&cfg);
				snprintf(arg, sizeof(arg), "%s=%lu", flag, hi);
				assert_int_equal(run(&cfg, ARGS(arg), err, sizeof(err), out, 64),
				                 0);
				pg_config_free(&cfg);
				if (p && sscanf(p, " (default %lu)", &def) == 1) {
					assert_true(def == 0 || (def >= lo && def <= hi));
					snprintf(arg, sizeof(arg), "%s=%lu", flag, def);
					assert_int_equal(
					    run(&cfg, ARGS(arg), err, sizeof(err), out, 64), 0);
					pg_config_free(&cfg);
				}
				checked++;
				break;
			}
		}
	}
	assert_true(checked >= 20); /* every numeric flag */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_help_ranges),
	    cmocka_unit_test(test_valid),
	    cmocka_unit_test(test_ops_flags),
	    cmocka_unit_test(test_routing_config_file),
	    cmocka_unit_test(test_invalid),
	    cmocka_unit_test(test_invalid_files),
	    cmocka_unit_test(test_help_version),
	};

	return cmocka_run_group_tests_name("config", tests, setup, teardown);
}
