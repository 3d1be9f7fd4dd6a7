// SPDX-License-Identifier: MIT
/*
 * A client connection: reading its requests. The head is parsed once
 * complete and rewritten for the backend by forward.h's rules; then the
 * body bytes its key needs (decoded if chunked); routing and dispatch
 * (exchange.c); then the rest of the body, streamed as it arrives once the
 * backend connection is up (a chunked one re-framed, without trailers).
 * Bodies past --max-body-size get 413. After an early answer the rest of a
 * short body is dropped (PG_C_DISCARD, boundary.h). Requests on a
 * connection are served one at a time, in order: pipelined bytes wait in
 * c->in.
 *
 * A request goes HEAD -> KEY -> (routed and dispatched) -> STREAM (rest of
 * the body) -> WAIT (response streaming back) -> HEAD, or LINGER once the
 * gateway answers an error.
 */
#include <stdlib.h>
#include <string.h>
#include "datapath/datapath.h"
#include "lib/boundary.h"
#include "lib/buf.h"
#include "lib/forward.h"
#include "lib/json.h"
#include "proxy/tracing.h"
#include "proxy/body.h"
#include "proxy/input.h"
#include "proxy/pd.h"
#include "proxy/queue.h"
#include "proxy/quota.h"
#include "proxy/reply.h"
#include "proxy/worker_state.h"
#include "proxy/models.h"
#include "state/pools.h"
#include "router/route.h"
#include "sys/lifecycle.h"
#include "proxy/sock.h"

/* Answering an error: stop reading, answer, shut our side, drain input for
 * this long so the kernel does not reset the answer away. */
#define LINGER_MS 2000

const char *pg_client_state_str(enum pg_client_state s)
{
	switch (s) {
	case PG_C_HEAD:
		return "head";
	case PG_C_KEY:
		return "key";
	case PG_C_QUEUED:
		return "queued";
	case PG_C_STREAM:
		return "stream";
	case PG_C_WAIT:
		return "wait";
	case PG_C_DISCARD:
		return "discard";
	case PG_C_LINGER:
		return "linger";
	}
	return "?";
}

static void settle(struct pg_worker *w, struct pg_client *c);

/* While a body its key needs whole is read: the size its buffer should
 * have once incoming more bytes join it, the rest of the body up to 1 MiB
 * ahead (a Content-Length alone commits no memory); 0 otherwise. */
static size_t key_reserve(const struct pg_client *c, size_t incoming)
{
	size_t have = c->in_len + incoming, ahead;

	if (c->state != PG_C_KEY || c->x.key_need <= have)
		return 0;
	ahead = c->x.key_need - have;
	return have + (ahead < (1u << 20) ? ahead : (1u << 20));
}

/* The request head at p[0..len) (c->in, or a request's first bytes where
 * they were received): once it is parsed and the request begun, its length
 * (for the caller to consume); 0 while it is incomplete, or once the
 * gateway answered it (the connection lingers). */
static size_t request_head(struct pg_worker *w, struct pg_client *c, const char *p, size_t len)
{
	struct pg_exchange *x = &c->x;
	struct pg_http_request req;
	struct pg_route_cfg rc;
	ssize_t n;

	if (!len)
		return 0;
	if (!x->t0_ns)
		x->t0_ns = pg_now_ns();
	/* Parse only once the head is complete: a head trickling in a byte at
	 * a time must not be re-parsed from its start on every read. */
	if (!pg_http_head_ready(p, len, &c->head_scan))
		return 0;
	c->head_scan = 0;
	n = pg_http_parse_request(p, len, &req);
	if (n == 0)
		return 0;
	if (n < 0) {
		pg_client_error(w, c, (int)-n, "malformed request");
		return 0;
	}
	if (!pg_admit(w->gw)) { /* --max-in-flight reached */
		pg_reply_overload(w, c);
		pg_client_linger(w, c);
		return 0;
	}
	x->admitted = true;
	x->minor = (uint8_t)req.minor;
	x->keep_alive = req.keep_alive;
	x->head_method = pg_name_is(req.method, "HEAD");
	x->api = (uint8_t)pg_key_api(req.method, req.path);
	/* The head as forwarded, and the request's id: also what the access
	 * log and the X-Request-Id of an answer of the gateway's own take. */
	{
		struct pg_fwd_ident id = {
		    .client = {c->peer, c->peer_len}, .boot = w->rid_boot, .seq = &w->rid_seq};
		char tp[PG_TRACEPARENT_LEN];

		pg_trace_begin(w, x, &req, &id, tp);
		pg_fwd_request_head(&req, &id, &x->fwd, &x->fwd_len, &x->fwd_cap);
		x->id_off = (uint32_t)id.id_off;
		x->id_len = (uint8_t)id.id_len;
	}
	x->fwd_head = x->fwd_len;
	if (w->gw->pools && pg_pool_head(w, c, &req))
		return 0;
	if (req.body == PG_BODY_LENGTH)
		x->body =
		    (struct pg_frame){.kind = PG_FRAME_LENGTH, .remaining = req.content_length};
	else if (req.body == PG_BODY_CHUNKED)
		x->body = (struct pg_frame){.kind = PG_FRAME_CHUNKED};
	if (req.key.len) {
		x->hdr_key = malloc(req.key.len);
		if (!x->hdr_key)
			abort();
		memcpy(x->hdr_key, req.key.p, req.key.len);
		x->hdr_key_len = req.key.len;
	}
	if (req.body == PG_BODY_LENGTH && pg_body_too_big(w, c, req.content_length))
		return 0;
	pg_queue_head(w, c, &req);
	if (req.expect_continue && req.body != PG_BODY_NONE) {
		/* 100 asks for the body: not when it would be read for nothing
		 * (RFC 9110 §10.1.1 lets the final answer come instead). */
		if (!pg_route_any_usable(&w->gw->router, w->now_ms)) {
			pg_client_error(w, c, 502, "no healthy backend");
			return 0;
		}
		pg_reply_continue(w, c);
	}

	pg_router_cfg(&w->gw->router, x->pool > 0 ? (unsigned)x->pool : 0, &rc);
	/* A body its key will parse: JSON, no header key, not past the size
	 * keyed on its raw bytes (a model pool reads its own) */
	if (x->api != PG_API_RAW && !req.key.len && x->pool != PG_POOL_BY_MODEL &&
	    (req.body == PG_BODY_CHUNKED || req.content_length <= PG_KEY_JSON_BODY_MAX))
		x->ahead_window = pg_route_key_window(&rc);
	x->key_need = pg_key_hold((enum pg_api)x->api, rc.prefix_length, pg_route_blocks(&rc),
	                          x->pool == PG_POOL_BY_MODEL,
	                          req.body == PG_BODY_LENGTH ? (int64_t)req.content_length
	                          : req.body == PG_BODY_NONE ? 0
	                                                     : -1);
	/* A request that may wait (queue.h) waits with its whole body. */
	if (rc.flow_queue_ms || pg_pd_pool(w->gw, x->pool > 0 ? (unsigned)x->pool : 0))
		x->key_need = pg_queue_hold(x->key_need, req.body == PG_BODY_LENGTH
		                                             ? (int64_t)req.content_length
		                                         : req.body == PG_BODY_NONE ? 0
		                                                                    : -1);
	c->state = PG_C_KEY;
	return (size_t)n;
}

static bool request_key(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;
	struct pg_route_input in = {.api = (enum pg_api)x->api,
	                            .header_key = {x->hdr_key, x->hdr_key_len}};
	struct pg_route_cfg cfg;
	uint64_t t;
	size_t n = 0;
	bool ready;
	int rc;

	switch (x->body.kind) {
	case PG_FRAME_LENGTH:
		if (x->hold.lent) { /* whole, where it arrived (lend_body) */
			in.body = x->held;
			in.body_len = x->held_len;
			in.complete = ready = true;
			break;
		}
		n = c->in_len < x->body.remaining ? c->in_len : x->body.remaining;
		in.body = c->in;
		in.body_len = n;
		in.complete = n == x->body.remaining;
		ready = n >= x->key_need;
		break;
	case PG_FRAME_CHUNKED:
		rc = pg_body_chunked(w, c);
		if (rc < 0)
			return false;
		ready = rc;
		in.body = x->kbuf;
		in.body_len = x->klen;
		in.complete = x->ch_done;
		break;
	default:
		in.complete = ready = true;
		break;
	}
	if (!ready) {
		pg_parse_ahead(w, x, &in);
		return false;
	}
	t = pg_now_ns(); /* the decision's time includes the body's last piece */
	pg_parse_ahead(w, x, &in);
	if (x->pool == PG_POOL_BY_MODEL && pg_pool_body(w, c, &in))
		return false;
	in.pool = x->pool > 0 ? (unsigned)x->pool : 0;
	in.pre = x->ahead;
	in.scratch = &w->key_scratch;
	pg_router_cfg(&w->gw->router, in.pool, &cfg);
	if (!pg_quota_arrive(w, c, &in))
		return false; /* over its tenant's quota: answered */
	if (cfg.flow_queue_ms && !pg_queue_arrive(w, c, &in, n, &cfg))
		return false; /* waits, or was answered */
	return pg_dispatch(w, c, &in, n, t);
}

/* Forward the rest of the body as it arrives, once the backend connection is
 * up (until then a failed connect can still be retried elsewhere). */
static void request_stream(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;
	struct pg_upstream *u = x->up;
	char *out = NULL;
	size_t n = 0, olen = 0, ocap = 0;

	if (!u || !u->s.can_send || !c->in_len)
		return;
	if (u->s.qbytes > PG_REQ_QUEUE_MAX) {
		pg_sock_pause(w, &c->s); /* resumed when the backend's queue drains */
		return;
	}
	if (x->body.kind == PG_FRAME_LENGTH) {
		n = c->in_len < x->body.remaining ? c->in_len : x->body.remaining;
		x->body.remaining -= n;
		if (!x->body.remaining)
			c->state = PG_C_WAIT;
		pg_sock_queue_copy(w, &u->s, c->in, n);
		pg_in_consume(c, n);
		x->streamed += n;
		return;
	}
	/* Chunked: decoded and re-framed (forward.h), into one send. */
	while (n < c->in_len) {
		size_t used, doff, dlen;
		enum pg_chunked_rc rc = pg_body_chunk_step(w, c, n, &used, &doff, &dlen);

		if (rc == PG_CHUNKED_ERROR) {
			free(out);
			return;
		}
		pg_fwd_chunk(c->in + n + doff, dlen, &out, &olen, &ocap);
		n += used;
		if (rc == PG_CHUNKED_DONE) {
			pg_fwd_last_chunk(&out, &olen, &ocap);
			c->state = PG_C_WAIT;
			break;
		}
	}
	pg_in_consume(c, n);
	x->streamed += olen;
	if (olen)
		pg_sock_queue(w, &u->s, out, olen, -1, true);
	else
		free(out);
}

/* After an early response the rest of a Content-Length body is read and
 * dropped (bounded: boundary.h), then the next request is served. */
static void request_discard(struct pg_worker *w, struct pg_client *c)
{
	size_t n = c->in_len < c->discard_left ? c->in_len : (size_t)c->discard_left;

	pg_in_consume(c, n);
	c->discard_left -= n;
	if (!c->discard_left) {
		c->state = PG_C_HEAD;
		c->idle_since_ms = w->now_ms;
	}
}

static void advance(struct pg_worker *w, struct pg_client *c)
{
	for (;;) {
		switch (c->state) {
		case PG_C_HEAD: {
			size_t n = request_head(w, c, c->in, c->in_len);

			if (!n)
				return;
			pg_in_consume(c, n);
			/* A head that came in pieces: room for its body at once. */
			pg_in_room(&w->spares, c, c->in_len, key_reserve(c, 0));
			break;
		}
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
			request_discard(w, c);
			if (c->state == PG_C_DISCARD)
				return;
			break;
		case PG_C_QUEUED:
		case PG_C_WAIT:
			/* Pipelined requests wait their turn, within bounds. */
			if (c->in_len > PG_PIPELINE_MAX)
				pg_sock_pause(w, &c->s);
			return;
		case PG_C_LINGER:
			pg_in_consume(c, c->in_len);
			return;
		}
		if (c->s.closed)
			return;
	}
}

void pg_client_advance(struct pg_worker *w, struct pg_client *c)
{
	advance(w, c);
	settle(w, c);
}

/* --- the idle and busy lists ------------------------------------------------- */

static void list_remove(struct pg_client *c)
{
	struct pg_clist *l = c->list;

	if (!l)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
	c->list = NULL;
}

static void list_append(struct pg_clist *l, struct pg_client *c)
{
	c->list = l;
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
}

/* A connection waiting for a request goes to the idle list's tail (so that
 * list stays in the order of idle_since_ms); any other to the busy list. */
static void settle(struct pg_worker *w, struct pg_client *c)
{
	bool idle = c->state == PG_C_HEAD && !c->in_len;

	if (c->s.closed || (idle ? c->list == &w->idle : c->list == &w->busy))
		return;
	list_remove(c);
	if (idle) {
		c->idle_since_ms = w->now_ms;
		list_append(&w->idle, c);
	} else {
		list_append(&w->busy, c);
	}
}

/* --- the run list ------------------------------------------------------------ */

void pg_client_schedule(struct pg_worker *w, struct pg_client *c)
{
	if (c->scheduled || c->s.closed)
		return;
	c->scheduled = true;
	c->run_next = NULL;
	if (w->run_tail)
		w->run_tail->run_next = c;
	else
		w->run_head = c;
	w->run_tail = c;
}

void pg_worker_run(struct pg_worker *w)
{
	struct pg_client *c;

	while ((c = w->run_head)) {
		w->run_head = c->run_next;
		if (!w->run_head)
			w->run_tail = NULL;
		c->scheduled = false;
		if (c->s.closed)
			continue; /* freed by pg_sock_reap, after this */
		if (c->x.up && c->x.up->state == PG_U_DONE)
			pg_response_end(w, c);
		else
			pg_client_advance(w, c);
	}
}

/* --- socket events ----------------------------------------------------------- */

/* A request whose head was just parsed at data[-head..) and whose whole
 * Content-Length body is data[0, len): the body stays in the provided
 * buffer bid it arrived in, lent to the exchange (conn.h pg_hold), not
 * copied; what follows it (a pipelined request) is copied into c->in.
 * False (nothing done) unless the body is long enough to be worth a buffer
 * (PG_LEND_BODY_MIN) and buffers are plentiful. */
static bool lend_body(struct pg_worker *w, struct pg_client *c, char *data, size_t len, int bid)
{
	struct pg_exchange *x = &c->x;
	uint64_t body = x->body.remaining;

	if (c->state != PG_C_KEY || x->body.kind != PG_FRAME_LENGTH || bid < 0 ||
	    body < PG_LEND_BODY_MIN || body > len || !pg_worker_can_lend(w))
		return false;
	x->held = data;
	x->held_len = (size_t)body;
	x->hold = (struct pg_hold){.lent = true, .bid = (uint16_t)bid};
	if (len > body)
		pg_in_append(&w->spares, c, data + body, len - (size_t)body, 0);
	return true;
}

static bool client_data(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid)
{
	struct pg_client *c = (struct pg_client *)s;
	bool kept = false;

	if (c->state == PG_C_LINGER)
		return false; /* discarded */
	c->last_rx_ms = w->now_ms;
	/* A request's first bytes: its head is parsed here, in the provided
	 * buffer, so only the body is copied, once, into a buffer sized for it
	 * (the head copied with it would be moved out of the way, and the
	 * buffer regrown, as the rest of the body arrived); a body that came
	 * whole with its head is not copied at all (lend_body). A head answered at
	 * once (an error) leaves the connection lingering, and the rest of the
	 * receive unread, not held for the linger. */
	if (c->state == PG_C_HEAD && !c->in_len) {
		size_t n = request_head(w, c, data, len);

		if (c->state == PG_C_LINGER)
			return false;
		data += n;
		len -= n;
		if (n && lend_body(w, c, data, len, bid)) {
			kept = true; /* the exchange gives it back */
			len = 0;
		}
	}
	if (len)
		pg_in_append(&w->spares, c, data, len, key_reserve(c, len));
	pg_client_advance(w, c);
	/* Bound what one connection makes us hold: the key's bytes at most while
	 * reading them, a pipeline's worth otherwise. */
	if (!c->s.closed && c->state != PG_C_KEY && c->in_len > PG_PIPELINE_MAX)
		pg_sock_pause(w, &c->s);
	return kept;
}

static void client_eof(struct pg_worker *w, struct pg_sock *s, int err)
{
	(void)err;
	pg_client_gone(w, (struct pg_client *)s);
}

static void client_sent(struct pg_worker *w, struct pg_sock *s, int err)
{
	struct pg_client *c = (struct pg_client *)s;
	struct pg_upstream *u = c->x.up;

	if (err) {
		pg_client_gone(w, c);
		return;
	}
	if (c->state == PG_C_LINGER) {
		pg_sock_shutdown_when_sent(w, &c->s);
		return;
	}
	if (!u || u->s.closed)
		return;
	if (pg_dp_client_sent(w, u))
		return;
	if (!u->s.want_recv && c->s.qbytes < PG_RESP_QUEUE_MAX / 2)
		pg_sock_recv(w, &u->s);
}

static void client_free(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_client *c = (struct pg_client *)s;

	pg_spare_give(&w->spares, c->in_buf, c->in_cap);
	pg_exchange_free(w, &c->x);
	free(c);
}

static const struct pg_sock_ops client_ops = {
    .name = "client",
    .data = client_data,
    .eof = client_eof,
    .sent = client_sent,
    .free = client_free,
};

struct pg_client *pg_client_new(struct pg_worker *w, int fd)
{
	struct pg_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	pg_sock_init(&c->s, fd, &client_ops);
	c->peer_len = (uint8_t)pg_sock_peer_name(fd, c->peer, sizeof(c->peer));
	c->s.can_send = true;
	c->state = PG_C_HEAD;
	c->idle_since_ms = c->last_rx_ms = w->now_ms;
	w->nclients++;
	list_append(&w->idle, c);
	__atomic_fetch_add(&w->stats->connections, 1, __ATOMIC_RELAXED);
	pg_sock_recv(w, &c->s);
	return c;
}

void pg_client_close(struct pg_worker *w, struct pg_client *c)
{
	if (c->s.closed)
		return;
	pg_exchange_reset(w, c);
	list_remove(c);
	w->nclients--;
	pg_sock_close(w, &c->s);
}

void pg_client_linger(struct pg_worker *w, struct pg_client *c)
{
	pg_exchange_reset(w, c);
	c->state = PG_C_LINGER;
	pg_in_consume(c, c->in_len);
	c->head_scan = 0;
	c->linger_until_ms = w->now_ms + LINGER_MS;
	settle(w, c);
	pg_sock_recv(w, &c->s);
	pg_sock_shutdown_when_sent(w, &c->s);
}
