// SPDX-License-Identifier: MIT
/* Each backend's queue of work and learned speed (load.h). */
#include <math.h>
#include <stdlib.h>

#include "router/load.h"
#include "router/router.h"

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define ADD(p, v)   __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define SUB(p, v)   __atomic_fetch_sub((p), (v), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

const uint32_t pg_ttft_err_bounds_ms[PG_TTFT_ERR_BUCKETS - 1] = {10,   30,    100,   300,   1000,
                                                                 3000, 10000, 30000, 100000};

struct pg_speeds *pg_speeds_new(void)
{
	struct pg_speeds *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	for (unsigned i = 0; i < PG_MAX_BACKENDS; i++)
		pthread_mutex_init(&s->slot[i].mu, NULL);
	return s;
}

void pg_speeds_free(struct pg_speeds *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < PG_MAX_BACKENDS; i++)
		pthread_mutex_destroy(&s->slot[i].mu);
	free(s);
}

void pg_load_take(const struct pg_router *r, uint16_t id, uint32_t tokens, struct pg_load_ticket *t,
                  uint64_t now_ns)
{
	struct pg_backend *b = &r->maps->backends[id];
	struct pg_speed sp;

	pg_load_drop(r, t);
	pg_work_speed(b, &sp);
	pg_work_take(b, &t->w, tokens, &sp, now_ns);
	t->backend = id;
	t->measured = pg_work_measured(b);
	t->epoch = LOAD(&b->epoch);
	t->due_ms = now_ns / 1000000 +
	            (uint64_t)(t->w.pred_ms * (t->measured ? 1 : PG_LOAD_UNMEASURED_SLACK));
	t->head_ns = 0;
}

void pg_load_drop(const struct pg_router *r, struct pg_load_ticket *t)
{
	if (t->w.pending)
		pg_work_drop(&r->maps->backends[t->backend], &t->w);
}

void pg_load_cut(const struct pg_router *r, struct pg_load_ticket *t, uint64_t now_ms)
{
	struct pg_backend *b = &r->maps->backends[t->backend];

	if (!t->w.sent_ns)
		return;
	pg_load_drop(r, t);
	if (!t->measured && LOAD(&b->epoch) == t->epoch)
		__atomic_store_n(&b->explore_after_ms, now_ms + PG_LOAD_EXPLORE_BACKOFF_MS,
		                 __ATOMIC_RELAXED);
}

/* s's fit (under s->mu), for the member of b's slot with epoch: a new
 * member starts from what the others do (its pool's speed, or the
 * defaults). */
static void fit_of(struct pg_speed_slot *s, const struct pg_backend *b, uint32_t epoch)
{
	struct pg_speed prior;

	if (s->live && s->epoch == epoch)
		return;
	pg_work_speed(b, &prior);
	pg_fit_init(&s->fit, &prior);
	s->epoch = epoch;
	s->live = true;
}

/* A fit's speed into the table, unless the slot changed hands meanwhile. */
static void publish_fit(struct pg_backend *b, uint32_t epoch, const struct pg_speed *cur,
                        uint64_t n)
{
	if (LOAD(&b->epoch) != epoch)
		return;
	STORE(&b->fit_obs, (uint32_t)(n < UINT32_MAX ? n : UINT32_MAX));
	if (n >= PG_FIT_OWN_MIN) /* else the pool's speed (pg_load_share_speeds) */
		pg_work_publish_speed(b, cur);
}

/* The fit of t's backend learns from it (its first token at now_ns);
 * published into the table, and in a fleet queued for the other gateways'
 * fits (never waits). */
static void learn(const struct pg_router *r, unsigned worker, const struct pg_load_ticket *t,
                  uint64_t now_ns)
{
	struct pg_speed_slot *s = &r->speeds->slot[t->backend];
	struct pg_backend *b = &r->maps->backends[t->backend];
	struct pg_fit_obs obs;
	struct pg_speed cur;
	uint64_t n;
	bool learned;

	pthread_mutex_lock(&s->mu);
	fit_of(s, b, t->epoch);
	learned = pg_work_learn(&s->fit, b, &t->w, now_ns, &obs);
	cur = s->fit.cur;
	n = s->fit.n;
	pthread_mutex_unlock(&s->mu);
	publish_fit(b, t->epoch, &cur, n);
	if (learned && r->out && r->out->learned)
		r->out->learned(r, worker, t->backend, t->epoch, &obs);
	/* the first of its pool measured: the others go by it at once, not at
	 * the next tick (until then a measured instance and the defaults are
	 * told apart by how wrong the defaults are, and new conversations,
	 * a burst of them, all go to the measured one) */
	if (learned && n == PG_FIT_OWN_MIN)
		pg_load_share_speeds(r);
}

void pg_load_observe(const struct pg_router *r, uint16_t id, uint32_t epoch,
                     const struct pg_fit_obs *obs, uint64_t now_ns)
{
	struct pg_speed_slot *s;
	struct pg_backend *b;
	struct pg_speed cur;
	uint64_t n;

	if (!r->speeds || !id || id >= PG_MAX_BACKENDS)
		return;
	s = &r->speeds->slot[id];
	b = &r->maps->backends[id];
	if (LOAD(&b->epoch) != epoch)
		return;
	pthread_mutex_lock(&s->mu);
	fit_of(s, b, epoch);
	pg_fit_learn(&s->fit, now_ns / 1000000, obs);
	cur = s->fit.cur;
	n = s->fit.n;
	pthread_mutex_unlock(&s->mu);
	publish_fit(b, epoch, &cur, n);
}

void pg_load_share_speeds(const struct pg_router *r)
{
	const unsigned max = pg_router_max_id(r);

	for (unsigned p = 0; p < r->maps->npools; p++) {
		struct pg_speed med;

		if (!pg_work_median_speed(r->maps->backends, max, p, &med))
			continue;
		for (unsigned id = 1; id <= max; id++) {
			struct pg_backend *b = &r->maps->backends[id];

			if (!(LOAD(&b->flags) & PG_BACKEND_ACTIVE) || LOAD(&b->pool) != p ||
			    LOAD(&b->fit_obs) >= PG_FIT_OWN_MIN)
				continue;
			/* and what its fit learns from starts there: the defaults,
			 * when they are far off, hold a fit of a few first tokens
			 * far off too */
			if (r->speeds) {
				struct pg_speed_slot *s = &r->speeds->slot[id];

				pthread_mutex_lock(&s->mu);
				if (s->live && s->epoch == LOAD(&b->epoch) &&
				    s->fit.n < PG_FIT_OWN_MIN)
					pg_fit_prior(&s->fit, &med);
				pthread_mutex_unlock(&s->mu);
			}
			pg_work_publish_speed(b, &med);
		}
	}
}

void pg_load_first(const struct pg_router *r, unsigned worker, struct pg_ttft_err *st,
                   struct pg_load_ticket *t, uint64_t now_ns)
{
	struct pg_backend *b = &r->maps->backends[t->backend];
	struct pg_speed sp;
	double ttft_ms, err;
	unsigned i = 0;

	if (!t->w.pending)
		return;
	pg_work_speed(b, &sp);
	ttft_ms = pg_work_first(b, &t->w, sp.overhead_ms, now_ns);
	err = ttft_ms - t->w.pred_ms;
	while (i < PG_TTFT_ERR_BUCKETS - 1 && fabs(err) > pg_ttft_err_bounds_ms[i])
		i++;
	if (st) {
		ADD(&st->bucket[i], 1);
		ADD(&st->sum_us, (int64_t)(err * 1000));
		ADD(&st->abs_us, (uint64_t)(fabs(err) * 1000));
	}
	if (r->speeds)
		learn(r, worker, t, now_ns);
}

/* t's answer took until now_ns: its instance's bound learns it, as the
 * time of the queue it joined (decoding apart: the bound is of the engine
 * alone, the decoding of those ahead of it in its time). */
static void learn_bound(const struct pg_router *r, const struct pg_load_ticket *t, uint64_t now_ns)
{
	struct pg_speed_slot *s = &r->speeds->slot[t->backend];
	struct pg_backend *b = &r->maps->backends[t->backend];
	static const struct pg_speed defaults = {PG_SPEED_OVERHEAD_DEFAULT,
	                                         1e6 / PG_SPEED_RATE_DEFAULT, 0};
	struct pg_speed cur;
	uint64_t n;

	pthread_mutex_lock(&s->mu);
	if (!s->bound_live || s->bound_epoch != t->epoch) {
		pg_fit_init(&s->bound, &defaults);
		s->bound_epoch = t->epoch;
		s->bound_live = true;
	}
	pg_fit_observe(&s->bound, now_ns / 1000000, true, t->w.ahead, 0,
	               (double)(now_ns - t->w.sent_ns) / 1e6);
	cur = s->bound.cur;
	n = s->bound.n;
	pthread_mutex_unlock(&s->mu);
	if (n >= PG_FIT_OWN_MIN && LOAD(&b->epoch) == t->epoch)
		pg_work_publish_bound(b, &cur);
}

void pg_load_answered(const struct pg_router *r, struct pg_load_ticket *t, uint64_t now_ns)
{
	struct pg_backend *b = &r->maps->backends[t->backend];
	struct pg_speed sp;

	if (t->head_ns || !t->w.sent_ns)
		return;
	t->head_ns = now_ns;
	/* the bound is read only where no stream measured the instance: no
	 * lock and fit for an answer anywhere else */
	if (r->speeds && now_ns > t->w.sent_ns && !pg_work_measured(b))
		learn_bound(r, t, now_ns);
	__atomic_fetch_add(&b->firsts, 1, __ATOMIC_RELAXED); /* seen to leave */
	pg_work_speed(b, &sp);
	pg_work_leave(b, &t->w, (uint64_t)fmax((double)now_ns / 1e6 - sp.overhead_ms, 0));
}

bool pg_load_due(const struct pg_router *r, struct pg_load_ticket *t, uint64_t now_ms)
{
	struct pg_backend *b = &r->maps->backends[t->backend];
	struct pg_speed sp;

	if (!t->w.pending)
		return false;
	/* on a speed not measured, its engine's report that it has begun it
	 * closes the loop the slack leaves open */
	if (now_ms < t->due_ms && (t->measured || !pg_work_begun(b, &t->w, now_ms)))
		return false;
	pg_work_speed(b, &sp);
	pg_work_leave(
	    b, &t->w,
	    (uint64_t)fmax((double)(now_ms < t->due_ms ? now_ms : t->due_ms) - sp.overhead_ms, 0));
	return true;
}
