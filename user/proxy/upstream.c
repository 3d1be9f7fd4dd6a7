// SPDX-License-Identifier: MIT
/*
 * The backend side of a request: connections to backends and the pool of
 * idle keep-alive ones, the response head (rewritten for the client) and
 * the body, forwarded as it arrives (zero copy from provided buffers while
 * they are plentiful) with its framing tracked to find its end. Failures
 * before any response byte reached the client go back to proxy.c for a
 * retry; later ones end the client's response visibly.
 */
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lib/boundary.h"
#include "sys/lifecycle.h"
#include "sys/log.h"
#include "control/metrics.h"
#include "proxy/proxy_internal.h"

/* --- connections and the pool -------------------------------------------------------- */

void pg_pool_remove(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_upstream **pp = &w->pool[u->backend];

	while (*pp && *pp != u)
		pp = &(*pp)->pool_next;
	if (*pp) {
		*pp = u->pool_next;
		w->pool_len[u->backend]--;
	}
	u->in_pool = false;
}

static void linger_remove(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_upstream **pp = &w->linger;

	while (*pp && *pp != u)
		pp = &(*pp)->pool_next;
	if (*pp)
		*pp = u->pool_next;
	u->lingering = false;
}

void pg_upstream_close(struct pg_worker *w, struct pg_upstream *u)
{
	if (u->in_pool)
		pg_pool_remove(w, u);
	if (u->lingering)
		linger_remove(w, u);
	pg_dp_upstream_closing(w, u); /* kernel state goes while the fd is open */
	u->c = NULL;
	pg_sock_close(w, &u->s);
}

struct pg_upstream *pg_pool_get(struct pg_worker *w, uint16_t id)
{
	struct pg_upstream *u;

	while ((u = w->pool[id])) {
		pg_pool_remove(w, u);
		if (u->epoch == w->gw->maps.backends[id].epoch && !u->s.closed) {
			u->reused = true;
			return u;
		}
		pg_upstream_close(w, u);
	}
	return NULL;
}

struct pg_upstream *pg_upstream_new(struct pg_worker *w, uint16_t id, struct pg_client *c,
				       enum pg_dp_path path)
{
	const struct pg_backend *b = &w->gw->maps.backends[id];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct pg_upstream *u;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return NULL;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	u = calloc(1, sizeof(*u));
	if (!u) {
		close(fd);
		return NULL;
	}
	u->s.fd = fd;
	u->s.kind = PG_SOCK_UPSTREAM;
	u->w = w;
	u->backend = id;
	u->epoch = b->epoch;
	u->connecting = true;
	sa.sin_addr.s_addr = b->ipv4;
	sa.sin_port = htons(b->port);
	u->path = (uint8_t)path;
	pg_dp_upstream_setup(w, u, c, &sa); /* on failure u->path is copy */
	pg_sock_connect(w, &u->s, &sa);
	return u;
}

/* The response head for the client (forward.h), with our Connection. */
static void forward_response_head(struct pg_worker *w, struct pg_client *c,
				  const struct pg_http_response *resp, const char *h, size_t n)
{
	char *out = NULL;
	size_t len = 0, cap = 0;

	if (pg_draining(w->gw))
		c->keep_alive = false; /* shutting down: this is its last response */
	c->resp_bytes += n;
	pg_fwd_response_head(h, n, resp, !c->keep_alive, &out, &len, &cap);
	if (w->gw->cfg->route_header) {
		/* Before the blank line: why this backend (--route-header). */
		char line[160], name[32];
		int k = snprintf(line, sizeof(line),
				 "X-Prefixgate-Route: backend=%s; reason=%s; matched=%u\r\n",
				 pg_backend_name(&w->gw->maps.backends[c->backend], name, sizeof(name)),
				 pg_decision_name(c->attempts > 1 ? PG_DEC_RETRY : c->choice.decision),
				 c->choice.matched);

		len -= 2;
		pg_bytes_append(&out, &len, &cap, line, (size_t)k);
		pg_bytes_append(&out, &len, &cap, "\r\n", 2);
	}
	pg_sock_queue(w, &c->s, out, len, -1, true);
}

/* Forward response body bytes (zero copy from a provided buffer while they
 * are plentiful), tracking the framing to find the end. */
static bool forward_body(struct pg_worker *w, struct pg_upstream *u, char *data, size_t len,
			 int bid)
{
	struct pg_client *c = u->c;
	size_t take = 0;
	bool done = false, kept = false;

	switch (u->rstate) {
	case PG_R_LENGTH:
		take = len < u->left ? len : (size_t)u->left;
		u->left -= take;
		done = !u->left;
		break;
	case PG_R_CHUNKED:
		while (take < len) {
			size_t used, doff, dlen;
			enum pg_chunked_rc rc =
				pg_chunked_feed(&u->ch, data + take, len - take, &used, &doff, &dlen);

			if (rc == PG_CHUNKED_ERROR) {
				pg_sock_queue_copy(w, &c->s, data, take);
				pg_backend_broke(w, c);
				return false;
			}
			take += used;
			if (rc == PG_CHUNKED_DONE) {
				done = true;
				break;
			}
		}
		break;
	case PG_R_EOF:
		take = len;
		break;
	default:
		done = true;
		break;
	}
	if (take < len)
		u->keep_alive = false; /* bytes after the response: never reuse */
	c->resp_bytes += take;
	if (take) {
		if (bid >= 0 && w->bufs_out < PG_NBUFS / 2) {
			pg_sock_queue(w, &c->s, data, take, bid, false);
			kept = true;
		} else {
			pg_sock_queue_copy(w, &c->s, data, take);
		}
	}
	if (done)
		pg_response_end(w, c, u);
	else if (c->s.qbytes > PG_RESP_QUEUE_MAX)
		pg_sock_pause(w, &u->s); /* resumed by pg_client_sent */
	return kept;
}

static void response_head(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_client *c = u->c;
	struct pg_http_response resp;
	ssize_t n;

	for (;;) {
		n = pg_http_parse_response(u->hbuf, u->hlen, c->head_method, &resp);
		if (n == 0)
			return;
		if (n < 0) {
			pg_attempt_failed(w, c, "invalid response head", true);
			return;
		}
		if (resp.status >= 200)
			break;
		if (resp.status == 101) {
			/* Upgrade is never forwarded: a switch is a broken backend,
			 * and what follows is no longer HTTP. */
			pg_attempt_failed(w, c, "101 Switching Protocols to a request without Upgrade",
					  true);
			return;
		}
		/* Other 1xx: Expect was answered by us; interim answers are dropped. */
		memmove(u->hbuf, u->hbuf + n, u->hlen - (size_t)n);
		u->hlen -= (size_t)n;
	}
	c->resp_started = true;
	c->resp_status = (uint16_t)resp.status;
	u->keep_alive = resp.keep_alive && u->path == PG_DP_COPY;
	/* Answered before the backend had the whole request (boundary.h): this
	 * connection is not pooled after it, and unless the rest of the body is
	 * small enough to drop, neither is the client's kept. */
	if (c->state == PG_C_STREAM || u->s.qbytes) {
		u->early = true;
		__atomic_fetch_add(&w->stats->early_answers, 1, __ATOMIC_RELAXED);
		if (c->state == PG_C_STREAM && !pg_early_keeps_client(c->body, c->body_left))
			c->keep_alive = false;
	}
	switch (resp.body) {
	case PG_BODY_LENGTH:
		u->left = resp.content_length;
		u->rstate = u->left ? PG_R_LENGTH : PG_R_DONE;
		break;
	case PG_BODY_CHUNKED:
		pg_chunked_init(&u->ch);
		u->rstate = PG_R_CHUNKED;
		break;
	case PG_BODY_EOF:
		c->keep_alive = false; /* the close is the end of the body */
		u->rstate = PG_R_EOF;
		break;
	default:
		u->rstate = PG_R_DONE;
		break;
	}
	forward_response_head(w, c, &resp, u->hbuf, (size_t)n);
	u->hlen -= (size_t)n;
	if (u->rstate == PG_R_DONE && !u->hlen) {
		pg_response_end(w, c, u);
		return;
	}
	/* Body bytes that came with the head. */
	forward_body(w, u, u->hbuf + n, u->hlen, -1);
	if (!u->s.closed) {
		u->hlen = 0;
		if (u->path != PG_DP_COPY && c->up == u)
			pg_dp_body_start(w, u); /* the rest of the body via the kernel */
	}
}

void pg_upstream_frame(const struct pg_upstream *u, struct pg_frame *f)
{
	memset(f, 0, sizeof(*f));
	if (u->rstate == PG_R_LENGTH) {
		f->kind = PG_FRAME_LENGTH;
		f->remaining = u->left;
	} else if (u->rstate == PG_R_CHUNKED) {
		*f = u->ch.f;
	}
}

bool pg_upstream_take_frame(struct pg_worker *w, struct pg_upstream *u, const struct pg_frame *f)
{
	if (u->rstate == PG_R_LENGTH && f->kind == PG_FRAME_LENGTH)
		u->left = f->remaining;
	else if (u->rstate == PG_R_CHUNKED && f->kind == PG_FRAME_CHUNKED)
		u->ch.f = *f;
	else
		return false;
	if (!pg_frame_done(f) || !u->c)
		return false;
	pg_response_end(w, u->c, u);
	return true;
}

bool pg_upstream_data(struct pg_worker *w, struct pg_upstream *u, char *data, size_t len, int bid)
{
	if (!u->c) {
		pg_upstream_close(w, u); /* an idle connection must not speak */
		return false;
	}
	if (u->spliced) {
		pg_dp_sync(w, u);
		if (u->c == NULL || u->s.closed)
			return false; /* the redirected bytes completed the response */
	}
	u->rx += len;
	if (u->rstate != PG_R_HEAD) {
		bool kept = forward_body(w, u, data, len, bid);

		if (u->spliced && !u->s.closed)
			pg_dp_forwarded(w, u);
		return kept;
	}
	if (u->hlen + len > PG_HTTP_MAX_HEAD) {
		pg_attempt_failed(w, u->c, "response head too large", true);
		return false;
	}
	pg_bytes_append(&u->hbuf, &u->hlen, &u->hcap, data, len);
	response_head(w, u);
	return false;
}

void pg_upstream_eof(struct pg_worker *w, struct pg_upstream *u, int err)
{
	struct pg_client *c = u->c;

	u->peer_closed = true;
	if (!c) {
		pg_upstream_close(w, u);
		return;
	}
	if (u->spliced && !err) {
		pg_dp_sync(w, u);
		if (u->c != c || u->s.closed)
			return; /* the redirected bytes completed the response */
	}
	/* A framed body cut short by the close is a broken response: the
	 * client sees it end without its last chunk or short of its length. */
	if (u->rstate == PG_R_EOF && !err) {
		u->keep_alive = false;
		pg_response_end(w, c, u);
	} else if (u->rstate == PG_R_HEAD && !c->resp_started) {
		pg_attempt_failed(w, c, err ? strerror(-err) : "connection closed before a response",
			       !u->reused);
	} else {
		pg_backend_broke(w, c);
	}
}

void pg_upstream_connected(struct pg_worker *w, struct pg_upstream *u, int res)
{
	struct pg_client *c = u->c;

	u->connecting = false;
	if (res == 0) {
		u->s.can_send = true;
		pg_sock_flush(w, &u->s);
		if (c && c->state == PG_C_STREAM)
			pg_client_advance(w, c);
		return;
	}
	if (!c) {
		pg_upstream_close(w, u);
		return;
	}
	pg_attempt_failed(w, c, res == -ECANCELED ? "connect timed out" : strerror(-res), true);
}

void pg_upstream_sent(struct pg_worker *w, struct pg_upstream *u, int err)
{
	struct pg_client *c = u->c;

	if (!c) {
		if (err)
			pg_upstream_close(w, u);
		return;
	}
	if (err) {
		if (!c->resp_started && !c->streamed)
			pg_attempt_failed(w, c, strerror(-err), !u->reused);
		else
			pg_backend_broke(w, c);
		return;
	}
	if (!c->first_sent) {
		c->first_sent = true;
		pg_stats_send_latency(w->stats, pg_now_ns() - c->t0_ns);
	}
	if (c->state == PG_C_STREAM && u->s.qbytes < PG_REQ_QUEUE_MAX / 2) {
		pg_sock_recv(w, &c->s);
		pg_client_advance(w, c);
	}
}

void pg_upstream_free(struct pg_upstream *u)
{
	free(u->hbuf);
	free(u);
}
void pg_pool_put(struct pg_worker *w, struct pg_upstream *u)
{
	u->in_pool = true;
	u->reused = false;
	u->idle_since_ms = w->now_ms;
	u->pool_next = w->pool[u->backend];
	w->pool[u->backend] = u;
	w->pool_len[u->backend]++;
}

void pg_upstream_linger(struct pg_worker *w, struct pg_upstream *u)
{
	pg_dp_upstream_closing(w, u); /* kernel state goes now: nothing more to splice */
	u->c = NULL;
	u->lingering = true;
	u->idle_since_ms = w->now_ms;
	u->pool_next = w->linger;
	w->linger = u;
	pg_sock_recv(w, &u->s); /* its EOF (or any byte) closes it */
}

void pg_pool_tick(struct pg_worker *w)
{
	const struct pg_backend *bs = w->gw->maps.backends;

	for (struct pg_upstream *u = w->linger, *un; u; u = un) {
		un = u->pool_next;
		if (w->now_ms - u->idle_since_ms > PG_LINGER_MS)
			pg_upstream_close(w, u);
	}

	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		struct pg_upstream *u, *un;

		for (u = w->pool[id]; u; u = un) {
			un = u->pool_next;
			if (w->now_ms - u->idle_since_ms > PG_POOL_IDLE_MS || u->epoch != bs[id].epoch ||
			    !(bs[id].flags & PG_BACKEND_ACTIVE))
				pg_upstream_close(w, u);
		}
	}
}

void pg_pool_close_all(struct pg_worker *w)
{
	while (w->linger)
		pg_upstream_close(w, w->linger);
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++)
		while (w->pool[id])
			pg_upstream_close(w, w->pool[id]);
}
