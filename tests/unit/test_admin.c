// SPDX-License-Identifier: MIT
/*
 * Admin API tests: requests through pg_admin_handle() (members, the dry
 * run, routing, /metrics, methods) and its HTTP framing (pg_admin_input),
 * on the in-memory gateway of control_fixture.h.
 */
#include "control_fixture.h"
#include "admin/metrics.h"
#include "router/route.h"

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
	    {"{\"address\":\"10.0.0.1\"}", 400, "HOST:PORT"},
	    {"{\"address\":\"[::1]:7001\"}", 201, "\"id\":6,\"address\":\"[::1]:7001\""},
	    {"{\"address\":\"::1:7001\"}", 400, "brackets"},
	    {"{\"address\":\"Pool.Example:8000\"}", 202,
	     "{\"name\":\"pool.example:8000\",\"resolving\":true}"},
	    {"{\"address\":\"pool.example:8000\"}", 409, "already a backend"},
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
	assert_int_equal(gw.maps.state->nbackends, 6);

	/* a name: forgotten, its addresses (none resolved here) drained */
	assert_int_equal(req("DELETE", "/backends/pool.example:8000", NULL, &r), 202);
	assert_non_null(strstr(r.body.p, "{\"name\":\"pool.example:8000\",\"draining\":true}"));
	pg_buf_free(&r.body);
	assert_int_equal(req("DELETE", "/backends/pool.example:8000", NULL, &r), 404);
	pg_buf_free(&r.body);

	assert_int_equal(req("DELETE", "/backends/10.0.0.9:8000", NULL, &r), 202);
	assert_non_null(strstr(r.body.p, "\"address\":\"10.0.0.9:8000\""));
	assert_non_null(strstr(r.body.p, "\"draining\":true"));
	pg_buf_free(&r.body);
	assert_int_equal(flags(4), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	assert_int_equal(gw.maps.state->nbackends, 5);
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
	assert_int_equal(gw.maps.state->nbackends, 6);
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
	id = pg_route_worker(&gw.router, 0, &in, NULL, 0, &k, &ch);
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

/* Sample lines have a family announced by TYPE before them. */
static void check_exposition(const char *text)
{
	char typed[128][96];
	size_t ntyped = 0;

	for (const char *l = text; *l; l = strchr(l, '\n') + 1) {
		char name[96];
		double v;

		assert_non_null(strchr(l, '\n'));
		if (!strncmp(l, "# HELP ", 7))
			continue;
		if (!strncmp(l, "# TYPE ", 7)) {
			assert_true(ntyped < 128);
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
	    /* durations in seconds, the Prometheus base unit */
	    "# TYPE prefixgate_routing_latency_seconds histogram\n",
	    "\nprefixgate_routing_latency_seconds_bucket{le=\"0.000001\"} 1\n",
	    "\nprefixgate_routing_latency_seconds_bucket{le=\"0.000002\"} 1\n",
	    "\nprefixgate_routing_latency_seconds_bucket{le=\"0.000005\"} 4\n",
	    "\nprefixgate_routing_latency_seconds_bucket{le=\"0.000012\"} 4\n",
	    "\nprefixgate_routing_latency_seconds_bucket{le=\"0.01\"} 4\n",
	    "\nprefixgate_routing_latency_seconds_bucket{le=\"+Inf\"} 5\n",
	    "\nprefixgate_routing_latency_seconds_sum 0.020011500\n",
	    "\nprefixgate_routing_latency_seconds_count 5\n",
	    "# TYPE prefixgate_routing_decision_seconds histogram\n",
	    "\nprefixgate_routing_decision_seconds_bucket{le=\"0.000001\"} 0\n",
	    "\nprefixgate_routing_decision_seconds_bucket{le=\"0.000008\"} 1\n",
	    "\nprefixgate_routing_decision_seconds_bucket{le=\"+Inf\"} 2\n",
	    "\nprefixgate_routing_decision_seconds_count 2\n",
	    "# TYPE prefixgate_dispatch_latency_seconds histogram\n",
	    /* the microsecond families, deprecated, for one release */
	    "# HELP prefixgate_routing_latency_microseconds DEPRECATED, removed in the next "
	    "release: prefixgate_routing_latency_seconds in microseconds; use "
	    "prefixgate_routing_latency_seconds.\n",
	    "\nprefixgate_routing_latency_microseconds_bucket{le=\"5\"} 4\n",
	    "\nprefixgate_routing_latency_microseconds_bucket{le=\"10000\"} 4\n",
	    "\nprefixgate_routing_latency_microseconds_sum 20011.500\n",
	    "\nprefixgate_routing_decision_microseconds_bucket{le=\"8\"} 1\n",
	    "# TYPE prefixgate_dispatch_latency_microseconds histogram\n",
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
	/* decisions: 7.5 us on worker 0, 300 us on worker 1 */
	pg_stats_decide_latency(&gw.stats[0], 7500);
	pg_stats_decide_latency(&gw.stats[1], 300000);
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

/* /health: 503 with no usable backend; ?ready also 503 when draining. */
static void test_health(void **state)
{
	struct pg_admin_reply r;
	uint64_t now = pg_now_ms();

	(void)state;
	assert_int_equal(req("GET", "/health", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\"status\":\"ok\",\"backends\":3,\"healthy\":3}"));
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/health?ready", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\"ready\":true,\"draining\":false"));
	pg_buf_free(&r.body);
	for (int id = 1; id <= 3; id++) {
		gw.maps.backends[id].flags |= PG_BACKEND_DOWN;
		gw.maps.backends[id].down_until_ms = now + 60000;
	}
	assert_int_equal(req("GET", "/health", NULL, &r), 503);
	assert_non_null(strstr(r.body.p, "\"status\":\"no healthy backend\",\"backends\":3,"
	                                 "\"healthy\":0}"));
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/health?ready=1", NULL, &r), 503);
	assert_non_null(strstr(r.body.p, "\"ready\":false"));
	pg_buf_free(&r.body);
	gw.maps.backends[2].flags &= (uint16_t)~PG_BACKEND_DOWN;
	gw.maps.backends[2].down_until_ms = 0;
	assert_int_equal(req("GET", "/health", NULL, &r), 200);
	pg_buf_free(&r.body);
	__atomic_store_n(&gw.draining, 1, __ATOMIC_RELAXED);
	assert_int_equal(req("GET", "/health", NULL, &r), 200); /* still serving */
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/health?x=1&ready", NULL, &r), 503);
	assert_non_null(strstr(r.body.p, "\"status\":\"draining\""));
	assert_non_null(strstr(r.body.p, "\"draining\":true"));
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/health?readyx", NULL, &r), 200); /* another name */
	pg_buf_free(&r.body);
	gw.draining = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_post_delete, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_route_dry_run, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_route_strategies, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_routing, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_metrics, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_methods, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_framing, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_health, setup_init, teardown),
	};

	return cmocka_run_group_tests_name("admin", tests, NULL, NULL);
}
