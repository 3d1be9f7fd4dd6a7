/* SPDX-License-Identifier: MIT */
/*
 * The routing core's context: everything a routing decision, a work
 * ticket and a speed fit read or write, and nothing else of a gateway.
 * The gateway embeds one (struct pg_gateway.router); tools/tracesim makes
 * one per simulated gateway over tables of its own, and tools/routebench
 * one over shared memory: all three run the very same objects.
 *
 *   maps:     the shared tables (state/maps.h): backends, ring copies,
 *             per-pool state and RoutingConfig, the block index
 *   members:  which backends serve each model pool (NULL: every member
 *             serves pool 0, the only one)
 *   speeds:   the learned speed of each backend (load.h; NULL: none is
 *             learned, the published or default speeds stay)
 *   caps:     what each backend's cache really keeps, learned from its
 *             answers (capacity.h; NULL: the configured capacity stays)
 *   out:      what the core tells the rest of its host (NULL: nothing):
 *             decisions for the peers' indexes and the routing
 *             statistics, observations for the peers' fits
 *   clock:    its time (the gateway's monotonic clock; tracesim's
 *             simulated one)
 *
 * Files: route (one decision), view (the backend view: who may take a
 * request), strategy + random, least, prefix, cache (the strategies, one
 * file each behind strategy.h's table), index (cache_aware's block index),
 * work (work tickets, an instance's queue and the speed fit), load (the
 * tickets and fits on the shared table).
 */
#ifndef PG_ROUTER_ROUTER_H
#define PG_ROUTER_ROUTER_H

#include <stdbool.h>
#include <stdint.h>
#include "router/index.h"
#include "router/strategy.h"
#include "router/work.h"
#include "state/maps.h"

/* Buckets of the matched-length histogram: 0 blocks, then 2^(i-1) up to
 * 2^i - 1 blocks, the last one open (it takes all above 512). */
#define PG_CA_MATCH_BUCKETS 11

struct pg_router;
struct pg_key;
struct pg_key_blocks;
struct pg_speeds;
struct pg_capacities;

/* What the core tells its host (each may be NULL). worker: the caller's
 * worker index, for per-worker queues. */
struct pg_router_out {
	/* chain[0..n) was sent to id (member epoch): the peers' indexes;
	 * request: the first of a request's records */
	void (*sent)(const struct pg_router *r, unsigned worker, uint16_t id, uint32_t epoch,
	             const uint64_t *chain, uint32_t n, bool request);
	/* id's fit learned obs: the peers' fits */
	void (*learned)(const struct pg_router *r, unsigned worker, uint16_t id, uint32_t epoch,
	                const struct pg_fit_obs *obs);
	/* a real request was routed to id (anchor: its key's; shadow: what
	 * PREFIX_AWARE would have chosen, when asked) */
	void (*decided)(const struct pg_router *r, unsigned worker, uint64_t anchor, uint16_t id,
	                uint16_t shadow, uint64_t now_ms);
	/* pg_route_key for a real request, whatever it chose (id 0: none):
	 * the key and blocks it was given (before the decision moved the
	 * anchor), its pool, random word, deadline and class, the clock it read, the
	 * choice (the gateway's route journal: sys/journal.h) */
	void (*routed)(const struct pg_router *r, unsigned worker, unsigned pool,
	               const struct pg_key *key, const struct pg_key_blocks *kb, uint64_t rnd,
	               uint32_t budget_ms, uint8_t prio, uint64_t now_ms, uint16_t id,
	               const struct pg_choice *choice);
};

struct pg_router {
	struct pg_maps *maps;
	const struct pg_idset *members; /* PG_MAX_POOLS entries, or NULL */
	struct pg_speeds *speeds;
	struct pg_capacities *caps; /* capacity.h; NULL: nothing learned of caches */
	const struct pg_router_out *out;
	uint64_t (*clock)(const struct pg_router *r); /* ns */
	enum pg_load_signal load_signal;              /* --load-signal */
	bool shadow;                                  /* --shadow: out->decided gets the shadow */
	/* cache_aware's lambda (cache.h): PG_CA_WORK_BASE and
	 * PG_CA_WORK_QUEUED; tools/tracesim sweeps them */
	double ca_work_base, ca_work_queued;
	uint64_t tick_ms; /* the last pg_router_tick */
	/* The highest backend id ever made active in the table (raised before
	 * the id is published: pg_router_activate), so that scans stop there,
	 * not at PG_MAX_BACKENDS. */
	unsigned backend_hwm;
	/* Load mode SHARE (lib/fleet.h): each of this many gateways routes on
	 * ConcurrencyThreshold / fleet_share; 0 or 1: the whole threshold.
	 * Written by the fleet thread (routing only: GET /routing and metrics
	 * show the configured threshold). */
	uint32_t fleet_share;
	/* cache_aware: matched prefix lengths, in blocks, by power-of-two
	 * bucket (0, 1, 2-3, 4-7, ...), and index slots evicted. Their own
	 * cache line: every worker adds to them. */
	uint64_t ca_matched[PG_CA_MATCH_BUCKETS] __attribute__((aligned(64)));
	uint64_t ca_evictions;
};

static inline uint64_t pg_router_now_ns(const struct pg_router *r)
{
	return r->clock(r);
}

static inline uint64_t pg_router_now_ms(const struct pg_router *r)
{
	return r->clock(r) / 1000000;
}

/* r->backend_hwm: no id above it has ever been used (bounds periodic scans). */
static inline unsigned pg_router_hwm(const struct pg_router *r)
{
	return __atomic_load_n(&r->backend_hwm, __ATOMIC_ACQUIRE);
}

/* Highest backend id in use (bounds scans of the backend table). It is on
 * every routing decision's path: the scan starts at the high-water mark, not
 * at PG_MAX_BACKENDS - 1, so it reads one entry or a few (a scan of the whole
 * table, 4,095 entries of 176 bytes and more, cost more than the rest of a
 * PREFIX_AWARE decision). */
static inline unsigned pg_router_max_id(const struct pg_router *r)
{
	unsigned id = pg_router_hwm(r);

	for (; id > 0; id--)
		if (__atomic_load_n(&r->maps->backends[id].flags, __ATOMIC_RELAXED) &
		    PG_BACKEND_ACTIVE)
			break;
	return id;
}

/* Backend id is about to be published ACTIVE (control thread; tests that
 * fill the table by hand call it too). */
static inline void pg_router_activate(struct pg_router *r, unsigned id)
{
	if (id > r->backend_hwm)
		__atomic_store_n(&r->backend_hwm, id, __ATOMIC_RELEASE);
}

/* Pool's live routing configuration (the control thread may change it at
 * any time; each field is read atomically). */
static inline void pg_router_cfg(const struct pg_router *r, unsigned pool, struct pg_route_cfg *rc)
{
	const struct pg_state *st = &r->maps->state[pool];

	rc->strategy = (enum pg_strategy)__atomic_load_n(&st->strategy, __ATOMIC_RELAXED);
	rc->prefix_length = __atomic_load_n(&st->prefix_length, __ATOMIC_RELAXED);
	rc->concurrency_threshold = __atomic_load_n(&st->concurrency_threshold, __ATOMIC_RELAXED);
	rc->load_signal = r->load_signal;
	rc->new_choices = __atomic_load_n(&st->ca_choices, __ATOMIC_RELAXED);
	rc->flow_queue_ms = __atomic_load_n(&st->flow_queue_ms, __ATOMIC_RELAXED);
	rc->flow_deadline_ms = __atomic_load_n(&st->flow_deadline_ms, __ATOMIC_RELAXED);
}

/* The core's periodic work (the gateway's control thread calls it every
 * PG_CONTROL_TICK_MS, tracesim as often in simulated time): the members'
 * pg_backend.recent decayed, the pool's speed shared with the members
 * that have not shown their own (load.h). */
void pg_router_tick(struct pg_router *r, uint64_t now_ms);

/* The backends not to choose for pool: exclude, plus every backend that
 * is not pool's member (buf holds them; exclude itself when there are no
 * pools). */
const struct pg_idset *pg_router_exclude(const struct pg_router *r, unsigned pool,
                                         const struct pg_idset *exclude, struct pg_idset *buf);

/* cache_aware's block index as the shared maps hold it. */
static inline struct pg_ca_index pg_router_index(const struct pg_router *r)
{
	return (struct pg_ca_index){
	    .slots = r->maps->ca,
	    .nslots = r->maps->ca_slots,
	    .backends = r->maps->backends,
	    .capacity_blocks =
	        __atomic_load_n(&r->maps->state->ca_capacity_blocks, __ATOMIC_RELAXED),
	    .requests = &r->maps->state->ca_requests,
	};
}

/* Take / give back one in-flight slot of backend id, counting the decision. */
static inline void pg_inflight_take(const struct pg_router *r, uint16_t id, unsigned decision)
{
	struct pg_backend *b = &r->maps->backends[id];

	__atomic_fetch_add(&b->in_flight, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&b->requests[decision], 1, __ATOMIC_RELAXED);
	/* at once, so new conversations in a burst see each other (the
	 * control thread only decays it: pg_recent_decay) */
	__atomic_fetch_add(&b->recent, PG_CA_RECENT_ONE, __ATOMIC_RELAXED);
}

static inline void pg_inflight_release(const struct pg_router *r, uint16_t id)
{
	__atomic_fetch_sub(&r->maps->backends[id].in_flight, 1, __ATOMIC_RELAXED);
}

#endif /* PG_ROUTER_ROUTER_H */
