// SPDX-License-Identifier: MIT
/* Each backend's queue of work and learned speed (load.h). */
#include <math.h>
#include <stdlib.h>

#include "lib/cachechoice.h"
#include "state/load.h"

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define ADD(p, v)   __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define SUB(p, v)   __atomic_fetch_sub((p), (v), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

const uint32_t pg_ttft_err_bounds_ms[PG_TTFT_ERR_BUCKETS - 1] = {10,   30,    100,   300,   1000,
                                                                 3000, 10000, 30000, 100000};

struct pg_speeds *pg_speeds_new(const struct pg_speed *prior)
{
	struct pg_speeds *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->slot_prior = *prior;
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

void pg_load_take(struct pg_gateway *gw, uint16_t id, uint32_t tokens, struct pg_load_ticket *t,
                  uint64_t now_ns)
{
	struct pg_backend *b = &gw->maps.backends[id];
	const uint64_t queued = LOAD(&b->prefill_tokens) + LOAD(&b->peer_prefill_tokens);
	const int64_t dec = (int64_t)LOAD(&b->in_flight) - (int64_t)LOAD(&b->prefill_reqs) +
	                    LOAD(&b->peer_in_flight) - (int64_t)LOAD(&b->peer_prefill_reqs);
	struct pg_speed sp;

	if (t->pending)
		pg_load_drop(gw, t);
	pg_ca_speed(b, &sp);
	*t = (struct pg_load_ticket){
	    .pending = true,
	    .backend = id,
	    .epoch = LOAD(&b->epoch),
	    .tokens = tokens ? tokens : 1,
	    .ahead = (float)(queued + (tokens ? tokens : 1)),
	    .decoding = (float)(dec > 0 ? dec : 0),
	    .sent_ns = now_ns,
	};
	t->pred_ms = (float)pg_speed_predict(&sp, t->ahead, t->decoding);
	t->due_ms = now_ns / 1000000 + (uint64_t)t->pred_ms;
	ADD(&b->prefill_tokens, t->tokens);
	ADD(&b->prefill_reqs, 1);
}

void pg_load_drop(struct pg_gateway *gw, struct pg_load_ticket *t)
{
	struct pg_backend *b;

	if (!t->pending)
		return;
	t->pending = false;
	b = &gw->maps.backends[t->backend];
	SUB(&b->prefill_tokens, t->tokens);
	SUB(&b->prefill_reqs, 1);
}

/* The fit of t's backend learns from it; published into the table. */
static void learn(struct pg_gateway *gw, const struct pg_load_ticket *t, double ttft_ms,
                  uint64_t now_ms)
{
	struct pg_speed_slot *s = &gw->speeds->slot[t->backend];
	struct pg_backend *b = &gw->maps.backends[t->backend];
	struct pg_speed cur;

	pthread_mutex_lock(&s->mu);
	if (!s->live || s->epoch != t->epoch) {
		/* a new member in this slot: it starts from the defaults */
		pg_fit_init(&s->fit, &gw->speeds->slot_prior);
		s->epoch = t->epoch;
		s->live = true;
	}
	pg_fit_observe(&s->fit, now_ms, t->ahead, t->decoding, ttft_ms);
	cur = s->fit.cur;
	pthread_mutex_unlock(&s->mu);
	if (LOAD(&b->epoch) != t->epoch)
		return; /* the slot changed hands meanwhile */
	STORE(&b->fit_overhead_us, (uint32_t)fmin(cur.overhead_ms * 1000, UINT32_MAX));
	STORE(&b->fit_decode_us, (uint32_t)fmin(cur.ms_per_decode * 1000, UINT32_MAX));
	STORE(&b->fit_rate, (uint32_t)fmax(fmin(1e6 / cur.ms_per_ktok, UINT32_MAX), 1));
}

void pg_load_first(struct pg_gateway *gw, struct pg_worker_stats *st, struct pg_load_ticket *t,
                   uint64_t now_ns)
{
	double ttft_ms, err;
	unsigned i = 0;

	if (!t->pending)
		return;
	pg_load_drop(gw, t);
	ttft_ms = (double)(now_ns - t->sent_ns) / 1e6;
	err = ttft_ms - t->pred_ms;
	while (i < PG_TTFT_ERR_BUCKETS - 1 && fabs(err) > pg_ttft_err_bounds_ms[i])
		i++;
	if (st) {
		ADD(&st->ttft_err[i], 1);
		ADD(&st->ttft_err_sum_us, (int64_t)(err * 1000));
	}
	if (gw->speeds)
		learn(gw, t, ttft_ms, now_ns / 1000000);
}
