// SPDX-License-Identifier: MIT
/*
 * Response writing: the out-of-memory rule for byte buffers, response heads
 * with the integrity headers every response carries, chunked framing, and
 * the deterministic bulk body. Nothing here does I/O: bytes go to the
 * connection's output buffer and conn.c sends them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mockllm.h"

static void oom(void)
{
	fprintf(stderr, "mockllm: out of memory growing a buffer\n");
	abort();
}

char *mock_room(struct pg_buf *b, size_t n)
{
	char *d = pg_buf_reserve(b, n);

	if (!d)
		oom();
	return d;
}

void mock_buf_ok(const struct pg_buf *b)
{
	if (b->oom)
		oom();
}

/*
 * Head of the response to c's current request. content_length < 0 means
 * Transfer-Encoding: chunked. extra: more header lines (each ending CRLF)
 * or NULL. Decides whether the connection closes after this response.
 */
void out_head(struct conn *c, int status, const char *ctype, int64_t content_length,
              const char *extra)
{
	struct pg_buf *o = &c->out;

	if (!c->req.keep_alive)
		c->close_after = true;
	pg_buf_printf(o, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", status, pg_http_reason(status),
	              ctype);
	if (content_length >= 0)
		pg_buf_printf(o, "Content-Length: %lld\r\n", (long long)content_length);
	else
		pg_buf_puts(o, "Transfer-Encoding: chunked\r\n");
	pg_buf_printf(o, "X-Backend-Id: %s\r\nX-Body-Length: %llu\r\nX-Body-Crc32: %08x\r\n",
	              g_srv.cfg.id, (unsigned long long)c->req.body_len, c->req.crc);
	if (c->close_after)
		pg_buf_puts(o, "Connection: close\r\n");
	pg_buf_append(o, c->req.seen, c->req.seen_len);
	if (extra)
		pg_buf_puts(o, extra);
	pg_buf_puts(o, "\r\n");
	conn_mark_dirty(c);
}

/* A complete response with a body of len bytes (none for HEAD). */
void out_simple(struct conn *c, int status, const char *ctype, const char *body, size_t len)
{
	out_head(c, status, ctype, (int64_t)len, NULL);
	if (!c->req.is_head)
		pg_buf_append(&c->out, body, len);
	conn_response_done(c);
}

/* An OpenAI-style error object. msg: printable ASCII (quotes and
 * backslashes are escaped here). */
void out_error(struct conn *c, int status, const char *msg)
{
	struct pg_buf b = {0};

	pg_buf_puts(&b, "{\"object\":\"error\",\"message\":\"");
	for (; *msg; msg++) {
		if (*msg == '"' || *msg == '\\')
			pg_buf_append(&b, "\\", 1);
		pg_buf_append(&b, msg, 1);
	}
	pg_buf_printf(&b, "\",\"type\":\"%s\",\"param\":null,\"code\":%d}\n",
	              status == 404   ? "NotFoundError"
	              : status >= 500 ? "InternalServerError"
	                              : "BadRequestError",
	              status);
	mock_buf_ok(&b);
	out_simple(c, status, "application/json", b.p, b.len);
	pg_buf_free(&b);
}

void out_chunk(struct conn *c, const char *data, size_t len)
{
	if (len == 0)
		return; /* a zero-size chunk would end the body */
	pg_buf_printf(&c->out, "%zx\r\n", len);
	pg_buf_append(&c->out, data, len);
	pg_buf_puts(&c->out, "\r\n");
	conn_mark_dirty(c);
}

void out_chunk_end(struct conn *c)
{
	pg_buf_puts(&c->out, "0\r\n\r\n");
	conn_mark_dirty(c);
}

/* Add 16 to a 15-digit zero-padded decimal number. */
static void dec_add16(char *d)
{
	int v = d[14] - '0' + 6, carry = v / 10;

	d[14] = (char)('0' + v % 10);
	v = d[13] - '0' + 1 + carry;
	carry = v / 10;
	d[13] = (char)('0' + v % 10);
	for (int i = 12; carry && i >= 0; i--) {
		v = d[i] - '0' + 1;
		carry = v / 10;
		d[i] = (char)('0' + v % 10);
	}
}

/*
 * dst[0..len) = bytes [offset, offset + len) of the infinite pattern made of
 * 16-byte lines sprintf("%015llu\n", offset_of_line).
 */
void bulk_pattern(uint64_t offset, char *dst, size_t len)
{
	uint64_t line = offset & ~(uint64_t)15;
	size_t skip = (size_t)(offset - line);
	char cur[17];

	snprintf(cur, sizeof(cur), "%015llu\n", (unsigned long long)(line % 1000000000000000ull));
	while (len) {
		size_t n = 16 - skip;

		if (n > len)
			n = len;
		memcpy(dst, cur + skip, n);
		dst += n;
		len -= n;
		skip = 0;
		dec_add16(cur);
	}
}

void out_bulk_start(struct conn *c, uint64_t total, bool chunked, uint64_t stop_at)
{
	c->bulk.active = true;
	c->bulk.chunked = chunked;
	c->bulk.total = total;
	c->bulk.stop_at = stop_at < total ? stop_at : total;
	c->bulk.made = 0;
	conn_mark_dirty(c);
}

/*
 * Generate more of the bulk body while little output is pending: memory
 * stays bounded whatever the body size, the socket paces generation.
 * Returns true once everything to be generated has been (the body, its
 * chunked terminator, or the part sent before a reset-mid-body).
 */
bool out_bulk_fill(struct conn *c)
{
	struct bulk *k = &c->bulk;
	struct pg_buf *o = &c->out;

	while (k->made < k->stop_at && o->len - o->off < MOCK_OUT_LOW) {
		uint64_t n = k->total - k->made;
		uint64_t cut;

		if (n > (k->chunked ? MOCK_BULK_CHUNK : 65536))
			n = k->chunked ? MOCK_BULK_CHUNK : 65536;
		if (k->chunked)
			pg_buf_printf(o, "%llx\r\n", (unsigned long long)n);
		cut = k->made + n > k->stop_at ? k->stop_at - k->made : n;
		bulk_pattern(k->made, mock_room(o, cut + 2), cut);
		o->len += cut;
		k->made += cut;
		if (k->chunked && cut == n)
			pg_buf_puts(o, "\r\n");
	}
	if (k->made < k->stop_at)
		return false;
	if (k->active && k->made == k->total && k->chunked)
		pg_buf_puts(o, "0\r\n\r\n");
	k->active = false;
	return true;
}
