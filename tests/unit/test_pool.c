// SPDX-License-Identifier: MIT
/*
 * Model pools: the model scan of a body, the pool table's lookups
 * (lib/modelpool.h), --pool parsing (config), and a gateway with pools in memory:
 * members, rings and RoutingConfig per pool, a routing decision never
 * leaving its pool (state/pools.h, route.h), the admin API's ?pool=.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/config.h"
#include "admin/admin.h"
#include "control/control.h"
#include "members/members.h"
#include "lib/modelpool.h"
#include "state/pools.h"
#include "router/route.h"
#include "sys/log.h"

static int model(const char *body, char *buf)
{
	return pg_json_model(body, strlen(body), buf);
}

static void test_json_model(void **state)
{
	char m[PG_MODEL_NAME_MAX + 1], big[600];
	int n;

	(void)state;
	assert_int_equal(model("{\"model\":\"llama\",\"messages\":[]}", m), 5);
	assert_memory_equal(m, "llama", 5);
	/* anywhere at the top level, whitespace around */
	n = model(" {\n \"messages\" : [{\"model\":\"inner\",\"content\":\"x}\\\"]\"}], "
	          "\"n\": -1.5e3, \"t\": true, \"o\": {\"a\": [1, {\"b\": null}]},"
	          "\"model\" :\t\"meta-llama/Llama-3-8B\" } ",
	          m);
	assert_int_equal(n, 21);
	assert_memory_equal(m, "meta-llama/Llama-3-8B", 21);
	/* a nested "model" is not the request's */
	assert_int_equal(model("{\"messages\":[{\"model\":\"inner\"}]}", m), -1);
	/* the last duplicate wins, as in the parser; a later non-string clears */
	assert_int_equal(model("{\"model\":\"a\",\"model\":\"bb\"}", m), 2);
	assert_int_equal(model("{\"model\":\"a\",\"model\":7}", m), -1);
	/* escapes in the value and the name */
	assert_int_equal(model("{\"mod\\u0065l\":\"q\\u00e9\\n\\\"\"}", m), 5);
	assert_memory_equal(m, "q\xc3\xa9\n\"", 5);
	/* not an object, not a string, bad escape, truncated before the value */
	assert_int_equal(model("[\"model\",\"x\"]", m), -1);
	assert_int_equal(model("{\"model\":null}", m), -1);
	assert_int_equal(model("{\"model\":\"a\\x\"}", m), -1);
	assert_int_equal(model("{\"messages\":[1,2", m), -1);
	assert_int_equal(model("", m), -1);
	assert_int_equal(model("{}", m), -1);
	/* a prefix of a large body: what it holds counts */
	assert_int_equal(model("{\"model\":\"x\",\"messages\":[{\"content\":\"tr", m), 1);
	/* too long a name matches nothing */
	memset(big, 'a', sizeof(big));
	memcpy(big, "{\"model\":\"", 10);
	memcpy(big + 10 + PG_MODEL_NAME_MAX + 1, "\"}", 3);
	assert_int_equal(model(big, m), -1);
	memcpy(big + 10 + PG_MODEL_NAME_MAX, "\"}", 3);
	assert_int_equal(model(big, m), PG_MODEL_NAME_MAX);
}

static struct pg_config cfg;

static int parse(const char *const *args, char *err, size_t errlen)
{
	char *argv[64] = {"prefixgate"};
	int argc = 1;

	for (; args[argc - 1]; argc++)
		argv[argc] = (char *)args[argc - 1];
	return pg_config_parse(&cfg, argc, argv, stdout, err, errlen);
}

#define PARSE(...) parse((const char *const[]){__VA_ARGS__, NULL}, err, sizeof(err))

static void test_table(void **state)
{
	const struct pg_pool_table *t = &cfg.pools;
	char err[256];

	(void)state;
	assert_int_equal(PARSE("--pool", "a:model=alpha,alpha-2", "--pool", "b:model=beta",
	                       "--pool", "sm:path=/invocations", "--pool", "api:path=/api/"),
	                 0);
	assert_int_equal(t->n, 5);
	assert_string_equal(t->pool[0].name, "default");
	assert_true(t->by_model && t->by_path);
	assert_false(t->catch_all); /* no --pool default, no plain --backend */
	assert_int_equal(pg_pool_by_model_name(t, "alpha-2", 7), 1);
	assert_int_equal(pg_pool_by_model_name(t, "beta", 4), 2);
	assert_int_equal(pg_pool_by_model_name(t, "bet", 3), -1);
	assert_int_equal(pg_pool_by_model(t, "gamma", 5), PG_POOL_UNKNOWN);
	assert_int_equal(pg_pool_by_model(t, "", -1), PG_POOL_UNKNOWN);
	/* paths: whole segments, a trailing '/' matches anything under it */
	assert_int_equal(pg_pool_by_path(t, true, "/invocations", 12), 3);
	assert_int_equal(pg_pool_by_path(t, true, "/invocations/x", 14), 3);
	assert_int_equal(pg_pool_by_path(t, true, "/invocationsx", 13), PG_POOL_UNKNOWN);
	assert_int_equal(pg_pool_by_path(t, false, "/api/x", 6), 4);
	assert_int_equal(pg_pool_by_path(t, true, "/api", 4), PG_POOL_UNKNOWN);
	/* the model decides POSTs under /v1/ only */
	assert_int_equal(pg_pool_by_path(t, true, "/v1/chat/completions", 20), PG_POOL_BY_MODEL);
	assert_int_equal(pg_pool_by_path(t, false, "/v1/models", 10), PG_POOL_UNKNOWN);
	assert_int_equal(pg_pool_find(t, "sm", 2), 3);
	assert_int_equal(pg_pool_find(t, "s", 1), -1);
	pg_config_free(&cfg);

	/* with plain --backend the default pool is the catch-all */
	assert_int_equal(PARSE("--backend", "10.0.0.1:80", "--pool", "a:model=alpha"), 0);
	assert_true(cfg.pools.catch_all);
	assert_int_equal(pg_pool_by_model(&cfg.pools, "gamma", 5), PG_POOL_DEFAULT);
	assert_int_equal(pg_pool_by_path(&cfg.pools, false, "/health", 7), PG_POOL_DEFAULT);
	pg_config_free(&cfg);
	/* so it is when declared */
	assert_int_equal(PARSE("--pool", "a:model=alpha", "--pool", "default"), 0);
	assert_true(cfg.pools.catch_all);
	pg_config_free(&cfg);
	/* no pools: one default pool that takes everything */
	assert_int_equal(PARSE("--backend", "10.0.0.1:80"), 0);
	assert_int_equal(cfg.pools.n, 1);
	assert_true(cfg.pools.catch_all && !cfg.pools.by_model);
	pg_config_free(&cfg);
}

static void test_parse_routing(void **state)
{
	const struct pg_pool_table *t = &cfg.pools;
	char err[256];

	(void)state;
	/* a pool follows the gateway's RoutingConfig except for what it sets */
	assert_int_equal(PARSE("--strategy", "random", "--concurrency-threshold", "7", "--pool",
	                       "a:model=x", "--pool", "a:strategy=cache_aware", "--pool",
	                       "a:prefix-length=2048", "--pool", "b:model=y", "--pool",
	                       "b:new-conversation-choices=3", "--pool",
	                       "a:backend=10.0.0.1:1,10.0.0.2:1"),
	                 0);
	assert_int_equal(t->pool[0].route.strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(t->pool[1].route.strategy, PG_STRATEGY_CACHE_AWARE);
	assert_int_equal(t->pool[1].route.prefix_length, 2048);
	assert_int_equal(t->pool[1].route.concurrency_threshold, 7);
	assert_int_equal(t->pool[2].route.strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(t->pool[2].route.new_choices, 3);
	assert_int_equal(t->pool[1].nbackends, 2);
	assert_string_equal(t->pool[1].backends[1], "10.0.0.2:1");
	pg_config_free(&cfg);
}

static void expect_error(const char *const *args, const char *want)
{
	char err[512];

	assert_int_equal(parse(args, err, sizeof(err)), 2);
	if (!strstr(err, want)) {
		fprintf(stderr, "error \"%s\" lacks \"%s\"\n", err, want);
		fail();
	}
}

#define ERR(want, ...) expect_error((const char *const[]){__VA_ARGS__, NULL}, want)

static void test_parse_errors(void **state)
{
	(void)state;
	ERR("NAME is 1-31", "--pool", "a b:model=x");
	ERR("NAME is 1-31", "--pool", ":model=x");
	ERR("expected NAME:KEY=VALUE", "--pool", "a:model");
	ERR("unknown key \"modle\"", "--pool", "a:modle=x");
	/* every key named, as the file's error names them */
	ERR("unknown key \"modle\" (model, path, backend, strategy, prefix-length, "
	    "concurrency-threshold, new-conversation-choices, flow-control, "
	    "flow-instance-queue-ms, flow-deadline-ms, routing-config, pd, prefill, decode, "
	    "pd-min-tokens, bootstrap-port)",
	    "--pool", "a:modle=x");
	ERR("model x is already served by pool a", "--pool", "a:model=x", "--pool", "b:model=x");
	ERR("an empty item", "--pool", "a:model=x,,y");
	ERR("path=v1: a path prefix starts with '/'", "--pool", "a:path=v1");
	ERR("path /p is already pool a's", "--pool", "a:path=/p", "--pool", "b:path=/p");
	ERR("strategy=fast: not a strategy", "--pool", "a:strategy=fast");
	ERR("prefix-length=10: not a number in 1024-65536", "--pool", "a:prefix-length=10");
	ERR("backend=", "--pool", "a:backend=nohost");
	ERR("backend 10.0.0.1:1 given twice", "--pool", "a:backend=10.0.0.1:1,10.0.0.1:1");
	ERR("backend 10.0.0.1:1 is already pool default (--backend)'s", "--backend", "10.0.0.1:1",
	    "--pool", "a:model=x", "--pool", "a:backend=10.0.0.1:1");
	ERR("backend 10.0.0.1:1 is already pool a's", "--pool", "a:model=x", "--pool",
	    "a:backend=10.0.0.1:1", "--pool", "b:model=y", "--pool", "b:backend=10.0.0.1:1");
	ERR("--pool a: no model= and no path=", "--pool", "a:backend=10.0.0.1:1");
	ERR("routing-config=/nonexistent", "--pool", "a:routing-config=/nonexistent");
	/* the default pool is one of the 16 */
	ERR("--pool p16: more than 15 pools besides default (16 with it, the most a gateway has)",
	    "--pool", "p1:model=1", "--pool", "p2:model=2", "--pool", "p3:model=3", "--pool",
	    "p4:model=4", "--pool", "p5:model=5", "--pool", "p6:model=6", "--pool", "p7:model=7",
	    "--pool", "p8:model=8", "--pool", "p9:model=9", "--pool", "p10:model=10", "--pool",
	    "p11:model=11", "--pool", "p12:model=12", "--pool", "p13:model=13", "--pool",
	    "p14:model=14", "--pool", "p15:model=15", "--pool", "p16:model=16");
}

/* ---- a gateway with pools, in memory --------------------------------------- */

static struct pg_gateway gw;

static int setup_gw(void **state)
{
	char err[256];

	(void)state;
	pg_log_level = PG_LOG_ERROR;
	memset(&gw, 0, sizeof(gw));
	if (PARSE("--backend", "10.0.0.9:80", "--pool", "a:model=alpha", "--pool",
	          "a:backend=10.0.0.1:80,10.0.0.2:80", "--pool", "b:model=beta", "--pool",
	          "b:backend=10.0.0.3:80,10.0.0.4:80,10.0.0.5:80", "--pool",
	          "b:strategy=least_outstanding_requests")) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	gw.cfg = &cfg;
	if (pg_maps_open_pools(&gw.maps, false, "", 0, pg_pools_count(&cfg), err, sizeof(err)) ||
	    pg_control_init(&gw, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	return 0;
}

static int teardown_gw(void **state)
{
	(void)state;
	pg_control_stop(&gw);
	pg_pools_free(&gw);
	pg_maps_close(&gw.maps);
	pg_config_free(&cfg);
	return 0;
}

static uint16_t route(unsigned pool, const char *text, uint64_t rnd, struct pg_choice *ch)
{
	struct pg_route_input in = {.api = PG_API_RAW,
	                            .body = text,
	                            .body_len = strlen(text),
	                            .complete = true,
	                            .pool = pool};
	struct pg_key k;

	return pg_route_dry(&gw.router, &in, NULL, rnd, &k, ch);
}

static void test_gateway(void **state)
{
	struct pg_choice ch;
	struct pg_idset tried = {0};
	char err[256], body[64];
	struct pg_key k = {0};

	(void)state;
	assert_non_null(gw.pools);
	assert_int_equal(gw.maps.npools, 3);
	assert_int_equal(gw.maps.state[0].nbackends, 1);
	assert_int_equal(gw.maps.state[1].nbackends, 2);
	assert_int_equal(gw.maps.state[2].nbackends, 3);
	assert_int_equal(pg_members_count(&gw), 6);
	assert_int_equal(gw.maps.state[2].strategy, PG_STRATEGY_LEAST_OUTSTANDING);
	assert_int_equal(gw.maps.state[1].strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_string_equal(gw.maps.pools[1].name, "a");
	assert_string_equal(gw.maps.pools[2].models, "beta");
	assert_true(gw.maps.pools[0].flags & PG_POOL_CATCH_ALL);
	/* every decision stays in its pool, on every strategy */
	for (unsigned i = 0; i < 200; i++) {
		uint64_t rnd = 0x9e3779b97f4a7c15ull * (i + 1);
		unsigned id;

		snprintf(body, sizeof(body), "prompt %u", i);
		id = route(0, body, rnd, &ch);
		assert_int_equal(gw.maps.backends[id].pool, 0);
		id = route(1, body, rnd, &ch);
		assert_int_equal(gw.maps.backends[id].pool, 1);
		assert_int_equal(ch.pool, 1);
		id = route(2, body, rnd, &ch);
		assert_int_equal(gw.maps.backends[id].pool, 2);
		assert_int_equal(ch.decision, PG_DEC_LEAST_OUTSTANDING);
	}
	/* a retry stays in the first choice's pool, and ends when it is used up */
	route(1, "x", 1, &ch);
	pg_idset_add(&tried, ch.backend);
	k.hash = 1;
	assert_int_equal(gw.maps.backends[pg_route_again(&gw.router, &k, &tried, 2, &ch)].pool, 1);
	pg_idset_add(&tried, ch.backend);
	assert_int_equal(pg_route_again(&gw.router, &k, &tried, 3, &ch), 0);
	/* a member joins pool b: only b's ring changes */
	uint64_t g0 = gw.maps.state[0].ring_generation, g1 = gw.maps.state[1].ring_generation,
	         g2 = gw.maps.state[2].ring_generation;
	int id = pg_member_add_pool(&gw, "10.0.0.6:80", 2, err, sizeof(err));

	assert_true(id > 0);
	assert_int_equal(gw.maps.backends[id].pool, 2);
	assert_int_equal(gw.maps.state[2].ring_generation, g2 + 1);
	assert_int_equal(gw.maps.state[1].ring_generation, g1);
	assert_int_equal(gw.maps.state[0].ring_generation, g0);
	/* an address has one pool */
	assert_int_equal(pg_member_add_pool(&gw, "10.0.0.1:80", 2, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "already a member of pool a"));
	/* draining takes it out of its pool at once */
	assert_int_equal(pg_member_remove(&gw, "10.0.0.6:80", err, sizeof(err)), id);
	assert_false(pg_idset_has(&gw.pools->members[2], (unsigned)id));
	assert_int_equal(gw.maps.state[2].nbackends, 3);
}

static void test_backends_file(void **state)
{
	const char *text = "10.0.1.1:80 pool=a  # tagged\n10.0.1.2:80\n\t10.0.1.3:80\tpool=b\n";
	char err[256], **v, *list[1];
	size_t n;
	int id;

	(void)state;
	assert_int_equal(pg_backends_parse(text, strlen(text), &v, &n, err, sizeof(err)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(v[0], "10.0.1.1:80 pool=a");
	assert_string_equal(v[1], "10.0.1.2:80");
	assert_string_equal(v[2], "10.0.1.3:80 pool=b");
	pg_backends_free(v, n);
	text = "10.0.1.1:80 pool=a\n10.0.1.1:80\n";
	assert_int_equal(pg_backends_parse(text, strlen(text), &v, &n, err, sizeof(err)), -1);
	assert_string_equal(err, "line 2: 10.0.1.1:80 pool=a duplicates line 1");
	text = "10.0.1.1:80 pool=\n";
	assert_int_equal(pg_backends_parse(text, strlen(text), &v, &n, err, sizeof(err)), -1);
	/* a file member joins its pool; moved to another, it drains and comes back there */
	list[0] = "10.0.1.1:80 pool=a";
	assert_int_equal(pg_members_sync(&gw, list, 1, err, sizeof(err)), 1);
	for (id = PG_MAX_BACKENDS - 1; id > 0; id--)
		if (!memcmp(gw.maps.backends[id].addr, "\x0a\x00\x01\x01", 4))
			break;
	assert_true(id > 0);
	assert_int_equal(gw.maps.backends[id].pool, 1);
	assert_true(pg_idset_has(&gw.pools->members[1], (unsigned)id));
	list[0] = "10.0.1.1:80 pool=b";
	assert_true(pg_members_sync(&gw, list, 1, err, sizeof(err)) >= 1);
	assert_int_equal(gw.maps.backends[id].pool, 2);
	assert_false(pg_idset_has(&gw.pools->members[1], (unsigned)id));
	assert_true(pg_idset_has(&gw.pools->members[2], (unsigned)id));
	assert_int_equal(gw.maps.state[1].nbackends, 2);
	assert_int_equal(gw.maps.state[2].nbackends, 4);
	list[0] = "10.0.1.1:80 pool=zz";
	assert_int_equal(pg_members_sync(&gw, list, 1, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no such pool"));
}

static int admin(const char *method, const char *target, const char *body, struct pg_admin_reply *r)
{
	const char *q = strchr(target, '?');
	struct pg_str path = {target, q ? (size_t)(q - target) : strlen(target)};
	struct pg_str query = q ? (struct pg_str){q + 1, strlen(q + 1)} : (struct pg_str){"", 0};
	int st = pg_admin_handle(&gw, (struct pg_str){method, strlen(method)}, path, query, body,
	                         body ? strlen(body) : 0, r);

	pg_buf_append(&r->body, "", 1);
	return st;
}

static void test_admin(void **state)
{
	struct pg_admin_reply r;

	(void)state;
	assert_int_equal(admin("PUT", "/routing?pool=a", "{\"RoutingStrategy\":\"RANDOM\"}", &r),
	                 200);
	pg_buf_free(&r.body);
	assert_int_equal(gw.maps.state[1].strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(gw.maps.state[0].strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(admin("GET", "/routing?pool=b", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "LEAST_OUTSTANDING_REQUESTS"));
	pg_buf_free(&r.body);
	assert_int_equal(admin("GET", "/routing?pool=zz", NULL, &r), 404);
	pg_buf_free(&r.body);
	assert_int_equal(admin("GET", "/routing?x=1", NULL, &r), 404);
	pg_buf_free(&r.body);
	assert_int_equal(
	    admin("POST", "/backends", "{\"address\":\"10.0.0.7:80\",\"pool\":\"a\"}", &r), 201);
	assert_non_null(strstr(r.body.p, "\"pool\":\"a\""));
	pg_buf_free(&r.body);
	assert_int_equal(gw.maps.state[1].nbackends, 3);
	assert_int_equal(admin("POST", "/backends", "{\"address\":\"10.0.0.8:80\",\"pool\":7}", &r),
	                 400);
	pg_buf_free(&r.body);
	assert_int_equal(admin("GET", "/backends?pool=a", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "10.0.0.7:80"));
	assert_null(strstr(r.body.p, "10.0.0.3:80"));
	pg_buf_free(&r.body);
	assert_int_equal(admin("GET", "/pools", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "{\"name\":\"b\",\"models\":[\"beta\"],\"paths\":[],"
	                                 "\"catch_all\":false,\"backends\":3,"));
	assert_non_null(strstr(r.body.p, "{\"name\":\"default\",\"models\":[],\"paths\":[],"
	                                 "\"catch_all\":true,\"backends\":1,"));
	pg_buf_free(&r.body);
	/* the dry run picks the pool of the body's model, or the one named */
	assert_int_equal(admin("POST", "/route?path=/v1/chat/completions",
	                       "{\"model\":\"beta\",\"messages\":[]}", &r),
	                 200);
	assert_non_null(strstr(r.body.p, "\"pool\":\"b\""));
	pg_buf_free(&r.body);
	assert_int_equal(admin("POST", "/route?pool=a", "raw", &r), 200);
	assert_non_null(strstr(r.body.p, "\"pool\":\"a\""));
	pg_buf_free(&r.body);
	assert_int_equal(admin("GET", "/metrics", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "prefixgate_pool_backends{pool=\"a\"} 3\n"));
	assert_non_null(strstr(r.body.p, "{backend=\"10.0.0.3:80\",pool=\"b\"}"));
	pg_buf_free(&r.body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json_model),
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_parse_routing),
	    cmocka_unit_test(test_parse_errors),
	    cmocka_unit_test_setup_teardown(test_gateway, setup_gw, teardown_gw),
	    cmocka_unit_test_setup_teardown(test_admin, setup_gw, teardown_gw),
	    cmocka_unit_test_setup_teardown(test_backends_file, setup_gw, teardown_gw),
	};

	return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
