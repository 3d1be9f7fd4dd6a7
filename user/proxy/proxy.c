// SPDX-License-Identifier: MIT
/*
 * The HTTP state machine of one client connection and the backend
 * connection serving its current request. Requests on a connection are
 * served one at a time, in order (pipelined requests wait in the input
 * buffer), each routed by its own key.
 *
 * A request goes HEAD -> KEY (read the body bytes its key needs) -> routed
 * and dispatched -> STREAM (rest of the body) -> WAIT (response streaming
 * back) -> HEAD; a response that ends while the body is still coming (an
 * early answer) goes to DISCARD (drop the rest, then HEAD) or closes the
 * connection, and its backend connection is never pooled (boundary.h has
 * the invariant, pg_response_end applies it). What an attempt sends first (rewritten head plus the body
 * held for the key) stays in c->fwd, so a failed connect or a stale pooled
 * connection can be retried elsewhere as long as no response byte reached
 * the client and no body byte beyond c->fwd was sent.
 *
 * The in-flight slot of a backend is taken at dispatch and given back
 * exactly once: when the backend has sent the whole response, when the
 * client goes away, or when the attempt fails (c->counted guards it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netinet/tcp.h>
#include <unistd.h>
#include "lib/boundary.h"
#include "datapath/datapath.h"
#include "control/accesslog.h"
#include "sys/lifecycle.h"
#include "sys/log.h"
#include "state/route.h"
#include "proxy/proxy_internal.h"
#include "proxy/worker.h"

#define LINGER_MS 2000

/* --- answers of the gateway's own --------------------------------------------- */

static const char *reason(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 417: return "Expectation Failed";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

static void reply(struct pg_worker *w, struct pg_client *c, int status, const char *msg, bool close)
{
	char body[256], head[256];
	int bl, hl;

	bl = snprintf(body, sizeof(body),
		      "{\"error\":{\"message\":\"%s\",\"type\":\"prefixgate_error\",\"code\":%d}}\n",
		      msg, status);
	hl = snprintf(head, sizeof(head),
		      "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n",
		      status, reason(status), bl, close ? "Connection: close\r\n" : "");
	pg_sock_queue_copy(w, &c->s, head, (size_t)hl);
	pg_sock_queue_copy(w, &c->s, body, (size_t)bl);
}

/* --- request bookkeeping ---------------------------------------------------- */

static void release_slot(struct pg_worker *w, struct pg_client *c)
{
	if (c->counted) {
		pg_inflight_release(w->gw, c->backend);
		c->counted = false;
	}
}


/* One access-log record for the request ending now (off unless --access-log). */
static void log_request(struct pg_worker *w, struct pg_client *c, unsigned status,
			enum pg_alog_outcome outcome)
{
	uint64_t now = pg_now_ns();
	struct pg_alog_rec r = {
	    .wall_ms = pg_wall_ms() - (c->t0_ns ? (now - c->t0_ns) / 1000000 : 0),
	    .key_hash = c->key.hash,
	    .bytes_in = c->fwd_len + c->streamed,
	    .bytes_out = c->resp_bytes,
	    .route_us = c->route_ns / 1000,
	    .total_us = c->t0_ns ? (uint32_t)((now - c->t0_ns) / 1000) : 0,
	    .status = (uint16_t)status,
	    .backend = c->backend,
	    .decision = c->attempts > 1 ? PG_DEC_RETRY : c->choice.decision,
	    .key_source = c->key.source,
	    .outcome = (uint8_t)outcome,
	    .attempts = c->attempts,
	};

	if (pg_alog_enabled() && c->t0_ns)
		pg_alog_push(w->id, &r);
}

/* Forget the current request (after its response, or when giving up). */
static void request_reset(struct pg_worker *w, struct pg_client *c)
{
	release_slot(w, c);
	if (c->up) {
		pg_upstream_close(w, c->up); /* drops any segment borrowing c->fwd */
		c->up = NULL;
	}
	free(c->fwd);
	free(c->kbuf);
	free(c->hdr_key);
	c->fwd = c->kbuf = c->hdr_key = NULL;
	c->fwd_len = c->fwd_cap = c->klen = c->kcap = c->hdr_key_len = 0;
	c->fwd_head = 0;
	c->fwd_close = false;
	memset(&c->tried, 0, sizeof(c->tried));
	c->attempts = 0;
	c->t0_ns = 0;
	c->resp_started = false;
	c->streamed = 0;
	c->ch_off = 0;
	c->ch_done = false;
	c->body_seen = 0;
	c->backend = 0;
	c->first_sent = false;
	c->sent_ms = 0;
	c->resp_status = 0;
	c->resp_bytes = 0;
	c->route_ns = 0;
	memset(&c->key, 0, sizeof(c->key));
	if (c->admitted) {
		pg_admit_release(w->gw);
		c->admitted = false;
	}
}

static void client_close(struct pg_worker *w, struct pg_client *c)
{
	if (c->s.closed)
		return;
	request_reset(w, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	w->nclients--;
	pg_sock_close(w, &c->s);
}

/* Answer, then close gracefully: flush, shut our side, drain the client's
 * input for a while so the kernel does not reset the answer away. */
void pg_client_linger(struct pg_worker *w, struct pg_client *c)
{
	request_reset(w, c);
	c->state = PG_C_LINGER;
	c->in_len = 0;
	c->head_scan = 0;
	c->linger_until_ms = w->now_ms + LINGER_MS;
	pg_sock_recv(w, &c->s);
	if (!c->s.qbytes && !c->shut) {
		shutdown(c->s.fd, SHUT_WR);
		c->shut = true;
	}
}

void pg_client_error(struct pg_worker *w, struct pg_client *c, int status, const char *msg)
{
	__atomic_fetch_add(status >= 500 ? &w->stats->no_backend : &w->stats->client_errors, 1,
			   __ATOMIC_RELAXED);
	log_request(w, c, c->resp_started ? c->resp_status : (unsigned)status, PG_ALOG_GATEWAY);
	if (c->resp_started) {
		client_close(w, c); /* mid-response: the truncation tells the client */
		return;
	}
	reply(w, c, status, msg, true);
	pg_client_linger(w, c);
}

/* --- dispatch ----------------------------------------------------------------- */



/* A spliced response ends with the backend's FIN: ask for it. */
static void fwd_add_close(struct pg_client *c)
{
	static const char hdr[] = "Connection: close\r\n";
	size_t n = sizeof(hdr) - 1, at = c->fwd_head - 2; /* before the blank line */

	if (c->fwd_close)
		return;
	pg_bytes_append(&c->fwd, &c->fwd_len, &c->fwd_cap, hdr, n);
	memmove(c->fwd + at + n, c->fwd + at, c->fwd_len - n - at);
	memcpy(c->fwd + at, hdr, n);
	c->fwd_head += n;
	c->fwd_close = true;
}

/* Send the request to backend id (pooled connection unless fresh). */
void pg_attempt(struct pg_worker *w, struct pg_client *c, uint16_t id, unsigned decision,
		    bool fresh)
{
	enum pg_dp_path path = pg_dp_choose(w, id, c->head_method, c->key.stream);
	struct pg_upstream *u;

	if (path != PG_DP_COPY) {
		fresh = true; /* one connection per spliced response */
		fwd_add_close(c);
	}
	u = fresh ? NULL : pg_pool_get(w, id);
	c->backend = id;
	c->sent_ms = w->now_ms;
	c->attempts++;
	pg_idset_add(&c->tried, id);
	pg_inflight_take(w->gw, id, decision);
	c->counted = true;
	if (!u)
		u = pg_upstream_new(w, id, c, path);
	if (!u) {
		pg_attempt_failed(w, c, strerror(errno), false);
		return;
	}
	u->c = c;
	u->rstate = PG_R_HEAD;
	u->hlen = 0;
	u->early = false;
	c->up = u;
	pg_sock_queue(w, &u->s, c->fwd, c->fwd_len, -1, false); /* borrowed: kept for retries */
	pg_sock_recv(w, &u->s);
}

void pg_attempt_failed(struct pg_worker *w, struct pg_client *c, const char *why,
			   bool mark_down)
{
	struct pg_backend *b = &w->gw->maps.backends[c->backend];
	struct pg_upstream *u = c->up;
	bool stale = u && u->reused && !mark_down;
	uint16_t id;

	if (u) {
		c->up = NULL;
		pg_upstream_close(w, u);
	}
	__atomic_fetch_add(&b->failures, 1, __ATOMIC_RELAXED);
	if (mark_down) {
		uint16_t old;
		char name[32];

		__atomic_store_n(&b->down_until_ms, w->now_ms + PG_DOWN_MS, __ATOMIC_RELAXED);
		old = __atomic_fetch_or(&b->flags, PG_BACKEND_DOWN, __ATOMIC_RELAXED);
		if (!(old & PG_BACKEND_DOWN))
			pg_warn("backend %s down for %d ms: %s", pg_backend_name(b, name, sizeof(name)),
				PG_DOWN_MS, why);
	}
	release_slot(w, c);
	if (c->resp_started || c->streamed || c->attempts >= PG_MAX_ATTEMPTS) {
		pg_client_error(w, c, 502, "backend failed");
		return;
	}
	if (stale) {
		/* A pooled connection the backend had closed: same backend, fresh. */
		pg_attempt(w, c, c->backend, PG_DEC_RETRY, true);
		return;
	}
	id = pg_route_again(w->gw, &c->key, &c->tried, pg_worker_rand(w), &c->choice);
	if (!id) {
		pg_client_error(w, c, 502, "no healthy backend");
		return;
	}
	pg_attempt(w, c, id, PG_DEC_RETRY, false);
}

/* --- client socket events ---------------------------------------------------------- */

struct pg_client *pg_client_new(struct pg_worker *w, int fd)
{
	struct pg_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->s.fd = fd;
	c->s.kind = PG_SOCK_CLIENT;
	c->s.can_send = true;
	c->w = w;
	c->state = PG_C_HEAD;
	c->idle_since_ms = c->last_rx_ms = w->now_ms;
	w->nclients++;
	c->next = w->clients;
	if (c->next)
		c->next->prev = c;
	w->clients = c;
	__atomic_fetch_add(&w->stats->connections, 1, __ATOMIC_RELAXED);
	return c;
}

bool pg_client_data(struct pg_worker *w, struct pg_client *c, char *data, size_t len)
{
	if (c->state == PG_C_LINGER)
		return false; /* discarded */
	c->last_rx_ms = w->now_ms;
	pg_bytes_append(&c->in, &c->in_len, &c->in_cap, data, len);
	pg_client_advance(w, c);
	/* Bound what one connection makes us hold: the key's bytes at most while
	 * reading them, a pipeline's worth otherwise. */
	if (!c->s.closed && c->state != PG_C_KEY && c->in_len > PG_PIPELINE_MAX)
		pg_sock_pause(w, &c->s);
	return false;
}

void pg_client_eof(struct pg_worker *w, struct pg_client *c, int err)
{
	(void)err;
	if (c->state != PG_C_LINGER && (c->up || c->counted)) {
		__atomic_fetch_add(&w->stats->aborted, 1, __ATOMIC_RELAXED);
		log_request(w, c, c->resp_status, PG_ALOG_CLIENT_ABORT);
	}
	/* The client is gone: the backend connection closes with it, so the
	 * inference server stops generating for nobody. */
	client_close(w, c);
}

void pg_client_sent(struct pg_worker *w, struct pg_client *c)
{
	if (c->state == PG_C_LINGER) {
		if (!c->s.qbytes && !c->shut) {
			shutdown(c->s.fd, SHUT_WR);
			c->shut = true;
		}
		return;
	}
	if (pg_dp_client_sent(w, c))
		return;
	if (c->up && !c->up->s.want_recv && !c->up->s.closed && c->s.qbytes < PG_RESP_QUEUE_MAX / 2)
		pg_sock_recv(w, &c->up->s);
}

void pg_client_free(struct pg_client *c)
{
	free(c->in);
	free(c->fwd);
	free(c->kbuf);
	free(c->hdr_key);
	free(c);
}

/* --- the response's end, as the client sees it ---------------------------------- */

/* The only place a used backend connection goes back to the pool: under
 * the invariant of boundary.h. */
void pg_response_end(struct pg_worker *w, struct pg_client *c, struct pg_upstream *u)
{
	const struct pg_backend *b = &w->gw->maps.backends[u->backend];
	const struct pg_reuse r = {
	    .request_complete = c->state != PG_C_STREAM,
	    .request_flushed = !u->s.qbytes,
	    .early = u->early,
	    .resp_reusable = u->keep_alive,
	    .head_request = c->head_method,
	    .open = !u->s.closed && !u->peer_closed,
	    .member = u->epoch == b->epoch && (b->flags & PG_BACKEND_ACTIVE),
	    .room = w->pool_len[u->backend] < PG_POOL_MAX,
	};
	bool owed = c->state == PG_C_STREAM; /* the rest of its body is still coming */

	log_request(w, c, c->resp_status, PG_ALOG_OK);
	release_slot(w, c);
	c->up = NULL;
	u->c = NULL;
	if (pg_reuse_ok(&r))
		pg_pool_put(w, u);
	else if (u->spliced && !u->peer_closed && !u->s.closed)
		pg_upstream_linger(w, u);
	else
		pg_upstream_close(w, u);
	/* The client's side of an early answer was settled at its head
	 * (boundary.h): drop the rest of the body, or close. */
	if (owed && !pg_early_keeps_client(c->body, c->body_left))
		c->keep_alive = false;
	if (!c->keep_alive) {
		pg_client_linger(w, c);
		return;
	}
	request_reset(w, c);
	c->state = owed ? PG_C_DISCARD : PG_C_HEAD;
	c->idle_since_ms = w->now_ms;
	pg_sock_recv(w, &c->s);
	pg_client_advance(w, c);
}

/* Mid-response failure of the backend: the client gets what was sent and a
 * close (a chunked stream without its last chunk, or a short body). */
void pg_backend_broke(struct pg_worker *w, struct pg_client *c)
{
	__atomic_fetch_add(&w->stats->backend_errors, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&w->gw->maps.backends[c->backend].failures, 1, __ATOMIC_RELAXED);
	log_request(w, c, c->resp_status, PG_ALOG_BACKEND_ERROR);
	c->keep_alive = false;
	pg_client_linger(w, c);
}


/* --- housekeeping ------------------------------------------------------------------ */

/* Enforce the timeouts on one client; true if it was closed or answered. */
static bool client_timeouts(struct pg_worker *w, struct pg_client *c, const struct pg_timeouts *t,
			    bool draining)
{
	uint64_t now = w->now_ms;

	switch (c->state) {
	case PG_C_LINGER:
		if (now < c->linger_until_ms)
			return false;
		client_close(w, c);
		return true;
	case PG_C_HEAD:
		if (!c->in_len) {
			/* Idle keep-alive connection (closed at once when draining). */
			if (!draining && now - c->idle_since_ms < t->idle_ms)
				return false;
			client_close(w, c);
			return true;
		}
		if (now - c->t0_ns / 1000000 < t->header_ms)
			return false;
		pg_client_error(w, c, 408, "request head timed out");
		return true;
	case PG_C_DISCARD:
		/* Its answer is out: a stalled tail just ends the connection. */
		if (c->s.want_recv && now - c->last_rx_ms >= t->body_ms) {
			client_close(w, c);
			return true;
		}
		return false;
	case PG_C_KEY:
	case PG_C_STREAM:
		/* Only while we want its bytes: our own backpressure is no stall. */
		if (c->s.want_recv && now - c->last_rx_ms >= t->body_ms) {
			pg_client_error(w, c, 408, "request body timed out");
			return true;
		}
		/* A streaming request may have a backend answering too. */
		__attribute__((fallthrough));
	case PG_C_WAIT:
		if (c->resp_started || !c->sent_ms || now - c->sent_ms < t->first_byte_ms)
			return false;
		__atomic_fetch_add(&w->gw->maps.backends[c->backend].failures, 1, __ATOMIC_RELAXED);
		pg_client_error(w, c, 504, "backend sent no response in time");
		return true;
	}
	return false;
}

void pg_proxy_tick(struct pg_worker *w)
{
	const struct pg_timeouts *t = &w->gw->cfg->timeouts;
	bool draining = pg_draining(w->gw);
	struct pg_client *c, *next;

	pg_dp_tick(w);
	for (c = w->clients; c; c = next) {
		next = c->next;
		client_timeouts(w, c, t, draining);
	}
	pg_pool_tick(w);
}

void pg_proxy_shutdown(struct pg_worker *w)
{
	while (w->clients)
		client_close(w, w->clients);
	pg_pool_close_all(w);
}
