// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over user/lib/http.c. Each input is used as a request head,
 * as a response head (after a GET and after a HEAD) and as a chunked body
 * (after the request head if one parsed, else from its first byte). Every
 * parser also gets the input in pieces whose sizes come from the input
 * bytes, as a socket would deliver it. Invariants: results point inside the
 * input, a complete head gives the same result at every later read, a
 * prefix of a complete head is "need more", pg_http_head_ready kept between
 * reads agrees with a fresh scan and stays true, and the chunked decoder
 * decodes the same bytes and stops at the same offset however it is fed
 * (DONE and ERROR stay put). A head the gateway rewrites (forward.h)
 * parses again, framed the same, with no field a Connection field named;
 * a chunked body re-framed decodes to the same bytes.
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include "lib/buf.h"
#include "lib/forward.h"
#include "fuzz.h"
#include "lib/http.h"

static bool is_error(ssize_t r)
{
	return r == -400 || r == -405 || r == -414 || r == -417 || r == -431 || r == -501 ||
	       r == -505;
}

/* s lies inside buf[0..end). */
static bool str_within(struct pg_str s, const char *buf, size_t end)
{
	if (!s.len)
		return true;
	return s.p >= buf && s.p <= buf + end && s.len <= (size_t)(buf + end - s.p);
}

static bool str_same(struct pg_str a, struct pg_str b)
{
	return a.len == b.len && (!a.len || a.p == b.p);
}

static void check_request_fields(const struct pg_http_request *r, const char *buf, ssize_t n)
{
	FUZZ_CHECK(r->head_len == (size_t)n);
	FUZZ_CHECK(str_within(r->method, buf, (size_t)n) && r->method.len > 0);
	FUZZ_CHECK(str_within(r->target, buf, (size_t)n) && r->target.len > 0);
	FUZZ_CHECK(r->target.len <= PG_HTTP_MAX_TARGET);
	FUZZ_CHECK(str_within(r->path, buf, (size_t)n) && r->path.len <= r->target.len);
	FUZZ_CHECK(str_within(r->key, buf, (size_t)n));
	FUZZ_CHECK(r->minor == 0 || r->minor == 1);
	FUZZ_CHECK(r->body >= PG_BODY_NONE && r->body <= PG_BODY_CHUNKED);
	FUZZ_CHECK(r->nheaders <= PG_HTTP_MAX_HEADERS);
	for (size_t i = 0; i < r->nheaders; i++) {
		FUZZ_CHECK(str_within(r->headers[i].name, buf, (size_t)n));
		FUZZ_CHECK(r->headers[i].name.len > 0);
		FUZZ_CHECK(str_within(r->headers[i].value, buf, (size_t)n));
	}
	if (r->nheaders) {
		/* a lookup by a present name finds a header with that name */
		char name[64];
		size_t nl = r->headers[0].name.len < sizeof(name) - 1 ? r->headers[0].name.len
		                                                      : sizeof(name) - 1;
		const struct pg_http_header *h;

		memcpy(name, r->headers[0].name.p, nl);
		name[nl] = 0;
		h = pg_http_find(r, name);
		if (nl == r->headers[0].name.len && !memchr(name, 0, nl)) {
			FUZZ_CHECK(h != NULL);
			FUZZ_CHECK(h->name.len == nl && !strncasecmp(h->name.p, name, nl));
		}
	}
}

static void check_same_request(const struct pg_http_request *a, const struct pg_http_request *b)
{
	FUZZ_CHECK(str_same(a->method, b->method) && str_same(a->target, b->target));
	FUZZ_CHECK(str_same(a->path, b->path) && str_same(a->key, b->key));
	FUZZ_CHECK(a->minor == b->minor && a->body == b->body);
	FUZZ_CHECK(a->body != PG_BODY_LENGTH || a->content_length == b->content_length);
	FUZZ_CHECK(a->keep_alive == b->keep_alive && a->expect_continue == b->expect_continue);
	FUZZ_CHECK(a->head_len == b->head_len && a->nheaders == b->nheaders);
	for (size_t i = 0; i < a->nheaders; i++)
		FUZZ_CHECK(str_same(a->headers[i].name, b->headers[i].name) &&
		           str_same(a->headers[i].value, b->headers[i].value));
}

/* The rewritten request head parses, is framed the same, and keeps none of
 * the fields its Connection fields listed (Host excepted). */
static void check_forward_request(const struct pg_http_request *r)
{
	static struct pg_http_request again;
	char *out = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;

	/* With identity fields: still one head, the id where it says. */
	{
		uint64_t seq = 0;
		struct pg_fwd_ident id = {.client = {"192.0.2.1", 9}, .boot = 0xaa, .seq = &seq};

		pg_fwd_request_head(r, &id, &out, &len, &cap);
		FUZZ_CHECK(len >= 4 && !memcmp(out + len - 4, "\r\n\r\n", 4));
		FUZZ_CHECK(id.id_off + id.id_len <= len);
		FUZZ_CHECK(id.id_len > 0 && id.id_len <= PG_REQUEST_ID_MAX && seq == id.made);
		if (id.made)
			FUZZ_CHECK(
			    id.id_len == 33 &&
			    !memcmp(out + id.id_off, "00000000000000aa-0000000000000001", 33));
		free(out);
		out = NULL;
		len = cap = 0;
	}
	pg_fwd_request_head(r, NULL, &out, &len, &cap);
	n = pg_http_parse_request(out, len, &again);
	if (len >= PG_HTTP_MAX_HEAD) { /* canonical framing can add a byte or two */
		free(out);
		return;
	}
	FUZZ_CHECK(n > 0 && (size_t)n == len);
	FUZZ_CHECK(again.body == r->body && again.content_length == r->content_length);
	FUZZ_CHECK(again.method.len == r->method.len && again.target.len == r->target.len);
	FUZZ_CHECK(!memcmp(again.target.p, r->target.p, r->target.len));
	FUZZ_CHECK(again.minor == r->minor && !again.expect_continue);
	for (size_t i = 0; i < again.nheaders; i++) {
		struct pg_str name = again.headers[i].name;

		FUZZ_CHECK(!pg_fwd_own_field(name));
		if (pg_name_is(name, "host") || pg_name_is(name, "content-length") ||
		    pg_name_is(name, "transfer-encoding"))
			continue;
		for (size_t j = 0; j < r->nheaders; j++)
			if (pg_name_is(r->headers[j].name, "connection"))
				FUZZ_CHECK(!pg_fwd_list_has(r->headers[j].value, name));
	}
	free(out);
}

/* The rewritten response head parses with the same framing. */
static void check_forward_response(const char *buf, const struct pg_http_response *r, bool head)
{
	struct pg_http_response again;
	char *out = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;

	/* For an HTTP/1.0 client: never a Transfer-Encoding (RFC 9112 §6.1). */
	pg_fwd_response_head(buf, r->head_len, r,
	                     &(struct pg_fwd_resp){.close = true, .http10 = true}, &out, &len,
	                     &cap);
	if (len < PG_HTTP_MAX_HEAD) {
		n = pg_http_parse_response(out, len, head, &again);
		FUZZ_CHECK(n > 0 && (size_t)n == len && again.body != PG_BODY_CHUNKED);
	}
	free(out);
	out = NULL;
	len = cap = 0;
	pg_fwd_response_head(buf, r->head_len, r, &(struct pg_fwd_resp){.close = true}, &out, &len,
	                     &cap);
	n = pg_http_parse_response(out, len, head, &again);
	if (len >= PG_HTTP_MAX_HEAD) { /* "Connection: close" was added */
		free(out);
		return;
	}
	FUZZ_CHECK(n > 0 && (size_t)n == len);
	FUZZ_CHECK(again.status == r->status && again.body == r->body);
	FUZZ_CHECK(again.has_length == r->has_length && again.content_length == r->content_length);
	FUZZ_CHECK(!again.keep_alive);
	free(out);
}

/* The request parser, whole and read in pieces; returns the head length. */
static ssize_t check_request(const char *buf, size_t len, struct fuzz_rng *rng)
{
	static struct pg_http_request whole, part;
	ssize_t rn = pg_http_parse_request(buf, len, &whole), rk;
	size_t got = 0, scan = 0, fresh;
	bool ready = false, r;

	FUZZ_CHECK(rn == 0 || is_error(rn) || (rn > 0 && (size_t)rn <= len));
	if (rn == 0)
		FUZZ_CHECK(len < PG_HTTP_MAX_HEAD);
	if (rn > 0) {
		check_request_fields(&whole, buf, rn);
		check_forward_request(&whole);
	}
	while (got < len) {
		got += fuzz_piece(rng, len - got);
		r = pg_http_head_ready(buf, got, &scan);
		FUZZ_CHECK(scan <= got);
		fresh = 0;
		FUZZ_CHECK(r == pg_http_head_ready(buf, got, &fresh));
		FUZZ_CHECK(!ready || r); /* once true, stays true */
		ready = r;
		rk = pg_http_parse_request(buf, got, &part);
		if (rk > 0)
			FUZZ_CHECK(ready);
		if (rn > 0 && got >= (size_t)rn) {
			FUZZ_CHECK(rk == rn);
			check_same_request(&whole, &part);
		} else if (rn > 0) {
			FUZZ_CHECK(rk == 0);
		} else {
			FUZZ_CHECK(rk == 0 || rk == rn);
		}
	}
	return rn;
}

static void check_same_response(const struct pg_http_response *a, const struct pg_http_response *b)
{
	FUZZ_CHECK(a->status == b->status && a->minor == b->minor && a->body == b->body);
	FUZZ_CHECK(a->body != PG_BODY_LENGTH || a->content_length == b->content_length);
	FUZZ_CHECK(a->keep_alive == b->keep_alive && a->head_len == b->head_len);
}

static void check_response(const char *buf, size_t len, bool head, struct fuzz_rng *rng)
{
	struct pg_http_response whole, part;
	ssize_t rn = pg_http_parse_response(buf, len, head, &whole), rk;
	size_t got = 0;

	FUZZ_CHECK(rn <= 0 || (size_t)rn <= len);
	if (rn == 0)
		FUZZ_CHECK(len < PG_HTTP_MAX_HEAD);
	if (rn > 0) {
		FUZZ_CHECK(whole.head_len == (size_t)rn);
		FUZZ_CHECK(whole.status >= 100 && whole.status <= 999);
		FUZZ_CHECK(whole.minor == 0 || whole.minor == 1);
		FUZZ_CHECK(whole.body >= PG_BODY_NONE && whole.body <= PG_BODY_EOF);
		if (head || whole.status < 200 || whole.status == 204 || whole.status == 304)
			FUZZ_CHECK(whole.body == PG_BODY_NONE);
		check_forward_response(buf, &whole, head);
	}
	while (got < len) {
		got += fuzz_piece(rng, len - got);
		rk = pg_http_parse_response(buf, got, head, &part);
		if (rn > 0 && got >= (size_t)rn) {
			FUZZ_CHECK(rk == rn);
			check_same_response(&whole, &part);
		} else if (rn > 0) {
			FUZZ_CHECK(rk == 0);
		} else {
			FUZZ_CHECK(rk == 0 || rk == rn);
		}
	}
}

struct dechunk {
	enum pg_chunked_rc rc;
	size_t pos;     /* bytes consumed in all */
	size_t out_len; /* decoded bytes */
};

/* Feed buf[0..len) to a fresh decoder, `avail` growing by pieces (whole at
 * once when rng is NULL), each piece fed until the decoder wants more. */
static struct dechunk dechunk(const char *buf, size_t len, struct fuzz_rng *rng, char *out)
{
	struct pg_frame c;
	struct dechunk d = {PG_CHUNKED_MORE, 0, 0};
	size_t avail = 0, used, off, dlen;

	pg_chunked_init(&c);
	while (avail < len && d.rc == PG_CHUNKED_MORE) {
		avail += rng ? fuzz_piece(rng, len - avail) : len;
		for (;;) {
			used = off = dlen = (size_t)-1;
			d.rc = pg_chunked_feed(&c, buf + d.pos, avail - d.pos, &used, &off, &dlen);
			FUZZ_CHECK(used <= avail - d.pos);
			if (d.rc == PG_CHUNKED_DATA) {
				FUZZ_CHECK(dlen > 0 && off <= used && dlen <= used - off);
				memcpy(out + d.out_len, buf + d.pos + off, dlen);
				d.out_len += dlen;
			} else {
				FUZZ_CHECK(dlen == 0);
			}
			d.pos += used;
			if (d.rc == PG_CHUNKED_MORE)
				FUZZ_CHECK(d.pos == avail);
			if (d.rc != PG_CHUNKED_DATA)
				break;
		}
	}
	if (d.rc == PG_CHUNKED_DONE || d.rc == PG_CHUNKED_ERROR) {
		/* final states stay final and take nothing more */
		enum pg_chunked_rc again =
		    pg_chunked_feed(&c, buf + d.pos, len - d.pos, &used, &off, &dlen);
		FUZZ_CHECK(again == d.rc && used == 0 && dlen == 0);
	}
	return d;
}

static void check_chunked(const char *buf, size_t len, struct fuzz_rng *rng)
{
	char *a = malloc(len + 1), *b = malloc(len + 1);
	struct dechunk whole, split;

	FUZZ_CHECK(a && b);
	whole = dechunk(buf, len, NULL, a);
	split = dechunk(buf, len, rng, b);
	FUZZ_CHECK(whole.rc == split.rc);
	FUZZ_CHECK(whole.pos == split.pos);
	FUZZ_CHECK(whole.out_len == split.out_len && !memcmp(a, b, whole.out_len));
	FUZZ_CHECK(whole.out_len <= whole.pos);
	if (whole.rc == PG_CHUNKED_DONE) {
		/* Re-framed as client.c does (one chunk here), it decodes the same. */
		char *re = NULL, *c = malloc(whole.out_len + 1);
		size_t rlen = 0, rcap = 0;
		struct dechunk back;

		FUZZ_CHECK(c != NULL);
		pg_fwd_chunk(a, whole.out_len, &re, &rlen, &rcap);
		pg_fwd_last_chunk(&re, &rlen, &rcap);
		back = dechunk(re, rlen, rng, c);
		FUZZ_CHECK(back.rc == PG_CHUNKED_DONE && back.pos == rlen);
		FUZZ_CHECK(back.out_len == whole.out_len && !memcmp(a, c, whole.out_len));
		free(re);
		free(c);
	}
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct fuzz_rng rng;
	ssize_t head;

	fuzz_rng_seed(&rng, data, size);
	head = check_request(buf, size, &rng);
	check_response(buf, size, false, &rng);
	check_response(buf, size, true, &rng);
	if (head > 0)
		check_chunked(buf + head, size - (size_t)head, &rng);
	else
		check_chunked(buf, size, &rng);
	return 0;
}
