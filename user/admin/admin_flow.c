// SPDX-License-Identifier: MIT
/*
 * GET /flow (admin.c dispatches to it): flow control's queues and tenants
 * as JSON (doc/routing.md "Flow control"; the same counters as /metrics'
 * prefixgate_flow_* and the pinned map pg_flow). Control thread only.
 */
#include "admin/admin_pools.h"
#include "lib/buf.h"
#include "state/flowctl.h"
#include "state/pools.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

static void pool_json(const struct pg_gateway *gw, unsigned p, struct pg_buf *o)
{
	const struct pg_flow_stats *st = &gw->maps.flow[p];
	struct pg_route_cfg rc;
	char q[16];

	pg_router_cfg(&gw->router, p, &rc);
	pg_buf_printf(
	    o,
	    "{\"pool\":\"%s\",\"InstanceQueueMs\":%s,\"DeadlineMs\":%u,\"queued\":%u,"
	    "\"queued_class\":{\"critical\":%u,\"standard\":%u,\"sheddable\":%u},"
	    "\"queued_bytes\":%llu,\"enqueued\":%llu,\"dispatched\":%llu,"
	    "\"wait_ms_total\":%llu,\"expired\":%llu,\"late\":%llu,\"shed\":%llu,"
	    "\"refused\":%llu,\"gone\":%llu,\"bypassed\":%llu}",
	    pg_pool_name(gw, p), pg_flow_queue_json(rc.flow_queue_ms, q, sizeof(q)),
	    rc.flow_deadline_ms, LOAD(&st->queued), LOAD(&st->queued_class[PG_PRIO_CRITICAL]),
	    LOAD(&st->queued_class[PG_PRIO_STANDARD]), LOAD(&st->queued_class[PG_PRIO_SHEDDABLE]),
	    (unsigned long long)LOAD(&st->queued_bytes), (unsigned long long)LOAD(&st->enqueued),
	    (unsigned long long)LOAD(&st->dispatched), (unsigned long long)LOAD(&st->wait_ms_total),
	    (unsigned long long)LOAD(&st->expired), (unsigned long long)LOAD(&st->late),
	    (unsigned long long)LOAD(&st->shed), (unsigned long long)LOAD(&st->refused),
	    (unsigned long long)LOAD(&st->gone), (unsigned long long)LOAD(&st->bypassed));
}

int pg_admin_flow_get(struct pg_gateway *gw, struct pg_admin_reply *r)
{
	const struct pg_flowctl *f = gw->flow;
	bool first = true;

	pg_buf_puts(&r->body, "{\"pools\":[");
	for (unsigned p = 0; gw->maps.flow && p < gw->maps.npools; p++) {
		if (p)
			pg_buf_puts(&r->body, ",");
		pool_json(gw, p, &r->body);
	}
	pg_buf_puts(&r->body, "],\"tenants\":[");
	for (unsigned t = 0; f && t < PG_FLOW_TENANTS; t++) {
		const struct pg_flow_tenant *e = &f->tenants.t[t];
		int prio = LOAD(&e->prio);

		if (t && !LOAD(&e->key))
			continue;
		pg_buf_printf(
		    &r->body,
		    "%s{\"tenant\":\"%s\",\"weight\":%u,\"priority\":%s%s%s,\"queued\":%u,"
		    "\"served_work\":%llu,\"refused\":%llu,\"peer_queued\":%u,"
		    "\"peer_served_work\":%llu}",
		    first ? "" : ",", e->label, LOAD(&e->weight), prio >= 0 ? "\"" : "",
		    prio >= 0 && prio < PG_PRIO_COUNT ? pg_prio_names[prio] : "null",
		    prio >= 0 ? "\"" : "", LOAD(&e->queued),
		    (unsigned long long)LOAD(&f->ts[t].served),
		    (unsigned long long)LOAD(&f->ts[t].refused), LOAD(&e->peer_queued),
		    (unsigned long long)LOAD(&e->peer_served));
		first = false;
	}
	pg_buf_printf(&r->body, "],\"peer_queued\":%u}\n", f ? LOAD(&f->peer_queued) : 0);
	return r->status = 200;
}
