// SPDX-License-Identifier: MIT
/*
 * The configuration file's meaning (config/config_file.c, config_load.c),
 * table-driven: good files and what they configure; bad files, each giving
 * exactly one error at its line that says what is wrong and what is
 * allowed; the flags over a file; a configuration written back
 * (pg_config_render) reading back as itself; what two configurations
 * differ in (pg_config_diff).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "config/config.h"
#include "lib/buf.h"
#include "lib/conf.h"

#define ARGS(...) ((char *[]){"prefixgate", __VA_ARGS__, NULL})

static int argc_of(char **a)
{
	int n = 0;

	while (a[n])
		n++;
	return n;
}

static int parse(struct pg_config *cfg, const char *text, int argc, char **argv,
                 struct pg_conf_errs *e)
{
	static char *none[] = {"prefixgate", NULL};

	return pg_config_parse_text(cfg, "t.conf", text, strlen(text), argv ? argc : 1,
	                            argv ? argv : none, e);
}

static void test_good(void **state)
{
	static const char text[] =
	    "# a gateway in front of two pools\n"
	    "listen 0.0.0.0:8080;\n"
	    "admin 127.0.0.1:9191\n"
	    "workers 3; no-bpf; shadow off; route-header on\n"
	    "backend 10.0.0.1:8000 10.0.0.2:8000;\n"
	    "backend vllm.local:8000\n"
	    "strategy cache_aware; prefix-length 2048\n"
	    "new-conversation-choices 2\n"
	    "health-check-path /ready; health-check-interval 500\n"
	    "max-in-flight 0; log-level warn; flow-control; flow-deadline-ms 3000\n"
	    "flow-tenant header:x-team\n"
	    "pool llama {\n"
	    "    model meta-llama/Llama-3.1-8B-Instruct \"llama 3\";\n"
	    "    backend 10.0.1.1:8000\n"
	    "    backend 10.0.1.2:8000\n"
	    "    strategy prefix_aware; concurrency-threshold 4\n"
	    "    flow-instance-queue-ms 0\n"
	    "}\n"
	    "pool sm { path /invocations; backend [2001:db8::1]:8080; flow-control off }\n"
	    "tenant batch { weight 1; priority sheddable }\n"
	    "tenant interactive { weight 4 }\n"
	    "tenant plain\n";
	struct pg_config cfg;
	struct pg_conf_errs e = {0};
	char a[PG_ADDR_STRLEN];

	(void)state;
	if (parse(&cfg, text, 0, NULL, &e))
		fail_msg("%u: %s", e.v ? e.v[0].line : 0, e.v ? e.v[0].msg : "?");
	assert_string_equal(pg_addr_format(&cfg.listen, a), "0.0.0.0:8080");
	assert_string_equal(pg_addr_format(&cfg.admin, a), "127.0.0.1:9191");
	assert_int_equal(cfg.workers, 3);
	assert_true(cfg.no_bpf && !cfg.shadow && cfg.route_header && cfg.flow.on);
	assert_int_equal(cfg.nbackends, 3);
	assert_string_equal(cfg.backends[2], "vllm.local:8000");
	assert_string_equal(cfg.health.path, "/ready");
	assert_int_equal(cfg.health.interval_ms, 500);
	assert_int_equal(cfg.log_level, 1);
	assert_int_equal(cfg.flow.tenant_src, PG_TENANT_HEADER);
	assert_string_equal(cfg.flow.tenant_header, "x-team");
	/* the gateway's routing, and each pool's over it */
	assert_int_equal(cfg.route.strategy, PG_STRATEGY_CACHE_AWARE);
	assert_int_equal(cfg.route.prefix_length, 2048);
	assert_int_equal(cfg.route.new_choices, 2);
	assert_int_equal(cfg.route.flow_queue_ms, PG_FLOW_QUEUE_AUTO);
	assert_int_equal(cfg.route.flow_deadline_ms, 3000);
	assert_int_equal(cfg.pools.n, 3);
	assert_string_equal(cfg.pools.pool[1].name, "llama");
	assert_int_equal(cfg.pools.pool[1].nmodels, 2);
	assert_string_equal(cfg.pools.pool[1].models[1], "llama 3");
	assert_int_equal(cfg.pools.pool[1].nbackends, 2);
	assert_int_equal(cfg.pools.pool[1].route.strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(cfg.pools.pool[1].route.prefix_length, 2048);
	assert_int_equal(cfg.pools.pool[1].route.concurrency_threshold, 4);
	assert_int_equal(cfg.pools.pool[1].route.flow_queue_ms, 0);
	assert_int_equal(cfg.pools.pool[1].route.flow_deadline_ms, 3000);
	assert_string_equal(cfg.pools.pool[2].paths[0], "/invocations");
	assert_string_equal(cfg.pools.pool[2].backends[0], "[2001:db8::1]:8080");
	assert_int_equal(cfg.pools.pool[2].route.flow_queue_ms, 0);
	assert_true(cfg.pools.catch_all); /* plain backends: the default pool takes the rest */
	assert_int_equal(cfg.flow.ntenants, 3);
	assert_int_equal(cfg.flow.tenants[0].prio, 2);
	assert_int_equal(cfg.flow.tenants[1].weight, 4);
	assert_int_equal(cfg.flow.tenants[2].weight, 1);
	assert_string_equal(cfg.conf_path, "t.conf");
	pg_config_free(&cfg);
	pg_conf_errs_free(&e);
}

/* Each bad file: one error, at its line, saying what is wrong and what is
 * allowed; nothing configured. */
static void test_bad(void **state)
{
	static const struct {
		const char *text;
		unsigned line;
		const char *msg;
	} cases[] = {
	    {"workers 2\nworker 3\n", 2, "unknown directive \"worker\" (did you mean workers?)"},
	    {"prefix-length 100\n", 1, "prefix-length: 100 is out of range 1024-65536"},
	    {"workers two\n", 1, "workers: \"two\" is not a decimal number"},
	    {"listen 1.2.3.4:8080\nworkers 2\nworkers 3\n", 3,
	     "workers: given twice (first at line 2)"},
	    {"workers\n", 1, "workers: takes one value, N"},
	    {"listen a b\n", 1, "listen: takes one value, ADDR:PORT"},
	    {"strategy fast\n", 1,
	     "strategy: \"fast\" is not one of random, least_outstanding_requests, prefix_aware, "
	     "cache_aware"},
	    {"no-bpf yes\n", 1, "no-bpf: takes no value, or on or off (not \"yes\")"},
	    {"--workers 4\n", 1,
	     "unknown directive \"--workers\": a directive is its flag's name "
	     "without --: workers"},
	    {"workers=4\n", 1,
	     "unknown directive \"workers=4\": a directive's value follows its "
	     "name after a space: workers 4"},
	    {"frobnicate on\n", 1,
	     "unknown directive \"frobnicate\": the directives are prefixgate's flags without "
	     "their "
	     "-- (prefixgate --help), and the blocks pool NAME { ... } and tenant NAME { ... }"},
	    {"check\n", 1,
	     "\"check\" is a flag of the command line only (--check), not a directive"},
	    {"model x\n", 1, "\"model\" belongs in a pool block (pool NAME { model ...; })"},
	    {"pool a:model=x\n", 1,
	     "pool: a pool is a block: pool NAME { model M; backend HOST:PORT; ... }"},
	    {"listen :80 {\n}\n", 1, "listen: not a block (only pool and tenant open one)"},
	    {"backend 10.0.0.1:80\nbackend 10.0.0.1:80\n", 2, "backend 10.0.0.1:80: given twice"},
	    {"pool a {\n model x\n prefx 3\n}\n", 3,
	     "pool a: unknown directive \"prefx\" (a pool's are model, path, backend, strategy, "
	     "prefix-length, concurrency-threshold, new-conversation-choices, flow-control, "
	     "flow-instance-queue-ms, flow-deadline-ms, routing-config, pd, prefill, decode, "
	     "pd-min-tokens, bootstrap-port)"},
	    {"pool a {\n model x\n strateg random\n}\n", 3,
	     "pool a: unknown directive \"strateg\" (did you mean strategy?)"},
	    {"pool a {\n model x,y\n}\n", 2,
	     "pool a: model \"x,y\": one item a word, without commas (model A B ...)"},
	    {"pool a {\n model x\n prefix-length 10\n}\n", 3,
	     "pool a: prefix-length 10: not a number in 1024-65536"},
	    {"pool a {\n model x\n strategy fast\n}\n", 3,
	     "pool a: strategy fast: not a strategy (random, least_outstanding_requests, "
	     "prefix_aware, cache_aware)"},
	    {"pool a {\n model x\n strategy random\n strategy random\n}\n", 4,
	     "pool a: strategy given twice (first at line 3)"},
	    {"pool a {\n model x\n path v1\n}\n", 3,
	     "pool a: path v1: a path prefix starts with '/'"},
	    {"pool a { model x }\npool a { model y }\n", 2,
	     "pool a: given twice (first at line 1): one block a pool"},
	    {"pool a { model x }\npool b { model x }\n", 2,
	     "pool b: model x is already served by pool a"},
	    {"pool a {\n backend 10.0.0.1:80\n}\n", 1,
	     "pool a: no model= and no path=: no request would reach it"},
	    {"backend 10.0.0.1:80\npool a { model x; backend 10.0.0.1:80 }\n", 2,
	     "pool a: backend 10.0.0.1:80 is already pool default (--backend)'s"},
	    {"pool a b { model x }\n", 1,
	     "pool: expected pool NAME { model M; backend HOST:PORT; ... }"},
	    {"pool a/b { model x }\n", 1, "pool a/b: NAME is 1-31 of A-Z a-z 0-9 _ . -"},
	    {"pool a {\n model x\n inner {\n }\n}\n", 3, "pool a: no block inside a pool block"},
	    {"pool a {\n model x\n flow-control maybe\n}\n", 3,
	     "pool a: flow-control: takes no value, or on or off (not \"maybe\")"},
	    {"pool c {\n model x\n pd tgi\n}\n", 3,
	     "pool c: pd tgi: the protocol is vllm or sglang"},
	    {"pool c {\n model x\n pd vllm\n prefill 10.0.0.1:80\n}\n", 1,
	     "pool c: pd=vllm needs its decode instances (decode=ADDR,...)"},
	    {"pool c {\n model x\n pd sglang\n prefill 10.0.0.1:80@0\n decode 10.0.0.2:80\n}\n", 4,
	     "pool c: prefill 10.0.0.1:80@0: @PORT is its bootstrap port, 1-65535"},
	    {"pool c {\n model x\n pd sglang\n prefill 10.0.0.1:80\n decode 10.0.0.2:80\n}\n", 1,
	     "pool c: pd=sglang needs each prefill instance's bootstrap port (prefill=ADDR@PORT, "
	     "or bootstrap-port=PORT for all)"},
	    {"pool c {\n model x\n pd vllm\n pd-min-tokens lots\n decode 10.0.0.2:80\n}\n", 4,
	     "pool c: pd-min-tokens lots: expected 0-1000000000 tokens"},
	    {"tenant a { weight 0 }\n", 1, "tenant a: weight: expected 1-1000, got \"0\""},
	    {"tenant a {\n priority urgent\n}\n", 2,
	     "tenant a: priority: expected critical, standard or sheddable, got \"urgent\""},
	    {"tenant a {\n colour red\n}\n", 2,
	     "tenant a: \"colour\" is not weight W, priority P, rpm N or tpm N (one value each)"},
	    {"tenant a {\n rpm 10\n rpm 20\n}\n", 3, "tenant a: rpm given twice (first at line 2)"},
	    {"tenant a {\n tpm lots\n}\n", 2,
	     "tenant a: tpm: expected 0 (no limit) to 1000000000 a minute, got \"lots\""},
	    {"tenant a\ntenant a\n", 2, "tenant a: given twice"},
	    {"admin 0.0.0.0:9090\n", 1,
	     "admin 0.0.0.0:9090 is not a loopback address: also give --admin-token or "
	     "--admin-token-file (every admin request then needs \"Authorization: Bearer "
	     "TOKEN\")"},
	    {"admin-token short\n", 1,
	     "admin-token: the token must be 16-256 characters long (it has 5)"},
	    {"no-bpf\ndata-path sockmap\n", 2,
	     "data-path sockmap needs BPF: drop --no-bpf or use "
	     "copy"},
	    {"routing-config /nonexistent/rc.json\n", 1,
	     "routing-config /nonexistent/rc.json: No such file or directory"},
	    {"backends-file /nonexistent/b\n", 1,
	     "backends-file /nonexistent/b: No such file or directory"},
	    {"pool a { model x; routing-config /nonexistent/r.json }\n", 1,
	     "pool a: routing-config /nonexistent/r.json: No such file or directory"},
	    {"etcd-endpoints http://127.0.0.1:2379\nbackends-file /dev/null\n", 1,
	     "etcd-endpoints and --backends-file: choose one source"},
	    {"pool \"a {\n model x\n}\nworkers 2\n", 1,
	     "a quoted word is not closed on its line (a '\"' is missing)"},
	    {"workers 2\n}\n", 2, "'}' closes no block"},
	    {"max-load-gap 2\n", 1,
	     "unknown directive \"max-load-gap\": the directives are prefixgate's flags without "
	     "their -- (prefixgate --help), and the blocks pool NAME { ... } and tenant NAME { "
	     "... }"},
	    {"pool a {\n model x\n max-load-gap 2\n}\n", 3,
	     "pool a: max-load-gap: " PG_CA_GAP_REMOVED},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_config cfg;
		struct pg_conf_errs e = {0};
		int rc = parse(&cfg, cases[i].text, 0, NULL, &e);

		if (rc != 2 || e.n != 1) {
			fail_msg("case %zu: rc %d, %zu errors (first %u: %s; second %u: %s)", i, rc,
			         e.n, e.n ? e.v[0].line : 0, e.n ? e.v[0].msg : "",
			         e.n > 1 ? e.v[1].line : 0, e.n > 1 ? e.v[1].msg : "");
		}
		if (e.v[0].line != cases[i].line || strcmp(e.v[0].msg, cases[i].msg))
			fail_msg("case %zu: %u: \"%s\"\nexpected %u: \"%s\"", i, e.v[0].line,
			         e.v[0].msg, cases[i].line, cases[i].msg);
		assert_null(cfg.conf);
		assert_null(cfg.backends);
		pg_conf_errs_free(&e);
	}
}

/* All the errors of a file in one pass. */
static void test_every_error(void **state)
{
	static const char text[] = "workers 0\n"
	                           "listen nowhere\n"
	                           "pool a {\n bogus 1\n model x\n}\n"
	                           "shadow\n"
	                           "tenant \"a b\"\n"
	                           "pool b { backend 10.0.0.9:80 }\n"
	                           "pool c {\n backend 10.0.0.8:80 \"\n}\n";
	struct pg_config cfg;
	struct pg_conf_errs e = {0};
	/* pool b's missing model is found once everything is read; pool c's
	 * is not told: its block has an error already */
	static const unsigned lines[] = {11, 1, 2, 4, 8, 9};

	(void)state;
	assert_int_equal(parse(&cfg, text, 0, NULL, &e), 2);
	assert_int_equal(e.n, 6);
	for (size_t i = 0; i < 6; i++)
		if (e.v[i].line != lines[i])
			fail_msg("error %zu at line %u (%s), expected %u", i, e.v[i].line,
			         e.v[i].msg, lines[i]);
	assert_string_equal(e.v[5].msg,
	                    "pool b: no model= and no path=: no request would reach it");
	pg_conf_errs_free(&e);
}

/* The flags over the file: a flag overrides a directive; --backend,
 * --pool and --tenant add to the file's lists, naming the same item
 * again being no error. */
static void test_flags_over_file(void **state)
{
	static const char text[] = "workers 2\nprefix-length 2048\nbackend 10.0.0.1:80\n"
	                           "pool a { model x; backend 10.0.0.2:80; strategy random }\n"
	                           "tenant t { weight 3 }\n";
	char **args = ARGS("--workers", "4", "--backend", "10.0.0.1:80", "--backend", "10.0.0.3:80",
	                   "--pool", "a:model=x", "--pool", "a:strategy=cache_aware", "--pool",
	                   "a:backend=10.0.0.2:80", "--tenant", "t:priority=critical");
	struct pg_config cfg;
	struct pg_conf_errs e = {0};

	(void)state;
	if (parse(&cfg, text, argc_of(args), args, &e))
		fail_msg("%u: %s", e.v ? e.v[0].line : 0, e.v ? e.v[0].msg : "?");
	assert_int_equal(cfg.workers, 4);
	assert_int_equal(cfg.route.prefix_length, 2048);
	assert_int_equal(cfg.nbackends, 2);
	assert_int_equal(cfg.pools.pool[1].nmodels, 1);
	assert_int_equal(cfg.pools.pool[1].nbackends, 1);
	assert_int_equal(cfg.pools.pool[1].route.strategy, PG_STRATEGY_CACHE_AWARE);
	/* --tenant replaces the file's: weight back to 1 */
	assert_int_equal(cfg.flow.ntenants, 1);
	assert_int_equal(cfg.flow.tenants[0].weight, 1);
	assert_int_equal(cfg.flow.tenants[0].prio, 0);
	pg_config_free(&cfg);
	pg_conf_errs_free(&e);
	/* twice on the command line is still an error */
	args = ARGS("--backend", "10.0.0.3:80", "--backend", "10.0.0.3:80");
	assert_int_equal(parse(&cfg, text, argc_of(args), args, &e), 2);
	assert_int_equal(e.v[0].line, 0);
	assert_string_equal(e.v[0].msg, "--backend 10.0.0.3:80: given twice");
	pg_conf_errs_free(&e);
	/* a flag's error is the command line's (no line), the file's still told */
	args = ARGS("--workers", "0");
	assert_int_equal(parse(&cfg, "workers 2\nbogus\n", argc_of(args), args, &e), 2);
	assert_int_equal(e.n, 2);
	assert_int_equal(e.v[0].line, 2);
	assert_int_equal(e.v[1].line, 0);
	assert_string_equal(e.v[1].msg, "--workers: 0 is out of range 1-64");
	pg_conf_errs_free(&e);
}

/* What pg_config_render writes reads back as the same configuration. */
static void test_render_round_trip(void **state)
{
	static const char *const texts[] = {
	    "",
	    "listen 0.0.0.0:8080\nworkers 2\nno-bpf\nbackend 10.0.0.1:80 name.example:81\n"
	    "strategy random; concurrency-threshold 20\nlog-level debug\n"
	    "health-check-path none; access-log /var/log/prefixgate/access.log\n",
	    "pool a { model \"m 1\" m2; path /v2/; backend 10.0.0.2:80; strategy cache_aware; "
	    "new-conversation-choices 3; flow-control }\n"
	    "pool default { backend 10.0.0.3:80 }\n"
	    "tenant batch { priority sheddable }\ntenant x:y { weight 7 }\n"
	    "flow-control; flow-deadline-ms 100; flow-tenant user; admin-token-file "
	    "/tmp/pg-test-token\n",
	    /* prefill/decode pools: the decode set's routing block after its pool */
	    "pool chat { model m; pd vllm; prefill 10.0.0.4:80 10.0.0.5:80; decode 10.0.0.6:80; "
	    "pd-min-tokens 64 }\n"
	    "pool chat-decode { strategy least_outstanding_requests }\n"
	    "pool sg { model s; pd sglang; prefill 10.0.0.7:80@8998 [::1]:81; decode [::1]:82; "
	    "bootstrap-port 9000 }\n",
	};
	struct pg_buf one = {0}, two = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct pg_config cfg;
		struct pg_conf_errs e = {0};

		if (i == 2) { /* the token file */
			FILE *f = fopen("/tmp/pg-test-token", "w");

			assert_non_null(f);
			fputs("0123456789abcdef0123\n", f);
			fclose(f);
		}
		if (parse(&cfg, texts[i], 0, NULL, &e))
			fail_msg("text %zu: %u: %s", i, e.v[0].line, e.v[0].msg);
		pg_buf_reset(&one);
		pg_config_render(&cfg, NULL, &one);
		pg_buf_append(&one, "", 1);
		pg_config_free(&cfg);
		if (parse(&cfg, one.p, 0, NULL, &e))
			fail_msg("text %zu written as\n%s\ndoes not read back: %u: %s", i, one.p,
			         e.v[0].line, e.v[0].msg);
		pg_buf_reset(&two);
		pg_config_render(&cfg, NULL, &two);
		pg_buf_append(&two, "", 1);
		pg_config_free(&cfg);
		if (strcmp(one.p, two.p))
			fail_msg("text %zu: written\n%s\nread back and written\n%s", i, one.p,
			         two.p);
		if (i == 2) {
			assert_non_null(strstr(one.p, "\npool default {\n"));
			assert_non_null(strstr(one.p, "    model \"m 1\" m2;\n"));
			assert_non_null(strstr(one.p, "tenant x:y { weight 7; }"));
		}
		if (i == 3) {
			static const char *const want[] = {
			    "    prefill 10.0.0.4:80 10.0.0.5:80;\n",
			    "    decode 10.0.0.6:80;\n",
			    "    pd-min-tokens 64;\n",
			    "\npool chat-decode {\n    strategy least_outstanding_requests;\n",
			    "    prefill 10.0.0.7:80@8998 [::1]:81;\n",
			    "    bootstrap-port 9000;\n",
			};

			for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++)
				if (!strstr(one.p, want[w]))
					fail_msg("text %zu written as\n%s\nwithout %s", i, one.p,
					         want[w]);
		}
	}
	unlink("/tmp/pg-test-token");
	pg_buf_free(&one);
	pg_buf_free(&two);
}

struct seen {
	char text[1024];
};

static void collect(void *arg, const char *name, bool live, const char *was, const char *now)
{
	struct seen *s = arg;
	size_t n = strlen(s->text);

	snprintf(s->text + n, sizeof(s->text) - n, "%s%s %s>%s;", live ? "+" : "", name, was, now);
}

static void test_diff(void **state)
{
	struct pg_config a, b;
	struct pg_conf_errs e = {0};
	struct seen s = {""};

	(void)state;
	assert_int_equal(parse(&a,
	                       "workers 2\nhealth-check-interval 500\nstrategy random\n"
	                       "admin-token 0123456789abcdef\n",
	                       0, NULL, &e),
	                 0);
	assert_int_equal(parse(&b,
	                       "workers 3\nlog-level debug\nstrategy cache_aware\n"
	                       "admin-token 0123456789abcdeX\nuser nobody\n",
	                       0, NULL, &e),
	                 0);
	pg_config_diff(&a, &b, collect, &s);
	/* routing is not told: whoever applies it compares it */
	assert_string_equal(s.text, "workers 2>3;+health-check-interval 500>2000;"
	                            "user (none)>nobody;admin-token (a token)>(another token);"
	                            "+log-level info>debug;");
	pg_config_free(&a);
	pg_config_free(&b);
	pg_conf_errs_free(&e);
}

/* pg_config_parse (the first error only) names the file and line. */
static void test_first_error(void **state)
{
	char path[] = "/tmp/pg-test-conf-XXXXXX", err[256], want[300];
	int fd = mkstemp(path);
	struct pg_config cfg;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "workers 2\nworkers 0\n", 20), 20);
	close(fd);
	assert_int_equal(pg_config_parse(&cfg, 3, ARGS("-c", path), NULL, err, sizeof(err)), 2);
	assert_false(cfg.check);
	snprintf(want, sizeof(want), "%s:2: workers: given twice (first at line 1)", path);
	assert_string_equal(err, want);
	assert_int_equal(
	    pg_config_parse(&cfg, 4, ARGS("--config", path, "--check"), NULL, err, sizeof(err)), 2);
	assert_true(cfg.check);
	/* --check is known wherever it stands, also after the flag at fault
	 * (the unit's ExecReload puts it last) */
	assert_int_equal(pg_config_parse(&cfg, 4, ARGS("--strategy", "fastest", "--check"), NULL,
	                                 err, sizeof(err)),
	                 2);
	assert_true(cfg.check);
	assert_int_equal(pg_config_parse(&cfg, 4, ARGS("--bogus", "--backend", "--check"), NULL,
	                                 err, sizeof(err)),
	                 2);
	assert_false(cfg.check); /* (--check as --backend's value is no --check) */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "workers 2\n", 10), 10);
	close(fd);
	assert_int_equal(pg_config_parse(&cfg, 3, ARGS("--workers=5", "--config=/nonexistent/x"),
	                                 NULL, err, sizeof(err)),
	                 2);
	assert_string_equal(err, "--config /nonexistent/x: No such file or directory");
	assert_int_equal(
	    pg_config_parse(&cfg, 5, ARGS("--workers", "5", "-c", path), NULL, err, sizeof(err)),
	    0);
	assert_int_equal(cfg.workers, 5);
	assert_string_equal(cfg.conf_path, path);
	pg_config_free(&cfg);
	unlink(path);
}

/* What a configuration needs of the system (start-up's checks,
 * sys/preflight.h), each at its directive's line; a flag's at line 0. */
static void test_needs(void **state)
{
	static const struct {
		enum pg_need_kind kind;
		const char *name, *value;
		unsigned line;
	} want[] = {
	    {PG_NEED_USER, "user", "nobody", 2},
	    {PG_NEED_RELOAD, "config", "t.conf", 0},
	    {PG_NEED_APPEND, "access-log", "/var/log/prefixgate/access.log", 0},
	    {PG_NEED_STATE, "etcd-state-file", "/var/lib/prefixgate/etcd.json", 3},
	    {PG_NEED_BIND, "listen", NULL, 1},
	    {PG_NEED_BIND, "admin", NULL, 0},
	};
	char **args = ARGS("--access-log", "/var/log/prefixgate/access.log");
	struct pg_conf_errs e = {0};
	struct pg_config cfg;

	(void)state;
	assert_int_equal(parse(&cfg,
	                       "listen 127.0.0.1:8000\nuser nobody\n"
	                       "etcd-state-file /var/lib/prefixgate/etcd.json\n"
	                       "etcd-endpoints http://127.0.0.1:2379\n",
	                       argc_of(args), args, &e),
	                 0);
	assert_int_equal(cfg.nneeds, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < cfg.nneeds; i++) {
		const struct pg_need *n = &cfg.needs[i];

		if (n->kind != want[i].kind || strcmp(n->name, want[i].name) ||
		    n->line != want[i].line ||
		    (want[i].value ? !n->value || strcmp(n->value, want[i].value) : !!n->value))
			fail_msg("need %zu: %d %s %s at %u", i, n->kind, n->name,
			         n->value ? n->value : "-", n->line);
	}
	assert_int_equal(pg_sockaddr_port(&cfg.needs[4].addr), 8000);
	pg_config_free(&cfg);
	pg_conf_errs_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),
	    cmocka_unit_test(test_bad),
	    cmocka_unit_test(test_every_error),
	    cmocka_unit_test(test_flags_over_file),
	    cmocka_unit_test(test_render_round_trip),
	    cmocka_unit_test(test_diff),
	    cmocka_unit_test(test_first_error),
	    cmocka_unit_test(test_needs),
	};

	return cmocka_run_group_tests_name("config_file", tests, NULL, NULL);
}
