// SPDX-License-Identifier: MIT
/*
 * The sockmsg path (sk_msg verdict on a same-host backend's own socket):
 * the gate and taking the body's state back (datapath_internal.h).
 *
 * sockmsg (same-host backend), per request:
 *   socket -> bind(backend address, port 0) -> route with its gate closed ->
 *   connect (the sockops program puts the backend's socket in the sockmap) ->
 *   request -> every backend write is passed to the proxy while the gate is
 *   closed: the proxy reads the head, rewrites it, forwards it and whatever
 *   body came with it -> once the client's send queue is empty (every byte
 *   the proxy read is in the client's kernel queue) it opens the gate at the
 *   count of bytes it received -> later writes go straight to the client
 *   socket inside the backend's send(). A write over the budget of an
 *   opening (slow client) is passed instead: the proxy forwards it and
 *   reopens when its queue is empty again. Each opening hands the program
 *   the decoder's state; the write that ends the body is passed, so the
 *   proxy decodes it (from the state the program hands back, pg_dp_sync)
 *   and ends the response, keeping the client connection.
 */
#include <errno.h>
#include <string.h>
#include "datapath/datapath_internal.h"
#include "proxy/sock.h"

/* msg: open the gate at the bytes received, once all are in the client's
 * kernel queue (nothing queued or being sent by the proxy), handing the
 * program the decoder's state at that count. */
void pg_dp_msg_gate(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;
	struct pg_client *c = u->c;
	__u64 room = 0;
	uint16_t gen;
	int rc;

	if (d->sstate != PG_SP_MSG || !d->spliced || !c || u->state != PG_U_BODY || c->s.qbytes ||
	    c->s.send_busy || d->gate_at == d->rx || u->s.closed)
		return;
	gen = (uint16_t)(d->gate_gen + 1);
	if (!gen)
		gen = 1; /* the program starts at generation 0: never reuse it */
	/* Redirect no more than half the room left in the client's send
	 * buffer (the rest covers buffer overhead): a redirect into a full
	 * buffer is a short write for a non-blocking backend, after which the
	 * program's framing state cannot be trusted (pg_dp_sync). With less
	 * room the gate stays closed and the backend's writes come to us;
	 * each one we forward brings us back here. */
	rc = pg_splice_send_room(c->s.fd, &room);
	if (!rc && room < 2 * DP_OPEN_MIN)
		return;
	if (!rc)
		rc = pg_splice_carried(c->s.fd, &d->carried_at);
	if (!rc)
		pg_dp_mark_base(c, d->carried_at);
	if (!rc)
		rc = pg_splice_route_gate(dp->sp, u->s.fd, &d->sa, PG_SPLICE_GATE(d->rx, gen),
		                          &u->frame, room / 2 < dp->budget ? room / 2 : dp->budget);
	if (rc) {
		pg_dp_warn(w, "open gate", rc);
		d->sstate = PG_SP_NONE; /* closed for good: the proxy copies the rest */
		pg_splice_route_del(dp->sp, u->s.fd, &d->sa);
		return;
	}
	d->gate_gen = gen;
	d->gate_at = d->rx;
}

void pg_dp_forwarded(struct pg_worker *w, struct pg_upstream *u)
{
	if (u->dp)
		pg_dp_msg_gate(w, u);
}

void pg_dp_sync(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;
	struct pg_splice_peer r;
	__u64 carried = 0;
	int rc;

	/* Only what arrives while the gate is open at our count can follow
	 * redirected bytes (anything else was passed before it opened), and
	 * the program takes the gate's state at the first write it sees of a
	 * generation: no write seen, no bytes redirected, our state stands.
	 * The backend's writes are serialised by its socket lock and each
	 * reaches us only after its verdict, so the state read here is final
	 * for this opening. */
	if (!d || d->sstate != PG_SP_MSG || d->gate_at != d->rx || d->synced_gen == d->gate_gen)
		return;
	d->synced_gen = d->gate_gen;
	rc = pg_splice_route_get(dp->sp, u->s.fd, &d->sa, &r);
	if (!rc && r.gate_gen != d->gate_gen)
		return; /* no write seen since the opening: nothing redirected */
	if (!rc && u->c)
		rc = pg_splice_carried(u->c->s.fd, &carried);
	/*
	 * The program advances its state over each write it redirects, but a
	 * non-blocking backend facing a full client socket gets a short count:
	 * only part of that write reached the client, and the backend sends the
	 * rest again. The client socket carried exactly the redirected bytes
	 * since the opening (the proxy wrote nothing meanwhile); if that is not
	 * what the program offered, its state is off by the bytes sent twice.
	 */
	if (!rc && carried - d->carried_at == r.since) {
		pg_upstream_take_frame(w, u, &r.frame);
		return;
	}
	/* Where the body stands is unknown: it ends with the backend's close,
	 * and so does the client's connection (a body cut short shows as one). */
	if (rc)
		pg_dp_warn(w, "read route", rc);
	memset(&u->frame, 0, sizeof(u->frame)); /* PG_FRAME_NONE */
	if (u->c)
		u->c->x.keep_alive = false;
	/* Nothing more to track: the proxy copies the rest. */
	d->sstate = PG_SP_NONE;
	pg_splice_route_del(dp->sp, u->s.fd, &d->sa);
	__atomic_fetch_add(&w->stats->splice_unframed, 1, __ATOMIC_RELAXED);
}
