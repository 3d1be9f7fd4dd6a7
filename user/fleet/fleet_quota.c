// SPDX-License-Identifier: MIT
/*
 * Quotas across a fleet (doc/routing.md "Quotas", Fleets): each gateway
 * tells the others, on prefixgate.CLUSTER.quota every 20 ms, what it
 * counted in each tenant's sliding minute since its last message, by
 * wall-clock second: the requests it let through and the tokens it
 * charged. The others count them in the tenant's peer minute
 * (lib/quota.h), which every quota check adds to its own. What the fleet
 * lets through beyond a limit is what the other gateways let through before
 * they were told: at most one message interval and a delivery of their
 * admissions.
 */
#include <string.h>
#include "fleet/fleet_internal.h"
#include "state/flowctl.h"
#include "state/quotas.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* This gateway's count of kind k at second sec not yet told: told now. */
static int32_t untold(struct pg_quota_counts *c, unsigned k, uint64_t sec, uint64_t now)
{
	int64_t d = (int64_t)pg_qwin_at(&c->local[k], sec, now) -
	            (int64_t)pg_qwin_at(&c->sent[k], sec, now);

	d = d > INT32_MAX ? INT32_MAX : d < INT32_MIN ? INT32_MIN : d;
	pg_qwin_add(&c->sent[k], sec, now, d);
	return (int32_t)d;
}

void pg_fleet_publish_quota(struct pg_fleet *f)
{
	struct pg_quotas *q = f->gw->quotas;
	struct pg_flow_tenants *ts = &f->gw->flow->tenants;
	const uint64_t now = pg_quotas_clock(), sec = now / PG_QUOTA_BUCKET_MS;
	uint64_t from = f->quota_sec && f->quota_sec + 2 >= sec ? f->quota_sec : sec - 2;
	struct pg_fleet_hdr h;
	struct pg_fleet_enc e;

	if (!LOAD(&q->on))
		return;
	pg_fleet_header(f, PG_FLEET_MSG_QUOTA, &h);
	if (pg_fleet_enc_begin(&e, f->quota_buf, sizeof(f->quota_buf), &h))
		return;
	for (unsigned t = 0; t < PG_FLOW_TENANTS && !e.full; t++) {
		const uint64_t key = LOAD(&ts->t[t].key);

		if (t && !key)
			continue;
		for (uint64_t s = from; s <= sec; s++) {
			struct pg_fleet_quota m = {.key = key, .sec = s};

			m.requests = untold(&q->counts[t], PG_QUOTA_REQUESTS, s, now);
			m.tokens = untold(&q->counts[t], PG_QUOTA_TOKENS, s, now);
			if (!m.requests && !m.tokens)
				continue;
			if (!pg_fleet_enc_quota(&e, ts->t[t].label, &m)) /* (room for 3 s of all) */
				break;
			COUNT(f, quota_published, 1);
		}
	}
	f->quota_sec = sec;
	if (e.count)
		pg_fleet_publish(f, f->subj_quota, &e, PG_FLEET_MSG_QUOTA);
}

void pg_fleet_on_quota(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	struct pg_fleet *f = closure;
	struct pg_quotas *q = f->gw->quotas;
	struct pg_fleet_entry e;
	struct pg_fleet_hdr h;
	struct pg_fleet_dec d;

	(void)nc;
	(void)sub;
	if (!pg_fleet_msg_begin(f, msg, PG_FLEET_MSG_QUOTA, &d, &h) || !q || !f->gw->flow)
		goto out;
	while (pg_fleet_dec_next(&d, PG_FLEET_MSG_QUOTA, &e)) {
		/* the tenant by its key (its label's hash: the same everywhere) */
		unsigned t = pg_flow_tenant(&f->gw->flow->tenants, e.quota.key, e.addr);
		const uint64_t now = pg_quotas_clock();

		pg_qwin_add(&q->counts[t].peer[PG_QUOTA_REQUESTS], e.quota.sec, now,
		            e.quota.requests);
		pg_qwin_add(&q->counts[t].peer[PG_QUOTA_TOKENS], e.quota.sec, now, e.quota.tokens);
		COUNT(f, quota_applied, 1);
	}
	if (d.bad)
		COUNT(f, bad, 1);
out:
	natsMsg_Destroy(msg);
}
