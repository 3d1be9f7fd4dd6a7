// SPDX-License-Identifier: MIT
/*
 * Configuration parser tests, without a command line: SageMaker
 * RoutingConfig variants (pg_routing_config_parse), addresses
 * (pg_addr_parse) and the backends file's text (pg_backends_parse).
 */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/config.h"

static void test_routing_config_json(void **state)
{
	static const struct {
		const char *json;
		int rc;
		enum pg_strategy strategy;
		uint32_t plen, conc;
		const char *err;
	} cases[] = {
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":4096,\"ConcurrencyThreshold\":10}}",
	     0, PG_STRATEGY_PREFIX_AWARE, 4096, 10, NULL},
	    {"{\"RoutingConfig\":{\"RoutingStrategy\":\"PREFIX_AWARE\","
	     "\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":2048,\"ConcurrencyThreshold\":4}}}",
	     0, PG_STRATEGY_PREFIX_AWARE, 2048, 4, NULL},
	    {" {\"RoutingStrategy\" : \"least_outstanding_requests\"} ", 0,
	     PG_STRATEGY_LEAST_OUTSTANDING, 4096, 10, NULL},
	    {"{\"RoutingStrategy\":\"Random\",\"PrefixAwareRoutingConfig\":{}}", 0,
	     PG_STRATEGY_RANDOM, 4096, 10, NULL},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"ConcurrencyThreshold\":1024}}",
	     0, PG_STRATEGY_PREFIX_AWARE, 4096, 1024, NULL},
	    {"{\"RoutingStrategy\":\"PREFIX_\\u0041WARE\",\"PrefixAwareRoutingConfig\":null}", 0,
	     PG_STRATEGY_PREFIX_AWARE, 4096, 10, NULL},
	    {"{\"RoutingStrategy\":\"CACHE_AWARE\",\"CacheAwareConfig\":{"
	     "\"NewConversationChoices\":2},"
	     "\"PrefixAwareRoutingConfig\":{\"PrefixLength\":2048}}",
	     0, PG_STRATEGY_CACHE_AWARE, 2048, 10, NULL},

	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"Foo\":1}", -1, 0, 0, 0, "Foo: unknown field"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":{\"PrefixLen\":1}"
	     "}",
	     -1, 0, 0, 0, "PrefixAwareRoutingConfig.PrefixLen: unknown field"},
	    {"{\"RoutingConfig\":{\"RoutingStrategy\":\"RANDOM\"},\"Extra\":1}", -1, 0, 0, 0,
	     "Extra: unknown field"},
	    {"{\"RoutingConfig\":{\"RoutingStrategy\":\"RANDOM\",\"X\":{}}}", -1, 0, 0, 0,
	     "RoutingConfig.X: unknown field"},
	    {"{\"RoutingStrategy\":4}", -1, 0, 0, 0,
	     "RoutingStrategy: expected a string, got number"},
	    {"{\"RoutingStrategy\":\"FASTEST\"}", -1, 0, 0, 0,
	     "RoutingStrategy: \"FASTEST\" is not one of RANDOM, LEAST_OUTSTANDING_REQUESTS, "
	     "PREFIX_AWARE, CACHE_AWARE"},
	    {"{\"RoutingStrategy\":\"CACHE_AWARE\",\"CacheAwareConfig\":{\"MaxLoadGap\":4}}", -1, 0,
	     0, 0, "CacheAwareConfig.MaxLoadGap: " PG_CA_GAP_REMOVED},
	    {"{\"RoutingStrategy\":\"CACHE_AWARE\",\"CacheAwareConfig\":"
	     "{\"NewConversationChoices\":0}}",
	     -1, 0, 0, 0, "CacheAwareConfig.NewConversationChoices: 0 is out of range 1-4"},
	    {"{\"RoutingStrategy\":\"CACHE_AWARE\",\"CacheAwareConfig\":"
	     "{\"NewConversationChoices\":5}}",
	     -1, 0, 0, 0, "CacheAwareConfig.NewConversationChoices: 5 is out of range 1-4"},
	    {"{\"RoutingStrategy\":\"CACHE_AWARE\",\"CacheAwareConfig\":{\"Gap\":2}}", -1, 0, 0, 0,
	     "CacheAwareConfig.Gap: unknown field"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":\"4096\"}}",
	     -1, 0, 0, 0, "PrefixAwareRoutingConfig.PrefixLength: expected an integer, got string"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":[]}", -1, 0, 0, 0,
	     "PrefixAwareRoutingConfig: expected an object, got array"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":4096.5}}",
	     -1, 0, 0, 0, "PrefixAwareRoutingConfig.PrefixLength: 4096.5 is not an integer"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":100}}",
	     -1, 0, 0, 0, "PrefixAwareRoutingConfig.PrefixLength: 100 is out of range 1024-65536"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":-5}}",
	     -1, 0, 0, 0, "PrefixAwareRoutingConfig.PrefixLength: -5 is out of range 1024-65536"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":1e400}}",
	     -1, 0, 0, 0, "PrefixAwareRoutingConfig.PrefixLength: 1e400 is not an integer"},
	    {"{\"RoutingConfig\":{\"RoutingStrategy\":\"PREFIX_AWARE\","
	     "\"PrefixAwareRoutingConfig\":"
	     "{\"ConcurrencyThreshold\":0}}}",
	     -1, 0, 0, 0,
	     "RoutingConfig.PrefixAwareRoutingConfig.ConcurrencyThreshold: 0 is out of range "
	     "1-1024"},
	    {"{\"PrefixAwareRoutingConfig\":{\"PrefixLength\":4096}}", -1, 0, 0, 0,
	     "RoutingStrategy: missing (RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE or "
	     "CACHE_AWARE)"},
	    {"{\"RoutingConfig\":\"PREFIX_AWARE\"}", -1, 0, 0, 0,
	     "RoutingConfig: expected an object, got string"},
	    {"[]", -1, 0, 0, 0, "expected a JSON object, got array"},
	    {"{\"RoutingStrategy\":\"RANDOM\",}", -1, 0, 0, 0,
	     "invalid JSON at byte 28: expected a member name string"},
	    {"", -1, 0, 0, 0, "invalid JSON at byte 0: expected a value"},
	};
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_route_cfg rc = {PG_STRATEGY_RANDOM, 1, 2, PG_LOAD_INFLIGHT, 2, 0, 0};
		int r;

		err[0] = 0;
		r = pg_routing_config_parse(cases[i].json, strlen(cases[i].json), &rc, err,
		                            sizeof(err));
		if (r != cases[i].rc)
			fail_msg("case %zu: rc %d (%s)", i, r, err);
		if (r) {
			if (strcmp(err, cases[i].err))
				fail_msg("case %zu: \"%s\", expected \"%s\"", i, err, cases[i].err);
			/* untouched on error */
			assert_int_equal(rc.prefix_length, 1);
			assert_int_equal(rc.concurrency_threshold, 2);
			continue;
		}
		assert_int_equal(rc.strategy, cases[i].strategy);
		assert_int_equal(rc.prefix_length, cases[i].plen);
		assert_int_equal(rc.concurrency_threshold, cases[i].conc);
	}
	assert_string_equal(pg_strategy_name(PG_STRATEGY_LEAST_OUTSTANDING),
	                    "LEAST_OUTSTANDING_REQUESTS");
	/* CacheAwareConfig.NewConversationChoices: given, or the default */
	{
		static const char given[] = "{\"RoutingStrategy\":\"CACHE_AWARE\","
		                            "\"CacheAwareConfig\":{\"NewConversationChoices\":3}}";
		static const char absent[] = "{\"RoutingStrategy\":\"CACHE_AWARE\"}";
		struct pg_route_cfg rc = {0};

		assert_int_equal(
		    pg_routing_config_parse(given, strlen(given), &rc, err, sizeof(err)), 0);
		assert_int_equal(rc.new_choices, 3);
		assert_int_equal(
		    pg_routing_config_parse(absent, strlen(absent), &rc, err, sizeof(err)), 0);
		assert_int_equal(rc.new_choices, PG_CA_CHOICES_DEFAULT);
	}
}

static void test_backends_file(void **state)
{
	static const struct {
		const char *text, *err;
		size_t n;
	} cases[] = {
	    {"", NULL, 0},
	    {"# only a comment\n\n   \n", NULL, 0},
	    {"127.0.0.1:8001", NULL, 1},
	    {"127.0.0.1:8001\r\n\t10.0.0.1:9000  \r\n# x\nlocalhost:8002 # comment\n", NULL, 3},
	    {"127.0.0.1:8001\n\n127.0.0.1:80x\n",
	     "line 3: \"127.0.0.1:80x\": port must be a "
	     "decimal number 1-65535",
	     0},
	    {"127.0.0.1:8001\nlocalhost:8001\n", "line 2: 127.0.0.1:8001 duplicates line 1", 0},
	    {"1.2.3.4:1 1.2.3.4:2\n",
	     "line 1: unexpected \"1.2.3.4:2\" after the address (a line is HOST:PORT "
	     "[pool=NAME])",
	     0},
	    /* what follows the address is said precisely, not taken for its port */
	    {"10.0.0.1:80 pool=qwen junk\n",
	     "line 1: unexpected \"junk\" after the address (a line is HOST:PORT [pool=NAME])", 0},
	    {"\n10.0.0.1:80\tjunk pool=qwen # c\n",
	     "line 2: unexpected \"junk\" after the address (a line is HOST:PORT [pool=NAME])", 0},
	    {"10.0.0.1:80 pool=a pool=b\n", "line 1: pool= given twice", 0},
	    {"10.0.0.1:80 pool=a/b\n", "line 1: pool=a/b: a name is 1-31 of A-Z a-z 0-9 _ . -", 0},
	    {"10.0.0.1:80 pool=\n", "line 1: pool=: a name is 1-31 of A-Z a-z 0-9 _ . -", 0},
	    {"\n\nexample..com:80\n",
	     "line 3: \"example..com:80\": host must be an IPv4 address "
	     "A.B.C.D, [IPV6], localhost or a DNS name",
	     0},
	    {"[::1]:80\n[0:0::1]:80\n", "line 2: [::1]:80 duplicates line 1", 0},
	    {"Pool.Example:80\npool.example:80\n", "line 2: pool.example:80 duplicates line 1", 0},
	    {"[::1]:8000\nvllm.svc.cluster.local:8000\n127.0.0.1:1\n", NULL, 3},
	};
	char err[256], **v;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = pg_backends_parse(cases[i].text, strlen(cases[i].text), &v, &n, err,
		                           sizeof(err));

		if (cases[i].err) {
			if (rc != -1 || strcmp(err, cases[i].err))
				fail_msg("case %zu: rc %d \"%s\"", i, rc, rc ? err : "");
			continue;
		}
		if (rc)
			fail_msg("case %zu: %s", i, err);
		assert_int_equal(n, cases[i].n);
		if (n == 3 && v[0][0] == '[') {
			assert_string_equal(v[0], "[::1]:8000");
			assert_string_equal(v[1], "vllm.svc.cluster.local:8000");
		} else if (n == 3) {
			assert_string_equal(v[0], "127.0.0.1:8001");
			assert_string_equal(v[1], "10.0.0.1:9000");
			assert_string_equal(v[2], "127.0.0.1:8002");
		}
		pg_backends_free(v, n);
	}
	/* a NUL byte inside a line, and the backend limit */
	assert_int_equal(pg_backends_parse("1.2.3.4:5\0x\n", 12, &v, &n, err, sizeof(err)), -1);
	assert_string_equal(err, "line 1: not a HOST:PORT");
	{
		char *text = malloc(PG_MAX_BACKENDS * 16);
		size_t len = 0;

		size_t head = 0; /* the text before the last line */

		for (unsigned i = 1; i <= PG_MAX_BACKENDS; i++) {
			head = len;
			len += (size_t)sprintf(text + len, "10.0.%u.%u:80\n", i / 256, i % 256);
		}
		assert_int_equal(pg_backends_parse(text, len, &v, &n, err, sizeof(err)), -1);
		/* the limit itself is accepted */
		assert_int_equal(pg_backends_parse(text, head, &v, &n, err, sizeof(err)), 0);
		assert_int_equal(n, PG_MAX_BACKENDS - 1);
		pg_backends_free(v, n);
		char want[64];

		snprintf(want, sizeof(want), "line %d: more than %d backends", PG_MAX_BACKENDS,
		         PG_MAX_BACKENDS - 1);
		assert_string_equal(err, want);
		free(text);
	}
}

/* A gateway's pools checked line by line: an unknown pool, and a line for
 * the default pool where it takes no requests, name their line. */
static void test_backends_file_pools(void **state)
{
	struct pg_pool_table t = {.n = 2, .pool = {{.name = "default"}, {.name = "qwen"}}};
	struct pg_backends_rules r = {.pools = &t};
	const char *text = "10.0.0.1:80 pool=qwen\n10.0.0.2:80 pool=default\n10.0.0.3:80\n";
	char err[256], **v;
	size_t n;

	(void)state;
	assert_int_equal(pg_backends_parse_in(text, strlen(text), &r, &v, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0], "10.0.0.1:80 pool=qwen");
	assert_string_equal(v[1], "10.0.0.2:80"); /* pool=default: as without pool= */
	pg_backends_free(v, n);
	text = "10.0.0.1:80 pool=qwen\n\n10.0.0.2:80 pool=llama\n";
	assert_int_equal(pg_backends_parse_in(text, strlen(text), &r, &v, &n, err, sizeof(err)),
	                 -1);
	assert_string_equal(err, "line 3: pool=llama: no such pool (the pools: default, qwen)");
	/* no catch-all: the default pool would get no traffic */
	r.need_pool = true;
	text = "10.0.0.1:80 pool=qwen\n10.0.0.2:80\n";
	assert_int_equal(pg_backends_parse_in(text, strlen(text), &r, &v, &n, err, sizeof(err)),
	                 -1);
	assert_string_equal(err, "line 2: 10.0.0.2:80: the default pool takes no requests (it was "
	                         "not the catch-all at start-up): give pool=NAME, one of qwen");
	text = "10.0.0.2:80 pool=default\n";
	assert_int_equal(pg_backends_parse_in(text, strlen(text), &r, &v, &n, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "line 1: 10.0.0.2:80: the default pool takes no requests"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_routing_config_json),
	    cmocka_unit_test(test_backends_file),
	    cmocka_unit_test(test_backends_file_pools),
	};

	return cmocka_run_group_tests_name("config_parse", tests, NULL, NULL);
}
