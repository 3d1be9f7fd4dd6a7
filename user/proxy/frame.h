/* SPDX-License-Identifier: MIT */
/*
 * A response's body framing as a backend connection reads it (conn.h
 * pg_upstream.frame): from its head, then over its body bytes to find
 * its end. One set of rules for every response the gateway reads: a
 * client's, forwarded (upstream.c), and a prefill leg's, kept (pd.c).
 * Inline: run on every receive of a response body.
 */
#ifndef PG_PROXY_FRAME_H
#define PG_PROXY_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include "pg_frame.h"
#include "lib/http.h"

/* The framing of a response's body from its head, into f (PG_FRAME_NONE:
 * it ends with the connection); true when no body follows the head. */
static inline bool pg_response_frame(const struct pg_http_response *resp, struct pg_frame *f)
{
	switch (resp->body) {
	case PG_BODY_LENGTH:
		*f = (struct pg_frame){.kind = PG_FRAME_LENGTH, .remaining = resp->content_length};
		return !resp->content_length;
	case PG_BODY_CHUNKED:
		pg_chunked_init(f);
		return false;
	case PG_BODY_EOF:
		*f = (struct pg_frame){.kind = PG_FRAME_NONE};
		return false;
	default:
		*f = (struct pg_frame){.kind = PG_FRAME_NONE};
		return true;
	}
}

/* Body bytes buf[0, len) of a response framed by f: *take of them are
 * its own (the rest came after its end: its connection is not to be
 * reused), *done once its end is among them; false (*take: the bytes
 * before it) on a broken chunked framing. Each piece of its data (a
 * chunked body's, de-chunked) goes to data(arg, p, n) as it is taken,
 * unless data is NULL. */
static inline bool pg_frame_take(struct pg_frame *f, const char *buf, size_t len, size_t *take,
                                 bool *done, void (*data)(void *arg, const char *p, size_t n),
                                 void *arg)
{
	*done = false;
	if (f->kind == PG_FRAME_LENGTH) {
		*take = len < f->remaining ? len : (size_t)f->remaining;
		f->remaining -= *take;
		*done = !f->remaining;
	} else if (f->kind != PG_FRAME_CHUNKED) {
		*take = len; /* the body ends with the connection */
	} else {
		for (*take = 0; *take < len;) {
			size_t used, doff, dlen;
			enum pg_chunked_rc rc =
			    pg_chunked_feed(f, buf + *take, len - *take, &used, &doff, &dlen);

			if (rc == PG_CHUNKED_ERROR)
				return false;
			if (data && rc == PG_CHUNKED_DATA && dlen)
				data(arg, buf + *take + doff, dlen);
			*take += used;
			if (rc == PG_CHUNKED_DONE) {
				*done = true;
				break;
			}
		}
		return true;
	}
	if (data && *take)
		data(arg, buf, *take);
	return true;
}

#endif /* PG_PROXY_FRAME_H */
