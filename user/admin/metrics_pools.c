// SPDX-License-Identifier: MIT
/* The model pools' metrics (metrics.h): one series per pool, pool="NAME". */
#include <stdio.h>
#include "admin/metrics.h"
#include "lib/names.h"
#include "state/pools.h"

void pg_metrics_pools_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	const unsigned n = gw->maps.npools, max = pg_router_max_id(&gw->router);
	uint64_t req[PG_MAX_POOLS] = {0};
	int32_t in_flight[PG_MAX_POOLS] = {0};
	struct pg_route_cfg rc;

	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];

		if (!(__atomic_load_n(&b->flags, __ATOMIC_ACQUIRE) & PG_BACKEND_ACTIVE) ||
		    b->pool >= n)
			continue;
		for (int d = 0; d < PG_DEC_MAX; d++)
			req[b->pool] += __atomic_load_n(&b->requests[d], __ATOMIC_RELAXED);
		in_flight[b->pool] += __atomic_load_n(&b->in_flight, __ATOMIC_RELAXED);
	}
	pg_metrics_family(o, "prefixgate_pool_requests_total", "counter",
	                  "Requests dispatched to the pool's current members.");
	for (unsigned p = 0; p < n; p++)
		pg_buf_printf(o, "prefixgate_pool_requests_total{pool=\"%s\"} %llu\n",
		              pg_pool_name(gw, p), (unsigned long long)req[p]);
	pg_metrics_family(o, "prefixgate_pool_in_flight", "gauge",
	                  "Requests in flight in the pool.");
	for (unsigned p = 0; p < n; p++)
		pg_buf_printf(o, "prefixgate_pool_in_flight{pool=\"%s\"} %d\n", pg_pool_name(gw, p),
		              in_flight[p]);
	pg_metrics_family(o, "prefixgate_pool_backends", "gauge", "Members in the pool's ring.");
	for (unsigned p = 0; p < n; p++)
		pg_buf_printf(o, "prefixgate_pool_backends{pool=\"%s\"} %u\n", pg_pool_name(gw, p),
		              __atomic_load_n(&gw->maps.state[p].nbackends, __ATOMIC_RELAXED));
	pg_metrics_family(
	    o, "prefixgate_pool_ring_generation", "gauge",
	    "Generation of the pool's live ring (bumped when its membership changes).");
	for (unsigned p = 0; p < n; p++)
		pg_buf_printf(o, "prefixgate_pool_ring_generation{pool=\"%s\"} %llu\n",
		              pg_pool_name(gw, p),
		              (unsigned long long)__atomic_load_n(
		                  &gw->maps.state[p].ring_generation, __ATOMIC_RELAXED));
	pg_metrics_family(o, "prefixgate_pool_routing_strategy", "gauge",
	                  "The pool's routing strategy (1 for the active one).");
	for (unsigned p = 0; p < n; p++) {
		pg_router_cfg(&gw->router, p, &rc);
		for (int s = 0; s < PG_STRATEGY_COUNT; s++)
			pg_buf_printf(
			    o,
			    "prefixgate_pool_routing_strategy{pool=\"%s\",strategy=\"%s\"} "
			    "%d\n",
			    pg_pool_name(gw, p), pg_strategy_name((enum pg_strategy)s),
			    rc.strategy == (enum pg_strategy)s);
	}
	pg_metrics_family(o, "prefixgate_pool_prefix_length", "gauge", "The pool's PrefixLength.");
	for (unsigned p = 0; p < n; p++) {
		pg_router_cfg(&gw->router, p, &rc);
		pg_buf_printf(o, "prefixgate_pool_prefix_length{pool=\"%s\"} %u\n",
		              pg_pool_name(gw, p), rc.prefix_length);
	}
	pg_metrics_family(o, "prefixgate_pool_concurrency_threshold", "gauge",
	                  "The pool's ConcurrencyThreshold.");
	for (unsigned p = 0; p < n; p++) {
		pg_router_cfg(&gw->router, p, &rc);
		pg_buf_printf(o, "prefixgate_pool_concurrency_threshold{pool=\"%s\"} %u\n",
		              pg_pool_name(gw, p), rc.concurrency_threshold);
	}
}
