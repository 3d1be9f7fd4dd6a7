/* SPDX-License-Identifier: MIT */
/*
 * The backend view, pure: which backends may take a request now and the
 * load each carries, as every strategy (strategy.h) sees them in a
 * snapshot of the backend table. No I/O; the caller supplies the clock.
 */
#ifndef PG_ROUTER_VIEW_H
#define PG_ROUTER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "prefixgate.h"

/*
 * What "least outstanding" compares (--load-signal). The backend's scraped
 * numbers count only while fresh (now < metrics_until_ms); a backend whose
 * numbers are stale or never came is compared by in_flight alone.
 *   INFLIGHT: in_flight, this gateway's exact count (the default).
 *   BACKEND:  running + waiting as the backend reported them (includes other
 *             clients' requests; only as fresh as the last scrape).
 *   BOTH:     in_flight + waiting: our exact count plus the backend's queue.
 */
enum pg_load_signal {
	PG_LOAD_INFLIGHT = 0,
	PG_LOAD_BACKEND = 1,
	PG_LOAD_BOTH = 2,
};

/* The requests in flight to backend b that routing counts: this gateway's
 * exact in_flight plus the other gateways' (peer_in_flight, 0 for a lone
 * gateway; user/lib/fleet.h). The threshold and every "least outstanding"
 * comparison use it, so a fleet of gateways holds ConcurrencyThreshold per
 * instance, not per gateway. */
static inline int64_t pg_backend_inflight(const struct pg_backend *b)
{
	return (int64_t)__atomic_load_n(&b->in_flight, __ATOMIC_RELAXED) +
	       __atomic_load_n(&b->peer_in_flight, __ATOMIC_RELAXED);
}

/* The load "least outstanding" compares for backend b under signal s (see above;
 * "in_flight" there is pg_backend_inflight). */
int64_t pg_backend_load(const struct pg_backend *b, enum pg_load_signal s, uint64_t now_ms);

/* A backend set as a bitmap of ids, e.g. the ones a request already tried. */
struct pg_idset {
	uint64_t bits[PG_MAX_BACKENDS / 64];
};

static inline void pg_idset_add(struct pg_idset *s, unsigned id)
{
	s->bits[id / 64] |= 1ull << (id % 64);
}
static inline bool pg_idset_has(const struct pg_idset *s, unsigned id)
{
	return s->bits[id / 64] >> (id % 64) & 1;
}

/* Whether backend b, whose flags were just loaded, is healthy now: not
 * failing active health checks (UNHEALTHY), and not DOWN unless
 * down_until_ms has passed. Inline, with the flags loaded once: every
 * strategy's scan tests every backend with it. */
static inline bool pg_backend_flags_healthy(const struct pg_backend *b, uint16_t flags,
                                            uint64_t now_ms)
{
	if (flags & PG_BACKEND_UNHEALTHY)
		return false;
	if (!(flags & PG_BACKEND_DOWN))
		return true;
	return now_ms >= __atomic_load_n(&b->down_until_ms, __ATOMIC_RELAXED);
}

/* ... and may take a new request: ACTIVE, not DRAINING, healthy. */
static inline bool pg_backend_flags_usable(const struct pg_backend *b, uint16_t flags,
                                           uint64_t now_ms)
{
	const uint16_t state =
	    PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING | PG_BACKEND_UNHEALTHY | PG_BACKEND_DOWN;

	if ((flags & state) == PG_BACKEND_ACTIVE) /* the common case, in one test */
		return true;
	if (!(flags & PG_BACKEND_ACTIVE) || (flags & PG_BACKEND_DRAINING))
		return false;
	return pg_backend_flags_healthy(b, flags, now_ms);
}

static inline bool pg_backend_healthy(const struct pg_backend *b, uint64_t now_ms)
{
	return pg_backend_flags_healthy(b, __atomic_load_n(&b->flags, __ATOMIC_RELAXED), now_ms);
}

static inline bool pg_backend_usable(const struct pg_backend *b, uint64_t now_ms)
{
	return pg_backend_flags_usable(b, __atomic_load_n(&b->flags, __ATOMIC_RELAXED), now_ms);
}

/* Whether backend id, known to be in 1..max_id (a scan's), may carry a
 * request now: usable, not in exclude (may be NULL). */
static inline bool pg_backend_open(const struct pg_backend *backends, unsigned id,
                                   const struct pg_idset *exclude, uint64_t now_ms)
{
	return pg_backend_usable(&backends[id], now_ms) && !(exclude && pg_idset_has(exclude, id));
}

/*
 * Whether backend id of the table backends may carry a request now: a real
 * id in 1..max_id and pg_backend_open. The strategies' test of every
 * candidate, and cache_aware's of the index's holders (router/route.c).
 */
static inline bool pg_backend_eligible(const struct pg_backend *backends, unsigned max_id,
                                       unsigned id, const struct pg_idset *exclude, uint64_t now_ms)
{
	return id && id <= max_id && pg_backend_open(backends, id, exclude, now_ms);
}

/*
 * Backend b's state in one word, as the admin API (GET /backends "health")
 * and prefixgatectl show it, whichever of them reads it: "draining" (being
 * removed), "unhealthy" (failing active health checks), "down" (refused or
 * reset a connection, until down_until_ms), else "up".
 */
const char *pg_backend_health(const struct pg_backend *b, uint64_t now_ms);

/*
 * pg_backend.recent elapsed_ms later: decayed by exp(-elapsed_ms /
 * PG_CA_RECENT_MS). Each dispatch adds PG_CA_RECENT_ONE (route.h), so with
 * a steady rate the count settles at that rate x PG_CA_RECENT_MS.
 */
uint32_t pg_recent_decay(uint32_t recent, uint64_t elapsed_ms);

#endif /* PG_ROUTER_VIEW_H */
