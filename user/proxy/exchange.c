// SPDX-License-Identifier: MIT
/*
 * One request and its response (struct pg_exchange, conn.h): dispatch to a
 * backend, retries, how the response's end or failure reaches the client,
 * the gateway's own errors, and the timeouts.
 *
 * What an attempt sends first (rewritten head plus the body held for the
 * key) stays in x->fwd and x->held, so a failed connect or a stale pooled connection
 * can be retried elsewhere as long as no response byte reached the client
 * and no body byte beyond those was sent.
 *
 * The in-flight slot of a backend is taken at dispatch and given back
 * exactly once: when the backend has sent the whole response, when the
 * client goes away, or when the attempt fails (x->counted guards it). A
 * response that ends while the body is still coming (an early answer) goes
 * to DISCARD (drop the rest, then HEAD) or closes the connection, and its
 * backend connection is never pooled (boundary.h has the invariant,
 * pg_response_end applies it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sys/accesslog.h"
#include "datapath/datapath.h"
#include "lib/boundary.h"
#include "lib/buf.h"
#include "lib/forward.h"
#include "proxy/quota.h"
#include "proxy/tracing.h"
#include "proxy/body.h"
#include "proxy/pd.h"
#include "proxy/queue.h"
#include "proxy/reply.h"
#include "proxy/worker_state.h"
#include "router/capacity.h"
#include "router/route.h"
#include "sys/journal.h"
#include "sys/lifecycle.h"
#include "sys/log.h"
#include "proxy/sock.h"
#include "proxy/tls.h"

/* --- a backend's slot (proxy/slot.c), given back ---------------------------------- */

static void release_slot(struct pg_worker *w, struct pg_exchange *x)
{
	pg_slot_give(w, x->backend, &x->load, &x->counted);
}

/* Text t[0..n) into a record field of cap bytes (cut to fit). */
static uint8_t rec_text(char *dst, size_t cap, const char *t, size_t n)
{
	n = n < cap ? n : cap;
	if (n) /* t may be NULL when empty (no request line read) */
		memcpy(dst, t, n);
	return (uint8_t)n;
}

/* Response bytes the client socket was given: ours, plus what the kernel
 * spliced since the hand-off (datapath.h): the socket's carried count then
 * and now, and our bytes still queued in userspace. */
static uint64_t bytes_out(const struct pg_client *c)
{
	const struct pg_exchange *x = &c->x;
	uint64_t now;

	if (!x->dp_base || pg_dp_carried(c->s.fd, &now) || now < x->dp_carried0)
		return x->resp_bytes;
	now = x->dp_resp0 + (now - x->dp_carried0) + c->s.qbytes;
	return now > x->resp_bytes ? now : x->resp_bytes;
}

/* One access-log record for the request ending now (off unless --access-log). */
static void log_request(struct pg_worker *w, const struct pg_client *c, unsigned status,
                        enum pg_alog_outcome outcome)
{
	const struct pg_exchange *x = &c->x;
	uint64_t now;
	struct pg_alog_rec r;
	struct pg_str m, p;
	struct pg_use use;
	/* its usage accounted, whether logged or not (quota.h) */
	const bool used = pg_quota_end(w, c, status, outcome == PG_ALOG_BACKEND_ERROR, &use);

	pg_trace_end(w, c, &x->trace, status, (unsigned)outcome);
	if (!pg_alog_on(w->gw->alog) || !x->t0_ns)
		return;
	now = pg_now_ns();
	r = (struct pg_alog_rec){
	    .wall_ms = pg_wall_ms() - (now - x->t0_ns) / 1000000,
	    .key_hash = x->key.hash,
	    .bytes_in = x->fwd_len + x->held_len + x->streamed,
	    .bytes_out = bytes_out(c),
	    .route_us =
	        x->route_ns / 1000 < UINT32_MAX ? (uint32_t)(x->route_ns / 1000) : UINT32_MAX,
	    .total_us = (uint32_t)((now - x->t0_ns) / 1000),
	    .ttft_us = x->ttft_ns > x->t0_ns ? (uint32_t)((x->ttft_ns - x->t0_ns) / 1000) : 0,
	    .queue_us = x->wait_us,
	    .prefill = x->pd && x->pd->route == PG_PDR_PAIR ? x->pd->prefill : 0,
	    .status = (uint16_t)status,
	    .backend = x->backend,
	    .decision = x->attempts > 1 ? PG_DEC_RETRY : x->choice.decision,
	    .key_source = x->key.source,
	    .outcome = (uint8_t)outcome,
	    .attempts = x->attempts,
	    .tls_version = pg_tls_version(&c->s), /* TLS hook: NULL for a plain client */
	    .tls_cipher = pg_tls_cipher(&c->s),
	    .used = used,
	};
	if (used)
		r.use = use;
	pg_fwd_request_line(x->fwd, x->fwd_head, &m, &p);
	r.method_len = rec_text(r.method, sizeof(r.method), m.p, m.len);
	r.path_len = rec_text(r.path, sizeof(r.path), p.p, p.len);
	r.client_len = rec_text(r.client, sizeof(r.client), c->peer, c->peer_len);
	if (x->id_len)
		r.id_len = rec_text(r.id, sizeof(r.id), x->fwd + x->id_off, x->id_len);
	if (x->tenant_key)
		r.tenant_len =
		    rec_text(r.tenant, sizeof(r.tenant), x->tenant_label, strlen(x->tenant_label));
	pg_alog_record(w->gw->alog, w->id, &r);
}

/* A copy of p[0, len) in a buffer of cap bytes (cap >= len > 0). */
static char *copy_of(const char *p, size_t len, size_t cap)
{
	char *q = malloc(cap);

	if (!q)
		abort(); /* out of memory: as pg_bytes_append */
	return memcpy(q, p, len);
}

/* Close x's backend connection u (not closed yet). A send still in flight
 * on it names x's request buffers (borrowed: x keeps them for retries):
 * they go with u, released when u is freed, so that nothing written into
 * them later (a retry's head, the next request in a kept buffer,
 * lib/spare.h) can be read by the kernel as this request's bytes. An
 * exchange that goes on (another attempt, or its error answer, which reads
 * fwd) goes on with copies. */
static void upstream_close(struct pg_worker *w, struct pg_exchange *x, struct pg_upstream *u,
                           bool goes_on)
{
	pg_upstream_close(w, u); /* drops the segments no send names */
	if (!u->s.sending)
		return;
	u->sent_fwd = x->fwd;
	u->sent_hold = x->hold;
	x->fwd = NULL;
	x->hold = (struct pg_hold){0};
	if (!goes_on)
		return;
	if (u->sent_fwd)
		x->fwd = copy_of(u->sent_fwd, x->fwd_len, x->fwd_cap);
	if (x->held_len) {
		x->held = x->hold.buf = copy_of(x->held, x->held_len, x->held_len);
		x->hold.cap = x->held_len;
	}
}

void pg_hold_give(struct pg_worker *w, struct pg_hold *h)
{
	pg_spare_give(&w->spares, h->buf, h->cap);
	if (h->lent)
		w->io->buf_return(w, h->bid);
	*h = (struct pg_hold){0};
}

void pg_held_release(struct pg_worker *w, struct pg_exchange *x, const struct pg_upstream *u)
{
	if (!x->hold.lent || !x->resp_started || u->s.qbytes || u->s.send_busy)
		return;
	pg_hold_give(w, &x->hold);
	x->held = NULL;
	x->streamed += x->held_len; /* sent: the access log's bytes_in still counts it */
	x->held_len = 0;
}

void pg_exchange_free(struct pg_worker *w, struct pg_exchange *x)
{
	free(x->fwd);
	free(x->head_wait);
	pg_hold_give(w, &x->hold);
	free(x->kbuf);
	pg_parse_ahead_end(w, x);
	free(x->hdr_key);
}

void pg_exchange_reset(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	release_slot(w, x);
	pg_queue_leave(w, c);
	pg_pd_free(w, x);
	if (x->up)
		upstream_close(w, x, x->up, false);
	if (x->admitted)
		pg_admit_release(w->gw);
	pg_exchange_free(w, x);
	memset(x, 0, sizeof(*x));
}

void pg_client_error(struct pg_worker *w, struct pg_client *c, int status, const char *msg)
{
	struct pg_exchange *x = &c->x;

	__atomic_fetch_add(status >= 500 ? &w->stats->no_backend : &w->stats->client_errors, 1,
	                   __ATOMIC_RELAXED);
	if (x->resp_started) {
		log_request(w, c, x->resp_status, PG_ALOG_GATEWAY);
		pg_client_close(w, c); /* mid-response: the truncation tells the client */
		return;
	}
	pg_reply_error(w, c, status, msg, true);
	log_request(w, c, (unsigned)status, PG_ALOG_GATEWAY); /* its bytes counted */
	pg_client_linger(w, c);
}

void pg_client_answer(struct pg_worker *w, struct pg_client *c, int status, const char *body,
                      size_t len)
{
	if (status >= 400)
		__atomic_fetch_add(&w->stats->client_errors, 1, __ATOMIC_RELAXED);
	pg_reply_json(w, c, status, body, len, true);
	log_request(w, c, (unsigned)status, PG_ALOG_GATEWAY);
	pg_client_linger(w, c);
}

/* The client's connection once its exchange is answered (a: boundary.h
 * pg_after_answer): the next request, after the rest of the body is read
 * and dropped, or close. */
static void client_after(struct pg_worker *w, struct pg_client *c, enum pg_after a)
{
	uint64_t left = c->x.body.remaining;

	if (a == PG_AFTER_CLOSE) {
		pg_client_linger(w, c);
		return;
	}
	pg_exchange_reset(w, c);
	c->discard_left = a == PG_AFTER_DISCARD ? left : 0;
	c->state = a == PG_AFTER_DISCARD ? PG_C_DISCARD : PG_C_HEAD;
	c->idle_since_ms = w->now_ms;
	pg_sock_recv(w, &c->s);
}

void pg_client_throttled(struct pg_worker *w, struct pg_client *c, const char *code,
                         const char *msg, unsigned retry_after_s)
{
	struct pg_exchange *x = &c->x;
	size_t n = 0;
	bool owed = false;
	enum pg_after a;

	/* Refused while its body is read (its deadline, at routing: only the
	 * key's bytes may be in): what came of it is taken, what is still to
	 * come is owed. One that waited holds its body whole. */
	if (c->state == PG_C_KEY) {
		if (x->body.kind == PG_FRAME_LENGTH && !x->hold.lent)
			n = c->in_len < x->body.remaining ? c->in_len : (size_t)x->body.remaining;
		owed = !pg_body_take(w, c, n);
	}
	a = pg_after_answer(x->keep_alive, owed, &x->body);
	__atomic_fetch_add(&w->stats->client_errors, 1, __ATOMIC_RELAXED);
	pg_reply_throttled(w, c, code, msg, retry_after_s, a == PG_AFTER_CLOSE);
	log_request(w, c, 429, PG_ALOG_GATEWAY);
	client_after(w, c, a);
	if (a != PG_AFTER_CLOSE)
		pg_client_schedule(w, c);
}

void pg_client_gone(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	if (c->state != PG_C_LINGER && (x->up || x->counted || x->fq.queued)) {
		pg_debug("worker %u: client gone in state %s, backend connection %s", w->id,
		         pg_client_state_str(c->state),
		         x->up ? pg_up_state_str(x->up->state) : "none");
		__atomic_fetch_add(&w->stats->aborted, 1, __ATOMIC_RELAXED);
		log_request(w, c, x->resp_status, PG_ALOG_CLIENT_ABORT);
	}
	/* The client is gone: the backend connection closes with it, so the
	 * inference server stops generating for nobody. */
	pg_client_close(w, c);
}

/* --- dispatch -------------------------------------------------------------------- */

/* A spliced response ends with the backend's FIN: ask for it. */
static void fwd_add_close(struct pg_exchange *x)
{
	static const char hdr[] = "Connection: close\r\n";
	size_t n = sizeof(hdr) - 1, at = x->fwd_head - 2; /* before the blank line */

	if (x->fwd_close)
		return;
	pg_bytes_append(&x->fwd, &x->fwd_len, &x->fwd_cap, hdr, n);
	memmove(x->fwd + at + n, x->fwd + at, x->fwd_len - n - at);
	memcpy(x->fwd + at, hdr, n);
	x->fwd_head += n;
	x->fwd_close = true;
}

/* The request's work on backend id (pg_work_on); a decode leg's, a
 * token: its KV comes from the prefill instance. */
static uint32_t work_on(const struct pg_exchange *x, uint16_t id)
{
	if (x->pd && x->pd->route == PG_PDR_PAIR)
		return 1;
	return pg_work_on(&x->key, &x->choice, id);
}

void pg_attempt(struct pg_worker *w, struct pg_client *c, uint16_t id, unsigned decision,
                bool fresh)
{
	struct pg_exchange *x = &c->x;
	/* HTTP/1.0 clients: copied, so a chunked body can be de-chunked; TLS
	 * clients: copied, to be encrypted (TLS hook: proxy/tls.h) */
	enum pg_dp_path path = x->minor == 0 || c->s.tls
	                           ? PG_DP_COPY
	                           : pg_dp_choose(w, id, x->head_method, x->key.stream);
	struct pg_upstream *u;

	if (path != PG_DP_COPY) {
		fresh = true; /* one connection per spliced response */
		fwd_add_close(x);
	}
	u = fresh ? NULL : pg_pool_get(w, id);
	x->backend = id;
	x->sent_ms = w->now_ms;
	x->attempts++;
	pg_idset_add(&x->tried, id);
	pg_slot_take(w, id, decision, work_on(x, id), &x->load, &x->counted);
	if (x->choice.seq_taken) { /* counted when routed (a retry's is not) */
		x->load.seq = x->key.anchor;
		x->choice.seq_taken = false;
	}
	pg_trace_attempt(&x->trace, id, u != NULL);
	if (!u)
		u = pg_upstream_new(w, id, path, c);
	if (!u) {
		pg_attempt_failed(w, c, strerror(errno), false);
		return;
	}
	pg_upstream_start(w, u, c);
}

void pg_attempt_abandon(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	release_slot(w, x);
	if (x->up) {
		struct pg_upstream *u = x->up;

		x->up = NULL;
		upstream_close(w, x, u, true);
	}
}

void pg_attempt_failed(struct pg_worker *w, struct pg_client *c, const char *why, bool mark_down)
{
	struct pg_exchange *x = &c->x;
	struct pg_backend *b = &w->gw->maps.backends[x->backend];
	struct pg_upstream *u = x->up;
	bool stale = u && u->reused && !mark_down;

	pg_trace_failed(&x->trace);
	if (u) {
		x->up = NULL;
		upstream_close(w, x, u, true);
	}
	__atomic_fetch_add(&b->failures, 1, __ATOMIC_RELAXED);
	if (mark_down) {
		uint16_t old;
		char name[PG_ADDR_STRLEN];

		__atomic_store_n(&b->down_until_ms, w->now_ms + PG_DOWN_MS, __ATOMIC_RELAXED);
		old = __atomic_fetch_or(&b->flags, PG_BACKEND_DOWN, __ATOMIC_RELAXED);
		if (!(old & PG_BACKEND_DOWN))
			pg_warn("backend %s down for %d ms: %s",
			        pg_backend_name(b, name, sizeof(name)), PG_DOWN_MS, why);
	}
	release_slot(w, x);
	if (x->resp_started || x->streamed || x->attempts >= PG_MAX_ATTEMPTS) {
		pg_client_error(w, c, 502, "backend failed");
		return;
	}
	if (stale) {
		/* A pooled connection the backend had closed: same backend, fresh. */
		pg_attempt(w, c, x->backend, PG_DEC_RETRY, true);
		return;
	}
	if (x->pd) { /* a fresh prefill with another decode instance */
		pg_pd_decode_failed(w, c, why);
		return;
	}
	pg_dispatch_again(w, c, PG_AGAIN_ATTEMPT);
}

/* --- the response's end, as the client sees it ----------------------------------- */

/* A choice that predicted a hit, its answer whole: whether the hit held,
 * from the cached tokens the engine reported, else from a stream's first
 * token against the prediction; what the instance's cache keeps is
 * learned from it (router/capacity.h). */
static void cache_verdict(struct pg_worker *w, struct pg_exchange *x)
{
	const struct pg_ca_est *e = &x->choice.est[0];
	enum pg_cc_verdict v = PG_CC_UNKNOWN;
	enum pg_cc_kind kind;
	struct pg_usage u;
	uint32_t cached;

	if (!x->cache_check)
		return;
	x->cache_check = false;
	pg_usage_get(&x->usage, &u);
	if (pg_usage_cached(&u, false, &cached))
		v = pg_cc_verdict(x->choice.matched, x->choice.shared, x->key.tokens, cached,
		                  u.have & PG_USAGE_PROMPT ? u.prompt_tokens : 0);
	else if (x->key.stream && x->ttft_ns > x->load.w.sent_ns && e->id == x->backend)
		v = pg_capacity_ttft_verdict(e->ttft_ms, e->saved_ms,
		                             (double)(x->ttft_ns - x->load.w.sent_ns) / 1e6);
	kind = u.have & PG_USAGE_TIMINGS  ? PG_CC_SLOTS
	       : u.have & PG_USAGE_OBJECT ? PG_CC_PAGED
	                                  : PG_CC_ANY_KIND;
	pg_journal_lock(w->gw->journal);
	pg_capacity_answer(&w->gw->router, &x->choice, kind, v);
	pg_journal_verdict(w->gw->journal, x->load.journal, kind, v);
	pg_journal_unlock(w->gw->journal);
}

/* Where an exchange's backend connection goes back to the pool: under
 * the invariant of boundary.h (a prefill leg's: pd.c, by the same rules,
 * pg_pool_reusable). Runs from the run list, never inside an event of
 * either socket. */
void pg_response_end(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;
	struct pg_upstream *u = x->up;
	bool owed = c->state == PG_C_STREAM; /* the rest of its body is still coming */
	enum pg_after a;

	cache_verdict(w, x);
	log_request(w, c, x->resp_status, PG_ALOG_OK);
	release_slot(w, x);
	x->up = NULL;
	u->c = NULL;
	if (pg_pool_reusable(w, u, !owed, x->head_method))
		pg_pool_put(w, u);
	else if (pg_dp_spliced(u) && !u->s.qbytes && !u->peer_closed && !u->s.closed)
		pg_upstream_linger(w, u); /* nothing of x's is still to be sent */
	else
		upstream_close(w, x, u, false);
	/* The client's side of an early answer was settled at its head
	 * (boundary.h): drop the rest of the body, or close. */
	a = pg_after_answer(x->keep_alive, owed, &x->body);
	client_after(w, c, a);
	if (a != PG_AFTER_CLOSE)
		pg_client_advance(w, c);
}

void pg_backend_broke(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	__atomic_fetch_add(&w->stats->backend_errors, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->gw->maps.backends[x->backend].failures, 1, __ATOMIC_RELAXED);
	log_request(w, c, x->resp_status, PG_ALOG_BACKEND_ERROR);
	pg_client_linger(w, c);
}

/* --- housekeeping ---------------------------------------------------------------- */

/* Enforce the timeouts on one busy client. */
static void client_timeouts(struct pg_worker *w, struct pg_client *c, const struct pg_timeouts *t)
{
	const struct pg_exchange *x = &c->x;
	uint64_t now = w->now_ms;

	switch (c->state) {
	case PG_C_LINGER:
		if (now >= c->linger_until_ms)
			pg_client_close(w, c);
		return;
	case PG_C_HEAD:
		/* (Idle ones, no byte of a request yet, are on w->idle.) */
		if (c->in_len && now - x->t0_ns / 1000000 >= t->header_ms)
			pg_client_error(w, c, 408, "request head timed out");
		return;
	case PG_C_DISCARD:
		/* Its answer is out: a stalled tail just ends the connection. */
		if (c->s.want_recv && now - c->last_rx_ms >= t->body_ms)
			pg_client_close(w, c);
		return;
	case PG_C_QUEUED:
		return; /* its deadline ends its wait (queue.h), or its client */
	case PG_C_KEY:
	case PG_C_STREAM:
		/* Only while we want its bytes: our own backpressure is no stall. */
		if (c->s.want_recv && now - c->last_rx_ms >= t->body_ms) {
			pg_client_error(w, c, 408, "request body timed out");
			return;
		}
		/* A streaming request may have a backend answering too. */
		__attribute__((fallthrough));
	case PG_C_WAIT:
		if (x->pd && x->pd->u) { /* its prefill leg, under way */
			pg_pd_tick(w, c);
			if (!x->up)
				return;
		}
		/* A response that does not stream shows no first token: on a
		 * measured speed its work leaves the queue when its first token is
		 * predicted, else at its head or its engine's report
		 * (router/load.h; reports are checked as they come too:
		 * pg_proxy_reports). */
		if (!x->key.stream)
			pg_exchange_due(w, &c->x.load, now);
		if (x->resp_started || !x->sent_ms || now - x->sent_ms < t->first_byte_ms)
			return;
		__atomic_fetch_add(&w->gw->maps.backends[x->backend].failures, 1, __ATOMIC_RELAXED);
		pg_client_error(w, c, 504, "backend sent no response in time");
		return;
	}
}

void pg_proxy_tick(struct pg_worker *w)
{
	const struct pg_timeouts *t = &w->gw->cfg->timeouts;
	bool draining = pg_draining(w->gw);
	struct pg_client *c, *next;

	for (c = w->busy.head; c; c = next) {
		next = c->next;
		client_timeouts(w, c, t);
	}
	/* Oldest first: the first one not due ends the scan (10,000 idle
	 * keep-alive clients cost nothing per tick). */
	while ((c = w->idle.head) && (draining || w->now_ms - c->idle_since_ms >= t->idle_ms))
		pg_client_close(w, c);
	pg_pool_tick(w);
}

void pg_proxy_reports(struct pg_worker *w)
{
	for (struct pg_client *c = w->busy.head; c; c = c->next)
		if (c->x.up && !c->x.key.stream && pg_load_pending(&c->x.load))
			pg_exchange_due(w, &c->x.load, w->now_ms);
}

void pg_proxy_shutdown(struct pg_worker *w)
{
	while (w->busy.head)
		pg_client_close(w, w->busy.head);
	while (w->idle.head)
		pg_client_close(w, w->idle.head);
	w->run_head = w->run_tail = NULL;
	pg_pool_close_all(w);
}
