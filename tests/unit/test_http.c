// SPDX-License-Identifier: MIT
/* Unit tests for user/lib/http.c: request and response heads (the chunked
 * decoder, user/lib/http_chunked.c, in test_http_chunked.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/http.h"
#include "lib/http_internal.h"

#define S(lit) lit, sizeof(lit) - 1
#define H11    "Host: a\r\n"

static struct pg_http_request req; /* 5 KiB of headers: not on the stack */

/* ---- malformed requests ---------------------------------------------- */

struct bad_case {
	const char *in;
	size_t len;
	int status;
};

static const struct bad_case bad_requests[] = {
    /* request line */
    {S("GET  / HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET / HTTP/1.1 \r\n" H11 "\r\n"), 400},
    {S("GET /\tHTTP/1.1\r\n" H11 "\r\n"), 400},
    {S(" GET / HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("G(T / HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET http://a/ HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("CONNECT a:443 HTTP/1.1\r\n" H11 "\r\n"), 501}, /* no tunnels, any form */
    {S("CONNECT /x HTTP/1.1\r\n" H11 "\r\n"), 501},
    {S("connect /x HTTP/1.1\r\n" H11 "\r\n"), 501},
    {S("TRACE / HTTP/1.1\r\n" H11 "\r\n"), 405},
    {S("GET /a%00b HTTP/1.1\r\n" H11 "\r\n"), 400}, /* a NUL, once decoded */
    {S("GET /a?q=%00 HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET /a\x01"
       "b HTTP/1.1\r\n" H11 "\r\n"),
     400}, /* raw control bytes */
    {S("GET /a\x7f"
       "b HTTP/1.1\r\n" H11 "\r\n"),
     400},
    {S("GET /a\x00"
       "b HTTP/1.1\r\n" H11 "\r\n"),
     400},
    {S("GET * HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("options * HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET /a#b HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET /a%zz HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET /a\"b HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET /\x80 HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("GET / HTTP/1.1\n" H11 "\r\n"), 400},
    {S("GET / HTTP/1.1\r\r\n" H11 "\r\n"), 400},
    {S("GET / http/1.1\r\n" H11 "\r\n"), 400},
    {S("GET / HTTP/1.10\r\n" H11 "\r\n"), 400},
    {S("GET / HTTP/11\r\n" H11 "\r\n"), 400},
    {S("GET / HTTP/1\r\n" H11 "\r\n"), 400},
    {S("GET /\r\n" H11 "\r\n"), 400},
    {S("GET / HTTP/2.0\r\n" H11 "\r\n"), 505},
    {S("GET / HTTP/1.2\r\n" H11 "\r\n"), 505},
    {S("GET / HTTP/0.9\r\n" H11 "\r\n"), 505},
    {S("\r\r\nGET / HTTP/1.1\r\n" H11 "\r\n"), 400},
    {S("\nGET / HTTP/1.1\r\n" H11 "\r\n"), 400},
    /* field syntax */
    {S("GET / HTTP/1.1\r\n" H11 "Foo : bar\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo\t: bar\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\r\n  b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\r\n\tb\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n Host: a\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\nBar: b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\rb\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo:\nBar: b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\r\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\0b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\x01b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Foo: a\x7f\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 ": novalue\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Fo@o: x\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "NoColon\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "\r\r"), 400},
    /* Content-Length */
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: -1\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: +5\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: 5, 5\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: 5\r\nContent-Length: 5\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: 1 2\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length:\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: 0x10\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: 9223372036854775808\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: 99999999999999999999\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length : 5\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content_Length: 5\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "transfer_encoding: chunked\r\n\r\n"), 400},
    /* Transfer-Encoding */
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: gzip\r\n\r\n"), 501},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: chunked, chunked\r\n\r\n"), 501},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: identity\r\n\r\n"), 501},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: gzip, chunked\r\n\r\n"), 501},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: chunked;x=1\r\n\r\n"), 501},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: chunked\r\n"
       "Transfer-Encoding: chunked\r\n\r\n"),
     501},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Content-Length: 5\r\nTransfer-Encoding: gzip\r\n\r\n"), 400},
    {S("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding : chunked\r\n\r\n"), 400},
    {S("POST / HTTP/1.1\r\n" H11 "Transfer-Encoding: \r\n chunked\r\n\r\n"), 400},
    /* Expect, key, Host */
    {S("POST / HTTP/1.1\r\n" H11 "Expect: 100-continue-please\r\n\r\n"), 417},
    {S("POST / HTTP/1.1\r\n" H11 "Expect: 100-continue, foo\r\n\r\n"), 417},
    {S("GET / HTTP/1.1\r\n" H11 "X-Prefixgate-Key: a\r\nx-prefixgate-key: a\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\n" H11 "Host: a\r\n\r\n"), 400},
    {S("GET / HTTP/1.0\r\n" H11 "HOST: b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), 400},
    {S("GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"), 400},
};

/* Whole input: the expected status. Every prefix: 0 or that same status. */
static void test_bad_requests(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_requests) / sizeof(bad_requests[0]); i++) {
		const struct bad_case *c = &bad_requests[i];
		ssize_t r = pg_http_parse_request(c->in, c->len, &req);
		if (r != -c->status)
			fail_msg("bad_requests[%zu]: got %zd, want %d", i, r, -c->status);
		for (size_t k = 0; k < c->len; k++) {
			r = pg_http_parse_request(c->in, k, &req);
			if (r != 0 && r != -c->status)
				fail_msg("bad_requests[%zu] prefix %zu: got %zd", i, k, r);
		}
	}
}

/* Generated inputs for the size limits. */
static char *repeat_head(const char *pre, char fill, size_t n, const char *post, size_t *len)
{
	size_t a = strlen(pre), b = strlen(post);
	char *p = malloc(a + n + b + 1);
	assert_non_null(p);
	memcpy(p, pre, a);
	memset(p + a, fill, n);
	memcpy(p + a + n, post, b + 1);
	*len = a + n + b;
	return p;
}

static void test_limits(void **state)
{
	size_t len;
	char *p;
	(void)state;

	/* target of exactly PG_HTTP_MAX_TARGET: fine; one more: 414 */
	p = repeat_head("GET /", 'a', PG_HTTP_MAX_TARGET - 1, " HTTP/1.1\r\n" H11 "\r\n", &len);
	assert_int_equal(pg_http_parse_request(p, len, &req), (ssize_t)len);
	assert_int_equal(req.target.len, PG_HTTP_MAX_TARGET);
	free(p);
	p = repeat_head("GET /", 'a', PG_HTTP_MAX_TARGET, " HTTP/1.1\r\n" H11 "\r\n", &len);
	assert_int_equal(pg_http_parse_request(p, len, &req), -414);
	/* known as soon as the target is too long, before the head ends */
	assert_int_equal(pg_http_parse_request(p, PG_HTTP_MAX_TARGET + 5, &req), -414);
	assert_int_equal(pg_http_parse_request(p, PG_HTTP_MAX_TARGET + 4, &req), 0);
	free(p);

	/* head of exactly PG_HTTP_MAX_HEAD: fine; one byte more: 431 */
	const char *pre = "GET / HTTP/1.1\r\n" H11 "X: ";
	size_t fill = PG_HTTP_MAX_HEAD - strlen(pre) - 4;
	p = repeat_head(pre, 'v', fill, "\r\n\r\n", &len);
	assert_int_equal(len, PG_HTTP_MAX_HEAD);
	assert_int_equal(pg_http_parse_request(p, len, &req), PG_HTTP_MAX_HEAD);
	free(p);
	p = repeat_head(pre, 'v', fill + 1, "\r\n\r\n", &len);
	assert_int_equal(pg_http_parse_request(p, len, &req), -431);
	assert_int_equal(pg_http_parse_request(p, len - 1, &req), -431);
	assert_int_equal(pg_http_parse_request(p, PG_HTTP_MAX_HEAD - 1, &req), 0);
	free(p);
	/* no end of head within PG_HTTP_MAX_HEAD bytes: 431, not 0 */
	p = repeat_head(pre, 'v', PG_HTTP_MAX_HEAD, "", &len);
	assert_int_equal(pg_http_parse_request(p, len, &req), -431);
	free(p);

	/* PG_HTTP_MAX_HEADERS fields: fine (Host is one); one more: 431 */
	char *h = malloc(64 * 1024);
	assert_non_null(h);
	for (int extra = 0; extra <= 1; extra++) {
		int n = sprintf(h, "GET / HTTP/1.1\r\n" H11);
		for (int i = 1; i < PG_HTTP_MAX_HEADERS + extra; i++)
			n += sprintf(h + n, "X-%d: %d\r\n", i, i);
		n += sprintf(h + n, "\r\n");
		ssize_t r = pg_http_parse_request(h, (size_t)n, &req);
		assert_int_equal(r, extra ? -431 : n);
		if (!extra) {
			assert_int_equal(req.nheaders, PG_HTTP_MAX_HEADERS);
			assert_memory_equal(req.headers[127].value.p, "127", 3);
		}
	}
	free(h);
}

/* ---- valid requests ---------------------------------------------------- */

struct good_case {
	const char *in;
	size_t len;
	size_t head_len; /* 0: the whole input */
	const char *method, *target, *path, *key;
	int minor;
	enum pg_body_kind body;
	uint64_t cl;
	bool keep_alive, expect_continue;
};

static const struct good_case good_requests[] = {
    {S("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0, "GET", "/", "/", NULL, 1, PG_BODY_NONE, 0, true,
     false},
    {S("POST /v1/chat/completions HTTP/1.1\r\nHost: gw:8080\r\nContent-Length: 123\r\n\r\n"), 0,
     "POST", "/v1/chat/completions", "/v1/chat/completions", NULL, 1, PG_BODY_LENGTH, 123, true,
     false},
    {S("POST /x HTTP/1.1\r\nHost: a\r\ncontent-length: 0\r\n\r\n"), 0, "POST", "/x", "/x", NULL, 1,
     PG_BODY_NONE, 0, true, false},
    {S("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n"), 0, "POST", "/x", "/x", NULL,
     1, PG_BODY_LENGTH, 7, true, false},
    {S("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n"), 0, "POST",
     "/x", "/x", NULL, 1, PG_BODY_LENGTH, INT64_MAX, true, false},
    {S("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"), 0, "POST", "/x", "/x",
     NULL, 1, PG_BODY_CHUNKED, 0, true, false},
    {S("POST /x HTTP/1.1\r\nHost: a\r\ntransfer-encoding:  CHUNKED \r\n\r\n"), 0, "POST", "/x",
     "/x", NULL, 1, PG_BODY_CHUNKED, 0, true, false},
    {S("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"), 0, "GET", "/", "/", NULL, 1,
     PG_BODY_NONE, 0, false, false},
    {S("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo,, Close\r\n\r\n"), 0, "GET", "/", "/", NULL, 1,
     PG_BODY_NONE, 0, false, false},
    {S("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n"), 0, "GET", "/", "/", NULL, 1,
     PG_BODY_NONE, 0, true, false},
    {S("GET / HTTP/1.0\r\n\r\n"), 0, "GET", "/", "/", NULL, 0, PG_BODY_NONE, 0, false, false},
    {S("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), 0, "GET", "/", "/", NULL, 0,
     PG_BODY_NONE, 0, true, false},
    {S("GET / HTTP/1.0\r\nConnection: Upgrade\r\nConnection: Keep-Alive\r\n\r\n"), 0, "GET", "/",
     "/", NULL, 0, PG_BODY_NONE, 0, true, false},
    {S("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"), 0, "GET", "/", "/", NULL, 0,
     PG_BODY_NONE, 0, false, false},
    {S("POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 5\r\n\r\n"), 0,
     "POST", "/x", "/x", NULL, 1, PG_BODY_LENGTH, 5, true, true},
    {S("POST /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"), 0, "POST", "/x",
     "/x", NULL, 0, PG_BODY_LENGTH, 5, false, false},
    {S("GET / HTTP/1.1\r\nHost: a\r\nx-prefixgate-key: \t sess 42 \t\r\n\r\n"), 0, "GET", "/", "/",
     "sess 42", 1, PG_BODY_NONE, 0, true, false},
    {S("POST /invocations?x=1&y=%2F%aa HTTP/1.1\r\nHost: [::1]:80\r\n\r\n"), 0, "POST",
     "/invocations?x=1&y=%2F%aa", "/invocations", NULL, 1, PG_BODY_NONE, 0, true, false},
    {S("GET /a?b?c HTTP/1.1\r\nHost: a\r\n\r\n"), 0, "GET", "/a?b?c", "/a", NULL, 1, PG_BODY_NONE,
     0, true, false},
    {S("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 0, "OPTIONS", "*", "*", NULL, 1, PG_BODY_NONE, 0,
     true, false},
    {S("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"), 0, "GET", "/", "/", NULL, 1, PG_BODY_NONE, 0,
     true, false},
    {S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.1\r\n"), 47, "POST",
     "/", "/", NULL, 1, PG_BODY_LENGTH, 2, true, false},
    {S("PATCH /p HTTP/1.1\r\nhost: h\r\nEmpty:\r\nU: caf\xc3\xa9\r\nT:\tx\ty\t\r\n\r\n"), 0,
     "PATCH", "/p", "/p", NULL, 1, PG_BODY_NONE, 0, true, false},
    {S("GET / HTTP/1.1\r\nHost:\r\n\r\n"), 0, "GET", "/", "/", NULL, 1, PG_BODY_NONE, 0, true,
     false},
    {S("M-SEARCH /x HTTP/1.1\r\nHost: a\r\n\r\n"), 0, "M-SEARCH", "/x", "/x", NULL, 1, PG_BODY_NONE,
     0, true, false},
};

static void assert_str(struct pg_str s, const char *want)
{
	if (!want) {
		assert_int_equal(s.len, 0);
		return;
	}
	if (s.len != strlen(want) || memcmp(s.p, want, s.len) != 0)
		fail_msg("got \"%.*s\", want \"%s\"", (int)s.len, s.p, want);
}

static void test_good_requests(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(good_requests) / sizeof(good_requests[0]); i++) {
		const struct good_case *c = &good_requests[i];
		size_t head = c->head_len ? c->head_len : c->len;
		ssize_t r = pg_http_parse_request(c->in, c->len, &req);
		if (r != (ssize_t)head)
			fail_msg("good_requests[%zu]: got %zd, want %zu", i, r, head);
		assert_int_equal(req.head_len, head);
		assert_str(req.method, c->method);
		assert_str(req.target, c->target);
		assert_str(req.path, c->path);
		assert_str(req.key, c->key);
		assert_int_equal(req.minor, c->minor);
		assert_int_equal(req.body, c->body);
		assert_int_equal(req.content_length, c->cl);
		assert_int_equal(req.keep_alive, c->keep_alive);
		assert_int_equal(req.expect_continue, c->expect_continue);
		/* every strict prefix of the head is incomplete */
		for (size_t k = 0; k < head; k++) {
			r = pg_http_parse_request(c->in, k, &req);
			if (r != 0)
				fail_msg("good_requests[%zu] prefix %zu: got %zd", i, k, r);
		}
	}
}

static void test_headers_and_find(void **state)
{
	static const char in[] = "PATCH /p HTTP/1.1\r\nhost: h\r\nEmpty:\r\n"
	                         "U: caf\xc3\xa9\r\nT:\tx\ty\t\r\n\r\n";
	(void)state;
	assert_int_equal(pg_http_parse_request(in, sizeof(in) - 1, &req), sizeof(in) - 1);
	assert_int_equal(req.nheaders, 4);
	assert_str(req.headers[0].name, "host");
	assert_str(req.headers[0].value, "h");
	assert_str(req.headers[1].value, "");
	assert_str(req.headers[2].value, "caf\xc3\xa9");
	assert_str(req.headers[3].value, "x\ty");
	assert_ptr_equal(pg_http_find(&req, "HOST"), &req.headers[0]);
	assert_ptr_equal(pg_http_find(&req, "t"), &req.headers[3]);
	assert_null(pg_http_find(&req, "Content-Length"));
	assert_null(pg_http_find(&req, "hos"));
	assert_int_equal(req.headers[0].kind, PG_HF_HOST);
	assert_int_equal(req.headers[1].kind, PG_HF_OTHER);
}

/* Every field the gateway knows, in any case; near misses are others. */
static void test_field_kinds(void **state)
{
	static const struct {
		const char *name;
		enum pg_http_field kind;
	} cases[] = {
	    {"Host", PG_HF_HOST},
	    {"expect", PG_HF_EXPECT},
	    {"CONNECTION", PG_HF_CONNECTION},
	    {"Keep-Alive", PG_HF_KEEP_ALIVE},
	    {"Proxy-Connection", PG_HF_PROXY_CONNECTION},
	    {"TE", PG_HF_TE},
	    {"Upgrade", PG_HF_UPGRADE},
	    {"Trailer", PG_HF_TRAILER},
	    {"Content-Length", PG_HF_CONTENT_LENGTH},
	    {"content_length", PG_HF_CONTENT_LENGTH}, /* for the parser to refuse */
	    {"Transfer-Encoding", PG_HF_TRANSFER_ENCODING},
	    {"transfer_encoding", PG_HF_TRANSFER_ENCODING},
	    {"X-Forwarded-For", PG_HF_X_FORWARDED_FOR},
	    {"x-request-id", PG_HF_X_REQUEST_ID},
	    {"X-Prefixgate-Key", PG_HF_X_PREFIXGATE_KEY},
	    {"keep_alive", PG_HF_OTHER},
	    {"x_request_id", PG_HF_OTHER},
	    {"Hosts", PG_HF_OTHER},
	    {"Tf", PG_HF_OTHER},
	    {"Content-Type", PG_HF_OTHER},
	    {"X-Prefixgate-Kex", PG_HF_OTHER},
	    {"", PG_HF_OTHER},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (pg_http_field_kind(cases[i].name, strlen(cases[i].name)) != cases[i].kind)
			fail_msg("%s: kind %d", cases[i].name,
			         pg_http_field_kind(cases[i].name, strlen(cases[i].name)));
}

/* Trickled one byte at a time: ready exactly when the head is complete,
 * and whenever ready, the parser has a verdict (never 0). */
static void test_head_ready(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(good_requests) / sizeof(good_requests[0]); i++) {
		const struct good_case *c = &good_requests[i];
		size_t head = c->head_len ? c->head_len : c->len, scan = 0;
		for (size_t k = 0; k <= head; k++) {
			bool ready = pg_http_head_ready(c->in, k, &scan);
			if (ready != (k == head))
				fail_msg("good_requests[%zu] len %zu: ready %d", i, k, ready);
		}
		assert_true(pg_http_head_ready(c->in, head, &scan)); /* asking again */
	}
	size_t nready = 0;
	for (size_t i = 0; i < sizeof(bad_requests) / sizeof(bad_requests[0]); i++) {
		const struct bad_case *c = &bad_requests[i];
		size_t scan = 0;
		for (size_t k = 0; k <= c->len; k++) {
			if (!pg_http_head_ready(c->in, k, &scan))
				continue;
			ssize_t r = pg_http_parse_request(c->in, k, &req);
			if (r != -c->status)
				fail_msg("bad_requests[%zu] ready at %zu: got %zd", i, k, r);
			nready++;
			break;
		}
	}
	/* only "\r\r" at the end of the head leaves no empty line to find */
	assert_int_equal(nready, sizeof(bad_requests) / sizeof(bad_requests[0]) - 1);

	char *p = malloc(PG_HTTP_MAX_HEAD);
	size_t scan = 0;
	assert_non_null(p);
	memset(p, 'a', PG_HTTP_MAX_HEAD);
	memcpy(p, "\r\n\r\nGET /", 10);
	assert_false(pg_http_head_ready(p, PG_HTTP_MAX_HEAD - 1, &scan));
	assert_true(pg_http_head_ready(p, PG_HTTP_MAX_HEAD, &scan));
	free(p);
}

/* ---- responses ---------------------------------------------------------- */

struct resp_case {
	const char *in;
	size_t len;
	bool head_request;
	int ret; /* < 0: expected error; else 1 = the whole input is the head */
	int status;
	int minor;
	enum pg_body_kind body;
	uint64_t cl;
	bool keep_alive;
};

static const struct resp_case responses[] = {
    {S("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), false, 1, 200, 1, PG_BODY_LENGTH, 5, true},
    {S("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), false, 1, 200, 1, PG_BODY_NONE, 0, true},
    {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), false, 1, 200, 1, PG_BODY_CHUNKED,
     0, true},
    {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"), false, 1, 200, 1,
     PG_BODY_CHUNKED, 0, true},
    {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"), false, 1, 200, 1,
     PG_BODY_EOF, 0, false},
    {S("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"), false, 1, 200, 1, PG_BODY_EOF, 0,
     false},
    {S("HTTP/1.1 204 No Content\r\n\r\n"), false, 1, 204, 1, PG_BODY_NONE, 0, true},
    {S("HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n"), false, 1, 304, 1, PG_BODY_NONE,
     100, true},
    {S("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"), true, 1, 200, 1, PG_BODY_NONE, 100, true},
    {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), true, 1, 200, 1, PG_BODY_NONE, 0,
     true},
    {S("HTTP/1.1 100 Continue\r\n\r\n"), false, 1, 100, 1, PG_BODY_NONE, 0, true},
    {S("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"), false, 1, 103, 1, PG_BODY_NONE, 0, true},
    {S("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n"), false, 1, 200, 0, PG_BODY_LENGTH, 5, false},
    {S("HTTP/1.0 200 OK\r\nContent-Length: 5\r\nConnection: Keep-Alive\r\n\r\n"), false, 1, 200, 0,
     PG_BODY_LENGTH, 5, true},
    {S("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"), false, 1, 200, 1,
     PG_BODY_LENGTH, 5, false},
    {S("HTTP/1.1 200\r\nContent-Length: 5\r\n\r\n"), false, 1, 200, 1, PG_BODY_LENGTH, 5, true},
    {S("HTTP/1.1 503 \r\nContent-Length: 5\r\n\r\n"), false, 1, 503, 1, PG_BODY_LENGTH, 5, true},
    {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), false, -400,
     0, 0, 0, 0, false},
    {S("HTTP/1.1 204 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"), false, -400,
     0, 0, 0, 0, false},
    {S("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), false, -400, 0, 0, 0, 0,
     false},
    {S("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n"), false, -400, 0, 0, 0,
     0, false},
    {S("HTTP/1.1 200 OK\r\nTransfer_Encoding: chunked\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 200 OK\r\nContent-Length: 5,5\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 20 OK\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 2000 OK\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 099 OK\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 600 OK\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/2 200 OK\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/2.0 200 OK\r\n\r\n"), false, -505, 0, 0, 0, 0, false},
    {S("HTTP/1.1 200 OK\nContent-Length: 5\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n X: y\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
    {S("HTTP/1.1 200 O\x01K\r\n\r\n"), false, -400, 0, 0, 0, 0, false},
};

static void test_responses(void **state)
{
	struct pg_http_response resp;
	(void)state;
	for (size_t i = 0; i < sizeof(responses) / sizeof(responses[0]); i++) {
		const struct resp_case *c = &responses[i];
		ssize_t want = c->ret < 0 ? c->ret : (ssize_t)c->len;
		ssize_t r = pg_http_parse_response(c->in, c->len, c->head_request, &resp);
		if (r != want)
			fail_msg("responses[%zu]: got %zd, want %zd", i, r, want);
		for (size_t k = 0; k < c->len; k++) {
			ssize_t rk = pg_http_parse_response(c->in, k, c->head_request, &resp);
			if (rk != 0 && rk != (c->ret < 0 ? c->ret : 0))
				fail_msg("responses[%zu] prefix %zu: got %zd", i, k, rk);
		}
		if (c->ret < 0)
			continue;
		pg_http_parse_response(c->in, c->len, c->head_request, &resp);
		assert_int_equal(resp.head_len, c->len);
		assert_int_equal(resp.status, c->status);
		assert_int_equal(resp.minor, c->minor);
		assert_int_equal(resp.body, c->body);
		assert_int_equal(resp.content_length, c->cl);
		if (resp.keep_alive != c->keep_alive)
			fail_msg("responses[%zu]: keep_alive %d", i, resp.keep_alive);
	}
}

/* The head parser's tables are the same sets as the rules in pg_frame.h
 * that the chunked decoder and the BPF programs use; hex digits too. */
static void test_char_classes(void **state)
{
	(void)state;
	for (int c = 0; c < 256; c++) {
		assert_int_equal(tchar[c], pg_frame_tchar((unsigned char)c));
		assert_int_equal(fchar[c], pg_frame_fchar((unsigned char)c));
	}
	for (int c = 0; c < 256; c++) {
		int want = c >= '0' && c <= '9'   ? c - '0'
		           : c >= 'a' && c <= 'f' ? c - 'a' + 10
		           : c >= 'A' && c <= 'F' ? c - 'A' + 10
		                                  : -1;

		assert_int_equal(pg_frame_hex((unsigned char)c), want);
	}
}

/* '[' and ']' raw in a target: refused by the proxy's parse, taken by the
 * admin API's (DELETE /backends/[::1]:8000). */
static void test_target_brackets(void **state)
{
	static const char in[] = "DELETE /backends/[::1]:8000?x=[1] HTTP/1.1\r\nHost: x\r\n\r\n";

	(void)state;
	assert_int_equal(pg_http_parse_request(in, strlen(in), &req), -400);
	assert_int_equal(pg_http_parse_request_opts(in, strlen(in), 0, &req), -400);
	assert_int_equal(pg_http_parse_request_opts(in, strlen(in), PG_HTTP_TARGET_BRACKETS, &req),
	                 (ssize_t)strlen(in));
	assert_str(req.path, "/backends/[::1]:8000");
	assert_str(req.target, "/backends/[::1]:8000?x=[1]");
	/* other bytes stay refused */
	assert_int_equal(pg_http_parse_request_opts("GET /a{b} HTTP/1.1\r\nHost: x\r\n\r\n", 34,
	                                            PG_HTTP_TARGET_BRACKETS, &req),
	                 -400);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_requests),    cmocka_unit_test(test_limits),
	    cmocka_unit_test(test_good_requests),   cmocka_unit_test(test_headers_and_find),
	    cmocka_unit_test(test_head_ready),      cmocka_unit_test(test_responses),
	    cmocka_unit_test(test_char_classes),    cmocka_unit_test(test_field_kinds),
	    cmocka_unit_test(test_target_brackets),
	};
	return cmocka_run_group_tests_name("http", tests, NULL, NULL);
}
