/* SPDX-License-Identifier: MIT */
/*
 * Flow control's gateway-wide state (doc/routing.md "Flow control"; lib/flow.h has
 * the order): the tenants, with what metrics show of each; the classes'
 * waits; each worker's queue's bounds; and how a worker that saw an
 * instance's queue shrink wakes the workers that have requests waiting.
 * The queues themselves are the workers' own (proxy/queue.h); their
 * counters are pinned, per pool (pg_flow, prefixgate.h).
 */
#ifndef PG_STATE_FLOWCTL_H
#define PG_STATE_FLOWCTL_H

#include <stdbool.h>
#include <stdint.h>
#include "config/config.h"
#include "lib/flow.h"

/* Queue-wait histogram bucket upper bounds, ms (last bucket: +Inf). */
#define PG_FLOW_WAIT_BUCKETS 14
extern const uint32_t pg_flow_wait_bounds_ms[PG_FLOW_WAIT_BUCKETS - 1];

struct pg_flow_hist {
	uint64_t b[PG_FLOW_WAIT_BUCKETS];
	uint64_t sum_us;
};

/* One tenant's counters (atomics), by its slot in the table. */
struct pg_flow_tstats {
	struct pg_flow_hist wait; /* the waits of its requests that went on */
	uint64_t served;          /* work units those carried */
	uint64_t refused;         /* its requests answered 429 */
};

/* What each worker's wake-up is (one cache line each: every worker writes
 * the others'). */
struct pg_flow_wake {
	int fd;           /* eventfd the worker reads in its ring */
	uint32_t waiting; /* requests it has queued (atomic) */
	int kicked;       /* written to and not yet read (atomic) */
	/* the rank (lib/flow.h pg_flow_rank) of its next request, by pool
	 * (atomic; UINT64_MAX: none) */
	uint64_t best[PG_MAX_POOLS];
} __attribute__((aligned(64)));

struct pg_flowctl {
	struct pg_flow_tenants tenants;
	struct pg_flow_tstats ts[PG_FLOW_TENANTS];
	struct pg_flow_hist cls[PG_PRIO_COUNT];
	/* Each worker's queue's bounds: the gateway's divided among them. */
	struct pg_flow_limits lim;
	enum pg_tenant_src src;
	const char *header; /* PG_TENANT_HEADER: its name */
	/* Requests waiting, every worker's (atomic): while 0, an instance's
	 * queue that shrinks wakes no one, and dispatches are not charged to
	 * their tenants (service counts while anyone waits: lib/flow.h), but
	 * for the fleet's other gateways' (peer_queued, fleet/fleet_flow.c). */
	uint32_t queued __attribute__((aligned(64)));
	uint32_t peer_queued;
	unsigned nworkers;
	struct pg_flow_wake *wake; /* nworkers entries */
};

/* The state for cfg's flow control and nworkers workers, its configured
 * tenants in the table; NULL with err set (out of memory, eventfd). */
struct pg_flowctl *pg_flowctl_new(const struct pg_config *cfg, unsigned nworkers, char *err,
                                  size_t errlen);
void pg_flowctl_free(struct pg_flowctl *f);

/* A wait of us microseconds into h. */
void pg_flow_hist_add(struct pg_flow_hist *h, uint64_t us);

/* The lowest rank another worker than self published for pool, and
 * which worker (-1: none waits). */
int pg_flowctl_better(const struct pg_flowctl *f, unsigned self, unsigned pool, uint64_t rank);

/* Wake worker i (once until it reads its eventfd). */
void pg_flowctl_kick(struct pg_flowctl *f, unsigned i);

/* Worker self saw an instance's queue shrink (a first token, a request's
 * end): every other worker with requests waiting is woken (once until it
 * reads its eventfd). */
void pg_flowctl_wake(struct pg_flowctl *f, unsigned self);

#endif /* PG_STATE_FLOWCTL_H */
