// SPDX-License-Identifier: MIT
/*
 * A backend connection: connecting, the response head (rewritten for the
 * client) and the body, forwarded as it arrives (zero copy from provided
 * buffers while they are plentiful) with its framing (u->frame) tracked to
 * find its end. The end is not acted on here: the connection goes to
 * PG_U_DONE and the client to the run list, where pg_response_end pools or
 * closes it. Failures before any response byte reached the client go back
 * to exchange.c for a retry; later ones end the client's response visibly.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sys/accesslog.h"
#include "lib/names.h"
#include "datapath/datapath.h"
#include "lib/boundary.h"
#include "lib/buf.h"
#include "lib/forward.h"
#include "proxy/tracing.h"
#include "proxy/frame.h"
#include "proxy/pd.h"
#include "proxy/queue.h"
#include "proxy/quota.h"
#include "proxy/worker_state.h"
#include "sys/lifecycle.h"
#include "proxy/sock.h"
#include "proxy/tls.h"

const char *pg_up_state_str(enum pg_up_state s)
{
	switch (s) {
	case PG_U_HEAD:
		return "head";
	case PG_U_BODY:
		return "body";
	case PG_U_DONE:
		return "done";
	case PG_U_IDLE:
		return "idle";
	case PG_U_LINGER:
		return "linger";
	}
	return "?";
}

void pg_upstream_close(struct pg_worker *w, struct pg_upstream *u)
{
	if (u->s.closed)
		return;
	pg_pool_remove(w, u);
	pg_dp_upstream_closing(w, u); /* kernel state goes while the fd is open */
	u->c = NULL;
	pg_sock_close(w, &u->s);
}

void pg_upstream_start(struct pg_worker *w, struct pg_upstream *u, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	u->c = c;
	u->state = PG_U_HEAD;
	u->hlen = 0;
	u->early = false;
	memset(&u->frame, 0, sizeof(u->frame));
	x->up = u;
	/* Borrowed, kept for retries; one sendmsg at the end of the turn. */
	pg_sock_queue(w, &u->s, x->fwd, x->fwd_len, -1, false);
	if (x->held_len)
		pg_sock_queue(w, &u->s, x->held, x->held_len, -1, false);
	pg_sock_recv(w, &u->s);
}

/* The end of the response: acted on from the run list (pg_response_end). */
static void body_done(struct pg_worker *w, struct pg_upstream *u)
{
	u->state = PG_U_DONE;
	pg_client_schedule(w, u->c);
}

/* One cache_aware estimate as the header's fields, each name prefixed by
 * pre ("" for the chosen instance, "runner_up_" for the next best). */
static int est_fields(char *p, size_t cap, const char *pre, const struct pg_ca_est *e)
{
	return snprintf(
	    p, cap,
	    "; %smatched=%u; %swait_ms=%.1f; %sprefill_ms=%.1f; %ssaved_ms=%.1f; %sttft_ms=%.1f",
	    pre, e->matched, pre, e->wait_ms, pre, e->prefill_ms, pre, e->saved_ms, pre,
	    e->ttft_ms);
}

/* X-Prefixgate-Route's line for x into line (cap bytes, CRLF included):
 * the backend and why; for cache_aware the estimates that decided, of the
 * chosen instance and of the runner-up (doc/routing.md, Routing under load). */
static size_t route_header(struct pg_worker *w, const struct pg_exchange *x, char *line, size_t cap)
{
	const struct pg_choice *ch = &x->choice;
	char name[PG_ADDR_STRLEN];
	size_t k;

	k = (size_t)snprintf(line, cap, "X-Prefixgate-Route: backend=%s; reason=%s",
	                     pg_backend_name(&w->gw->maps.backends[x->backend], name, sizeof(name)),
	                     pg_decision_name(x->attempts > 1 ? PG_DEC_RETRY : ch->decision));
	if (ch->est[0].id == x->backend && k < cap)
		k += (size_t)est_fields(line + k, cap - k, "", &ch->est[0]);
	else if (k < cap)
		k += (size_t)snprintf(line + k, cap - k, "; matched=%u", ch->matched);
	if (ch->est[0].id == x->backend && ch->est[1].id && k < cap) {
		k += (size_t)snprintf(
		    line + k, cap - k, "; runner_up=%s",
		    pg_backend_name(&w->gw->maps.backends[ch->est[1].id], name, sizeof(name)));
		if (k < cap)
			k += (size_t)est_fields(line + k, cap - k, "runner_up_", &ch->est[1]);
	}
	if (x->pd && x->pd->route == PG_PDR_PAIR && k < cap) /* prefill/decode */
		k += (size_t)snprintf(
		    line + k, cap - k, "; prefill=%s",
		    pg_backend_name(&w->gw->maps.backends[x->pd->prefill], name, sizeof(name)));
	if (k > cap - 3)
		k = cap - 3;
	memcpy(line + k, "\r\n", 3);
	return k + 2;
}

/* The response head for the client (forward.h), with our Connection. */
static void forward_response_head(struct pg_worker *w, struct pg_client *c,
                                  const struct pg_http_response *resp, const char *h, size_t n,
                                  bool hold)
{
	struct pg_exchange *x = &c->x;
	char *out = NULL;
	size_t len = 0, cap = 0;

	if (pg_draining(w->gw))
		x->keep_alive = false; /* shutting down: this is its last response */
	struct pg_fwd_resp o;

	if (x->minor == 0 && resp->body == PG_BODY_CHUNKED)
		x->keep_alive = false; /* de-chunked for HTTP/1.0: the close ends it */
	o = (struct pg_fwd_resp){
	    .close = !x->keep_alive,
	    .http10 = x->minor == 0,
	    .request_id = {x->id_len ? x->fwd + x->id_off : "", x->id_len},
	};
	pg_fwd_response_head(h, n, resp, &o, &out, &len, &cap);
	if (w->gw->cfg->route_header) {
		/* Before the blank line: why this backend (--route-header). */
		char line[512];
		size_t k = route_header(w, x, line, sizeof(line));

		len -= 2;
		pg_bytes_append(&out, &len, &cap, line, k);
		pg_bytes_append(&out, &len, &cap, "\r\n", 2);
	}
	if (x->quota_tenant) { /* its tenant's quota: x-ratelimit-* (quota.h) */
		char q[PG_QUOTA_HEAD_MAX];
		size_t k = pg_quota_head(w, x, q, sizeof(q));

		len -= 2;
		pg_bytes_append(&out, &len, &cap, q, k);
		pg_bytes_append(&out, &len, &cap, "\r\n", 2);
	}
	x->resp_bytes += len; /* the head as the client gets it */
	if (hold) {           /* until its first token (deadline.h) */
		x->head_wait = out;
		x->head_wait_len = len;
		return;
	}
	pg_sock_queue(w, &c->s, out, len, -1, true);
}

/* A head held for the first token (deadline.h) goes out, before any byte
 * of the body. */
static void release_head(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	if (!x->head_wait)
		return;
	pg_sock_queue(w, &c->s, x->head_wait, x->head_wait_len, -1, true);
	x->head_wait = NULL;
}

/* Where a response body's data goes besides the client's socket (frame.h
 * pg_frame_take's data): its usage, read as it passes (conn.h
 * pg_exchange.usage); for an HTTP/1.0 client, de-chunked, the client. */
struct body_sink {
	struct pg_worker *w;
	struct pg_client *c;
	bool dechunk;
};

static void body_data(void *arg, const char *p, size_t n)
{
	struct body_sink *s = arg;

	if (s->dechunk) {
		pg_sock_queue_copy(s->w, &s->c->s, p, n);
		s->c->x.resp_bytes += n;
	}
	if (s->c->x.usage_on)
		pg_usage_feed(&s->c->x.usage, p, n);
}

/* Forward response body bytes (zero copy from a provided buffer while they
 * are plentiful), tracking the framing to find the end. */
static bool forward_body(struct pg_worker *w, struct pg_upstream *u, char *data, size_t len,
                         int bid)
{
	struct pg_client *c = u->c;
	/* HTTP/1.0 client: the data only, queued by body_data */
	struct body_sink sink = {w, c, u->frame.kind == PG_FRAME_CHUNKED && c->x.minor == 0};
	size_t take = 0; /* (the response is complete: none) */
	bool done = false, kept = false;

	if (u->state == PG_U_BODY &&
	    !pg_frame_take(&u->frame, data, len, &take, &done,
	                   sink.dechunk || c->x.usage_on ? body_data : NULL, &sink)) {
		if (!sink.dechunk)
			pg_sock_queue_copy(w, &c->s, data, take);
		pg_backend_broke(w, c);
		return false;
	}
	if (take < len)
		u->keep_alive = false; /* bytes after the response: never reuse */
	if (sink.dechunk)
		take = 0; /* its data went out above */
	c->x.resp_bytes += take;
	if (take) {
		if (bid >= 0 && pg_worker_can_lend(w)) {
			pg_sock_queue(w, &c->s, data, take, bid, false);
			kept = true;
		} else {
			pg_sock_queue_copy(w, &c->s, data, take);
		}
	}
	if (done)
		body_done(w, u);
	else if (c->s.qbytes > PG_RESP_QUEUE_MAX)
		pg_sock_pause(w, &u->s); /* resumed as the client's queue drains */
	return kept;
}

/*
 * The response head in p[0, len): a receive (provided buffer bid, or -1) or
 * u->hbuf, where a head split over receives is gathered. Parsed where it is;
 * a head not yet complete is kept in u->hbuf for the next receive. Once it
 * is complete, it is forwarded rewritten, and the body bytes behind it go
 * on as any body bytes do (forward_body: lent, not copied, when they are in
 * a provided buffer). Returns whether buffer bid was kept.
 */
static bool response_head(struct pg_worker *w, struct pg_upstream *u, char *p, size_t len, int bid)
{
	struct pg_client *c = u->c;
	struct pg_exchange *x = &c->x;
	struct pg_http_response resp;
	bool kept = false, readable;
	ssize_t n;

	for (;;) {
		n = pg_http_parse_response(p, len, x->head_method, &resp);
		if (n == 0) {
			if (p != u->hbuf) /* the rest comes in a later receive */
				pg_bytes_append(&u->hbuf, &u->hlen, &u->hcap, p, len);
			else { /* gathered; interim answers before it dropped */
				memmove(u->hbuf, p, len);
				u->hlen = len;
			}
			return false;
		}
		if (n < 0) {
			pg_attempt_failed(
			    w, c, n == -431 ? "response head too large" : "invalid response head",
			    true);
			return false;
		}
		if (resp.status >= 200)
			break;
		if (resp.status == 101) {
			/* Upgrade is never forwarded: a switch is a broken backend,
			 * and what follows is no longer HTTP. */
			pg_attempt_failed(
			    w, c, "101 Switching Protocols to a request without Upgrade", true);
			return false;
		}
		/* Other 1xx: Expect was answered by us; interim answers are dropped. */
		p += n;
		len -= (size_t)n;
	}
	x->resp_started = true;
	x->resp_status = (uint16_t)resp.status;
	/* Only a streamed 2xx response shows its first token as a body byte
	 * (router/load.h); an answer that does not stream is whole by its
	 * head; any other had its first token by now, if at all. */
	if (resp.status < 300 && !x->head_method && !x->key.stream) {
		pg_exchange_answered(w, c, &x->load, pg_now_ns());
	} else if (resp.status >= 300 || x->head_method) {
		pg_exchange_no_token(w, &x->load);
		if (pg_alog_on(w->gw->alog))
			x->ttft_ns = pg_now_ns(); /* its head is its first token */
	}
	pg_held_release(w, x, u); /* no retry from here */
	/* what the answer says of its usage is read as it passes (not with a
	 * Content-Encoding: its bytes are not the usage's): for a predicted
	 * hit, checked; accounted (quota.h) when asked for */
	readable = resp.status < 300 && !x->head_method && !resp.encoded;
	x->cache_check = readable && x->choice.backend == x->backend &&
	                 x->choice.d_blocks != UINT32_MAX && x->choice.matched > x->choice.shared;
	x->usage_on = x->cache_check || (readable && pg_quota_reads_usage(w));
	if (x->usage_on)
		pg_usage_init(&x->usage, x->key.stream ? PG_USAGE_SSE : PG_USAGE_JSON);
	u->keep_alive = resp.keep_alive && !u->dp;
	/* Answered before the backend had the whole request (boundary.h): this
	 * connection is not pooled after it, and unless the rest of the body is
	 * small enough to drop, neither is the client's kept. */
	if (c->state == PG_C_STREAM || u->s.qbytes) {
		u->early = true;
		__atomic_fetch_add(&w->stats->early_answers, 1, __ATOMIC_RELAXED);
		if (c->state == PG_C_STREAM && !pg_early_keeps_client(&x->body))
			x->keep_alive = false;
	}
	u->state = pg_response_frame(&resp, &u->frame) ? PG_U_DONE : PG_U_BODY;
	if (resp.body == PG_BODY_EOF)
		x->keep_alive = false; /* the close is the end of the body */
	/* a streamed answer with a deadline and no token yet: its head waits
	 * for one, so that a 429 can still answer it (deadline.h) */
	forward_response_head(w, c, &resp, p, (size_t)n,
	                      x->cut_ms && x->key.stream && resp.status < 300 && !x->head_method &&
	                          u->state == PG_U_BODY && len == (size_t)n);
	if (u->state == PG_U_DONE)
		pg_client_schedule(w, c);
	/* Body bytes that came with the head: the first token among them. */
	if (len > (size_t)n) {
		pg_exchange_first_token(w, c, &x->load, pg_now_ns());
		kept = forward_body(w, u, p + n, len - (size_t)n, bid);
	}
	u->hlen = 0;
	if (u->hcap > PG_HBUF_KEEP) { /* not kept for the connection's life (pooled) */
		free(u->hbuf);
		u->hbuf = NULL;
		u->hcap = 0;
	}
	/* The rest of the body via the kernel, once the first token, if
	 * awaited, was seen here. */
	if (!u->s.closed && u->state == PG_U_BODY && u->dp && !pg_load_pending(&x->load))
		pg_dp_body_start(w, u);
	return kept;
}

bool pg_upstream_take_frame(struct pg_worker *w, struct pg_upstream *u, const struct pg_frame *f)
{
	if (u->state != PG_U_BODY || !u->c || f->kind != u->frame.kind || f->kind == PG_FRAME_NONE)
		return false;
	u->frame = *f;
	if (!pg_frame_done(f))
		return false;
	body_done(w, u);
	return true;
}

bool pg_upstream_input(struct pg_worker *w, struct pg_upstream *u, char *data, size_t len, int bid)
{
	if (u->dp)
		pg_dp_received(u, len);
	if (u->state != PG_U_HEAD) {
		/* the response's first body byte: its first token (router/load.h) */
		const bool first = u->c && pg_load_pending(&u->c->x.load);
		bool kept;

		if (first)
			pg_exchange_first_token(w, u->c, &u->c->x.load, pg_now_ns());
		if (u->c)
			release_head(w, u->c);
		kept = forward_body(w, u, data, len, bid);
		if (u->dp && !u->s.closed) {
			if (first && u->state == PG_U_BODY)
				pg_dp_body_start(w, u); /* held back for it (response_head) */
			else
				pg_dp_forwarded(w, u);
		}
		return kept;
	}
	if (!u->hlen) /* a head that begins in this receive */
		return response_head(w, u, data, len, bid);
	/* The head's limit is checked by the parse, on the head: a receive
	 * holds body bytes too, as much as PG_BUFSZ, beside a head begun in
	 * the one before. */
	pg_bytes_append(&u->hbuf, &u->hlen, &u->hcap, data, len);
	response_head(w, u, u->hbuf, u->hlen, -1);
	return false;
}

void pg_upstream_ended(struct pg_worker *w, struct pg_upstream *u, int err)
{
	struct pg_client *c = u->c;

	u->peer_closed = true;
	if (u->leg) { /* a prefill leg's (pd.h) */
		pg_pd_leg_failed(w, u, err ? strerror(-err) : NULL, false);
		return;
	}
	if (!c) {
		pg_upstream_close(w, u);
		return;
	}
	release_head(w, c); /* what came of the answer, as it came */
	if (u->dp && !err)
		pg_dp_sync(w, u); /* the redirected bytes may complete the body */
	if (u->state == PG_U_DONE)
		return; /* complete; pg_response_end sees it closed */
	/* A framed body cut short by the close is a broken response: the
	 * client sees it end without its last chunk or short of its length. */
	if (u->state == PG_U_BODY && u->frame.kind == PG_FRAME_NONE && !err) {
		u->keep_alive = false;
		body_done(w, u);
	} else if (u->state == PG_U_HEAD && !c->x.resp_started) {
		pg_attempt_failed(
		    w, c, err ? strerror(-err) : "connection closed before a response", !u->reused);
	} else {
		pg_backend_broke(w, c);
	}
}

/* --- socket events ----------------------------------------------------------- */

static bool upstream_data(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid)
{
	struct pg_upstream *u = (struct pg_upstream *)s;

	if (!u->c) {
		pg_upstream_close(w, u); /* an idle or lingering connection must not speak */
		return false;
	}
	if (u->leg)
		return pg_pd_leg_data(w, u, data, len);
	if (u->dp)
		pg_dp_sync(w, u); /* before decoding: take back what the kernel redirected */
	return pg_upstream_input(w, u, data, len, bid);
}

static void upstream_eof(struct pg_worker *w, struct pg_sock *s, int err)
{
	pg_upstream_ended(w, (struct pg_upstream *)s, err);
}

static void upstream_connected(struct pg_worker *w, struct pg_sock *s, int res)
{
	struct pg_upstream *u = (struct pg_upstream *)s;
	struct pg_client *c = u->c;

	if (res == 0) {
		if (c && !u->leg)
			pg_trace_connected(&c->x.trace);
		u->s.can_send = true;
		pg_sock_flush(w, &u->s);
		if (c && c->state == PG_C_STREAM)
			pg_client_schedule(w, c); /* body bytes that came meanwhile */
		return;
	}
	if (!c) {
		pg_upstream_close(w, u);
		return;
	}
	if (u->leg) {
		pg_pd_leg_failed(w, u, res == -ECANCELED ? "connect timed out" : strerror(-res),
		                 true);
		return;
	}
	pg_attempt_failed(w, c, res == -ECANCELED ? "connect timed out" : strerror(-res), true);
}

static void upstream_sent(struct pg_worker *w, struct pg_sock *s, int err)
{
	struct pg_upstream *u = (struct pg_upstream *)s;
	struct pg_client *c = u->c;
	struct pg_exchange *x;

	if (!c || u->state == PG_U_DONE) {
		if (err)
			u->peer_closed = true; /* never pooled; closed when it ends */
		if (err && !c)
			pg_upstream_close(w, u);
		return;
	}
	if (u->leg) {
		if (err)
			pg_pd_leg_failed(w, u, strerror(-err), !u->reused);
		return;
	}
	x = &c->x;
	if (err) {
		if (!x->resp_started && !x->streamed)
			pg_attempt_failed(w, c, strerror(-err), !u->reused);
		else
			pg_backend_broke(w, c);
		return;
	}
	if (!x->first_sent) {
		x->first_sent = true;
		pg_stats_send_latency(w->stats, pg_now_ns() - x->t0_ns);
	}
	pg_held_release(w, x, u); /* answered before it was all sent */
	if (c->state == PG_C_STREAM && u->s.qbytes < PG_REQ_QUEUE_MAX / 2) {
		pg_sock_recv(w, &c->s);
		pg_client_schedule(w, c);
	}
}

static void upstream_recv_ended(struct pg_worker *w, struct pg_sock *s)
{
	pg_dp_recv_ended(w, (struct pg_upstream *)s);
}

static void upstream_polled(struct pg_worker *w, struct pg_sock *s, int res)
{
	pg_dp_polled(w, (struct pg_upstream *)s, res);
}

static void upstream_free(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_upstream *u = (struct pg_upstream *)s;

	pg_dp_free(u);
	free(u->hbuf);
	free(u->sent_fwd);
	pg_hold_give(w, &u->sent_hold);
	free(u);
}

static const struct pg_sock_ops upstream_ops = {
    .name = "backend",
    .data = upstream_data,
    .eof = upstream_eof,
    .sent = upstream_sent,
    .connected = upstream_connected,
    .recv_ended = upstream_recv_ended,
    .polled = upstream_polled,
    .free = upstream_free,
};

struct pg_upstream *pg_upstream_new(struct pg_worker *w, uint16_t id, enum pg_dp_path path,
                                    struct pg_client *c)
{
	const struct pg_backend *b = &w->gw->maps.backends[id];
	union pg_sockaddr sa;
	struct pg_upstream *u;
	int fd;

	pg_backend_addr_get(b, &sa);
	fd = w->io->socket(w, sa.sa.sa_family);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	pg_sock_init(&u->s, fd, &upstream_ops);
	u->backend = id;
	u->epoch = b->epoch;
	/* TLS hook: an https:// backend's handshake follows the connect */
	if ((__atomic_load_n(&b->flags, __ATOMIC_RELAXED) & PG_BACKEND_TLS) &&
	    (errno = -pg_tls_connect(w, &u->s, id))) {
		close(fd);
		free(u);
		return NULL;
	}
	if (path != PG_DP_COPY)
		pg_dp_upstream_setup(w, u, c, &sa, path); /* on failure u->dp stays NULL: copy */
	pg_sock_connect(w, &u->s, &sa);
	return u;
}
