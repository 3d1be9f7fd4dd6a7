// SPDX-License-Identifier: MIT
/*
 * Control thread and admin API tests: a gateway built in memory (shared
 * memory maps, no BPF, no root), membership through control.h, requests
 * through pg_admin_handle() and its HTTP framing, and one real socket test
 * of the control thread (admin listener + SIGHUP).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "control/admin.h"
#include "control/control.h"
#include "sys/log.h"
#include "control/metrics.h"
#include "lib/ring.h"
#include "state/route.h"

static struct pg_config cfg;
static struct pg_gateway gw;
static char *static_backends[] = {"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"};
static char file_path[64], routing_path[64];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void make_temp(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/pg-test-admin-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, text);
}

/* A gateway with 3 --backend members, 2 workers' stats, no files. */
static int setup(void **state)
{
	char err[256];

	(void)state;
	pg_log_level = PG_LOG_ERROR;
	memset(&cfg, 0, sizeof(cfg));
	memset(&gw, 0, sizeof(gw));
	cfg.route.strategy = PG_STRATEGY_PREFIX_AWARE;
	cfg.route.prefix_length = PG_PREFIX_LENGTH_DEFAULT;
	cfg.route.concurrency_threshold = PG_CONCURRENCY_DEFAULT;
	cfg.backends = static_backends;
	cfg.nbackends = 3;
	pg_addr_parse("127.0.0.1:0", &cfg.admin, NULL, 0);
	gw.cfg = &cfg;
	gw.nworkers = 2;
	gw.stats = calloc(2, sizeof(*gw.stats));
	if (!gw.stats || pg_maps_open(&gw.maps, false, "", 0, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	file_path[0] = routing_path[0] = 0;
	return 0;
}

static int setup_init(void **state)
{
	char err[256];

	if (setup(state))
		return -1;
	if (pg_control_init(&gw, err, sizeof(err))) {
		fprintf(stderr, "pg_control_init: %s\n", err);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pg_control_stop(&gw);
	pg_maps_close(&gw.maps);
	free(gw.stats);
	if (file_path[0])
		unlink(file_path);
	if (routing_path[0])
		unlink(routing_path);
	return 0;
}

static struct pg_str S(const char *s) {
	return (struct pg_str){s, strlen(s)};
}

/* One request through pg_admin_handle; target may carry ?query. The reply
 * body is NUL-terminated for strstr. */
static int
req(const char *method, const char *target, const char *body, struct pg_admin_reply *r)
{
	const char *q = strchr(target, '?');
	struct pg_str path = {target, q ? (size_t)(q - target) : strlen(target)};
	struct pg_str query = q ? S(q + 1) : (struct pg_str){"", 0};
	int status = pg_admin_handle(&gw, S(method), path, query, body, body ? strlen(body) : 0, r);

	assert_int_equal(status, r->status);
	pg_buf_append(&r->body, "", 1);
	assert_false(r->body.oom);
	return status;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static uint16_t flags(int id)
{
	return gw.maps.backends[id].flags;
}

static void test_init(void **state)
{
	struct pg_admin_reply r;

	(void)state;
	assert_int_equal(gw.maps.state->nbackends, 3);
	assert_int_equal(gw.maps.state->ring_generation, 1);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(gw.maps.state->prefix_length, PG_PREFIX_LENGTH_DEFAULT);
	for (int id = 1; id <= 3; id++)
		assert_int_equal(flags(id), PG_BACKEND_ACTIVE);
	assert_int_equal(flags(4), 0);

	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_string_equal(r.content_type, "application/json");
	assert_int_equal(count(r.body.p, "\"id\":"), 3);
	assert_non_null(strstr(r.body.p, "{\"id\":2,\"address\":\"10.0.0.2:8000\",\"healthy\":true,"
	                                 "\"draining\":false,\"in_flight\":0,\"requests\":0,"
	                                 "\"failures\":0"));
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/health", NULL, &r), 200);
	assert_string_equal(r.body.p, "{\"status\":\"ok\",\"backends\":3,\"healthy\":3}\n");
	pg_buf_free(&r.body);
}

static void test_init_file(void **state)
{
	char err[256];

	(void)state;
	/* the file repeats a --backend (kept once) and adds two */
	make_temp(file_path, sizeof(file_path),
	          "# fleet\n10.0.0.3:8000\n\n10.0.1.1:9000  # new\nlocalhost:9001\n");
	cfg.backends_file = file_path;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->nbackends, 5);
	assert_int_equal(gw.maps.backends[5].port, 9001);
	assert_int_equal(gw.maps.backends[5].ipv4, htonl(INADDR_LOOPBACK));
	/* one ring for the whole initial membership */
	assert_int_equal(gw.maps.state->ring_generation, 1);
}

static void test_init_file_errors(void **state)
{
	char err[256], want[128];

	(void)state;
	make_temp(file_path, sizeof(file_path), "10.0.1.1:9000\n\n10.0.1.300:9000\n");
	cfg.backends_file = file_path;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:3: ", file_path);
	assert_non_null(strstr(err, want));

	cfg.backends_file = "/nonexistent/backends";
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--backends-file /nonexistent/backends"));
}

static void test_zero_backends(void **state)
{
	struct pg_admin_reply r;
	char err[256];

	(void)state;
	cfg.nbackends = 0;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->nbackends, 0);
	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_string_equal(r.body.p, "[\n]\n");
	pg_buf_free(&r.body);
	assert_int_equal(req("POST", "/route", "hello", &r), 503);
	assert_non_null(strstr(r.body.p, "\"backend\":null"));
	pg_buf_free(&r.body);
}

static void test_post_delete(void **state)
{
	static const struct {
		const char *body;
		int status;
		const char *want;
	} cases[] = {
	    {"{\"address\":\"10.0.0.9:8000\"}", 201, "\"id\":4,\"address\":\"10.0.0.9:8000\""},
	    {"{\"address\":\"10.0.0.9:8000\"}", 409, "already a member"},
	    {"{\"address\":\"10.0.0.1:8000\"}", 409, "already a member"},
	    {"{\"address\":\"localhost:7000\"}", 201, "\"id\":5,\"address\":\"127.0.0.1:7000\""},
	    {"{\"address\":\"10.0.0.300:1\"}", 400, "IPv4"},
	    {"{\"address\":\"10.0.0.1\"}", 400, "ADDR:PORT"},
	    {"{\"address\":\"10.0.0.1:0\"}", 400, "port"},
	    {"{\"address\":8000}", 400, "address: expected a string"},
	    {"{}", 400, "address: missing"},
	    {"{\"address\":\"10.0.0.8:1\",\"x\":1}", 400, "unknown field"},
	    {"[\"10.0.0.8:1\"]", 400, "expected {"},
	    {"{\"address\":", 400, "invalid JSON at byte"},
	    {"", 400, "invalid JSON"},
	    {"{\"address\":\"10.0.0.8:1\\u0000\"}", 400, "NUL"},
	};
	struct pg_admin_reply r;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st = req("POST", "/backends", cases[i].body, &r);

		if (st != cases[i].status || !strstr(r.body.p, cases[i].want))
			fail_msg("case %zu: %s -> %d %s", i, cases[i].body, st, r.body.p);
		if (st >= 400)
			assert_true(r.body.p[0] == '{' && strstr(r.body.p, "\"error\":"));
		pg_buf_free(&r.body);
	}
	assert_int_equal(gw.maps.state->nbackends, 5);

	assert_int_equal(req("DELETE", "/backends/10.0.0.9:8000", NULL, &r), 202);
	assert_non_null(strstr(r.body.p, "\"address\":\"10.0.0.9:8000\""));
	assert_non_null(strstr(r.body.p, "\"draining\":true"));
	pg_buf_free(&r.body);
	assert_int_equal(flags(4), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	assert_int_equal(gw.maps.state->nbackends, 4);
	/* again: still draining, still 202 */
	assert_int_equal(req("DELETE", "/backends/10.0.0.9%3A8000", NULL, &r), 202);
	pg_buf_free(&r.body);
	assert_int_equal(req("DELETE", "/backends/10.9.9.9:1", NULL, &r), 404);
	assert_non_null(strstr(r.body.p, "not a member"));
	pg_buf_free(&r.body);
	assert_int_equal(req("DELETE", "/backends/nonsense", NULL, &r), 400);
	pg_buf_free(&r.body);
	assert_int_equal(req("DELETE", "/backends/10.0.0.1%008000", NULL, &r), 400);
	pg_buf_free(&r.body);

	/* re-adding a draining member re-activates its slot */
	assert_int_equal(req("POST", "/backends", "{\"address\":\"10.0.0.9:8000\"}", &r), 201);
	assert_non_null(strstr(r.body.p, "\"id\":4,"));
	pg_buf_free(&r.body);
	assert_int_equal(flags(4), PG_BACKEND_ACTIVE);
	assert_int_equal(gw.maps.state->nbackends, 5);
}

static void test_drain(void **state)
{
	struct pg_backend *b = &gw.maps.backends[2];
	uint64_t now = pg_now_ms();
	uint32_t epoch = b->epoch;
	char err[128];

	(void)state;
	b->in_flight = 2;
	b->requests[PG_DEC_AFFINITY] = 5;
	assert_int_equal(pg_member_remove(&gw, "10.0.0.2:8000", err, sizeof(err)), 2);
	assert_int_equal(gw.maps.state->nbackends, 2);
	pg_control_tick(&gw, now + 10 * PG_DRAIN_GRACE_MS);
	assert_int_equal(flags(2), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	b->in_flight = 0;
	pg_control_tick(&gw, now - 1); /* in_flight 0, but within the grace period */
	assert_int_equal(flags(2), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	pg_control_tick(&gw, now + 10 * PG_DRAIN_GRACE_MS);
	assert_int_equal(flags(2), 0);
	assert_int_equal(pg_max_backend_id(&gw), 3);
	assert_int_equal(pg_member_remove(&gw, "10.0.0.2:8000", err, sizeof(err)), -ENOENT);

	/* the freed id is reused: new epoch, counters cleared */
	assert_int_equal(pg_member_add(&gw, "10.0.0.7:8000", err, sizeof(err)), 2);
	assert_int_equal(b->epoch, epoch + 1);
	assert_int_equal(b->requests[PG_DEC_AFFINITY], 0);
	assert_int_equal(flags(2), PG_BACKEND_ACTIVE);
}

/* Share of keys (of a fixed sample) whose ring owner differs from before,
 * and no key may land on a draining member. */
static void test_ring_generations(void **state)
{
	const uint64_t gen0 = gw.maps.state->ring_generation;
	struct pg_admin_reply r;
	uint16_t c[PG_RING_CANDIDATES];
	char err[128], line[64];
	uint64_t h = 1;

	(void)state;
	assert_int_equal(pg_member_add(&gw, "10.0.0.4:8000", err, sizeof(err)), 4);
	assert_int_equal(gw.maps.state->ring_generation, gen0 + 1);
	/* 3 -> 4 members: ~1/4 of the keys move (all to the new one) */
	assert_in_range(gw.maps.state->remapped_ppm, 200000, 300000);
	assert_int_equal(pg_maps_live_ring(&gw.maps)->nbackends, 4);

	assert_int_equal(pg_member_remove(&gw, "10.0.0.1:8000", err, sizeof(err)), 1);
	assert_int_equal(gw.maps.state->ring_generation, gen0 + 2);
	assert_in_range(gw.maps.state->remapped_ppm, 200000, 300000);
	for (int i = 0; i < 10000; i++) {
		h = h * 6364136223846793005ull + 1442695040888963407ull;
		size_t n = pg_maps_candidates(&gw.maps, h, c);

		assert_int_equal(n, 3);
		for (size_t k = 0; k < n; k++)
			assert_int_not_equal(c[k], 1);
	}
	/* an error changes nothing */
	assert_int_equal(pg_member_add(&gw, "10.0.0.4:8000", err, sizeof(err)), -EEXIST);
	assert_int_equal(gw.maps.state->ring_generation, gen0 + 2);

	assert_int_equal(req("GET", "/metrics", NULL, &r), 200);
	snprintf(line, sizeof(line), "\nprefixgate_ring_generation %llu\n",
	         (unsigned long long)(gen0 + 2));
	assert_non_null(strstr(r.body.p, line));
	assert_non_null(strstr(r.body.p, "\nprefixgate_ring_remapped_ratio 0.2"));
	pg_buf_free(&r.body);
}

static void test_members_sync(void **state)
{
	char *v1[] = {"10.0.0.3:8000", "10.0.2.1:8000", "10.0.2.2:8000"};
	char *v2[] = {"10.0.2.2:8000", "10.0.2.3:8000"};
	char err[128];

	(void)state;
	assert_int_equal(pg_members_sync(&gw, v1, 3, err, sizeof(err)), 2);
	assert_int_equal(gw.maps.state->nbackends, 5);
	/* 10.0.0.3 (also --backend) stays; 10.0.2.1 (file only) drains */
	assert_int_equal(pg_members_sync(&gw, v2, 2, err, sizeof(err)), 2);
	assert_int_equal(flags(3), PG_BACKEND_ACTIVE);
	assert_int_equal(flags(4), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	assert_int_equal(flags(5), PG_BACKEND_ACTIVE);
	assert_int_equal(flags(6), PG_BACKEND_ACTIVE);
	assert_int_equal(gw.maps.state->nbackends, 5);
	/* same list again: nothing to do, no new ring */
	uint64_t gen = gw.maps.state->ring_generation;

	assert_int_equal(pg_members_sync(&gw, v2, 2, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->ring_generation, gen);
	/* a member added through the API is not the file's to remove */
	assert_int_equal(pg_member_add(&gw, "10.0.3.1:8000", err, sizeof(err)), 7);
	assert_int_equal(pg_members_sync(&gw, NULL, 0, err, sizeof(err)), 2);
	assert_int_equal(flags(7), PG_BACKEND_ACTIVE);
	assert_int_equal(gw.maps.state->nbackends, 4);
}

static void test_down_expiry(void **state)
{
	struct pg_backend *b = &gw.maps.backends[1];
	struct pg_admin_reply r;
	uint64_t now = pg_now_ms();

	(void)state;
	b->down_until_ms = now + 60000;
	__atomic_fetch_or(&b->flags, PG_BACKEND_DOWN, __ATOMIC_RELAXED);
	assert_int_equal(req("GET", "/health", NULL, &r), 200);
	assert_string_equal(r.body.p, "{\"status\":\"ok\",\"backends\":3,\"healthy\":2}\n");
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/metrics", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\nprefixgate_backend_up{backend=\"10.0.0.1:8000\"} 0\n"));
	assert_non_null(strstr(r.body.p, "\nprefixgate_backends{state=\"down\"} 1\n"));
	pg_buf_free(&r.body);

	pg_control_tick(&gw, now);
	assert_true(flags(1) & PG_BACKEND_DOWN);
	pg_control_tick(&gw, now + 60000);
	assert_int_equal(flags(1), PG_BACKEND_ACTIVE);
	/* DOWN members stay in the ring: the balancer skips them */
	assert_int_equal(gw.maps.state->nbackends, 3);
}

/* The dry run of target names the backend pg_route_worker() picks for the same
 * request (api, X-Prefixgate-Key key or NULL, body). */
static void check_route_matches(const char *target, enum pg_api api, const char *key,
                                const char *body, const char *reason, const char *source)
{
	struct pg_route_input in = {
	    .api = api, .body = body, .body_len = strlen(body), .complete = true};
	struct pg_admin_reply r;
	struct pg_choice ch;
	struct pg_key k;
	char want[128], name[PG_ADDR_STRLEN];
	uint16_t id;

	if (key)
		in.header_key = S(key);
	id = pg_route_worker(&gw, 0, &in, NULL, 0, &k, &ch);
	assert_int_not_equal(id, 0);

	assert_int_equal(req("POST", target, body, &r), 200);
	snprintf(want, sizeof(want), "\"backend\":\"%s\",\"backend_id\":%u,",
	         pg_backend_name(&gw.maps.backends[id], name, sizeof(name)), id);
	if (!strstr(r.body.p, want))
		fail_msg("%s: want %s in %s", target, want, r.body.p);
	snprintf(want, sizeof(want), "\"reason\":\"%s\"", reason);
	assert_non_null(strstr(r.body.p, want));
	snprintf(want, sizeof(want), "\"key_hash\":\"0x%016llx\",\"key_length\":%u,",
	         (unsigned long long)k.hash, k.length);
	assert_non_null(strstr(r.body.p, want));
	snprintf(want, sizeof(want), "\"key_source\":\"%s\"", source);
	assert_non_null(strstr(r.body.p, want));
	assert_non_null(strstr(r.body.p, "\"strategy\":\"prefix_aware\""));
	assert_int_equal(count(r.body.p, "\"candidates\":[\""), 1);
	pg_buf_free(&r.body);
}

static void test_route_dry_run(void **state)
{
	static const char chat[] =
	    "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"You are a "
	    "support bot.\"},{\"role\":\"user\",\"content\":\"Where is my order?\"}]}";
	struct pg_admin_reply r;
	uint64_t total = 0;
	char body[64];

	(void)state;
	for (int i = 0; i < 40; i++) {
		snprintf(body, sizeof(body), "prompt number %d", i);
		check_route_matches("/route", PG_API_RAW, NULL, body, "affinity", "raw");
		check_route_matches("/route?path=/invocations", PG_API_RAW, NULL, body, "affinity",
		                    "raw");
	}
	check_route_matches("/route?path=/v1/chat/completions", PG_API_CHAT, NULL, chat, "affinity",
	                    "messages");
	check_route_matches("/route?path=%2Fv1%2Fchat%2Fcompletions", PG_API_CHAT, NULL, chat,
	                    "affinity", "messages");
	check_route_matches("/route?path=/v1/chat/completions&key=session+42", PG_API_CHAT,
	                    "session 42", chat, "explicit_key", "header");
	check_route_matches("/route?key=k%26v&path=/v1/chat/completions", PG_API_CHAT, "k&v", chat,
	                    "explicit_key", "header");
	check_route_matches("/route?path=/v1/completions", PG_API_COMPLETIONS, NULL,
	                    "{\"prompt\":\"hi\",\"prompt_cache_key\":\"user-7\"}", "explicit_key",
	                    "prompt_cache_key");

	/* whitespace and other fields never change the key */
	assert_int_equal(req("POST", "/route?path=/v1/chat/completions", chat, &r), 200);
	char *a = strstr(r.body.p, "\"key_hash\"");

	assert_non_null(a);
	a = strndup(a, 30);
	pg_buf_free(&r.body);
	assert_int_equal(req("POST", "/route?path=/v1/chat/completions",
	                     "{ \"messages\" : [ {\"content\":\"You are a support bot.\", "
	                     "\"role\":\"system\"}, {\"role\":\"user\",\"content\":\"Where is my "
	                     "order?\"}], \"temperature\": 0.5}",
	                     &r),
	                 200);
	assert_non_null(strstr(r.body.p, a));
	free(a);
	pg_buf_free(&r.body);

	/* broken JSON on an OpenAI path: raw fallback, said so */
	assert_int_equal(req("POST", "/route?path=/v1/chat/completions", "{\"messages\":", &r),
	                 200);
	assert_non_null(strstr(r.body.p, "\"fallback\":true"));
	assert_non_null(strstr(r.body.p, "\"key_source\":\"raw\""));
	pg_buf_free(&r.body);

	assert_int_equal(req("POST", "/route?model=x", "hi", &r), 400);
	assert_non_null(strstr(r.body.p, "unknown query parameter \\\"model\\\""));
	pg_buf_free(&r.body);
	assert_int_equal(req("POST", "/route?path=v1", "hi", &r), 400);
	pg_buf_free(&r.body);

	/* a dry run sends nothing and counts nothing */
	for (int id = 1; id < PG_MAX_BACKENDS; id++) {
		assert_int_equal(gw.maps.backends[id].in_flight, 0);
		for (int d = 0; d < PG_DEC_MAX; d++)
			total += gw.maps.backends[id].requests[d];
	}
	assert_int_equal(total, 0);
}

static void test_route_strategies(void **state)
{
	struct pg_admin_reply r;

	(void)state;
	assert_int_equal(
	    req("PUT", "/routing", "{\"RoutingStrategy\":\"LEAST_OUTSTANDING_REQUESTS\"}", &r),
	    200);
	pg_buf_free(&r.body);
	gw.maps.backends[1].in_flight = 3;
	gw.maps.backends[3].in_flight = 1;
	assert_int_equal(req("POST", "/route", "x", &r), 200);
	assert_non_null(strstr(r.body.p, "\"backend\":\"10.0.0.2:8000\""));
	assert_non_null(strstr(r.body.p, "\"reason\":\"least_outstanding\""));
	assert_non_null(strstr(r.body.p, "\"candidates\":[]"));
	pg_buf_free(&r.body);
	gw.maps.backends[1].in_flight = gw.maps.backends[3].in_flight = 0;

	assert_int_equal(req("PUT", "/routing", "{\"RoutingStrategy\":\"random\"}", &r), 200);
	pg_buf_free(&r.body);
	assert_int_equal(req("POST", "/route", "x", &r), 200);
	assert_non_null(strstr(r.body.p, "\"reason\":\"random\""));
	assert_non_null(strstr(r.body.p, "\"strategy\":\"random\""));
	pg_buf_free(&r.body);
}

static void test_routing(void **state)
{
	static const struct {
		const char *body, *want;
	} bad[] = {
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"PrefixLength\":100}}",
	     "PrefixAwareRoutingConfig.PrefixLength: 100 is out of range 1024-65536"},
	    {"{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	     "{\"ConcurrencyThreshold\":0}}",
	     "PrefixAwareRoutingConfig.ConcurrencyThreshold"},
	    {"{\"RoutingStrategy\":\"FASTEST\"}", "RoutingStrategy"},
	    {"{\"PrefixAwareRoutingConfig\":{}}", "RoutingStrategy: missing"},
	    {"{\"RoutingStrategy\":\"RANDOM\",\"Extra\":1}", "Extra: unknown field"},
	    {"not json", "invalid JSON"},
	};
	static const char good[] =
	    "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	    "{\"PrefixLength\":2048,\"ConcurrencyThreshold\":3}}\n";
	struct pg_admin_reply r;

	(void)state;
	assert_int_equal(req("GET", "/routing", NULL, &r), 200);
	assert_string_equal(r.body.p,
	                    "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	                    "{\"PrefixLength\":4096,\"ConcurrencyThreshold\":10}}\n");
	pg_buf_free(&r.body);
	assert_int_equal(req("PUT", "/routing", good, &r), 200);
	assert_string_equal(r.body.p, good);
	pg_buf_free(&r.body);
	assert_int_equal(gw.maps.state->prefix_length, 2048);
	assert_int_equal(gw.maps.state->concurrency_threshold, 3);
	assert_int_equal(req("GET", "/routing", NULL, &r), 200);
	assert_string_equal(r.body.p, good);
	pg_buf_free(&r.body);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(req("PUT", "/routing", bad[i].body, &r), 400);
		if (!strstr(r.body.p, bad[i].want))
			fail_msg("case %zu: want %s in %s", i, bad[i].want, r.body.p);
		pg_buf_free(&r.body);
	}
	/* errors leave the config alone */
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(gw.maps.state->prefix_length, 2048);
	assert_int_equal(gw.maps.state->concurrency_threshold, 3);
}

static void test_reload(void **state)
{
	struct pg_admin_reply r;
	char err[256];

	(void)state;
	make_temp(file_path, sizeof(file_path), "10.0.5.1:80\n");
	make_temp(routing_path, sizeof(routing_path), "{\"RoutingStrategy\":\"RANDOM\"}");
	cfg.backends_file = file_path;
	cfg.routing_config = routing_path;
	cfg.route.strategy = PG_STRATEGY_LEAST_OUTSTANDING; /* as if --strategy overrode it */
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->nbackends, 4);

	/* unchanged routing file: the override and PUT /routing survive */
	assert_int_equal(req("PUT", "/routing",
	                     "{\"RoutingStrategy\":\"PREFIX_AWARE\","
	                     "\"PrefixAwareRoutingConfig\":{\"PrefixLength\":8192}}",
	                     &r),
	                 200);
	pg_buf_free(&r.body);
	write_file(file_path, "10.0.5.2:80\n10.0.5.3:80\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(gw.maps.state->prefix_length, 8192);
	assert_int_equal(gw.maps.state->nbackends, 5);
	assert_true(flags(4) & PG_BACKEND_DRAINING); /* 10.0.5.1 */

	/* a changed routing file is applied whole */
	write_file(routing_path, "{\"RoutingStrategy\":\"RANDOM\"} ");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(gw.maps.state->prefix_length, PG_PREFIX_LENGTH_DEFAULT);

	/* broken files: logged, nothing changes */
	write_file(file_path, "10.0.5.2:80\nbogus\n");
	write_file(routing_path, "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"Bad\":1}");
	assert_int_equal(pg_control_reload(&gw), -1);
	assert_int_equal(gw.maps.state->nbackends, 5);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_RANDOM);
}

/* Sample lines have a family announced by TYPE before them. */
static void check_exposition(const char *text)
{
	char typed[64][96];
	size_t ntyped = 0;

	for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
		char name[96];
		double v;

		assert_non_null(strchr(l, '\n'));
		if (!strncmp(l, "# HELP ", 7))
			continue;
		if (!strncmp(l, "# TYPE ", 7)) {
			assert_true(ntyped < 64);
			assert_int_equal(sscanf(l + 7, "%95s", typed[ntyped]), 1);
			ntyped++;
			continue;
		}
		assert_int_equal(sscanf(l, "%95[a-z_]", name), 1);
		assert_true(ntyped > 0);
		size_t tl = strlen(typed[ntyped - 1]);

		if (strncmp(name, typed[ntyped - 1], tl) ||
		    (name[tl] && strcmp(name + tl, "_bucket") && strcmp(name + tl, "_sum") &&
		     strcmp(name + tl, "_count")))
			fail_msg("sample %s under TYPE %s", name, typed[ntyped - 1]);
		char line[256];
		size_t ll = (size_t)(strchr(l, '\n') - l);

		assert_true(ll < sizeof(line));
		memcpy(line, l, ll);
		line[ll] = 0;
		assert_non_null(strrchr(line, ' '));
		assert_int_equal(sscanf(strrchr(line, ' '), " %lf", &v), 1);
	}
	assert_true(ntyped >= 17);
}

static void test_metrics(void **state)
{
	static const char *const want[] = {
	    "# TYPE prefixgate_requests_total counter\n",
	    "\nprefixgate_requests_total{backend=\"10.0.0.1:8000\",decision=\"affinity\"} 7\n",
	    "\nprefixgate_requests_total{backend=\"10.0.0.1:8000\",decision=\"retry\"} 2\n",
	    "\nprefixgate_requests_total{backend=\"10.0.0.3:8000\",decision=\"explicit_key\"} 0\n",
	    "\nprefixgate_backend_in_flight{backend=\"10.0.0.2:8000\"} 4\n",
	    "\nprefixgate_backend_up{backend=\"10.0.0.2:8000\"} 1\n",
	    "\nprefixgate_backend_failures_total{backend=\"10.0.0.1:8000\"} 9\n",
	    "# TYPE prefixgate_routing_latency_microseconds histogram\n",
	    "\nprefixgate_routing_latency_microseconds_bucket{le=\"1\"} 1\n",
	    "\nprefixgate_routing_latency_microseconds_bucket{le=\"2\"} 1\n",
	    "\nprefixgate_routing_latency_microseconds_bucket{le=\"5\"} 4\n",
	    "\nprefixgate_routing_latency_microseconds_bucket{le=\"10000\"} 4\n",
	    "\nprefixgate_routing_latency_microseconds_bucket{le=\"+Inf\"} 5\n",
	    "\nprefixgate_routing_latency_microseconds_sum 20011.500\n",
	    "\nprefixgate_routing_latency_microseconds_count 5\n",
	    "\nprefixgate_routed_total 5\n",
	    "\nprefixgate_key_extraction_fallbacks_total 3\n",
	    "\nprefixgate_client_errors_total 11\n",
	    "\nprefixgate_no_backend_total 1\n",
	    "\nprefixgate_aborted_total 0\n",
	    "\nprefixgate_backend_errors_total 2\n",
	    "\nprefixgate_connections_total 12\n",
	    "\nprefixgate_ring_generation 2\n",
	    "# TYPE prefixgate_ring_rebuild_seconds gauge\n",
	    "# TYPE prefixgate_ring_rebuild_seconds_total counter\n",
	    "\nprefixgate_backends{state=\"active\"} 2\n",
	    "\nprefixgate_backends{state=\"draining\"} 1\n",
	    "\nprefixgate_backends{state=\"down\"} 0\n",
	    "\nprefixgate_routing_strategy{strategy=\"PREFIX_AWARE\"} 1\n",
	    "\nprefixgate_prefix_length 4096\n",
	};
	struct pg_admin_reply r;
	char err[64];

	(void)state;
	gw.maps.backends[1].requests[PG_DEC_AFFINITY] = 7;
	gw.maps.backends[1].requests[PG_DEC_RETRY] = 2;
	gw.maps.backends[1].failures = 9;
	gw.maps.backends[2].in_flight = 4;
	pg_member_remove(&gw, "10.0.0.2:8000", err, sizeof(err));
	/* worker 0: 500 ns, 3 us, 4 us; worker 1: 4.5 us, 20 ms */
	pg_stats_route_latency(&gw.stats[0], 500);
	pg_stats_route_latency(&gw.stats[0], 3000);
	pg_stats_route_latency(&gw.stats[0], 4000);
	pg_stats_route_latency(&gw.stats[1], 4000);
	pg_stats_route_latency(&gw.stats[1], 20000000);
	gw.stats[0].key_fallbacks = 1;
	gw.stats[1].key_fallbacks = 2;
	gw.stats[0].client_errors = 11;
	gw.stats[1].no_backend = 1;
	gw.stats[1].backend_errors = 2;
	gw.stats[0].connections = 5;
	gw.stats[1].connections = 7;

	assert_int_equal(req("GET", "/metrics", NULL, &r), 200);
	assert_string_equal(r.content_type, PG_METRICS_CONTENT_TYPE);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!strstr(r.body.p, want[i]))
			fail_msg("missing: %s", want[i]);
	check_exposition(r.body.p);
	pg_buf_free(&r.body);
}

static void test_methods(void **state)
{
	static const struct {
		const char *method, *target;
		int status;
		const char *allow;
	} cases[] = {
	    {"GET", "/nope", 404, NULL},
	    {"GET", "/backends/", 404, NULL},
	    {"GET", "/health/", 404, NULL},
	    {"POST", "/health", 405, "GET"},
	    {"DELETE", "/metrics", 405, "GET"},
	    {"PUT", "/backends", 405, "GET, POST"},
	    {"GET", "/backends/10.0.0.1:8000", 405, "DELETE"},
	    {"GET", "/route", 405, "POST"},
	    {"POST", "/routing", 405, "GET, PUT"},
	    {"get", "/health", 405, "GET"},
	};
	struct pg_admin_reply r;
	char small[1] = "";

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(req(cases[i].method, cases[i].target, NULL, &r), cases[i].status);
		assert_string_equal(r.content_type, "application/json");
		assert_true(r.body.p[0] == '{');
		if (cases[i].allow)
			assert_string_equal(r.allow, cases[i].allow);
		else
			assert_null(r.allow);
		pg_buf_free(&r.body);
	}
	/* the size is checked before the body is looked at */
	assert_int_equal(pg_admin_handle(&gw, S("POST"), S("/route"), S(""), small,
	                                 (size_t)PG_ADMIN_BODY_MAX + 1, &r),
	                 413);
	pg_buf_free(&r.body);
}

/* Feed raw bytes in pieces of step bytes; returns the output once done. */
static char *exchange(const char *raw, size_t len, size_t step, bool *done)
{
	struct pg_admin_conn c = {0};
	struct pg_buf out = {0};

	*done = false;
	for (size_t i = 0; i < len && !*done; i += step) {
		size_t n = len - i < step ? len - i : step;

		pg_buf_append(&c.in, raw + i, n);
		*done = pg_admin_input(&gw, &c, &out);
	}
	pg_admin_conn_free(&c);
	pg_buf_append(&out, "", 1);
	return out.p;
}

static void test_framing(void **state)
{
	static const char post[] = "POST /backends HTTP/1.1\r\nHost: x\r\nContent-Length: 28\r\n"
	                           "\r\n{\"address\":\"10.0.0.20:8000\"}";
	static const char chunked[] = "PUT /routing HTTP/1.1\r\nHost: x\r\n"
	                              "Transfer-Encoding: chunked\r\n\r\n"
	                              "f\r\n{\"RoutingStrate\r\n"
	                              "10\r\ngy\":\"RANDOM\"}   \r\n0\r\n\r\n";
	static const char cont[] = "PUT /routing HTTP/1.1\r\nHost: x\r\nContent-Length: 28\r\n"
	                           "Expect: 100-continue\r\n\r\n";
	const char *get = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	struct pg_admin_conn c = {0};
	struct pg_buf out = {0};
	bool done;
	char *o;

	(void)state;
	o = exchange(get, strlen(get), 1, &done);
	assert_true(done);
	assert_non_null(strstr(o, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	                          "Content-Length: 41\r\n"));
	assert_non_null(strstr(o, "Connection: close\r\n\r\n{\"status\":\"ok\",\"backends\":3,"));
	free(o);

	o = exchange(post, strlen(post), 7, &done);
	assert_true(done);
	assert_non_null(strstr(o, "HTTP/1.1 201 Created\r\n"));
	free(o);
	assert_int_equal(gw.maps.state->nbackends, 4);
	o = exchange(post, strlen(post) - 1, 1000, &done); /* body incomplete */
	assert_false(done);
	free(o);

	o = exchange(chunked, strlen(chunked), 5, &done);
	assert_true(done);
	assert_non_null(strstr(o, "HTTP/1.1 200 OK\r\n"));
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_RANDOM);
	free(o);

	/* the head is complete once its blank line is in; an error answered at
	 * the head leaves it incomplete */
	pg_buf_append(&c.in, cont, strlen(cont) - 2);
	assert_false(pg_admin_input(&gw, &c, &out));
	assert_false(pg_admin_head_complete(&c));
	pg_admin_conn_free(&c);
	pg_buf_puts(&c.in, "GET /health HTTP/1.1\r\n\r\n"); /* no Host: 400 */
	assert_true(pg_admin_input(&gw, &c, &out));
	assert_false(pg_admin_head_complete(&c));
	pg_admin_conn_free(&c);
	out.len = 0;

	/* 100 Continue first, once; then the reply */
	pg_buf_append(&c.in, cont, strlen(cont));
	assert_false(pg_admin_input(&gw, &c, &out));
	assert_true(pg_admin_head_complete(&c));
	assert_int_equal(out.len, strlen("HTTP/1.1 100 Continue\r\n\r\n"));
	assert_false(pg_admin_input(&gw, &c, &out));
	assert_int_equal(out.len, strlen("HTTP/1.1 100 Continue\r\n\r\n"));
	pg_buf_puts(&c.in, "{\"RoutingStrategy\":\"RANDOM\"}");
	assert_true(pg_admin_input(&gw, &c, &out));
	pg_buf_append(&out, "", 1);
	assert_non_null(strstr(out.p, "\r\n\r\nHTTP/1.1 200 OK\r\n"));
	pg_admin_conn_free(&c);
	pg_buf_free(&out);

	o = exchange("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n"
	             "Transfer-Encoding: chunked\r\n\r\n",
	             80, 80, &done);
	assert_true(done);
	assert_non_null(strstr(o, "HTTP/1.1 400 Bad Request\r\n"));
	free(o);
	o = exchange("POST /route HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n", 62,
	             62, &done);
	assert_true(done);
	assert_non_null(strstr(o, "HTTP/1.1 413 "));
	free(o);
}

/* ---- the thread, over a real socket -------------------------------------- */

/* One HTTP exchange with the admin listener; the reply, NUL-terminated,
 * or NULL after 5 s. */
static char *http(const char *raw)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(pg_control_admin_port()),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct pollfd p;
	char *buf = calloc(1, 65536);
	size_t len = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0 && buf);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, raw, strlen(raw), 0), (ssize_t)strlen(raw));
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	while (len < 65535 && poll(&p, 1, 5000) == 1 &&
	       (n = recv(fd, buf + len, 65535 - len, 0)) > 0)
		len += (size_t)n;
	close(fd);
	if (!len) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void test_thread(void **state)
{
	char err[256], *o;
	sigset_t hup;
	int tries;

	(void)state;
	make_temp(file_path, sizeof(file_path), "10.0.9.1:8000\n");
	cfg.backends_file = file_path;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &hup, NULL), 0);
	if (pg_control_start(&gw, err, sizeof(err)))
		fail_msg("pg_control_start: %s", err);
	assert_int_not_equal(pg_control_admin_port(), 0);

	o = http("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(o);
	assert_non_null(strstr(o, "\"backends\":4,\"healthy\":4}"));
	free(o);
	o = http("POST /backends HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\n"
	         "{\"address\":\"10.0.9.2:8000\"}");
	assert_non_null(o);
	assert_non_null(strstr(o, "HTTP/1.1 201 Created"));
	free(o);

	/* SIGHUP re-reads the backends file */
	write_file(file_path, "10.0.9.1:8000\n10.0.9.3:8000\n");
	assert_int_equal(kill(getpid(), SIGHUP), 0);
	for (tries = 0; tries < 100; tries++) {
		o = http("GET /backends HTTP/1.1\r\nHost: x\r\n\r\n");
		assert_non_null(o);
		bool seen = strstr(o, "\"10.0.9.3:8000\"") != NULL;

		free(o);
		if (seen)
			break;
		usleep(50000);
	}
	assert_true(tries < 100);
	pg_control_stop(&gw);
	assert_int_equal(pg_control_admin_port(), 0);
	assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &hup, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_init, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_init_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_init_file_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_zero_backends, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_post_delete, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_drain, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_ring_generations, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_members_sync, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_down_expiry, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_route_dry_run, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_route_strategies, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_routing, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_reload, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_metrics, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_methods, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_framing, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_thread, setup, teardown),
	};

	return cmocka_run_group_tests_name("admin", tests, NULL, NULL);
}
