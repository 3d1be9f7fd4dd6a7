// SPDX-License-Identifier: MIT
/*
 * Response writing: byte buffers, response heads with the integrity headers
 * every response carries, chunked framing, and the deterministic bulk body.
 * Nothing here does I/O: bytes go to the connection's output buffer and
 * conn.c sends them.
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

void buf_reserve(struct buf *b, size_t extra)
{
	size_t cap;
	char *p;

	if (b->len + extra <= b->cap)
		return;
	if (b->off) { /* drop what was already sent first */
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->len + extra <= b->cap)
			return;
	}
	cap = b->cap ? b->cap : 1024;
	while (cap < b->len + extra)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		oom();
	b->p = p;
	b->cap = cap;
}

void buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return;
	buf_reserve(b, n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

void buf_puts(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0)
			oom();
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		buf_reserve(b, (size_t)n + 1);
	}
}

void buf_reset(struct buf *b)
{
	b->len = b->off = 0;
}

void buf_release(struct buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

const char *status_text(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}

/*
 * Head of the response to c's current request. content_length < 0 means
 * Transfer-Encoding: chunked. extra: more header lines (each ending CRLF)
 * or NULL. Decides whether the connection closes after this response.
 */
void out_head(struct conn *c, int status, const char *ctype, int64_t content_length,
              const char *extra)
{
	struct buf *o = &c->out;

	if (!c->req.keep_alive)
		c->close_after = true;
	buf_printf(o, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n", status, status_text(status), ctype);
	if (content_length >= 0)
		buf_printf(o, "Content-Length: %lld\r\n", (long long)content_length);
	else
		buf_puts(o, "Transfer-Encoding: chunked\r\n");
	buf_printf(o, "X-Backend-Id: %s\r\nX-Body-Length: %llu\r\nX-Body-Crc32: %08x\r\n",
	           g_srv.cfg.id, (unsigned long long)c->req.body_len, c->req.crc);
	if (c->close_after)
		buf_puts(o, "Connection: close\r\n");
	if (extra)
		buf_puts(o, extra);
	buf_puts(o, "\r\n");
	conn_mark_dirty(c);
}

/* A complete response with a body of len bytes (none for HEAD). */
void out_simple(struct conn *c, int status, const char *ctype, const char *body, size_t len)
{
	out_head(c, status, ctype, (int64_t)len, NULL);
	if (!c->req.is_head)
		buf_append(&c->out, body, len);
	conn_response_done(c);
}

/* An OpenAI-style error object. msg: printable ASCII (quotes and
 * backslashes are escaped here). */
void out_error(struct conn *c, int status, const char *msg)
{
	struct buf b = {0};

	buf_puts(&b, "{\"object\":\"error\",\"message\":\"");
	for (; *msg; msg++) {
		if (*msg == '"' || *msg == '\\')
			buf_append(&b, "\\", 1);
		buf_append(&b, msg, 1);
	}
	buf_printf(&b, "\",\"type\":\"%s\",\"param\":null,\"code\":%d}\n",
	           status == 404 ? "NotFoundError" : "BadRequestError", status);
	out_simple(c, status, "application/json", b.p, b.len);
	buf_release(&b);
}

void out_chunk(struct conn *c, const char *data, size_t len)
{
	if (len == 0)
		return; /* a zero-size chunk would end the body */
	buf_printf(&c->out, "%zx\r\n", len);
	buf_append(&c->out, data, len);
	buf_puts(&c->out, "\r\n");
	conn_mark_dirty(c);
}

void out_chunk_end(struct conn *c)
{
	buf_puts(&c->out, "0\r\n\r\n");
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
	struct buf *o = &c->out;

	while (k->made < k->stop_at && o->len - o->off < MOCK_OUT_LOW) {
		uint64_t n = k->total - k->made;
		uint64_t cut;

		if (n > (k->chunked ? MOCK_BULK_CHUNK : 65536))
			n = k->chunked ? MOCK_BULK_CHUNK : 65536;
		if (k->chunked)
			buf_printf(o, "%llx\r\n", (unsigned long long)n);
		cut = k->made + n > k->stop_at ? k->stop_at - k->made : n;
		buf_reserve(o, cut + 2);
		bulk_pattern(k->made, o->p + o->len, cut);
		o->len += cut;
		k->made += cut;
		if (k->chunked && cut == n)
			buf_puts(o, "\r\n");
	}
	if (k->made < k->stop_at)
		return false;
	if (k->active && k->made == k->total && k->chunked)
		buf_puts(o, "0\r\n\r\n");
	k->active = false;
	return true;
}
