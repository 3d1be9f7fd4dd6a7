// SPDX-License-Identifier: MIT
/*
 * Reading a request: its head (parsed once complete, rewritten for the
 * backend by forward.h's rules), the body bytes its key needs (decoded if
 * chunked), routing and dispatch through proxy.c, then the rest of the body
 * streamed as it arrives once the backend connection is up (a chunked one
 * re-framed, without trailers). Bodies past --max-body-size get 413. After
 * an early answer the rest of a short body is dropped (PG_C_DISCARD,
 * boundary.h). Requests on a connection are served one at a time, in
 * order: pipelined bytes wait in c->in.
 */
#include <stdlib.h>
#include <string.h>
#include "lib/boundary.h"
#include "sys/lifecycle.h"
#include "proxy/proxy_internal.h"
#include "state/route.h"

static void in_consume(struct pg_client *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}


/* A request body past --max-body-size: 413 (or a close once answering). */
static bool body_too_big(struct pg_worker *w, struct pg_client *c, uint64_t size)
{
	if (size <= w->gw->cfg->max_body)
		return false;
	pg_client_error(w, c, 413, "request body too large");
	return true;
}

/* Chunked body so far (decoded bytes plus the chunk being read) too big. */
static bool chunked_too_big(struct pg_worker *w, struct pg_client *c)
{
	return body_too_big(w, c, c->body_seen + c->ch.f.remaining);
}

static bool request_head(struct pg_worker *w, struct pg_client *c)
{
	struct pg_http_request req;
	struct pg_route_cfg rc;
	ssize_t n;

	if (!c->in_len)
		return false;
	if (!c->t0_ns)
		c->t0_ns = pg_now_ns();
	/* Parse only once the head is complete: a head trickling in a byte at
	 * a time must not be re-parsed from its start on every read. */
	if (!pg_http_head_ready(c->in, c->in_len, &c->head_scan))
		return false;
	c->head_scan = 0;
	n = pg_http_parse_request(c->in, c->in_len, &req);
	if (n == 0)
		return false;
	if (n < 0) {
		pg_client_error(w, c, (int)-n, "malformed request");
		return false;
	}
	if (!pg_admit(w->gw)) { /* --max-in-flight reached */
		pg_sock_queue_copy(w, &c->s, PG_OVERLOAD_REPLY, sizeof(PG_OVERLOAD_REPLY) - 1);
		pg_client_linger(w, c);
		return false;
	}
	c->admitted = true;
	c->minor = (uint8_t)req.minor;
	c->keep_alive = req.keep_alive;
	c->head_method = pg_name_is(req.method, "HEAD");
	c->api = (uint8_t)pg_key_api(req.method, req.path);
	c->body = (uint8_t)req.body;
	c->body_left = req.body == PG_BODY_LENGTH ? req.content_length : 0;
	if (req.key.len) {
		c->hdr_key = malloc(req.key.len);
		if (!c->hdr_key)
			abort();
		memcpy(c->hdr_key, req.key.p, req.key.len);
		c->hdr_key_len = req.key.len;
	}
	if (req.body == PG_BODY_LENGTH && body_too_big(w, c, req.content_length))
		return false;
	pg_fwd_request_head(&req, &c->fwd, &c->fwd_len, &c->fwd_cap);
	c->fwd_head = c->fwd_len;
	if (req.expect_continue && req.body != PG_BODY_NONE)
		pg_sock_queue_copy(w, &c->s, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	in_consume(c, (size_t)n);

	pg_route_cfg_load(w->gw, &rc);
	c->key_need = pg_key_body_need((enum pg_api)c->api, rc.prefix_length);
	if (req.body == PG_BODY_LENGTH) {
		/* Too big to hold whole for its JSON: key on the raw prefix. */
		if (c->api != PG_API_RAW && req.content_length > PG_KEY_JSON_BODY_MAX)
			c->key_need = rc.prefix_length;
		if (c->key_need > req.content_length)
			c->key_need = req.content_length;
	} else if (req.body == PG_BODY_NONE) {
		c->key_need = 0;
	} else {
		pg_chunked_init(&c->ch);
	}
	c->state = PG_C_KEY;
	return true;
}


/* Decode more of a chunked body from c->in, collecting data for the key. */
static bool key_chunked(struct pg_worker *w, struct pg_client *c)
{
	while (!c->ch_done && c->klen < c->key_need && c->ch_off < c->in_len) {
		size_t used, doff, dlen;
		enum pg_chunked_rc rc = pg_chunked_feed(&c->ch, c->in + c->ch_off,
							c->in_len - c->ch_off, &used, &doff, &dlen);

		if (rc == PG_CHUNKED_ERROR) {
			pg_client_error(w, c, 400, "bad chunked body");
			return false;
		}
		if (rc == PG_CHUNKED_DATA)
			pg_bytes_append(&c->kbuf, &c->klen, &c->kcap, c->in + c->ch_off + doff, dlen);
		c->body_seen += dlen;
		c->ch_off += used;
		if (chunked_too_big(w, c))
			return false;
		if (rc == PG_CHUNKED_DONE)
			c->ch_done = true;
	}
	return c->ch_done || c->klen >= c->key_need;
}

static bool request_key(struct pg_worker *w, struct pg_client *c)
{
	struct pg_route_input in = {.api = (enum pg_api)c->api,
				    .header_key = {c->hdr_key, c->hdr_key_len}};
	uint16_t id;
	size_t n;

	switch (c->body) {
	case PG_BODY_NONE:
		in.complete = true;
		break;
	case PG_BODY_LENGTH:
		n = c->in_len < c->body_left ? c->in_len : c->body_left;
		if (n < c->key_need)
			return false;
		in.body = c->in;
		in.body_len = n;
		in.complete = n == c->body_left;
		break;
	default:
		if (!key_chunked(w, c))
			return false;
		in.body = c->kbuf;
		in.body_len = c->klen;
		in.complete = c->ch_done;
		break;
	}
	id = pg_route(w->gw, &in, NULL, pg_worker_rand(w), &c->key, &c->choice);
	c->route_ns = (uint32_t)(pg_now_ns() - c->t0_ns);
	pg_stats_route_latency(w->stats, c->route_ns);
	if (c->key.fallback)
		__atomic_fetch_add(&w->stats->key_fallbacks, 1, __ATOMIC_RELAXED);
	if (!id) {
		pg_client_error(w, c, 502, "no healthy backend");
		return false;
	}
	/* The body held so far joins the head in c->fwd. */
	if (c->body == PG_BODY_LENGTH) {
		n = c->in_len < c->body_left ? c->in_len : c->body_left;
		pg_bytes_append(&c->fwd, &c->fwd_len, &c->fwd_cap, c->in, n);
		in_consume(c, n);
		c->body_left -= n;
		c->replayable = c->body_left == 0;
	} else if (c->body == PG_BODY_CHUNKED) {
		/* Re-framed from the decoded bytes (forward.h). */
		pg_fwd_chunk(c->kbuf, c->klen, &c->fwd, &c->fwd_len, &c->fwd_cap);
		if (c->ch_done)
			pg_fwd_last_chunk(&c->fwd, &c->fwd_len, &c->fwd_cap);
		in_consume(c, c->ch_off);
		c->ch_off = 0;
		c->replayable = c->ch_done;
	} else {
		c->replayable = true;
	}
	free(c->kbuf);
	c->kbuf = NULL;
	c->klen = c->kcap = 0;
	c->state = c->replayable ? PG_C_WAIT : PG_C_STREAM;
	pg_attempt(w, c, id, c->choice.decision, false);
	return true;
}

/* Forward the rest of the body as it arrives, once the backend connection is
 * up (until then a failed connect can still be retried elsewhere). */
static void request_stream(struct pg_worker *w, struct pg_client *c)
{
	struct pg_upstream *u = c->up;
	size_t n = 0;

	if (!u || !u->s.can_send || !c->in_len)
		return;
	if (u->s.qbytes > PG_REQ_QUEUE_MAX) {
		pg_sock_pause(w, &c->s); /* resumed by pg_upstream_sent */
		return;
	}
	if (c->body == PG_BODY_LENGTH) {
		n = c->in_len < c->body_left ? c->in_len : c->body_left;
		c->body_left -= n;
		if (!c->body_left)
			c->state = PG_C_WAIT;
		pg_sock_queue_copy(w, &u->s, c->in, n);
		in_consume(c, n);
		c->streamed += n;
		return;
	}
	/* Chunked: decoded and re-framed (forward.h), into one send. */
	char *out = NULL;
	size_t olen = 0, ocap = 0;

	while (n < c->in_len) {
		size_t used, doff, dlen;
		enum pg_chunked_rc rc =
			pg_chunked_feed(&c->ch, c->in + n, c->in_len - n, &used, &doff, &dlen);

		if (rc == PG_CHUNKED_ERROR) {
			free(out);
			pg_client_error(w, c, 400, "bad chunked body");
			return;
		}
		pg_fwd_chunk(c->in + n + doff, dlen, &out, &olen, &ocap);
		c->body_seen += dlen;
		n += used;
		if (chunked_too_big(w, c)) {
			free(out);
			return;
		}
		if (rc == PG_CHUNKED_DONE) {
			pg_fwd_last_chunk(&out, &olen, &ocap);
			c->ch_done = true;
			c->state = PG_C_WAIT;
			break;
		}
	}
	in_consume(c, n);
	c->streamed += olen;
	if (olen)
		pg_sock_queue(w, &u->s, out, olen, -1, true);
	else
		free(out);
}

/* After an early response the rest of a Content-Length body is read and
 * dropped (bounded: pg_early_client), then the next request is served. */
static void request_discard(struct pg_client *c)
{
	size_t n = c->in_len < c->body_left ? c->in_len : (size_t)c->body_left;

	in_consume(c, n);
	c->body_left -= n;
	if (!c->body_left) {
		c->state = PG_C_HEAD;
		c->idle_since_ms = c->w->now_ms;
	}
}

void pg_client_advance(struct pg_worker *w, struct pg_client *c)
{
	for (;;) {
		switch (c->state) {
		case PG_C_HEAD:
			if (!request_head(w, c))
				return;
			break;
		case PG_C_KEY:
			if (!request_key(w, c))
				return;
			break;
		case PG_C_STREAM:
			request_stream(w, c);
			if (c->state == PG_C_STREAM)
				return;
			break;
		case PG_C_DISCARD:
			request_discard(c);
			if (c->state == PG_C_DISCARD)
				return;
			break;
		case PG_C_WAIT:
			/* Pipelined requests wait their turn, within bounds. */
			if (c->in_len > PG_PIPELINE_MAX)
				pg_sock_pause(w, &c->s);
			return;
		case PG_C_LINGER:
			c->in_len = 0;
			return;
		}
		if (c->s.closed)
			return;
	}
}

