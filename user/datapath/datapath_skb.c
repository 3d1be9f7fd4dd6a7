// SPDX-License-Identifier: MIT
/*
 * The sockmap path (sk_skb verdict on the gateway's backend socket: any
 * backend): draining, pairing, and finding the end (datapath_internal.h).
 *
 * sockmap (any backend), per request:
 *   fresh connection, request with "Connection: close" -> the proxy reads the
 *   head -> STOPPING: cancel the multishot recv, wait for its last CQE ->
 *   DRAIN: read the socket to EAGAIN (a partly read queue breaks the
 *   stream), forward it, wait until the client's send queue is empty ->
 *   PAIRED: pg_splice_pair with the decoder's state, one POLLRDHUP poll ->
 *   WAIT: FIN seen (or the 100 ms tick found a fall-back or the body's end)
 *   -> poll pg_splice_progress with back-off until drained -> the program's
 *   state says the body is complete: the response ends (client kept), or
 *   COPY: multishot recv again for passed bytes and the EOF, decoded from
 *   that state -> unpair while the fd is open -> close.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include "sys/accesslog.h"
#include "datapath/datapath_internal.h"
#include "proxy/sock.h"
#include "sys/log.h"

static void skb_try_pair(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;
	struct pg_client *c = u->c;
	uint64_t carried;
	int rc;

	/* Redirected bytes join the client's queue behind what it holds: the
	 * proxy's own bytes must all be there first. */
	if (c->s.qbytes || c->s.send_busy)
		return; /* pg_dp_client_sent comes back */
	if (pg_alog_on(w->gw->alog) && !c->x.dp_base && !pg_dp_carried(c->s.fd, &carried))
		pg_dp_mark_base(c, carried);
	rc = pg_splice_pair_ring(dp->sp, u->s.fd, c->s.fd, dp->budget, &u->frame, w->id, &d->key);
	if (rc) {
		pg_dp_warn(w, "pair sockets", rc);
		d->sstate = PG_SP_COPY;
		pg_sock_recv(w, &u->s);
		return;
	}
	d->sstate = PG_SP_PAIRED;
	d->polling = true;
	pg_sock_poll_rdhup(w, &u->s);
}

/* skb DRAIN: read to EAGAIN (bounded by the client's queue), then pair. */
void pg_dp_skb_drain(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_client *c = u->c;
	char buf[DP_READ_MAX];

	while (c->s.qbytes <= PG_RESP_QUEUE_MAX) {
		ssize_t n = recv(u->s.fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0) {
			pg_upstream_input(w, u, buf, (size_t)n, -1);
			if (u->s.closed || u->state != PG_U_BODY)
				return; /* failed, or the body is complete */
			continue;
		}
		if (n == 0) {
			pg_upstream_ended(w, u, 0);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			skb_try_pair(w, u);
		else
			pg_upstream_ended(w, u, -errno);
		return;
	}
}

void pg_dp_wait_add(struct pg_worker *w, struct pg_dp_conn *d)
{
	d->sstate = PG_SP_WAIT;
	d->wait_ms = 1;
	d->wait_at_ms = w->now_ms;
	if (!d->on_wait) {
		d->on_wait = true;
		d->wait_next = w->dp_wait;
		w->dp_wait = d;
	}
}

void pg_dp_wait_remove(struct pg_worker *w, struct pg_dp_conn *d)
{
	struct pg_dp_conn **pp = &w->dp_wait;

	if (!d->on_wait)
		return;
	while (*pp && *pp != d)
		pp = &(*pp)->wait_next;
	if (*pp)
		*pp = d->wait_next;
	d->on_wait = false;
}

void pg_dp_polled(struct pg_worker *w, struct pg_upstream *u, int res)
{
	struct pg_dp_conn *d = u->dp;

	if (!d)
		return;
	d->polling = false;
	if (d->sstate != PG_SP_PAIRED || res == -ECANCELED || !u->c)
		return;
	/* FIN or error: redirects may still be on their way to the client. */
	pg_dp_wait_add(w, d);
}

unsigned pg_dp_next_ms(struct pg_worker *w)
{
	uint64_t next = w->now_ms + 100;

	for (struct pg_dp_conn *d = w->dp_wait; d; d = d->wait_next)
		if (d->wait_at_ms < next)
			next = d->wait_at_ms;
	return next <= w->now_ms ? 0 : (unsigned)(next - w->now_ms);
}

void pg_dp_run(struct pg_worker *w)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn **pp = &w->dp_wait;

	while (*pp) {
		struct pg_dp_conn *d = *pp;
		struct pg_upstream *u = d->u;
		struct pg_splice_progress pr;

		if (w->now_ms < d->wait_at_ms) {
			pp = &d->wait_next;
			continue;
		}
		if (!pg_splice_progress(dp->sp, u->s.fd, u->c->s.fd, &pr) && !pr.drained) {
			/* A stalled client: back off up to DP_WAIT_MAX_MS. */
			d->wait_at_ms = w->now_ms + d->wait_ms;
			if (d->wait_ms < DP_WAIT_MAX_MS)
				d->wait_ms *= 2;
			pp = &d->wait_next;
			continue;
		}
		/* Every redirected byte is in the client's queue: what the program
		 * passed, and the EOF, are the proxy's to read and forward now. */
		*pp = d->wait_next;
		d->on_wait = false;
		if (pr.peer.flags & PG_SPLICE_F_BROKEN) {
			/* The program could not keep the stream intact (see
			 * skb_cut_repeat): the client must not take it as whole. */
			pg_dp_warn(w, "repeated bytes could not be cut", -EIO);
			pg_upstream_ended(w, u, -EIO);
			continue;
		}
		/* Where the body stands after the redirected bytes: complete
		 * (the program saw its end), or the proxy decodes the rest. */
		if (pg_upstream_take_frame(w, u, &pr.peer.frame))
			continue;
		d->sstate = PG_SP_COPY;
		pg_sock_recv(w, &u->s);
	}
}

/* Every pairing of this worker whose flags say the kernel is done with it
 * (fell back, broke, or saw the body's end): when events were lost. */
static void skb_scan(struct pg_worker *w)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_splice_peer peer;

	for (struct pg_client *c = w->busy.head; c; c = c->next) {
		struct pg_upstream *u = c->x.up;

		if (u && u->dp && u->dp->sstate == PG_SP_PAIRED &&
		    !pg_splice_peer_get(dp->sp, u->s.fd, &peer) &&
		    (peer.flags & (PG_SPLICE_F_FALLBACK | PG_SPLICE_F_BROKEN | PG_SPLICE_F_DONE)))
			pg_dp_wait_add(w, u->dp);
	}
}

/* One event of this worker's ring: its pairing is to be checked. A record
 * can name a pairing unpaired since (socket cookies are never reused). */
static void on_event(void *ctx, const struct pg_splice_event *ev)
{
	struct pg_worker *w = ctx;

	for (struct pg_client *c = w->busy.head; c; c = c->next) {
		struct pg_upstream *u = c->x.up;

		if (u && u->dp && u->dp->sstate == PG_SP_PAIRED && u->dp->key == ev->key) {
			pg_dp_wait_add(w, u->dp);
			return;
		}
	}
}

int pg_dp_events_fd(struct pg_worker *w)
{
	struct pg_datapath *dp = w->gw->dp;

	if (!dp || dp->mode != PG_DP_SKB)
		return -1;
	return pg_splice_events_ring_fd(dp->sp, w->id);
}

void pg_dp_events(struct pg_worker *w)
{
	struct pg_datapath *dp = w->gw->dp;
	__u64 lost = 0;

	if (!dp || dp->mode != PG_DP_SKB)
		return;
	/* A fall-back (a slow client) or a broken stream is written with a
	 * wake-up (the worker polls the ring's fd); the body's end without one,
	 * since the backend's FIN wakes the worker anyway. Drained at every
	 * wake-up, so an end whose FIN never comes is found within the loop's
	 * 100 ms timeout. */
	if (pg_splice_events_drain(dp->sp, w->id, on_event, w, &lost) < 0 || lost)
		skb_scan(w);
}
