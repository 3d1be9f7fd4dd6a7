// SPDX-License-Identifier: MIT
/*
 * OpenTelemetry's side of tracing: the OTLP/HTTP JSON encoding of a batch
 * (lib/otlp.h), a traced request's record made into its spans with the
 * right parents (lib/trace_rec.h pg_trace_spans), and the bounded ring
 * the records cross in (full: dropped and counted, never waited on).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/key.h"
#include "lib/trace_rec.h"

static void test_encode(void **state)
{
	struct pg_otlp_resource res = {.service = "prefixgate", .version = "1.2"};
	struct pg_otlp_span s[2] = {{.name = "POST /v1/chat/completions",
	                             .kind = PG_OTLP_SERVER,
	                             .status = PG_OTLP_ERROR,
	                             .start_ns = 1700000000000000000ull,
	                             .end_ns = 1700000000000000123ull},
	                            {.name = "q\"x", .kind = PG_OTLP_INTERNAL, .has_parent = true}};
	struct pg_buf o = {0};

	(void)state;
	memset(s[0].trace_id, 0xab, 16);
	memset(s[0].span_id, 0x01, 8);
	memcpy(s[1].trace_id, s[0].trace_id, 16);
	memcpy(s[1].parent_id, s[0].span_id, 8);
	memset(s[1].span_id, 0x02, 8);
	pg_otlp_str(&s[0], "http.request.method", "POST", 4);
	pg_otlp_int(&s[0], "http.response.status_code", 502);
	pg_otlp_bool(&s[0], "prefixgate.stream", true);
	pg_otlp_double(&s[1], "d", 0.5);
	pg_otlp_str(&s[1], "bytes", "a\n\"b", 4);
	for (int i = 0; i < PG_OTLP_ATTRS_MAX; i++) /* past the cap: dropped */
		pg_otlp_int(&s[1], "n", i);
	assert_int_equal(s[1].nattr, PG_OTLP_ATTRS_MAX);
	s[1].nattr = 2;
	pg_otlp_encode(&o, &res, s, 2);
	assert_false(o.oom);
	pg_buf_append(&o, "", 1);
	assert_string_equal(
	    o.p,
	    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
	    "\"value\":{\"stringValue\":\"prefixgate\"}}]},\"scopeSpans\":[{\"scope\":{\"name\":"
	    "\"prefixgate\",\"version\":\"1.2\"},\"spans\":["
	    "{\"traceId\":\"abababababababababababababababab\",\"spanId\":\"0101010101010101\","
	    "\"name\":\"POST /v1/chat/completions\",\"kind\":2,"
	    "\"startTimeUnixNano\":\"1700000000000000000\","
	    "\"endTimeUnixNano\":\"1700000000000000123\",\"attributes\":["
	    "{\"key\":\"http.request.method\",\"value\":{\"stringValue\":\"POST\"}},"
	    "{\"key\":\"http.response.status_code\",\"value\":{\"intValue\":\"502\"}},"
	    "{\"key\":\"prefixgate.stream\",\"value\":{\"boolValue\":true}}],"
	    "\"status\":{\"code\":2}},"
	    "{\"traceId\":\"abababababababababababababababab\",\"spanId\":\"0202020202020202\","
	    "\"parentSpanId\":\"0101010101010101\",\"name\":\"q\\\"x\",\"kind\":1,"
	    "\"startTimeUnixNano\":\"0\",\"endTimeUnixNano\":\"0\",\"attributes\":["
	    "{\"key\":\"d\",\"value\":{\"doubleValue\":0.5}},"
	    "{\"key\":\"bytes\",\"value\":{\"stringValue\":\"a\\n\\\"b\"}}],"
	    "\"status\":{\"code\":0}}]}]}]}");
	pg_buf_free(&o);
}

static void names(void *arg, uint16_t id, char *buf, size_t cap)
{
	(void)arg;
	snprintf(buf, cap, id == 2 ? "[::1]:8002" : "10.0.0.%u:800%u", id, id);
}

static const struct pg_otlp_attr *attr(const struct pg_otlp_span *s, const char *key)
{
	for (unsigned i = 0; i < s->nattr; i++)
		if (!strcmp(s->attr[i].key, key))
			return &s->attr[i];
	return NULL;
}

static const struct pg_otlp_span *named(const struct pg_otlp_span *s, size_t n, const char *name,
                                        unsigned nth)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s[i].name, name) && !nth--)
			return &s[i];
	return NULL;
}

static void test_spans(void **state)
{
	struct pg_trace_rec r = {
	    .has_parent = true,
	    .api = PG_API_CHAT,
	    .stream = true,
	    .strategy = 2,
	    .decision = 1,
	    .attempts = 2,
	    .status = 200,
	    .backend = 1,
	    .runner_up = 3,
	    .matched = 77,
	    .max_tokens = 16,
	    .start_ns = 1000,
	    .queued_ns = 1100,
	    .route_start_ns = 1500,
	    .route_end_ns = 1600,
	    .ttft_ns = 5000,
	    .end_ns = 9000,
	    .att = {{.start_ns = 1600,
	             .connected_ns = 1700,
	             .end_ns = 1800,
	             .backend = 1,
	             .result = PG_TRACE_FAILED},
	            {.start_ns = 1800, .backend = 2, .reused = true}},
	    .method_len = 4,
	    .path_len = 20,
	    .method = "POST",
	    .path = "/v1/chat/completions",
	};
	struct pg_otlp_span s[PG_TRACE_SPANS];
	struct pg_trace_text t;
	const struct pg_otlp_span *req, *sp;
	size_t n;

	(void)state;
	memset(r.trace_id, 7, 16);
	memset(r.span_id, 8, 8);
	memset(r.parent_id, 9, 8);
	n = pg_trace_spans(&r, 100, names, NULL, &t, s);
	/* request, queue, route, 2 attempts + 1 connect, first token, response */
	assert_int_equal(n, 8);
	req = &s[0];
	assert_string_equal(req->name, "POST /v1/chat/completions");
	assert_int_equal(req->kind, PG_OTLP_SERVER);
	assert_true(req->has_parent);
	assert_memory_equal(req->parent_id, r.parent_id, 8);
	assert_memory_equal(req->span_id, r.span_id, 8);
	assert_true(req->start_ns == 1100 && req->end_ns == 9100);
	assert_int_equal(attr(req, "http.response.status_code")->i, 200);
	assert_memory_equal(attr(req, "gen_ai.operation.name")->s, "chat", 4);
	assert_int_equal(attr(req, "gen_ai.request.max_tokens")->i, 16);
	assert_int_equal(req->status, PG_OTLP_UNSET);
	for (size_t i = 1; i < n; i++) {
		assert_memory_equal(s[i].trace_id, r.trace_id, 16);
		assert_true(s[i].has_parent);
		assert_true(s[i].start_ns <= s[i].end_ns);
		for (size_t j = 0; j < i; j++)
			assert_memory_not_equal(s[i].span_id, s[j].span_id, 8);
	}
	sp = named(s, n, "prefixgate.queue", 0);
	assert_non_null(sp);
	assert_true(sp->start_ns == 1200 && sp->end_ns == 1600);
	sp = named(s, n, "prefixgate.route", 0);
	assert_memory_equal(sp->parent_id, r.span_id, 8);
	assert_int_equal(attr(sp, "prefixgate.route.matched_tokens")->i, 77);
	assert_memory_equal(attr(sp, "prefixgate.route.runner_up")->s, "10.0.0.3:8003", 13);
	assert_memory_equal(attr(sp, "prefixgate.route.strategy")->s, "prefix_aware", 12);
	sp = named(s, n, "prefixgate.backend", 0);
	assert_int_equal(sp->kind, PG_OTLP_CLIENT);
	assert_int_equal(sp->status, PG_OTLP_ERROR);
	assert_int_equal(attr(sp, "server.port")->i, 8001);
	assert_memory_equal(named(s, n, "prefixgate.connect", 0)->parent_id, sp->span_id, 8);
	sp = named(s, n, "prefixgate.backend", 1);
	assert_memory_equal(attr(sp, "server.address")->s, "::1", 3);
	assert_int_equal(attr(sp, "server.address")->slen, 3);
	assert_int_equal(attr(sp, "http.response.status_code")->i, 200);
	assert_true(sp->end_ns == 9100); /* the last attempt runs to the end */
	sp = named(s, n, "prefixgate.first_token", 0);
	assert_true(sp->start_ns == 1900 && sp->end_ns == 5100);
	sp = named(s, n, "prefixgate.response", 0);
	assert_true(sp->start_ns == 5100 && sp->end_ns == 9100);

	/* a request answered by the gateway: no backend, no parent */
	r = (struct pg_trace_rec){.status = 502,
	                          .outcome = PG_TRACE_GATEWAY,
	                          .start_ns = 1,
	                          .route_start_ns = 2,
	                          .route_end_ns = 3,
	                          .end_ns = 4,
	                          .method_len = 3,
	                          .method = "GET",
	                          .path_len = 2,
	                          .path = "/x"};
	memset(r.trace_id, 7, 16);
	memset(r.span_id, 8, 8);
	n = pg_trace_spans(&r, 0, names, NULL, &t, s);
	assert_int_equal(n, 2);
	assert_false(s[0].has_parent);
	assert_string_equal(s[0].name, "GET"); /* not a known route: the method alone */
	assert_int_equal(s[0].status, PG_OTLP_ERROR);
	assert_memory_equal(attr(&s[0], "error.type")->s, "502", 3);
	assert_int_equal(s[1].status, PG_OTLP_ERROR);

	/* one that waited and got 429: its wait runs to its end, no route */
	r = (struct pg_trace_rec){.status = 429,
	                          .outcome = PG_TRACE_GATEWAY,
	                          .start_ns = 10,
	                          .queued_ns = 20,
	                          .end_ns = 90,
	                          .method_len = 4,
	                          .method = "POST",
	                          .api = PG_API_CHAT,
	                          .path_len = 20,
	                          .path = "/v1/chat/completions"};
	memset(r.trace_id, 7, 16);
	memset(r.span_id, 8, 8);
	n = pg_trace_spans(&r, 0, names, NULL, &t, s);
	assert_int_equal(n, 2);
	assert_int_equal(s[0].status, PG_OTLP_UNSET); /* a 4xx is not the server's error */
	assert_string_equal(s[1].name, "prefixgate.queue");
	assert_true(s[1].start_ns == 20 && s[1].end_ns == 90);
}

static void test_ring(void **state)
{
	struct pg_trace_ring *g = aligned_alloc(64, sizeof(*g));
	struct pg_trace_rec *r;
	const struct pg_trace_rec *p;

	(void)state;
	memset(g, 0, sizeof(*g));
	assert_null(pg_trace_ring_peek(g));
	for (unsigned i = 0; i < PG_TRACE_RING; i++) {
		r = pg_trace_ring_slot(g, 3);
		assert_non_null(r);
		r->status = (uint16_t)i;
		pg_trace_ring_commit(g);
	}
	/* full: the producer is told at once and the loss counted */
	assert_null(pg_trace_ring_slot(g, 3));
	assert_null(pg_trace_ring_slot(g, 3));
	assert_int_equal(g->dropped, 6); /* spans */
	for (unsigned i = 0; i < PG_TRACE_RING / 2; i++) {
		p = pg_trace_ring_peek(g);
		assert_int_equal(p->status, i);
		pg_trace_ring_pop(g);
	}
	/* room again, and order kept across the wrap */
	for (unsigned i = 0; i < PG_TRACE_RING / 2; i++) {
		r = pg_trace_ring_slot(g, 3);
		assert_non_null(r);
		r->status = (uint16_t)(PG_TRACE_RING + i);
		pg_trace_ring_commit(g);
	}
	assert_null(pg_trace_ring_slot(g, 3));
	for (unsigned i = PG_TRACE_RING / 2; i < PG_TRACE_RING + PG_TRACE_RING / 2; i++) {
		p = pg_trace_ring_peek(g);
		assert_non_null(p);
		assert_int_equal(p->status, i);
		pg_trace_ring_pop(g);
	}
	assert_null(pg_trace_ring_peek(g));
	assert_int_equal(g->dropped, 9);
	free(g);
}

static void test_url(void **state)
{
	static const char *const bad[] = {"",
	                                  "http://",
	                                  "http://h",
	                                  "http://:80",
	                                  "http://h:",
	                                  "http://h:x",
	                                  "http://h:0",
	                                  "http://h:65536",
	                                  "http://u@h:80",
	                                  "http://h:80?q",
	                                  "http://[::1/x",
	                                  "ftp://h:80",
	                                  "https://h:443",
	                                  "http://h:80 "};
	struct pg_otlp_url u;
	char err[160];

	(void)state;
	assert_int_equal(pg_otlp_url_parse("http://collector.local:4318", &u, err, sizeof(err)), 0);
	assert_string_equal(u.host, "collector.local");
	assert_string_equal(u.port, "4318");
	assert_string_equal(u.path, "/v1/traces");
	assert_string_equal(u.hostport, "collector.local:4318");
	assert_int_equal(pg_otlp_url_parse("http://[::1]:4318/", &u, err, sizeof(err)), 0);
	assert_string_equal(u.host, "::1");
	assert_string_equal(u.hostport, "[::1]:4318");
	assert_string_equal(u.path, "/v1/traces");
	assert_int_equal(
	    pg_otlp_url_parse("http://10.0.0.1:80/otlp/v1/traces", &u, err, sizeof(err)), 0);
	assert_string_equal(u.path, "/otlp/v1/traces");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!pg_otlp_url_parse(bad[i], &u, err, sizeof(err)))
			fail_msg("accepted \"%s\"", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_encode),
	    cmocka_unit_test(test_spans),
	    cmocka_unit_test(test_ring),
	    cmocka_unit_test(test_url),
	};

	return cmocka_run_group_tests_name("otlp", tests, NULL, NULL);
}
