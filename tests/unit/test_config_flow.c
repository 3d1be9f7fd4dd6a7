// SPDX-License-Identifier: MIT
/*
 * Flow control's configuration: its flags (config_flow.c, the table's
 * numbers), FlowControlConfig in a RoutingConfig, and which overrides
 * which.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "config/config.h"
#include "config_args.h"

/* pg_config_parse of args, what it prints dropped */
static int run(struct pg_config *cfg, const char *const *args, char *err, size_t errlen)
{
	char text[64];

	return config_args_parse(cfg, args, err, errlen, text, sizeof(text));
}

static void test_flags(void **state)
{
	struct pg_config cfg;
	char err[256];

	(void)state;
	/* off unless asked: SageMaker's routing */
	assert_int_equal(run(&cfg, ARGS("--no-bpf"), err, sizeof(err)), 0);
	assert_int_equal(cfg.route.flow_queue_ms, 0);
	assert_int_equal(cfg.flow.max_queued, PG_FLOW_MAX_QUEUED_DEFAULT);
	assert_int_equal(cfg.flow.max_bytes, PG_FLOW_MAX_BYTES_DEFAULT);
	assert_int_equal(cfg.flow.starve_ms, PG_FLOW_STARVE_MS);
	assert_int_equal(cfg.flow.tenant_src, PG_TENANT_BEARER);
	pg_config_free(&cfg);
	assert_int_equal(run(&cfg, ARGS("--flow-control"), err, sizeof(err)), 0);
	assert_int_equal(cfg.route.flow_queue_ms, PG_FLOW_QUEUE_AUTO);
	pg_config_free(&cfg);
	assert_int_equal(
	    run(&cfg,
	        ARGS("--flow-instance-queue-ms", "200", "--flow-deadline-ms", "3000",
	             "--flow-tenant", "header:X-Team", "--tenant", "batch:priority=sheddable",
	             "--tenant", "team:a:weight=3,priority=critical", "--tenant", "t-0123456789ab"),
	        err, sizeof(err)),
	    0);
	assert_int_equal(cfg.route.flow_queue_ms, 200);
	assert_int_equal(cfg.route.flow_deadline_ms, 3000);
	assert_int_equal(cfg.flow.tenant_src, PG_TENANT_HEADER);
	assert_string_equal(cfg.flow.tenant_header, "X-Team");
	assert_int_equal(cfg.flow.ntenants, 3);
	assert_string_equal(cfg.flow.tenants[0].name, "batch");
	assert_int_equal(cfg.flow.tenants[0].weight, 1);
	assert_int_equal(cfg.flow.tenants[0].prio, PG_PRIO_SHEDDABLE);
	assert_string_equal(cfg.flow.tenants[1].name, "team:a"); /* a name may hold a colon */
	assert_int_equal(cfg.flow.tenants[1].weight, 3);
	assert_int_equal(cfg.flow.tenants[1].prio, PG_PRIO_CRITICAL);
	assert_int_equal(cfg.flow.tenants[2].prio, -1);
	pg_config_free(&cfg);
	/* quotas: off unless given; a tenant's own beside the default, by key */
	assert_int_equal(run(&cfg,
	                     ARGS("--quota", "rpm=100", "--tenant", "team:b:rpm=5,weight=2",
	                          "--tenant", "c:tpm=0"),
	                     err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.flow.quota.max[PG_QUOTA_REQUESTS], 100);
	assert_int_equal(cfg.flow.quota.max[PG_QUOTA_TOKENS], 0);
	assert_string_equal(cfg.flow.tenants[0].name, "team:b");
	assert_int_equal(cfg.flow.tenants[0].weight, 2);
	assert_int_equal(cfg.flow.tenants[0].quota.max[PG_QUOTA_REQUESTS], 5);
	assert_int_equal(cfg.flow.tenants[0].quota_set, 1u << PG_QUOTA_REQUESTS);
	assert_int_equal(cfg.flow.tenants[1].quota_set, 1u << PG_QUOTA_TOKENS);
	pg_config_free(&cfg);
	/* 0 turns it off, whatever --flow-control says */
	assert_int_equal(
	    run(&cfg, ARGS("--flow-control", "--flow-instance-queue-ms", "0"), err, sizeof(err)),
	    0);
	assert_int_equal(cfg.route.flow_queue_ms, 0);
	pg_config_free(&cfg);
}

static void test_invalid(void **state)
{
	static const struct {
		const char *args[4];
		const char *err;
	} cases[] = {
	    {{"--flow-tenant", "cookie"},
	     "--flow-tenant: \"cookie\" is not bearer, user, cert or header:NAME (a header's "
	     "name)"},
	    {{"--flow-tenant", "header:"},
	     "--flow-tenant: \"header:\" is not bearer, user, cert or header:NAME (a header's "
	     "name)"},
	    {{"--tenant", "a b"},
	     "--tenant: \"a b\" is not a tenant's name (1-23 of A-Z a-z 0-9 . _ : @ -; a bearer "
	     "token's tenant is named t-HASH: see doc/routing.md, Flow control)"},
	    {{"--tenant", ":weight=2"},
	     "--tenant: \"\" is not a tenant's name (1-23 of A-Z a-z 0-9 . _ : @ -; a bearer "
	     "token's tenant is named t-HASH: see doc/routing.md, Flow control)"},
	    {{"--tenant", "a:weight=0"}, "--tenant a: weight: expected 1-1000, got \"0\""},
	    {{"--tenant", "a:weight=1001"}, "--tenant a: weight: expected 1-1000, got \"1001\""},
	    {{"--tenant", "a:priority=urgent"},
	     "--tenant a: priority: expected critical, standard or sheddable, got \"urgent\""},
	    {{"--tenant", "a:weight=2,color=red"},
	     "--tenant a: \"color=red\": expected weight=W, priority=P, rpm=N or tpm=N"},
	    {{"--tenant", "a:rpm=-1"},
	     "--tenant a: rpm: expected 0 (no limit) to 1000000000 a minute, got \"-1\""},
	    {{"--tenant", "a:tpm=1e9"},
	     "--tenant a: tpm: expected 0 (no limit) to 1000000000 a minute, got \"1e9\""},
	    {{"--quota", "rpm=10,rps=2"}, "--quota: \"rps=2\": expected rpm=N or tpm=N"},
	    {{"--quota", "tpm=1000000001"},
	     "--quota: tpm: expected 0 (no limit) to 1000000000 a minute, got \"1000000001\""},
	    {{"--tenant", "a", "--tenant", "a:weight=2"}, "--tenant a: given twice"},
	    {{"--flow-instance-queue-ms", "60001"},
	     "--flow-instance-queue-ms: 60001 is out of range 1-60000"},
	    {{"--flow-max-queued", "0"}, "--flow-max-queued: 0 is out of range 1-10000000"},
	    {{"--flow-control=yes"}, "--flow-control takes no value"},
	};
	struct pg_config cfg;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = run(&cfg, cases[i].args, err, sizeof(err));

		if (rc != 2 || strcmp(err, cases[i].err))
			fail_msg("case %zu: rc %d err \"%s\", expected \"%s\"", i, rc, err,
			         cases[i].err);
	}
}

static void test_routing_config(void **state)
{
	static const char on[] = "{\"RoutingStrategy\":\"CACHE_AWARE\",\"FlowControlConfig\":{}}";
	static const char set[] = "{\"RoutingStrategy\":\"RANDOM\",\"FlowControlConfig\":"
	                          "{\"InstanceQueueMs\":120,\"DeadlineMs\":2500}}";
	static const char off[] = "{\"RoutingStrategy\":\"RANDOM\",\"FlowControlConfig\":"
	                          "{\"InstanceQueueMs\":0}}";
	static const char none[] = "{\"RoutingStrategy\":\"RANDOM\",\"FlowControlConfig\":null}";
	static const char bad[] = "{\"RoutingStrategy\":\"RANDOM\",\"FlowControlConfig\":"
	                          "{\"QueueDepth\":3}}";
	struct pg_route_cfg rc = {0};
	char err[256];

	(void)state;
	assert_int_equal(pg_routing_config_parse(on, strlen(on), &rc, err, sizeof(err)), 0);
	assert_int_equal(rc.flow_queue_ms, PG_FLOW_QUEUE_AUTO);
	assert_int_equal(rc.flow_deadline_ms, 0);
	assert_int_equal(pg_routing_config_parse(set, strlen(set), &rc, err, sizeof(err)), 0);
	assert_int_equal(rc.flow_queue_ms, 120);
	assert_int_equal(rc.flow_deadline_ms, 2500);
	assert_int_equal(pg_routing_config_parse(off, strlen(off), &rc, err, sizeof(err)), 0);
	assert_int_equal(rc.flow_queue_ms, 0);
	assert_int_equal(pg_routing_config_parse(none, strlen(none), &rc, err, sizeof(err)), 0);
	assert_int_equal(rc.flow_queue_ms, 0);
	assert_int_equal(pg_routing_config_parse(bad, strlen(bad), &rc, err, sizeof(err)), -1);
	assert_string_equal(err, "FlowControlConfig.QueueDepth: unknown field");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_flags),
	    cmocka_unit_test(test_invalid),
	    cmocka_unit_test(test_routing_config),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
