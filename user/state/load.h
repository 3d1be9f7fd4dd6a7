/* SPDX-License-Identifier: MIT */
/*
 * Each backend's queue of work and its learned speed, on the shared
 * backend table (lib/work.h has the model, lib/cachechoice.h the rule that
 * reads them).
 *
 * A request's work (its prompt tokens less what the chosen backend was
 * believed to hold) joins that backend's queue (pg_backend.prefill_tokens,
 * prefill_reqs) when an attempt is sent, and leaves it exactly once: at
 * the response's first token, or when the attempt ends without one. The
 * first token is the first body byte of a streamed 2xx response (vLLM and
 * SGLang send the head at once and the first event with the first token);
 * its time since the attempt was sent is an observation of the backend's
 * speed, learned into its fit (lib/work.h) and published into the table
 * (pg_backend.fit_*). A response that does not stream shows no first
 * token: its work leaves the queue when the model predicts its first
 * token (the workers' tick), or at its head if that comes first.
 */
#ifndef PG_STATE_LOAD_H
#define PG_STATE_LOAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "gateway.h"
#include "lib/work.h"

/* One attempt's place in its backend's queue (in struct pg_exchange).
 * Zeroed: none. */
struct pg_load_ticket {
	struct pg_work_ticket w; /* lib/work.h */
	uint16_t backend;        /* whose */
	uint32_t epoch;          /* its member when taken */
	uint64_t due_ms;         /* when its first token is predicted */
};

/* The learned speeds: one fit per backend slot, each under its own lock
 * (a fit is updated once per streamed response: no contention to speak
 * of). Allocated at start-up; gw->speeds NULL: nothing is learned and
 * the defaults (or the published values) stay. */
struct pg_speed_slot {
	pthread_mutex_t mu;
	uint32_t epoch; /* the member its fit is of */
	bool live;      /* fit initialised for epoch */
	struct pg_fit fit;
};

struct pg_speeds {
	struct pg_speed_slot slot[PG_MAX_BACKENDS];
};

/* NULL on allocation failure. A member's fit starts from the speed
 * published for it when its first token is seen (its pool's, or the
 * defaults: pg_load_share_speeds). */
struct pg_speeds *pg_speeds_new(void);
void pg_speeds_free(struct pg_speeds *s);

/* An attempt with `tokens` of work is sent to backend id now. */
void pg_load_take(struct pg_gateway *gw, uint16_t id, uint32_t tokens, struct pg_load_ticket *t,
                  uint64_t now_ns);

/* Its first token came at now_ns: it leaves the queue, and its TTFT is
 * learned (st: the worker's statistics, for the prediction error); in a
 * fleet what was learned is queued for the other gateways (worker: the
 * worker's queue, state/fleetq.h). */
void pg_load_first(struct pg_gateway *gw, unsigned worker, struct pg_worker_stats *st,
                   struct pg_load_ticket *t, uint64_t now_ns);

/* Another gateway of the fleet learned obs of backend id (the member of
 * epoch): this gateway's fit learns it too. */
void pg_load_observe(struct pg_gateway *gw, uint16_t id, uint32_t epoch,
                     const struct pg_fit_obs *obs, uint64_t now_ns);

/* Members whose speed no first token has shown yet take the median of
 * their pool's that have (control thread, each tick): an instance that
 * never got a request must not look slower, or faster, than the ones that
 * did only because the defaults are not this fleet's speed. */
void pg_load_share_speeds(struct pg_gateway *gw);

/* It leaves the queue with nothing learned (no first token seen). No-op if
 * not pending. */
static inline bool pg_load_pending(const struct pg_load_ticket *t)
{
	return t->w.pending;
}

void pg_load_drop(struct pg_gateway *gw, struct pg_load_ticket *t);

#endif /* PG_STATE_LOAD_H */
