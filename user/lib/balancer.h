/* SPDX-License-Identifier: MIT */
/*
 * Backend choice, pure: given the routing config, ring candidates and a
 * snapshot of the backend table, pick one backend and say why. No I/O; the
 * caller supplies the clock and the random number.
 */
#ifndef PG_BALANCER_H
#define PG_BALANCER_H

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

struct pg_route_cfg {
	enum pg_strategy strategy;
	uint32_t prefix_length;
	uint32_t concurrency_threshold;
	enum pg_load_signal load_signal; /* LEAST_OUTSTANDING and the PREFIX_AWARE fallback */
	uint32_t new_choices;            /* CACHE_AWARE: CacheAwareConfig.NewConversationChoices
	                                  * (cachechoice.h) */
	/* Flow control (lib/flow.h; FlowControlConfig, a prefixgate extension):
	 * the prefill an instance may have queued, in predicted ms, and still
	 * take another request (0: off; past it on every instance, requests
	 * wait in the gateway), and the default deadline (0: none). */
	uint32_t flow_queue_ms;
	uint32_t flow_deadline_ms;
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

/* The load pg_balance compares for backend b under signal s (see above;
 * "in_flight" there is pg_backend_inflight). */
int64_t pg_backend_load(const struct pg_backend *b, enum pg_load_signal s, uint64_t now_ms);

/* cache_aware's estimate for one instance (cachechoice.h), for the
 * X-Prefixgate-Route header and the dry run. */
struct pg_ca_est {
	uint16_t id;      /* 0: none */
	uint32_t matched; /* prompt tokens it is believed to hold */
	float wait_ms;    /* its queue ahead of the request */
	float prefill_ms; /* the request's prefill there */
	float saved_ms;   /* the prefill its cache saves */
	float ttft_ms;    /* predicted time to first token */
};

struct pg_choice {
	uint16_t backend; /* 0: no usable backend */
	uint8_t decision; /* enum pg_decision */
	uint8_t ncand;    /* ring candidates considered (prefix_aware) */
	uint16_t cand[PG_RING_CANDIDATES];
	uint32_t matched; /* cache_aware: prompt tokens the chosen one is believed to hold */
	uint8_t pool;     /* the model pool chosen in (route.h sets it; the balancer does not) */
	bool late;        /* none chosen: the first token would come past the deadline (route.h) */
	struct pg_ca_est est[2]; /* cache_aware: the chosen one, the runner-up */
};

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

/*
 * Whether backend b is healthy now: not failing active health checks
 * (UNHEALTHY), and not DOWN unless down_until_ms has passed.
 */
bool pg_backend_healthy(const struct pg_backend *b, uint64_t now_ms);

/*
 * Backend b's state in one word, as the admin API (GET /backends "health")
 * and prefixgatectl show it, whichever of them reads it: "draining" (being
 * removed), "unhealthy" (failing active health checks), "down" (refused or
 * reset a connection, until down_until_ms), else "up".
 */
const char *pg_backend_health(const struct pg_backend *b, uint64_t now_ms);

/*
 * Whether backend b may take a new request now: ACTIVE, not DRAINING, and
 * pg_backend_healthy().
 */
bool pg_backend_usable(const struct pg_backend *b, uint64_t now_ms);

/*
 * Whether backend id of the table backends may carry a request now: a real
 * id in 1..max_id, not in exclude (may be NULL), pg_backend_usable(). The
 * strategies' test of every candidate, and cache_aware's of the index's
 * holders (user/state/route.c).
 */
bool pg_backend_eligible(const struct pg_backend *backends, unsigned max_id, unsigned id,
                         const struct pg_idset *exclude, uint64_t now_ms);

/*
 * Choose a backend. backends: the table (PG_MAX_BACKENDS entries; ids
 * 1..max_id are scanned). cand/ncand: ring candidates for the key (used by
 * PREFIX_AWARE). exclude: ids not to pick (may be NULL). rnd: a fresh random
 * 64-bit value. explicit_key: the key came from X-Prefixgate-Key or
 * prompt_cache_key (affinity decisions are then PG_DEC_EXPLICIT_KEY).
 *
 * PREFIX_AWARE: the first usable candidate whose in_flight is below the
 * threshold (decision AFFINITY if it is the first candidate, OVERFLOW
 * otherwise); if none, the least-outstanding usable backend (OVERFLOW).
 * The threshold always compares pg_backend_inflight (local + peers);
 * "least outstanding" compares
 * pg_backend_load() under cfg->load_signal.
 * A later candidate taking the request because the first is down, draining
 * or excluded is OVERFLOW too, as is the least-outstanding pick even when it
 * happens to be the first candidate.
 * LEAST_OUTSTANDING: lowest load among usable, ties broken by rnd.
 * RANDOM: uniform over usable. Load never makes the choice fail: only "no
 * usable backend" returns 0.
 *
 * "Usable" here also means: id in 1..max_id and not in exclude; candidates
 * beyond max_id are skipped, at most PG_RING_CANDIDATES candidates are used
 * (out->cand/ncand list them, for PREFIX_AWARE only). The decision is the
 * strategy's: a caller re-dispatching after a failed attempt records
 * PG_DEC_RETRY itself. rnd is used only to break ties / draw (its high bits,
 * by multiply-shift, so bias is at most PG_MAX_BACKENDS/2^64). No allocation; one pass
 * over 1..max_id at most; shared fields are read with relaxed atomic loads.
 */
uint16_t pg_balance(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                    unsigned max_id, const uint16_t *cand, size_t ncand,
                    const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd,
                    bool explicit_key, struct pg_choice *out);

/*
 * pg_backend.recent elapsed_ms later: decayed by exp(-elapsed_ms /
 * PG_CA_RECENT_MS). Each dispatch adds PG_CA_RECENT_ONE (route.h), so with
 * a steady rate the count settles at that rate x PG_CA_RECENT_MS.
 */
uint32_t pg_recent_decay(uint32_t recent, uint64_t elapsed_ms);

#endif /* PG_BALANCER_H */
