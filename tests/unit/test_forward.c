// SPDX-License-Identifier: MIT
/*
 * What crosses the gateway (forward.h): Connection-listed and hop-by-hop
 * fields removed, framing written in canonical form, chunked request bodies
 * re-framed without trailers, in both directions; and the boundary rules
 * (boundary.h): when a backend connection may be pooled, and what the
 * client's connection does after an early answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/boundary.h"
#include "lib/buf.h"
#include "lib/forward.h"
#include "lib/http.h"
#include "lib/trace.h"

#define S(x) x, sizeof(x) - 1

/* Parse a request head and rewrite it; returns the rewritten head, NUL
 * terminated (caller frees). */
static char *fwd_request(const char *in, size_t len)
{
	struct pg_http_request req;
	char *out = NULL;
	size_t olen = 0, ocap = 0;
	ssize_t n = pg_http_parse_request(in, len, &req);

	if (n <= 0)
		fail_msg("parse: %zd for %.*s", n, (int)len, in);
	pg_fwd_request_head(&req, NULL, &out, &olen, &ocap);
	pg_bytes_append(&out, &olen, &ocap, "", 1);
	return out;
}

static char *fwd_response(const char *in, size_t len, bool head, bool close)
{
	struct pg_http_response resp;
	char *out = NULL;
	size_t olen = 0, ocap = 0;
	ssize_t n = pg_http_parse_response(in, len, head, &resp);

	struct pg_fwd_resp o = {.close = close};

	if (n <= 0)
		fail_msg("parse: %zd for %.*s", n, (int)len, in);
	pg_fwd_response_head(in, (size_t)n, &resp, &o, &out, &olen, &ocap);
	pg_bytes_append(&out, &olen, &ocap, "", 1);
	return out;
}

#define POST "POST /v1/completions HTTP/1.1\r\nHost: gw\r\n"

static void test_request_heads(void **state)
{
	static const struct {
		const char *in;
		size_t len;
		const char *want;
	} cases[] = {
	    /* Connection-listed fields go, whatever their case or list shape. */
	    {S(POST "Connection: X-Secret\r\nX-Secret: s\r\nX-Keep: k\r\n\r\n"),
	     POST "X-Keep: k\r\n\r\n"},
	    {S(POST "X-Secret: s\r\nConnection: keep-alive, , x-secret ,X-Other\r\n"
	            "X-Other: o\r\nA: 1\r\n\r\n"),
	     POST "A: 1\r\n\r\n"},
	    {S(POST "Connection: a\r\nConnection: b\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
	     POST "C: 3\r\n\r\n"},
	    /* "close" names a field too; keep-alive only its own (dropped) */
	    {S(POST "Close: 1\r\nConnection: close\r\nX: 2\r\n\r\n"), POST "X: 2\r\n\r\n"},
	    {S(POST "Connection: keep-alive\r\nClose: 1\r\n\r\n"), POST "Close: 1\r\n\r\n"},
	    /* ...but never Host, and framing is rewritten either way. */
	    {S(POST "Connection: Host, Content-Length\r\nContent-Length: 5\r\n\r\n"),
	     POST "Content-Length: 5\r\n\r\n"},
	    /* The gateway's own fields. */
	    {S(POST "Keep-Alive: timeout=5\r\nProxy-Connection: x\r\nTE: trailers\r\n"
	            "Upgrade: h2c\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"),
	     POST "Content-Length: 2\r\n\r\n"},
	    /* Canonical framing. */
	    {S(POST "Content-Length: 0007\r\n\r\n"), POST "Content-Length: 7\r\n\r\n"},
	    {S(POST "content-length:   3  \r\n\r\n"), POST "Content-Length: 3\r\n\r\n"},
	    {S(POST "Content-Length: 00\r\n\r\n"), POST "Content-Length: 0\r\n\r\n"},
	    {S(POST "Transfer-Encoding: CHUNKED\r\n\r\n"),
	     POST "Transfer-Encoding: chunked\r\n\r\n"},
	    {S(POST "transfer-encoding:\tchunked \r\nTrailer: X-Auth\r\n\r\n"),
	     POST "Transfer-Encoding: chunked\r\n\r\n"},
	    /* Other fields pass as they are, in order. */
	    {S(POST "Authorization: Bearer t\r\nX-A: 1\r\nContent-Length: 1\r\nX-B: 2\r\n\r\n"),
	     POST "Authorization: Bearer t\r\nX-A: 1\r\nX-B: 2\r\nContent-Length: 1\r\n\r\n"},
	    {S("GET /x?q=1 HTTP/1.0\r\nHost: gw\r\nConnection: keep-alive\r\n\r\n"),
	     "GET /x?q=1 HTTP/1.0\r\nHost: gw\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = fwd_request(cases[i].in, cases[i].len);

		if (strcmp(got, cases[i].want))
			fail_msg("request case %zu:\n got: %s\nwant: %s", i, got, cases[i].want);
		free(got);
	}
}

/* More Connection fields than the forwarder remembers (PG_HTTP_CONN_MAX),
 * even ones that name nothing: every field but Host and framing is taken
 * as named, and dropped. */
static void test_many_connection_fields(void **state)
{
	(void)state;
	for (int k = PG_HTTP_CONN_MAX; k <= PG_HTTP_CONN_MAX + 1; k++) {
		char in[2048], *got;
		int n = snprintf(in, sizeof(in), POST);

		for (int i = 0; i < k; i++)
			n += snprintf(in + n, sizeof(in) - (size_t)n, "Connection: keep-alive\r\n");
		n += snprintf(in + n, sizeof(in) - (size_t)n, "A: 1\r\nContent-Length: 0\r\n\r\n");
		got = fwd_request(in, (size_t)n);
		assert_string_equal(got, k > PG_HTTP_CONN_MAX ? POST "Content-Length: 0\r\n\r\n"
		                                              : POST
		                             "A: 1\r\nContent-Length: 0\r\n\r\n");
		free(got);
	}
}

#define OK200 "HTTP/1.1 200 OK\r\n"

static void test_response_heads(void **state)
{
	static const struct {
		const char *in;
		size_t len;
		bool head, close;
		const char *want;
	} cases[] = {
	    {S(OK200 "Connection: X-Internal\r\nX-Internal: 1\r\nContent-Length: 2\r\n\r\n"), false,
	     false, OK200 "Content-Length: 2\r\n\r\n"},
	    {S(OK200 "Close: 1\r\nConnection: close\r\nContent-Length: 2\r\n\r\n"), false, false,
	     OK200 "Content-Length: 2\r\n\r\n"},
	    {S(OK200
	       "Keep-Alive: timeout=5\r\nConnection: keep-alive\r\nContent-Length: 02\r\n\r\n"),
	     false, true, OK200 "Content-Length: 2\r\nConnection: close\r\n\r\n"},
	    /* A response keeps its Transfer-Encoding, even when listed. */
	    {S(OK200 "Connection: transfer-encoding, content-length\r\n"
	             "Transfer-Encoding: gzip, chunked\r\nX: 1\r\n\r\n"),
	     false, false, OK200 "Transfer-Encoding: gzip, chunked\r\nX: 1\r\n\r\n"},
	    /* HEAD: Content-Length describes the GET body, and stays. */
	    {S(OK200 "Content-Length: 0100\r\n\r\n"), true, false,
	     OK200 "Content-Length: 100\r\n\r\n"},
	    {S("HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\n"), false, false,
	     "HTTP/1.1 304 Not Modified\r\nETag: \"a\"\r\n\r\n"},
	    {S("HTTP/1.1 401 Unauthorized\r\nUpgrade: h2c\r\nContent-Length: 0\r\n\r\n"), false,
	     true, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = fwd_response(cases[i].in, cases[i].len, cases[i].head, cases[i].close);

		if (strcmp(got, cases[i].want))
			fail_msg("response case %zu:\n got: %s\nwant: %s", i, got, cases[i].want);
		free(got);
	}
}

/* Decode a chunked body the way the proxy does (client.c) and re-frame it. */
static char *reframe(const char *in, size_t len, enum pg_chunked_rc *last)
{
	struct pg_frame ch;
	char *out = NULL;
	size_t olen = 0, ocap = 0, off = 0;

	pg_chunked_init(&ch);
	*last = PG_CHUNKED_MORE;
	while (off < len) {
		size_t used, doff, dlen;

		*last = pg_chunked_feed(&ch, in + off, len - off, &used, &doff, &dlen);
		if (*last == PG_CHUNKED_ERROR)
			break;
		pg_fwd_chunk(in + off + doff, dlen, &out, &olen, &ocap);
		off += used;
		if (*last == PG_CHUNKED_DONE) {
			pg_fwd_last_chunk(&out, &olen, &ocap);
			break;
		}
	}
	pg_bytes_append(&out, &olen, &ocap, "", 1);
	return out;
}

static void test_chunked_reframed(void **state)
{
	static const struct {
		const char *in;
		size_t len;
		const char *want;
	} cases[] = {
	    {S("5\r\nhello\r\n0\r\n\r\n"), "5\r\nhello\r\n0\r\n\r\n"},
	    /* Extensions and upper-case or zero-padded sizes are not passed on. */
	    {S("0005;a=b\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n"),
	     "5\r\nhello\r\na\r\n0123456789\r\n0\r\n\r\n"},
	    /* Trailers are dropped, framing or routing fields above all. */
	    {S("3\r\nabc\r\n0\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n"
	       "Host: evil\r\nAuthorization: x\r\n\r\n"),
	     "3\r\nabc\r\n0\r\n\r\n"},
	    {S("0\r\nX: 1\r\n\r\n"), "0\r\n\r\n"},
	};
	enum pg_chunked_rc rc;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = reframe(cases[i].in, cases[i].len, &rc);

		assert_int_equal(rc, PG_CHUNKED_DONE);
		if (strcmp(got, cases[i].want))
			fail_msg("chunked case %zu:\n got: %s\nwant: %s", i, got, cases[i].want);
		free(got);
	}
}

static void test_list_has(void **state)
{
	static const struct {
		const char *list, *token;
		bool want;
	} cases[] = {
	    {"close", "close", true}, {"a, b ,c", "b", true}, {"a,,\tB\t", "b", true},
	    {"ab", "a", false},       {"a-b", "a", false},    {"", "a", false},
	    {" , ,", "a", false},     {"xa", "a", false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_str l = {cases[i].list, strlen(cases[i].list)};
		struct pg_str t = {cases[i].token, strlen(cases[i].token)};

		if (pg_fwd_list_has(l, t) != cases[i].want)
			fail_msg("list case %zu: \"%s\" has \"%s\"", i, cases[i].list,
			         cases[i].token);
	}
}

static void test_reuse_rule(void **state)
{
	const struct pg_reuse clean = {
	    .request_complete = true,
	    .request_flushed = true,
	    .early = false,
	    .resp_reusable = true,
	    .head_request = false,
	    .open = true,
	    .member = true,
	    .room = true,
	};
	struct pg_reuse r;

	(void)state;
	assert_true(pg_reuse_ok(&clean));
	/* Each single fault alone keeps it out of the pool. */
	r = clean, r.request_complete = false, assert_false(pg_reuse_ok(&r));
	r = clean, r.request_flushed = false, assert_false(pg_reuse_ok(&r));
	r = clean, r.early = true, assert_false(pg_reuse_ok(&r));
	r = clean, r.resp_reusable = false, assert_false(pg_reuse_ok(&r));
	r = clean, r.head_request = true, assert_false(pg_reuse_ok(&r));
	r = clean, r.open = false, assert_false(pg_reuse_ok(&r));
	r = clean, r.member = false, assert_false(pg_reuse_ok(&r));
	r = clean, r.room = false, assert_false(pg_reuse_ok(&r));
}

static void test_early_client(void **state)
{
	(void)state;
	struct pg_frame len1 = {.kind = PG_FRAME_LENGTH, .remaining = 1},
	                len_max = {.kind = PG_FRAME_LENGTH, .remaining = PG_DISCARD_MAX},
	                len_over = {.kind = PG_FRAME_LENGTH, .remaining = PG_DISCARD_MAX + 1},
	                len_huge = {.kind = PG_FRAME_LENGTH, .remaining = UINT64_MAX}, ch;

	pg_chunked_init(&ch);
	assert_true(pg_early_keeps_client(&len1));
	assert_true(pg_early_keeps_client(&len_max));
	assert_false(pg_early_keeps_client(&len_over));
	assert_false(pg_early_keeps_client(&len_huge));
	assert_false(pg_early_keeps_client(&ch)); /* its size is unknown */
	/* after any answer, the backend's or the gateway's own (a 429) */
	assert_int_equal(pg_after_answer(true, false, &len1), PG_AFTER_NEXT);
	assert_int_equal(pg_after_answer(true, false, &ch), PG_AFTER_NEXT); /* read whole */
	assert_int_equal(pg_after_answer(true, true, &len_max), PG_AFTER_DISCARD);
	assert_int_equal(pg_after_answer(true, true, &len_over), PG_AFTER_CLOSE);
	assert_int_equal(pg_after_answer(true, true, &ch), PG_AFTER_CLOSE);
	assert_int_equal(pg_after_answer(false, false, &len1), PG_AFTER_CLOSE);
	assert_int_equal(pg_after_answer(false, true, &len1), PG_AFTER_CLOSE);
}

/* Request identity: X-Forwarded-For appended, X-Request-Id kept or made,
 * traceparent untouched; the response echoes the id. */
static char *fwd_ident(const char *in, struct pg_fwd_ident *id)
{
	static uint64_t seq;
	struct pg_http_request req;
	char *out = NULL;
	size_t olen = 0, ocap = 0;

	assert_true(pg_http_parse_request(in, strlen(in), &req) > 0);
	seq = 41;
	id->boot = 0x0123456789abcdefull;
	id->seq = &seq;
	pg_fwd_request_head(&req, id, &out, &olen, &ocap);
	assert_int_equal(seq, id->made ? 42 : 41); /* advanced for a made id only */
	pg_bytes_append(&out, &olen, &ocap, "", 1);
	return out;
}

static void test_identity(void **state)
{
	struct pg_fwd_ident id = {.client = {S("10.0.0.9")}};
	char *out, *longid, *in;
	struct pg_http_response resp;
	static const char rh[] = "HTTP/1.1 200 OK\r\nX-Request-Id: backend-own\r\n"
	                         "Content-Length: 0\r\n\r\n";
	size_t olen = 0, ocap = 0;

	(void)state;
	/* none sent: XFF is the client, the id is made */
	out = fwd_ident("GET / HTTP/1.1\r\nHost: h\r\ntraceparent: 00-abc-def-01\r\n\r\n", &id);
	assert_string_equal(out, "GET / HTTP/1.1\r\nHost: h\r\ntraceparent: 00-abc-def-01\r\n"
	                         "X-Forwarded-For: 10.0.0.9\r\n"
	                         "X-Request-Id: 0123456789abcdef-000000000000002a\r\n\r\n");
	assert_int_equal(id.id_len, PG_REQUEST_ID_GEN);
	assert_true(id.made);
	assert_memory_equal(out + id.id_off, "0123456789abcdef-000000000000002a", id.id_len);
	free(out);
	/* sent: XFF values joined and appended to; the client's first usable id
	 * kept in place, the others dropped */
	out = fwd_ident("GET / HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1\r\nX-Request-Id: \r\n"
	                "X-Request-Id: abc\r\nx-forwarded-for: 2.2.2.2, 3.3.3.3\r\n"
	                "x-request-id: def\r\nHost: h\r\n\r\n",
	                &id);
	assert_string_equal(out, "GET / HTTP/1.1\r\nX-Request-Id: abc\r\nHost: h\r\n"
	                         "X-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.9\r\n\r\n");
	assert_false(id.made);
	assert_int_equal(id.id_len, 3);
	assert_memory_equal(out + id.id_off, "abc", 3);
	free(out);
	/* an id too long to echo is replaced */
	longid = malloc(PG_REQUEST_ID_MAX + 2);
	memset(longid, 'x', PG_REQUEST_ID_MAX + 1);
	longid[PG_REQUEST_ID_MAX + 1] = 0;
	in = malloc(PG_REQUEST_ID_MAX + 64);
	snprintf(in, PG_REQUEST_ID_MAX + 64,
	         "GET / HTTP/1.1\r\nHost: h\r\nX-Request-Id: %s\r\n\r\n", longid);
	out = fwd_ident(in, &id);
	assert_null(strstr(out, longid));
	assert_int_equal(id.id_len, PG_REQUEST_ID_GEN);
	free(out);
	free(in);
	free(longid);
	/* more X-Forwarded-For fields than are remembered: all joined */
	out = fwd_ident("GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 1\r\nX-Forwarded-For: 2\r\n"
	                "X-Forwarded-For: 3\r\nX-Forwarded-For: 4\r\nX-Forwarded-For: 5\r\n"
	                "X-Forwarded-For: 6\r\nX-Forwarded-For: 7\r\nX-Forwarded-For: 8\r\n"
	                "X-Forwarded-For: 9\r\nX-Request-Id: q\r\n\r\n",
	                &id);
	assert_non_null(
	    strstr(out, "\r\nX-Forwarded-For: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10.0.0.9\r\n"));
	free(out);
	/* no client address: no XFF made up; Connection-listed XFF dropped */
	id = (struct pg_fwd_ident){0};
	out = fwd_ident("GET / HTTP/1.1\r\nHost: h\r\nConnection: x-forwarded-for\r\n"
	                "X-Forwarded-For: 9.9.9.9\r\nX-Request-Id: r1\r\n\r\n",
	                &id);
	assert_string_equal(out, "GET / HTTP/1.1\r\nHost: h\r\nX-Request-Id: r1\r\n\r\n");
	free(out);
	/* the response: the backend's id replaced by ours */
	assert_true(pg_http_parse_response(rh, sizeof(rh) - 1, false, &resp) > 0);
	out = NULL;
	pg_fwd_response_head(rh, sizeof(rh) - 1, &resp,
	                     &(struct pg_fwd_resp){.request_id = {S("r1")}}, &out, &olen, &ocap);
	pg_bytes_append(&out, &olen, &ocap, "", 1);
	assert_string_equal(out,
	                    "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Request-Id: r1\r\n\r\n");
	free(out);
}

/* Tracing on (forward.h): the client's traceparent fields replaced by the
 * gateway's; its tracestate kept with a valid parent, dropped without. */
static void test_trace_context(void **state)
{
	static const char tp[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01";
	struct pg_fwd_ident id = {.traceparent = tp};
	char *out;

	(void)state;
	assert_int_equal(sizeof(tp) - 1, PG_TRACEPARENT_LEN);
	out = fwd_ident("GET / HTTP/1.1\r\nTraceParent: 00-aa-bb-01\r\nHost: h\r\n"
	                "tracestate: a=1\r\ntraceparent: x\r\nX-Request-Id: r\r\n\r\n",
	                &id);
	assert_string_equal(out, "GET / HTTP/1.1\r\nHost: h\r\ntracestate: a=1\r\n"
	                         "X-Request-Id: r\r\n"
	                         "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-"
	                         "1111111111111111-01\r\n\r\n");
	free(out);
	id.drop_tracestate = true;
	out = fwd_ident("GET / HTTP/1.1\r\nHost: h\r\ntracestate: a=1\r\nTRACESTATE: b=2\r\n"
	                "X-Request-Id: r\r\n\r\n",
	                &id);
	assert_string_equal(out, "GET / HTTP/1.1\r\nHost: h\r\nX-Request-Id: r\r\n"
	                         "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-"
	                         "1111111111111111-01\r\n\r\n");
	free(out);
}

/* What the access log and the traces take of a forwarded request line. */
static void test_request_line(void **state)
{
	static const char *const cases[][3] = {
	    {"POST /v1/chat/completions?key=secret HTTP/1.1\r\n", "POST", "/v1/chat/completions"},
	    {"GET / HTTP/1.0\r\n", "GET", "/"},
	    {"GET /x", "GET", ""}, /* no second space: no path */
	    {"nospace", "", ""},
	    {"", "", ""},
	};
	struct pg_str m, p;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pg_fwd_request_line(cases[i][0], strlen(cases[i][0]), &m, &p);
		assert_int_equal(m.len, strlen(cases[i][1]));
		assert_memory_equal(m.p, cases[i][1], m.len);
		assert_int_equal(p.len, strlen(cases[i][2]));
		assert_memory_equal(p.p, cases[i][2], p.len);
	}
	pg_fwd_request_line(NULL, 0, &m, &p); /* no head at all */
	assert_int_equal(m.len + p.len, 0);
}

/* HTTP/1.0 clients: no Transfer-Encoding, keep-alive said out loud. */
static void test_http10_response(void **state)
{
	static const char ch[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX: y\r\n\r\n",
	                  cl[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n";
	struct pg_http_response resp;
	char *out = NULL;
	size_t olen = 0, ocap = 0;

	(void)state;
	assert_true(pg_http_parse_response(ch, sizeof(ch) - 1, false, &resp) > 0);
	pg_fwd_response_head(ch, sizeof(ch) - 1, &resp,
	                     &(struct pg_fwd_resp){.close = true, .http10 = true}, &out, &olen,
	                     &ocap);
	pg_bytes_append(&out, &olen, &ocap, "", 1);
	assert_string_equal(out, "HTTP/1.1 200 OK\r\nX: y\r\nConnection: close\r\n\r\n");
	free(out);
	out = NULL;
	olen = ocap = 0;
	assert_true(pg_http_parse_response(cl, sizeof(cl) - 1, false, &resp) > 0);
	pg_fwd_response_head(cl, sizeof(cl) - 1, &resp, &(struct pg_fwd_resp){.http10 = true}, &out,
	                     &olen, &ocap);
	pg_bytes_append(&out, &olen, &ocap, "", 1);
	assert_string_equal(
	    out, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\n");
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_heads),
	    cmocka_unit_test(test_response_heads),
	    cmocka_unit_test(test_many_connection_fields),
	    cmocka_unit_test(test_chunked_reframed),
	    cmocka_unit_test(test_list_has),
	    cmocka_unit_test(test_reuse_rule),
	    cmocka_unit_test(test_early_client),
	    cmocka_unit_test(test_identity),
	    cmocka_unit_test(test_trace_context),
	    cmocka_unit_test(test_request_line),
	    cmocka_unit_test(test_http10_response),
	};

	return cmocka_run_group_tests_name("forward", tests, NULL, NULL);
}
