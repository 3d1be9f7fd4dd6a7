// SPDX-License-Identifier: MIT
/*
 * prefixgatectl's admin API side, pure: GET /pools and GET /backends
 * replies into a snapshot the way the maps fill it (a pool's models as the
 * pg_pools map holds them, the gateway's health word and ring slots, a DNS
 * name standing for no address), and names merged onto a maps snapshot.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/prefixgatectl/ctl.h"
#include "lib/modelpool.h"

static struct ctl_snapshot snap, other;

static void test_pools(void **state)
{
	char body[8192], err[256], *models[70], names[70][16], want[248];
	size_t n = 0;

	(void)state;
	/* 70 models: more than the map's 247 bytes hold; the same first ones */
	n +=
	    (size_t)snprintf(body + n, sizeof(body) - n,
	                     "[{\"name\":\"default\",\"models\":[],\"paths\":[],\"catch_all\":"
	                     "false,\"backends\":0,\"members\":[],\"ring_generation\":1,"
	                     "\"remapped_ratio\":0.000000,\"routing\":{\"RoutingStrategy\":"
	                     "\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":{\"PrefixLength\":4096,"
	                     "\"ConcurrencyThreshold\":10}}},\n{\"name\":\"big\",\"models\":[");
	for (int i = 0; i < 70; i++) {
		snprintf(names[i], sizeof(names[i]), "model-%03d", i);
		models[i] = names[i];
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\"%s\"", i ? "," : "",
		                      names[i]);
	}
	n += (size_t)snprintf(body + n, sizeof(body) - n,
	                      "],\"paths\":[\"/invocations\",\"/v2/\"],\"catch_all\":false,"
	                      "\"backends\":2,\"members\":[\"10.0.0.1:80\",\"[::1]:80\"],"
	                      "\"ring_generation\":7,\"remapped_ratio\":0.499817,\"routing\":"
	                      "{\"RoutingStrategy\":\"CACHE_AWARE\",\"PrefixAwareRoutingConfig\":"
	                      "{\"PrefixLength\":2048,\"ConcurrencyThreshold\":3},"
	                      "\"CacheAwareConfig\":{\"NewConversationChoices\":2}}}]");
	assert_int_equal(ctl_parse_pools_json(body, n, &snap, err, sizeof(err)), 0);
	assert_int_equal(snap.npools, 2);
	assert_string_equal(snap.pool[0].name, "default");
	assert_false(snap.pool[0].catch_all);
	assert_int_equal(snap.pool[1].nmodels, 70);
	pg_pool_list_join(models, 70, want, sizeof(want));
	assert_string_equal(snap.pool[1].models, want);
	assert_string_equal(snap.pool[1].paths, "/invocations,/v2/");
	assert_int_equal(snap.pool[1].npaths, 2);
	assert_int_equal(snap.pool[1].strategy, PG_STRATEGY_CACHE_AWARE);
	assert_int_equal(snap.pool[1].prefix_length, 2048);
	assert_int_equal(snap.pool[1].concurrency_threshold, 3);
	assert_int_equal(snap.pool[1].new_choices, 2);
	assert_int_equal(snap.pool[1].ring_generation, 7);
	assert_int_equal(snap.pool[1].members, 2);
	assert_true(snap.pool[1].remapped == 0.499817);
	assert_int_equal(ctl_parse_pools_json("{}", 2, &other, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "expected an array"));
}

static const char backends[] =
    "[\n{\"id\":1,\"address\":\"10.0.0.1:80\",\"name\":\"vllm.svc:80\",\"healthy\":false,"
    "\"draining\":false,\"health\":\"unhealthy\",\"in_flight\":2,\"requests\":5,\"failures\":1,"
    "\"epoch\":3,\"pool\":\"big\",\"ring_slots\":40000,\"requests_by_decision\":{\"affinity\":4,"
    "\"overflow\":1}},\n"
    "{\"id\":0,\"address\":null,\"name\":\"never.invalid:9\",\"state\":\"unresolved\","
    "\"error\":\"lookup failed (Domain name not found)\",\"lookup_failures\":3,"
    "\"failing_seconds\":1.5,\"healthy\":false,\"draining\":false,\"in_flight\":0,"
    "\"requests\":0,\"pool\":\"big\"}\n]\n";

static void test_backends(void **state)
{
	char err[256];

	(void)state;
	memset(&snap, 0, sizeof(snap));
	snap.npools = 2;
	strcpy(snap.pool[0].name, "default");
	strcpy(snap.pool[1].name, "big");
	assert_int_equal(
	    ctl_parse_backends_json(backends, strlen(backends), &snap, err, sizeof(err)), 0);
	assert_int_equal(snap.n, 2);
	assert_string_equal(snap.b[0].health, "unhealthy");
	assert_false(snap.b[0].healthy);
	assert_int_equal(snap.b[0].pool, 1);
	assert_int_equal(snap.b[0].ring_slots, 40000);
	assert_int_equal(snap.b[0].requests[PG_DEC_OVERFLOW], 1);
	assert_int_equal(ctl_requests_total(&snap.b[0]), 5);
	assert_string_equal(snap.b[1].addr, "");
	assert_string_equal(snap.b[1].health, "unresolved");
	assert_string_equal(snap.b[1].name, "never.invalid:9");
	assert_int_equal(snap.b[1].ring_slots, -1);
	assert_int_equal(ctl_parse_backends_json("[{\"address\":7}]", 15, &snap, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "element 0 is not a backend"));
}

/* The maps know no DNS names: the API's are merged on by address, and
 * the names standing for no address appended, in the maps' pool order. */
static void test_merge_names(void **state)
{
	char err[256];

	(void)state;
	memset(&snap, 0, sizeof(snap));
	snap.npools = 2;
	strcpy(snap.pool[0].name, "default");
	strcpy(snap.pool[1].name, "big");
	snap.n = 1;
	snap.b[0] = (struct ctl_backend){.id = 1, .addr = "10.0.0.1:80", .health = "up"};
	other = snap;
	assert_int_equal(
	    ctl_parse_backends_json(backends, strlen(backends), &other, err, sizeof(err)), 0);
	ctl_merge_names(&snap, &other);
	assert_int_equal(snap.n, 2);
	assert_string_equal(snap.b[0].name, "vllm.svc:80");
	assert_string_equal(snap.b[0].health, "up"); /* the maps' own state is kept */
	assert_string_equal(snap.b[1].name, "never.invalid:9");
	assert_int_equal(snap.b[1].pool, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pools),
	    cmocka_unit_test(test_backends),
	    cmocka_unit_test(test_merge_names),
	};

	return cmocka_run_group_tests_name("prefixgatectl_parse", tests, NULL, NULL);
}
