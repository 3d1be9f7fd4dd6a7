// SPDX-License-Identifier: MIT
/*
 * Flow control across a fleet (doc/routing.md "Flow control", Fleets): each
 * gateway tells the others, on prefixgate.CLUSTER.flow every 20 ms, the
 * work it served each tenant since its last message and each tenant's
 * requests queued there. A gateway charges the peers' work to its own
 * tenants' counters (lib/flow.h pg_flow_heard), so that tenants share the
 * fleet by weight rather than each gateway; and it counts the peers'
 * queued requests as waiting (service is counted while anyone waits, in
 * the fleet) and shows them (GET /flow, /metrics).
 */
#include <string.h>
#include "fleet/fleet_internal.h"
#include "state/flowctl.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* Peer slot j's queued counts become q (NULL: none), the tenants' and the
 * total's sums following (under mu). */
static void column(struct pg_fleet *f, unsigned j, const uint32_t *q)
{
	struct pg_flowctl *fc = f->gw->flow;

	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++) {
		const uint32_t was = f->flow_q[j][t], now = q ? q[t] : 0;

		if (was == now)
			continue;
		/* (unsigned: a fall wraps, and adds up right) */
		__atomic_fetch_add(&fc->tenants.t[t].peer_queued, now - was, __ATOMIC_RELAXED);
		__atomic_fetch_add(&fc->peer_queued, now - was, __ATOMIC_RELAXED);
		f->flow_q[j][t] = now;
	}
}

void pg_fleet_flow_peers(struct pg_fleet *f)
{
	if (!f->gw->flow)
		return;
	for (unsigned j = 0; j < PG_FLEET_MAX_PEERS; j++)
		if (f->flow_owner[j][0] && strcmp(f->flow_owner[j], f->peers.p[j].id)) {
			column(f, j, NULL); /* gone, or its slot another's */
			f->flow_owner[j][0] = '\0';
		}
}

void pg_fleet_on_flow(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	static uint32_t q[PG_FLOW_TENANTS]; /* under mu */
	struct pg_fleet *f = closure;
	struct pg_flowctl *fc = f->gw->flow;
	struct pg_fleet_entry e;
	struct pg_fleet_hdr h;
	struct pg_fleet_dec d;
	int j = -1;

	(void)nc;
	(void)sub;
	if (!pg_fleet_msg_begin(f, msg, PG_FLEET_MSG_FLOW, &d, &h) || !fc)
		goto out;
	pthread_mutex_lock(&f->mu);
	memset(q, 0, sizeof(q));
	while (pg_fleet_dec_next(&d, PG_FLEET_MSG_FLOW, &e)) {
		unsigned t = pg_flow_heard(&fc->tenants, e.flow.key, e.addr, e.flow.served);

		q[t] += e.flow.queued;
		COUNT(f, flow_applied, 1);
	}
	/* its queued counts once it is a peer (its first LOAD), whole */
	for (unsigned i = 0; i < PG_FLEET_MAX_PEERS && j < 0; i++)
		if (!strcmp(f->peers.p[i].id, h.id))
			j = (int)i;
	if (j >= 0 && !d.bad) {
		if (strcmp(f->flow_owner[j], h.id)) {
			column(f, (unsigned)j, NULL);
			memcpy(f->flow_owner[j], h.id, sizeof(f->flow_owner[j]));
		}
		column(f, (unsigned)j, q);
	}
	pthread_mutex_unlock(&f->mu);
	if (d.bad)
		COUNT(f, bad, 1);
out:
	natsMsg_Destroy(msg);
}

void pg_fleet_publish_flow(struct pg_fleet *f)
{
	struct pg_flow_tenants *ts = &f->gw->flow->tenants;
	struct pg_fleet_hdr h;
	struct pg_fleet_enc e;

	pg_fleet_header(f, PG_FLEET_MSG_FLOW, &h);
	if (pg_fleet_enc_begin(&e, f->flow_buf, sizeof(f->flow_buf), &h))
		return;
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++) {
		struct pg_flow_tenant *x = &ts->t[t];
		struct pg_fleet_flow fl = {.key = LOAD(&x->key), .queued = LOAD(&x->queued)};

		if (t && !fl.key)
			continue;
		/* what was served, and what waits now, once more when it ends */
		if (!LOAD(&x->fleet_out) && !fl.queued && !f->flow_told[t])
			continue;
		fl.served = __atomic_exchange_n(&x->fleet_out, 0, __ATOMIC_RELAXED);
		if (!pg_fleet_enc_flow(&e, x->label, &fl)) /* (room for every tenant) */
			break;
		f->flow_told[t] = fl.queued;
		COUNT(f, flow_published, 1);
	}
	if (e.count)
		pg_fleet_publish(f, f->subj_flow, &e, PG_FLEET_MSG_FLOW);
}
