// SPDX-License-Identifier: MIT
/*
 * SIGHUP with a configuration file (control_reload.c), on the in-memory
 * gateway of control_fixture.h started from -c FILE: a good change applied
 * at once (backends added and drained, routing, health-check settings, the
 * log level, tenants, the running configuration GET /config shows), what
 * needs a restart left as it runs, a flag still over the file, a PUT
 * /routing kept by a reload that leaves the routing alone, and a file
 * with an error refused whole.
 */
#include "control_fixture.h"
#include "control/control.h"
#include "members/members_internal.h"
#include "lib/pd.h"
#include "state/flowctl.h"
#include "state/pools.h"

static char conf_path[64];
static char *argv_conf[] = {"prefixgate", "-c", conf_path, "--no-bpf", "--concurrency-threshold",
                            "7",          NULL};

static const char pd_text[] =
    "backend 10.0.0.1:8000\nlog-level error\n"
    "pool chat { model m; pd sglang; prefill 10.0.1.1:8000@8998; decode 10.0.2.1:8000 }\n";

static int setup_text(const char *text)
{
	char err[256];

	pg_log_level = PG_LOG_ERROR;
	memset(&gw, 0, sizeof(gw));
	make_temp(conf_path, sizeof(conf_path), text);
	if (pg_config_parse(&cfg, 6, argv_conf, NULL, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	cfg.admin.in.sin_port = 0;
	gw.cfg = &cfg;
	gw.nworkers = 2;
	gw.stats = calloc(2, sizeof(*gw.stats));
	gw.flow = pg_flowctl_new(&cfg, 2, err, sizeof(err));
	if (!gw.stats || !gw.flow ||
	    pg_maps_open_pools(&gw.maps, false, "", 0, cfg.pools.n, err, sizeof(err)) ||
	    pg_control_init(&gw, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	return 0;
}

static int setup_conf(void **state)
{
	(void)state;
	return setup_text("backend 10.0.0.1:8000 10.0.0.2:8000\nprefix-length 2048\nworkers 2\n"
	                  "pool a { model m; backend 10.0.1.1:8000; strategy random }\n"
	                  "tenant t { weight 2 }\nlog-level error\n");
}

static int setup_pd(void **state)
{
	(void)state;
	return setup_text(pd_text);
}

static int teardown_conf(void **state)
{
	(void)state;
	pg_control_stop(&gw);
	pg_pools_free(&gw);
	pg_maps_close(&gw.maps);
	pg_flowctl_free(gw.flow);
	free(gw.stats);
	pg_config_free(&cfg);
	unlink(conf_path);
	pg_log_level = PG_LOG_ERROR;
	return 0;
}

/* Backend id's state: 'A' active, 'D' draining, '-' free. */
static char member(int id)
{
	return !(flags(id) & PG_BACKEND_ACTIVE) ? '-' : flags(id) & PG_BACKEND_DRAINING ? 'D' : 'A';
}

static const char *config_text(struct pg_admin_reply *r)
{
	assert_int_equal(req("GET", "/config", NULL, r), 200);
	return r->body.p;
}

static void test_good_change(void **state)
{
	struct pg_admin_reply r;
	const struct pg_flow_tenant *t;

	(void)state;
	assert_int_equal(gw.maps.state[0].prefix_length, 2048);
	assert_int_equal(gw.maps.state[0].concurrency_threshold, 7);
	assert_int_equal(gw.maps.state[1].strategy, PG_STRATEGY_RANDOM);
	assert_true(member(1) == 'A' && member(2) == 'A' && member(3) == 'A');
	write_file(conf_path,
	           "backend 10.0.0.2:8000 10.0.0.3:8000\nprefix-length 4096\nworkers 4\n"
	           "concurrency-threshold 9\nhealth-check-interval 700\nlog-level warn\n"
	           "pool a { model m; backend 10.0.1.1:8000 10.0.1.2:8000; strategy cache_aware }\n"
	           "tenant t { weight 5; priority critical }\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	/* backends: 10.0.0.1 drained, 10.0.0.3 and 10.0.1.2 added */
	assert_int_equal(member(1), 'D');
	assert_true(member(2) == 'A' && member(3) == 'A' && member(4) == 'A' && member(5) == 'A');
	assert_int_equal(gw.maps.backends[5].pool, 1);
	/* routing: the file's, the flag's 7 still over it */
	assert_int_equal(gw.maps.state[0].prefix_length, 4096);
	assert_int_equal(gw.maps.state[0].concurrency_threshold, 7);
	assert_int_equal(gw.maps.state[1].strategy, PG_STRATEGY_CACHE_AWARE);
	assert_int_equal(gw.maps.state[1].prefix_length, 4096);
	/* health checks, log level, tenants at once; workers at a restart */
	assert_int_equal(cfg.health.interval_ms, 700);
	assert_int_equal(pg_log_level, PG_LOG_WARN);
	t = &gw.flow->tenants.t[pg_flow_tenant(&gw.flow->tenants,
	                                       pg_flow_label("t", 1, false, (char[24]){0}), "t")];
	assert_int_equal(t->weight, 5);
	assert_int_equal(t->prio, PG_PRIO_CRITICAL);
	assert_int_equal(cfg.workers, 2);
	/* what GET /config shows is what runs */
	config_text(&r);
	assert_non_null(strstr(r.body.p, "backend 10.0.0.2:8000 10.0.0.3:8000;\n"));
	assert_non_null(strstr(r.body.p, "workers 2;\n"));
	assert_non_null(strstr(r.body.p, "health-check-interval 700;\n"));
	assert_non_null(strstr(r.body.p, "    backend 10.0.1.1:8000 10.0.1.2:8000;\n"));
	assert_non_null(strstr(r.body.p, "tenant t { weight 5; priority critical; }"));
	pg_buf_free(&r.body);
}

static void test_put_kept(void **state)
{
	struct pg_route_cfg rc;

	(void)state;
	pg_router_cfg(&gw.router, 0, &rc);
	rc.strategy = PG_STRATEGY_LEAST_OUTSTANDING;
	pg_control_set_routing(&gw, &rc, "PUT /routing");
	/* the file's routing unchanged (workers only): the PUT stays */
	write_file(conf_path, "backend 10.0.0.1:8000 10.0.0.2:8000\nprefix-length 2048\nworkers 9\n"
	                      "pool a { model m; backend 10.0.1.1:8000; strategy random }\n"
	                      "tenant t { weight 2 }\nlog-level error\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(gw.maps.state[0].strategy, PG_STRATEGY_LEAST_OUTSTANDING);
	/* the file's routing changed: it replaces the PUT */
	write_file(conf_path, "backend 10.0.0.1:8000 10.0.0.2:8000\nprefix-length 3000\n"
	                      "pool a { model m; backend 10.0.1.1:8000; strategy random }\n"
	                      "log-level error\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(gw.maps.state[0].strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(gw.maps.state[0].prefix_length, 3000);
}

static void test_bad_file_refused(void **state)
{
	struct pg_admin_reply r;
	char *before;

	(void)state;
	before = strdup(config_text(&r));
	pg_buf_free(&r.body);
	/* a good change beside two errors: nothing of it applied */
	write_file(conf_path, "backend 10.0.0.1:8000 10.0.0.9:8000\nprefix-length 10\n"
	                      "pool a { model m; backend 10.0.1.1:8000; strategy random }\n"
	                      "bogus 1\n");
	assert_int_equal(pg_control_reload(&gw), -1);
	assert_int_equal(member(4), '-');
	assert_int_equal(gw.maps.state[0].prefix_length, 2048);
	assert_string_equal(config_text(&r), before);
	pg_buf_free(&r.body);
	/* gone, or a new pool (needs a restart): the rest still applied */
	unlink(conf_path);
	assert_int_equal(pg_control_reload(&gw), -1);
	write_file(conf_path, "backend 10.0.0.1:8000 10.0.0.2:8000 10.0.0.9:8000\n"
	                      "pool a { model m; backend 10.0.1.1:8000 }\n"
	                      "pool b { model n; backend 10.0.2.1:8000 }\nlog-level error\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(member(4), 'A');
	assert_int_equal(pg_pool_lookup(&gw, "b", 1), -1);
	free(before);
}

/* A prefill/decode pool: its decode set's members synced like any pool's;
 * its prefill/decode settings (the workers read them) left for a restart,
 * the pool's members with them. */
static void test_pd_pool(void **state)
{
	(void)state;
	assert_int_equal(gw.maps.backends[3].pool, 2); /* chat-decode */
	write_file(conf_path, "backend 10.0.0.1:8000\nlog-level error\n"
	                      "pool chat { model m; pd sglang; prefill 10.0.1.1:8000@8998; "
	                      "decode 10.0.2.1:8000 10.0.2.2:8000 }\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(member(4), 'A');
	assert_int_equal(gw.maps.backends[4].pool, 2);
	/* a prefill instance with its bootstrap port, and a new minimum */
	write_file(conf_path, "backend 10.0.0.1:8000\nlog-level error\n"
	                      "pool chat { model m; pd sglang; prefill 10.0.1.1:8000@8998 "
	                      "10.0.1.2:8000@8999; decode 10.0.2.1:8000 10.0.2.2:8000; "
	                      "pd-min-tokens 9 }\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(member(5), '-');
	assert_int_equal(cfg.pools.pool[1].nbootstraps, 1);
	assert_int_equal(cfg.pools.pool[1].pd_min_tokens, PG_PD_MIN_TOKENS_DEFAULT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_good_change, setup_conf, teardown_conf),
	    cmocka_unit_test_setup_teardown(test_put_kept, setup_conf, teardown_conf),
	    cmocka_unit_test_setup_teardown(test_bad_file_refused, setup_conf, teardown_conf),
	    cmocka_unit_test_setup_teardown(test_pd_pool, setup_pd, teardown_conf),
	};

	return cmocka_run_group_tests_name("control_reload", tests, NULL, NULL);
}
