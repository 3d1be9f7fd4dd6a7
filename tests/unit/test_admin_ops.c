// SPDX-License-Identifier: MIT
/*
 * The admin API as an operator meets it, on gateways built in memory from a
 * command line (shared memory maps, no root): IPv6 members named with raw
 * brackets, where a POST /backends without a pool may go, /health and the
 * dry run when a pool has no member, GET /pools' members, the metrics'
 * units: the load model's and flow control's in seconds (the millisecond
 * families deprecated). (test_admin.c has the API's plain behaviour on a
 * fixed gateway.)
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
#include "admin/metrics.h"
#include "state/flowctl.h"
#include "state/pools.h"
#include "sys/log.h"

static struct pg_config cfg;
static struct pg_gateway gw;

/* A gateway from the command line args (NULL-terminated). */
static void start(const char *const *args)
{
	char *argv[64] = {"prefixgate"}, err[256];
	int argc = 1;

	for (; args[argc - 1]; argc++)
		argv[argc] = (char *)args[argc - 1];
	pg_log_level = PG_LOG_ERROR;
	memset(&gw, 0, sizeof(gw));
	if (pg_config_parse(&cfg, argc, argv, stdout, err, sizeof(err)))
		fail_msg("parse: %s", err);
	gw.cfg = &cfg;
	if (pg_maps_open_pools(&gw.maps, false, "", 0, pg_pools_count(&cfg), err, sizeof(err)) ||
	    pg_control_init(&gw, err, sizeof(err)))
		fail_msg("start: %s", err);
}

#define START(...) start((const char *const[]){__VA_ARGS__, NULL})

static int teardown(void **state)
{
	(void)state;
	pg_control_stop(&gw);
	pg_pools_free(&gw);
	pg_maps_close(&gw.maps);
	pg_config_free(&cfg);
	return 0;
}

/* One request through pg_admin_handle; the body NUL-terminated. Free r. */
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

/* The bytes of one raw exchange through the admin API's framing. Free it. */
static char *raw(const char *request)
{
	struct pg_admin_conn c = {0};
	struct pg_buf out = {0};

	pg_buf_puts(&c.in, request);
	assert_true(pg_admin_input(&gw, &c, &out));
	pg_admin_conn_free(&c);
	pg_buf_append(&out, "", 1);
	return out.p;
}

/* The member with address a, or 0. */
static int member(const char *a)
{
	char name[PG_ADDR_STRLEN];

	for (int id = 1; id < PG_MAX_BACKENDS; id++)
		if ((gw.maps.backends[id].flags & PG_BACKEND_ACTIVE) &&
		    !strcmp(pg_backend_name(&gw.maps.backends[id], name, sizeof(name)), a))
			return id;
	return 0;
}

/* DELETE /backends/[::1]:8000, brackets raw as curl and Python send them. */
static void test_delete_ipv6(void **state)
{
	struct pg_admin_reply r;
	int id;
	char *o;

	(void)state;
	START("--backend", "[::1]:8000", "--backend", "10.0.0.1:80", "--backend", "[::1]:8001");
	id = member("[::1]:8000");
	assert_true(id > 0);
	o = raw("DELETE /backends/[::1]:8000 HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(strstr(o, "HTTP/1.1 202 Accepted\r\n"));
	assert_non_null(strstr(o, "\"address\":\"[::1]:8000\""));
	free(o);
	assert_true(gw.maps.backends[id].flags & PG_BACKEND_DRAINING);
	/* percent-encoded, as prefixgatectl sends it */
	id = member("[::1]:8001");
	o = raw("DELETE /backends/%5B%3A%3A1%5D%3A8001 HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(strstr(o, "HTTP/1.1 202 Accepted\r\n"));
	free(o);
	assert_true(gw.maps.backends[id].flags & PG_BACKEND_DRAINING);
	assert_int_equal(admin("GET", "/backends", NULL, &r), 200);
	assert_non_null(
	    strstr(r.body.p, "\"address\":\"[::1]:8001\",\"healthy\":true,\"draining\":true"));
	pg_buf_free(&r.body);
	o = raw("DELETE /backends/[::2]:8000 HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(strstr(o, "HTTP/1.1 404 Not Found\r\n"));
	assert_non_null(strstr(o, "[::2]:8000 is not a member"));
	free(o);
}

/* POST /backends without a pool where the default pool is not the
 * catch-all: refused, naming the pools, since the member would get no
 * traffic; with a pool it joins it. */
static void test_post_needs_pool(void **state)
{
	struct pg_admin_reply r;

	(void)state;
	START("--pool", "llama:model=l", "--pool", "llama:backend=10.0.0.1:80", "--pool",
	      "qwen:model=q");
	assert_false(cfg.pools.catch_all);
	assert_int_equal(admin("POST", "/backends", "{\"address\":\"10.0.0.2:80\"}", &r), 400);
	assert_string_equal(r.body.p,
	                    "{\"error\":\"pool: required: the default pool takes no requests on "
	                    "this gateway (it is not the catch-all); name one of llama, qwen\"}\n");
	pg_buf_free(&r.body);
	assert_int_equal(
	    admin("POST", "/backends", "{\"address\":\"10.0.0.2:80\",\"pool\":\"default\"}", &r),
	    400);
	assert_non_null(strstr(r.body.p, "pool: default: the default pool takes no requests"));
	pg_buf_free(&r.body);
	assert_int_equal(member("10.0.0.2:80"), 0);
	/* a DNS name too */
	assert_int_equal(admin("POST", "/backends", "{\"address\":\"vllm.example:80\"}", &r), 400);
	pg_buf_free(&r.body);
	assert_int_equal(
	    admin("POST", "/backends", "{\"address\":\"10.0.0.2:80\",\"pool\":\"qwen\"}", &r), 201);
	assert_non_null(strstr(r.body.p, "\"pool\":\"qwen\""));
	pg_buf_free(&r.body);
	assert_int_equal(gw.maps.state[2].nbackends, 1);
	teardown(NULL);
	/* a catch-all default pool takes it, as before */
	START("--pool", "llama:model=l", "--pool", "default");
	assert_int_equal(admin("POST", "/backends", "{\"address\":\"10.0.0.2:80\"}", &r), 201);
	pg_buf_free(&r.body);
	teardown(NULL);
	START("--backend", "10.0.0.1:80");
	assert_int_equal(admin("POST", "/backends", "{\"address\":\"10.0.0.2:80\"}", &r), 201);
	pg_buf_free(&r.body);
}

/* A pool requests reach with no healthy member: /health says so, naming
 * it, and the dry run says why no backend is usable. */
static void test_pool_without_members(void **state)
{
	struct pg_admin_reply r;
	uint64_t now = pg_now_ms();

	(void)state;
	START("--pool", "llama:model=l", "--pool", "llama:backend=10.0.0.1:80,10.0.0.2:80",
	      "--pool", "qwen:model=q");
	assert_int_equal(admin("GET", "/health", NULL, &r), 200);
	assert_string_equal(r.body.p, "{\"status\":\"degraded\",\"backends\":2,\"healthy\":2,"
	                              "\"degraded_pools\":[{\"pool\":\"qwen\",\"backends\":0,"
	                              "\"healthy\":0}]}\n");
	pg_buf_free(&r.body);
	/* degraded still serves: ready */
	assert_int_equal(admin("GET", "/health?ready", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\"ready\":true"));
	pg_buf_free(&r.body);
	assert_int_equal(admin("POST", "/route?path=/v1/chat/completions",
	                       "{\"model\":\"q\",\"messages\":[]}", &r),
	                 503);
	assert_non_null(
	    strstr(r.body.p, "\"error\":\"no usable backend in pool qwen (no member)\""));
	assert_non_null(strstr(r.body.p, "\"pool\":\"qwen\""));
	pg_buf_free(&r.body);
	/* llama's members down too: no pool serves */
	for (int id = 1; id <= 2; id++) {
		gw.maps.backends[id].flags |= PG_BACKEND_UNHEALTHY;
		gw.maps.backends[id].down_until_ms = now + 60000;
	}
	assert_int_equal(admin("GET", "/health", NULL, &r), 503);
	assert_non_null(strstr(r.body.p, "\"status\":\"no healthy backend\""));
	assert_non_null(strstr(r.body.p, "{\"pool\":\"llama\",\"backends\":2,\"healthy\":0}"));
	pg_buf_free(&r.body);
	assert_int_equal(admin("POST", "/route?pool=llama", "x", &r), 503);
	assert_non_null(
	    strstr(r.body.p, "no usable backend in pool llama (2 members, none healthy)"));
	pg_buf_free(&r.body);
	teardown(NULL);
	/* the default pool, not the catch-all, takes no requests: not counted */
	START("--pool", "llama:model=l", "--pool", "llama:backend=10.0.0.1:80");
	assert_int_equal(admin("GET", "/health", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "{\"status\":\"ok\""));
	pg_buf_free(&r.body);
}

/* GET /pools lists each pool's members (doc/operations.md: "members"), by address,
 * beside their count. */
static void test_pools_members(void **state)
{
	struct pg_admin_reply r;

	(void)state;
	START("--backend", "10.0.0.9:80", "--pool", "llama:model=l", "--pool",
	      "llama:backend=10.0.0.1:80,[::1]:80", "--pool", "qwen:model=q");
	assert_int_equal(admin("DELETE", "/backends/10.0.0.9:80", NULL, &r), 202);
	pg_buf_free(&r.body);
	assert_int_equal(admin("GET", "/pools", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "{\"name\":\"llama\",\"models\":[\"l\"],\"paths\":[],"
	                                 "\"catch_all\":false,\"backends\":2,\"members\":"
	                                 "[\"10.0.0.1:80\",\"[::1]:80\"],\"ring_generation\":"));
	/* a draining member is no longer counted nor listed */
	assert_non_null(strstr(r.body.p, "{\"name\":\"default\",\"models\":[],\"paths\":[],"
	                                 "\"catch_all\":true,\"backends\":0,\"members\":[],"));
	assert_non_null(strstr(r.body.p, "\"name\":\"qwen\",\"models\":[\"q\"],\"paths\":[],"
	                                 "\"catch_all\":false,\"backends\":0,\"members\":[],"));
	pg_buf_free(&r.body);
}

/* The load model's and flow control's durations in seconds, the
 * Prometheus base unit; the millisecond families served one more release,
 * marked deprecated. */
static void test_metrics_seconds(void **state)
{
	static const char *const want[] = {
	    /* the load model's and flow control's durations in seconds too */
	    "# TYPE prefixgate_ttft_prediction_error_seconds histogram\n",
	    "\nprefixgate_ttft_prediction_error_seconds_bucket{le=\"0.01\"} 2\n",
	    "\nprefixgate_ttft_prediction_error_seconds_bucket{le=\"0.03\"} 2\n",
	    "\nprefixgate_ttft_prediction_error_seconds_bucket{le=\"0.1\"} 3\n",
	    "\nprefixgate_ttft_prediction_error_seconds_bucket{le=\"+Inf\"} 3\n",
	    "\nprefixgate_ttft_prediction_error_seconds_sum 0.090000\n",
	    "\nprefixgate_ttft_prediction_error_seconds_count 3\n",
	    "# TYPE prefixgate_ttft_prediction_bias_seconds gauge\n",
	    "\nprefixgate_ttft_prediction_bias_seconds 0.020000\n",
	    "# TYPE prefixgate_flow_instance_queue_seconds gauge\n",
	    "\nprefixgate_flow_instance_queue_seconds 0.05\n",
	    /* their millisecond families, deprecated, for one release */
	    "# HELP prefixgate_ttft_prediction_error_milliseconds DEPRECATED, removed in the next "
	    "release: prefixgate_ttft_prediction_error_seconds in milliseconds; use "
	    "prefixgate_ttft_prediction_error_seconds.\n",
	    "\nprefixgate_ttft_prediction_error_milliseconds_bucket{le=\"100\"} 3\n",
	    "\nprefixgate_ttft_prediction_error_milliseconds_sum 90.000\n",
	    "\nprefixgate_ttft_prediction_bias_milliseconds 20.000\n",
	    "# HELP prefixgate_flow_instance_queue_milliseconds DEPRECATED, removed in the next "
	    "release: prefixgate_flow_instance_queue_seconds in milliseconds; use "
	    "prefixgate_flow_instance_queue_seconds.\n",
	    "\nprefixgate_flow_instance_queue_milliseconds 50\n",
	};
	struct pg_admin_reply r;
	char err[128];

	(void)state;
	START("--backend", "10.0.0.1:80", "--flow-control", "--flow-instance-queue-ms", "50");
	gw.nworkers = 2;
	gw.stats = calloc(2, sizeof(*gw.stats));
	assert_non_null(gw.stats);
	/* first tokens: 5 ms early, 5 ms early, 80 ms late */
	gw.stats[0].ttft_err.bucket[0] = 2;
	gw.stats[1].ttft_err.bucket[2] = 1;
	gw.stats[0].ttft_err.abs_us = 10000;
	gw.stats[1].ttft_err.abs_us = 80000;
	gw.stats[0].ttft_err.sum_us = -10000;
	gw.stats[1].ttft_err.sum_us = 70000;
	gw.flow = pg_flowctl_new(&cfg, gw.nworkers, err, sizeof(err));
	assert_non_null(gw.flow);
	assert_int_equal(admin("GET", "/metrics", NULL, &r), 200);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(r.body.p, want[i]))
			fail_msg("missing: %s", want[i]);
	pg_buf_free(&r.body);
	pg_flowctl_free(gw.flow);
	free(gw.stats);
	gw.stats = NULL;
	/* flow control's automatic room (each instance's service time): -1 */
	teardown(NULL);
	START("--backend", "10.0.0.1:80", "--flow-control");
	gw.flow = pg_flowctl_new(&cfg, 1, err, sizeof(err));
	assert_non_null(gw.flow);
	assert_int_equal(admin("GET", "/metrics", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\nprefixgate_flow_instance_queue_seconds -1\n"));
	pg_buf_free(&r.body);
	pg_flowctl_free(gw.flow);
	gw.flow = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_delete_ipv6, teardown),
	    cmocka_unit_test_teardown(test_post_needs_pool, teardown),
	    cmocka_unit_test_teardown(test_pool_without_members, teardown),
	    cmocka_unit_test_teardown(test_pools_members, teardown),
	    cmocka_unit_test_teardown(test_metrics_seconds, teardown),
	};

	return cmocka_run_group_tests_name("admin_ops", tests, NULL, NULL);
}
