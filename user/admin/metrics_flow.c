// SPDX-License-Identifier: MIT
/*
 * /metrics: flow control (doc/routing.md "Flow control"; state/flowctl.h): the
 * queue of each pool (its pinned counters, pg_flow), the waits by class,
 * and each tenant's queue, waits, service and refusals. Waits are in
 * seconds, as Prometheus names them.
 */
#include <stdio.h>
#include "admin/metrics.h"
#include "state/flowctl.h"
#include "state/pools.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* One histogram series of h: name{labels,le=...} in seconds. */
static void hist(struct pg_buf *o, const char *name, const char *labels,
                 const struct pg_flow_hist *h)
{
	uint64_t cum = 0;

	for (unsigned b = 0; b < PG_FLOW_WAIT_BUCKETS; b++) {
		cum += LOAD(&h->b[b]);
		if (b < PG_FLOW_WAIT_BUCKETS - 1)
			pg_buf_printf(o, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels,
			              pg_flow_wait_bounds_ms[b] / 1000.0, (unsigned long long)cum);
		else
			pg_buf_printf(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels,
			              (unsigned long long)cum);
	}
	pg_buf_printf(o, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels,
	              LOAD(&h->sum_us) / 1e6, name, labels, (unsigned long long)cum);
}

/* The pool's labels: {pool="NAME"} with model pools, none without (the
 * gateway's metrics name no pool then); more: another label to add. */
static const char *labels(const struct pg_gateway *gw, unsigned p, const char *more, char *buf,
                          size_t cap)
{
	if (gw->pools)
		snprintf(buf, cap, "{pool=\"%s\"%s%s}", pg_pool_name(gw, p), *more ? "," : "",
		         more);
	else
		snprintf(buf, cap, *more ? "{%s}" : "%s", more);
	return buf;
}

static void pools(const struct pg_gateway *gw, struct pg_buf *o)
{
	static const struct {
		const char *outcome;
		size_t off;
	} outcomes[] = {
	    {"dispatched", offsetof(struct pg_flow_stats, dispatched)},
	    {"expired", offsetof(struct pg_flow_stats, expired)},
	    {"late", offsetof(struct pg_flow_stats, late)},
	    {"shed", offsetof(struct pg_flow_stats, shed)},
	    {"refused", offsetof(struct pg_flow_stats, refused)},
	    {"gone", offsetof(struct pg_flow_stats, gone)},
	};
	const unsigned n = gw->maps.npools;
	struct pg_route_cfg rc;
	char l[PG_POOL_NAME_MAX + 64], more[48];

	pg_metrics_family(
	    o, "prefixgate_flow_instance_queue_seconds", "gauge",
	    "FlowControlConfig.InstanceQueueMs in seconds: an instance takes requests "
	    "while its queued prefill is predicted under it; 0: flow control off; "
	    "-1: each instance's own service time.");
	for (unsigned p = 0; p < n; p++) {
		pg_router_cfg(&gw->router, p, &rc);
		pg_buf_printf(o, "prefixgate_flow_instance_queue_seconds%s %g\n",
		              labels(gw, p, "", l, sizeof(l)),
		              rc.flow_queue_ms == PG_FLOW_QUEUE_AUTO ? -1.0
		                                                     : rc.flow_queue_ms / 1000.0);
	}
	/* In milliseconds, kept for one release so that dashboards can move
	 * (doc/operations.md, Operating prefixgate). */
	pg_metrics_family(o, "prefixgate_flow_instance_queue_milliseconds", "gauge",
	                  "DEPRECATED, removed in the next release: "
	                  "prefixgate_flow_instance_queue_seconds in milliseconds; use "
	                  "prefixgate_flow_instance_queue_seconds.");
	for (unsigned p = 0; p < n; p++) {
		pg_router_cfg(&gw->router, p, &rc);
		pg_buf_printf(o, "prefixgate_flow_instance_queue_milliseconds%s %lld\n",
		              labels(gw, p, "", l, sizeof(l)),
		              rc.flow_queue_ms == PG_FLOW_QUEUE_AUTO ? -1LL
		                                                     : (long long)rc.flow_queue_ms);
	}
	pg_metrics_family(o, "prefixgate_flow_queued", "gauge",
	                  "Requests waiting in the gateway, by class.");
	for (unsigned p = 0; p < n; p++)
		for (unsigned c = 0; c < PG_PRIO_COUNT; c++) {
			snprintf(more, sizeof(more), "class=\"%s\"", pg_prio_names[c]);
			pg_buf_printf(o, "prefixgate_flow_queued%s %u\n",
			              labels(gw, p, more, l, sizeof(l)),
			              LOAD(&gw->maps.flow[p].queued_class[c]));
		}
	pg_metrics_family(o, "prefixgate_flow_queued_bytes", "gauge",
	                  "Memory the waiting requests hold (connection, head, body).");
	for (unsigned p = 0; p < n; p++)
		pg_buf_printf(o, "prefixgate_flow_queued_bytes%s %llu\n",
		              labels(gw, p, "", l, sizeof(l)),
		              (unsigned long long)LOAD(&gw->maps.flow[p].queued_bytes));
	pg_metrics_family(o, "prefixgate_flow_enqueued_total", "counter",
	                  "Requests that waited in the gateway.");
	for (unsigned p = 0; p < n; p++)
		pg_buf_printf(o, "prefixgate_flow_enqueued_total%s %llu\n",
		              labels(gw, p, "", l, sizeof(l)),
		              (unsigned long long)LOAD(&gw->maps.flow[p].enqueued));
	pg_metrics_family(o, "prefixgate_flow_left_total", "counter",
	                  "Requests that left the queue, by how: dispatched to an instance; 429 "
	                  "because their deadline passed (expired; also counts requests sent on "
	                  "whose first token had not come by it), their first token was "
	                  "predicted past it (late), a request of a higher class took their "
	                  "place (shed), or the queue was full (refused); their client went "
	                  "(gone).");
	for (unsigned p = 0; p < n; p++)
		for (size_t i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++) {
			snprintf(more, sizeof(more), "outcome=\"%s\"", outcomes[i].outcome);
			pg_buf_printf(o, "prefixgate_flow_left_total%s %llu\n",
			              labels(gw, p, more, l, sizeof(l)),
			              (unsigned long long)LOAD(
			                  (const uint64_t *)((const char *)&gw->maps.flow[p] +
			                                     outcomes[i].off)));
		}
	pg_metrics_family(o, "prefixgate_flow_bypassed_total", "counter",
	                  "Requests that could not wait (a body past what is held whole) and "
	                  "were sent on at once.");
	for (unsigned p = 0; p < n; p++)
		pg_buf_printf(o, "prefixgate_flow_bypassed_total%s %llu\n",
		              labels(gw, p, "", l, sizeof(l)),
		              (unsigned long long)LOAD(&gw->maps.flow[p].bypassed));
}

static void tenants(const struct pg_flowctl *f, struct pg_buf *o)
{
	char l[64];

	pg_metrics_family(o, "prefixgate_flow_tenant_queued", "gauge",
	                  "The tenant's requests waiting (every pool, every worker).");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (!t || LOAD(&f->tenants.t[t].key))
			pg_buf_printf(o, "prefixgate_flow_tenant_queued{tenant=\"%s\"} %u\n",
			              f->tenants.t[t].label, LOAD(&f->tenants.t[t].queued));
	pg_metrics_family(o, "prefixgate_flow_tenant_weight", "gauge",
	                  "The tenant's share of capacity, relative (--tenant weight=).");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (!t || LOAD(&f->tenants.t[t].key))
			pg_buf_printf(o, "prefixgate_flow_tenant_weight{tenant=\"%s\"} %u\n",
			              f->tenants.t[t].label, LOAD(&f->tenants.t[t].weight));
	pg_metrics_family(o, "prefixgate_flow_tenant_served_work_total", "counter",
	                  "Work (prompt tokens not cached + max output tokens) of the tenant's "
	                  "requests sent on while anyone waited: what fairness counts.");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (!t || LOAD(&f->tenants.t[t].key))
			pg_buf_printf(
			    o, "prefixgate_flow_tenant_served_work_total{tenant=\"%s\"} %llu\n",
			    f->tenants.t[t].label, (unsigned long long)LOAD(&f->ts[t].served));
	pg_metrics_family(o, "prefixgate_flow_tenant_refused_total", "counter",
	                  "The tenant's requests answered 429 by flow control.");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (!t || LOAD(&f->tenants.t[t].key))
			pg_buf_printf(
			    o, "prefixgate_flow_tenant_refused_total{tenant=\"%s\"} %llu\n",
			    f->tenants.t[t].label, (unsigned long long)LOAD(&f->ts[t].refused));
	pg_metrics_family(o, "prefixgate_flow_tenant_wait_seconds", "histogram",
	                  "How long the tenant's requests that went on waited in the gateway.");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (!t || LOAD(&f->tenants.t[t].key)) {
			snprintf(l, sizeof(l), "tenant=\"%s\"", f->tenants.t[t].label);
			hist(o, "prefixgate_flow_tenant_wait_seconds", l, &f->ts[t].wait);
		}
}

void pg_metrics_flow_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	const struct pg_flowctl *f = gw->flow;
	char l[32];

	if (!f || !gw->maps.flow)
		return;
	pools(gw, o);
	pg_metrics_family(o, "prefixgate_flow_wait_seconds", "histogram",
	                  "How long requests that went on waited in the gateway, by class.");
	for (unsigned c = 0; c < PG_PRIO_COUNT; c++) {
		snprintf(l, sizeof(l), "class=\"%s\"", pg_prio_names[c]);
		hist(o, "prefixgate_flow_wait_seconds", l, &f->cls[c]);
	}
	tenants(f, o);
}
