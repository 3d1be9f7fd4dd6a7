// SPDX-License-Identifier: MIT
/*
 * The admin API's HTTP framing (admin.h): one exchange read from the bytes
 * received (head, Content-Length or chunked body, the token check), handed
 * to pg_admin_handle (admin.c), and its reply written as bytes. No sockets:
 * admin_listener.c moves the bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "admin/admin.h"
#include "config/config.h"

/* ---- HTTP framing ------------------------------------------------------------ */

static void reply_bytes(struct pg_buf *out, struct pg_admin_reply *r)
{
	if (r->body.oom) {
		pg_buf_free(&r->body);
		pg_admin_reply_error(r, 500, "out of memory");
	}
	pg_buf_printf(out,
	              "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	              "Cache-Control: no-store\r\nConnection: close\r\n",
	              r->status, pg_http_reason(r->status), r->content_type, r->body.len);
	if (r->allow)
		pg_buf_printf(out, "Allow: %s\r\n", r->allow);
	if (r->status == 401)
		pg_buf_puts(out, "WWW-Authenticate: Bearer realm=\"prefixgate\"\r\n");
	pg_buf_puts(out, "\r\n");
	pg_buf_append(out, r->body.p, r->body.len);
	pg_buf_free(&r->body);
}

static bool input_error(struct pg_buf *out, int status)
{
	struct pg_admin_reply r = {0};
	const char *msg = status == 413   ? "request body larger than 16 MiB"
	                  : status == 414 ? "request target too long"
	                  : status == 431 ? "request head too large"
	                  : status == 501 ? "unsupported Transfer-Encoding"
	                  : status == 505 ? "HTTP version not supported"
	                                  : "malformed request";

	pg_admin_reply_error(&r, status, msg);
	reply_bytes(out, &r);
	return true;
}

bool pg_admin_authorized(const struct pg_gateway *gw, const struct pg_http_request *req)
{
	const char *want = gw->cfg ? gw->cfg->admin_token : NULL;
	const struct pg_http_header *h;
	volatile unsigned char diff;
	size_t n, tlen;
	const char *tok;

	if (!want)
		return true;
	h = pg_http_find(req, "Authorization");
	if (!h || h->value.len < 7 || strncasecmp(h->value.p, "Bearer ", 7))
		return false;
	tok = h->value.p + 7;
	tlen = h->value.len - 7;
	n = strlen(want);
	/* Constant time in what the client sent: every byte of the token is
	 * compared whatever the first difference, and the loop runs over the
	 * token's length, not the client's. */
	diff = tlen != n;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)want[i] ^ (unsigned char)(i < tlen ? tok[i] : 0);
	return diff == 0;
}

bool pg_admin_input(struct pg_gateway *gw, struct pg_admin_conn *c, struct pg_buf *out)
{
	struct pg_http_request req;
	struct pg_admin_reply r;
	struct pg_str query = {0};
	const char *body = NULL, *q;
	size_t blen = 0, used, off, dlen;
	ssize_t h;

	/* head, chunk framing and body of the largest request taken */
	if (c->in.len > PG_HTTP_MAX_HEAD + 2 * (size_t)PG_ADMIN_BODY_MAX)
		return input_error(out, 413);
	if (!c->head_done && !pg_http_head_ready(c->in.p, c->in.len, &c->scan))
		return false;
	h = pg_http_parse_request_opts(c->in.p, c->in.len, PG_HTTP_TARGET_BRACKETS, &req);
	if (h <= 0)
		return h < 0 ? input_error(out, (int)-h) : false;
	if (!pg_admin_authorized(gw, &req)) {
		/* At the head: no body of an unauthenticated client is buffered. */
		memset(&r, 0, sizeof(r));
		pg_admin_reply_error(&r, 401,
		                     "missing or wrong admin token: send \"Authorization: Bearer "
		                     "TOKEN\" (--admin-token)");
		reply_bytes(out, &r);
		return true;
	}
	if (!c->head_done) {
		c->head_done = true;
		pg_chunked_init(&c->ch);
		c->ch_pos = (size_t)h;
	}
	if (req.body == PG_BODY_LENGTH) {
		if (req.content_length > PG_ADMIN_BODY_MAX)
			return input_error(out, 413);
		body = c->in.p + h;
		blen = (size_t)req.content_length;
		if (c->in.len - (size_t)h < blen)
			goto more;
	} else if (req.body == PG_BODY_CHUNKED) {
		for (;;) {
			enum pg_chunked_rc rc = pg_chunked_feed(
			    &c->ch, c->in.p + c->ch_pos, c->in.len - c->ch_pos, &used, &off, &dlen);

			if (rc == PG_CHUNKED_ERROR)
				return input_error(out, 400);
			if (rc == PG_CHUNKED_DATA)
				pg_buf_append(&c->body, c->in.p + c->ch_pos + off, dlen);
			c->ch_pos += used;
			if (c->body.len > PG_ADMIN_BODY_MAX)
				return input_error(out, 413);
			if (rc == PG_CHUNKED_MORE)
				goto more;
			if (rc == PG_CHUNKED_DONE)
				break;
		}
		body = c->body.p;
		blen = c->body.len;
	}
	q = memchr(req.target.p, '?', req.target.len);
	if (q)
		query = (struct pg_str){q + 1, (size_t)(req.target.p + req.target.len - q - 1)};
	pg_admin_handle(gw, req.method, req.path, query, body, blen, &r);
	reply_bytes(out, &r);
	return true;
more:
	if (req.expect_continue && !c->continued) {
		c->continued = true;
		pg_buf_puts(out, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	return false;
}

void pg_admin_conn_free(struct pg_admin_conn *c)
{
	pg_buf_free(&c->in);
	pg_buf_free(&c->body);
	memset(c, 0, sizeof(*c));
}

bool pg_admin_head_complete(const struct pg_admin_conn *c)
{
	return c->head_done;
}
