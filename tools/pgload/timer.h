/* SPDX-License-Identifier: MIT */
/*
 * Binary min-heap of timers keyed by due time. Entries are values, not
 * handles: a timer that no longer matters (its request finished) is left in
 * the heap and recognised as stale when it fires, by comparing its
 * generation with the owner's current one. All request timeouts are equally
 * long, so stale entries leave the heap at most --timeout-ms later.
 */
#ifndef PGLOAD_TIMER_H
#define PGLOAD_TIMER_H

#include <stddef.h>
#include <stdint.h>

enum pg_timer_kind {
	PG_T_ARRIVAL = 1, /* open loop: next Poisson arrival */
	PG_T_TIMEOUT,     /* a request's deadline: id = conn slot, gen */
	PG_T_SLOT,        /* closed loop: a slot re-arrives after a failed connect */
	PG_T_STOP,        /* --duration elapsed: stop issuing */
	PG_T_DEADLINE,    /* hard deadline: end the run */
};

struct pg_timer {
	uint64_t due_ns;
	uint32_t kind;
	uint32_t id;
	uint64_t gen;
};

struct pg_heap {
	struct pg_timer *a;
	size_t n, cap;
};

/* Returns 0, or -1 when out of memory. */
int pg_heap_push(struct pg_heap *h, const struct pg_timer *t);
/* Earliest timer, or NULL when empty. */
const struct pg_timer *pg_heap_peek(const struct pg_heap *h);
/* Remove the earliest timer into *out. Returns 0, or -1 when empty. */
int pg_heap_pop(struct pg_heap *h, struct pg_timer *out);
void pg_heap_free(struct pg_heap *h);

#endif /* PGLOAD_TIMER_H */
