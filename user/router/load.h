/* SPDX-License-Identifier: MIT */
/*
 * Each backend's queue of work and its learned speed, on the shared
 * backend table (router/work.h has the model, router/cache.h the rule that
 * reads them).
 *
 * A request's work (its prompt tokens less what the chosen backend was
 * believed to hold) joins that backend's queue (pg_backend.prefill_tokens,
 * prefill_reqs) when an attempt is sent, and leaves it exactly once: at
 * the response's first token, or when the attempt ends without one. The
 * first token is the first body byte of a streamed 2xx response (vLLM and
 * SGLang send the head at once and the first event with the first token);
 * its time since the attempt was sent is an observation of the backend's
 * speed, learned into its fit (router/work.h) and published into the table
 * (pg_backend.fit_*). A response that does not stream shows no first
 * token: its work stays in the queue until its first token as the
 * backend's measured speed predicts it (pg_load_due, the workers' tick),
 * or its head if that comes first (pg_load_answered); on a speed not
 * measured, until PG_LOAD_UNMEASURED_SLACK times that prediction (never
 * at a time predicted from the defaults alone, which nothing would
 * correct) or until the engine's report says it has begun it
 * (pg_work_begun), whichever comes first. An answer teaches the queue, not the speed: its head
 * comes after its decode, seconds where its prefill takes milliseconds and varying with the batch,
 * which would drown the prefill in any fit (a fit of the bound it sets, tried on the trace at 0.7
 * load with instances 3 times faster than the defaults, put p99 TTFT at 7.5 times the
 * reference's, 1.4 without it). That bound is kept apart, for one use: a deadline on an
 * instance no stream has measured is judged on it (router/route.c), where a request would
 * otherwise be sent there only one at a time, to explore.
 */
#ifndef PG_ROUTER_LOAD_H
#define PG_ROUTER_LOAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "router/work.h"

struct pg_router;

/* TTFT prediction error histogram bucket upper bounds, ms (last bucket:
 * +Inf). */
#define PG_TTFT_ERR_BUCKETS 10
extern const uint32_t pg_ttft_err_bounds_ms[PG_TTFT_ERR_BUCKETS - 1];

/* |first token - predicted| by bucket, and the sums of the signed and
 * absolute errors (us): the load model's accuracy, one per worker
 * (struct pg_worker_stats). */
struct pg_ttft_err {
	uint64_t bucket[PG_TTFT_ERR_BUCKETS];
	int64_t sum_us;
	uint64_t abs_us;
};

/* An answer that does not stream on an instance whose speed is not
 * measured leaves the queue at this many times its predicted first token
 * (pg_load_due), at the latest at its head: an engine up to this many
 * times slower than the defaults is never taken for idle early, and the
 * prefill of an answer whose decode runs for seconds does not stay in the
 * queue all that time. */
#define PG_LOAD_UNMEASURED_SLACK 4

/* One attempt's place in its backend's queue (in struct pg_exchange).
 * Zeroed: none. */
struct pg_load_ticket {
	struct pg_work_ticket w; /* router/work.h */
	uint16_t backend;        /* whose */
	bool measured;           /* its speed was measured when taken */
	uint32_t epoch;          /* its member when taken */
	uint64_t due_ms;         /* when it leaves the queue if nothing is seen (pg_load_due) */
	uint64_t head_ns;        /* its answer's head (pg_load_answered); 0: none yet */
	uint64_t journal;        /* its request's number in the host's journal
	                          * (sys/journal.h; 0: none); the core never reads it */
	/* The conversation (anchor) whose copy in its backend's per-slot
	 * cache it keeps busy until its slot is given back
	 * (router/capacity.h pg_capacity_done; 0: none). */
	uint64_t seq;
};

/* The learned speeds: one fit per backend slot, each under its own lock
 * (a fit is updated once per streamed response: no contention to speak
 * of). Allocated at start-up; pg_router.speeds NULL: nothing is learned
 * and the defaults (or the published values) stay. */
struct pg_speed_slot {
	pthread_mutex_t mu;
	uint32_t epoch; /* the member its fit is of */
	bool live;      /* fit initialised for epoch */
	struct pg_fit fit;
	/* Its answers that did not stream as a fit of their whole time
	 * against the queue each joined: a bound on its first tokens
	 * (pg_load_answered). */
	uint32_t bound_epoch;
	bool bound_live;
	struct pg_fit bound;
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
void pg_load_take(const struct pg_router *r, uint16_t id, uint32_t tokens, struct pg_load_ticket *t,
                  uint64_t now_ns);

/* Its first token came at now_ns: it leaves the queue, and its TTFT is
 * learned (st: the worker's error histogram, may be NULL); in a fleet
 * what was learned goes to the other gateways (r->out->learned; worker:
 * the caller's). */
void pg_load_first(const struct pg_router *r, unsigned worker, struct pg_ttft_err *st,
                   struct pg_load_ticket *t, uint64_t now_ns);

/* Another gateway of the fleet learned obs of backend id (the member of
 * epoch): this gateway's fit learns it too. */
void pg_load_observe(const struct pg_router *r, uint16_t id, uint32_t epoch,
                     const struct pg_fit_obs *obs, uint64_t now_ns);

/* Members whose speed no first token has shown yet take the median of
 * their pool's that have (control thread, each tick): an instance that
 * never got a request must not look slower, or faster, than the ones that
 * did only because the defaults are not this fleet's speed. */
void pg_load_share_speeds(const struct pg_router *r);

/* The head of its answer, which did not stream, came at now_ns: it leaves
 * the queue if it had not (its prefill over an overhead ago at the
 * latest). Its time bounds that of a first token behind the queue it
 * joined (pg_work_ticket.ahead): while no stream has measured the
 * instance's speed, learned into its bound (pg_backend.bound_*, published
 * from PG_FIT_OWN_MIN answers on), which a deadline is judged on then. */
void pg_load_answered(const struct pg_router *r, struct pg_load_ticket *t, uint64_t now_ns);

/* A ticket of an answer that does not stream, at now_ms (the workers'
 * tick): past its due time (its predicted first token, on a speed not
 * measured PG_LOAD_UNMEASURED_SLACK times that), it leaves the queue.
 * Returns whether it left. */
bool pg_load_due(const struct pg_router *r, struct pg_load_ticket *t, uint64_t now_ms);

/* A request sent to learn an instance's speed (not measured) that a
 * deadline cut (proxy/deadline.h) is not followed by another sent there to
 * learn it for this long (router/route.c explore): a slow instance is
 * tried about once a second, not with every request. */
#define PG_LOAD_EXPLORE_BACKOFF_MS 1000

/* Its attempt was cut at its deadline, before its first token, at now_ms:
 * it leaves the queue with nothing learned (its first token is not known,
 * only that it is later), and if its backend's speed was not measured when
 * it was taken, PG_LOAD_EXPLORE_BACKOFF_MS pass before that backend is
 * explored again. No-op for a ticket never taken. */
void pg_load_cut(const struct pg_router *r, struct pg_load_ticket *t, uint64_t now_ms);

/* It leaves the queue with nothing learned (no first token seen). No-op if
 * not pending. */
static inline bool pg_load_pending(const struct pg_load_ticket *t)
{
	return t->w.pending;
}

void pg_load_drop(const struct pg_router *r, struct pg_load_ticket *t);

#endif /* PG_ROUTER_LOAD_H */
