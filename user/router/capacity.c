// SPDX-License-Identifier: MIT
/* What each instance's cache really keeps (capacity.h). */
#include <stdlib.h>

#include "router/capacity.h"
#include "router/router.h"

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

struct pg_capacities *pg_capacities_new(void)
{
	struct pg_capacities *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	for (unsigned i = 0; i < PG_MAX_BACKENDS; i++)
		pthread_mutex_init(&c->slot[i].mu, NULL);
	return c;
}

void pg_capacities_free(struct pg_capacities *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < PG_MAX_BACKENDS; i++)
		pthread_mutex_destroy(&c->slot[i].mu);
	free(c);
}

/* id's slot (under its lock) for the member of epoch: a new member starts
 * from its reported or configured capacity, nothing learned, no list. */
static struct pg_capacity_slot *slot_of(const struct pg_router *r, uint16_t id, uint32_t epoch)
{
	struct pg_capacity_slot *s = &r->caps->slot[id];
	const struct pg_ca_index ix = pg_router_index(r);
	const uint32_t reported = LOAD(&r->maps->backends[id].ca_capacity_blocks);

	if (s->live && s->epoch == epoch) {
		if (reported && reported != s->cc.dflt_blocks)
			pg_cc_set_default(&s->cc, reported);
		return s;
	}
	pg_cc_init(&s->cc,
	           reported             ? reported
	           : ix.capacity_blocks ? ix.capacity_blocks
	                                : 1,
	           PG_CC_ANY_KIND);
	pg_cc_recent_init(&s->recent);
	s->epoch = epoch;
	s->live = true;
	return s;
}

/* What was learned, where the index and the choice read it. */
static void publish(const struct pg_router *r, uint16_t id, uint32_t epoch,
                    const struct pg_capacity_slot *s)
{
	struct pg_backend *b = &r->maps->backends[id];

	if (LOAD(&b->epoch) != epoch)
		return;
	STORE(&b->ca_learned_blocks, s->cc.blocks);
	STORE(&b->ca_learned_seqs, s->cc.seqs);
}

/* Every copy of anchor on r is busy (and it has one). */
static bool busy(const struct pg_cc_recent *r, uint64_t anchor)
{
	return pg_cc_recent_idle(r, anchor) == PG_CC_SEQS &&
	       pg_cc_recent_distance(r, anchor) != PG_CC_SEQS;
}

void pg_capacity_sent(const struct pg_router *r, uint16_t id, uint64_t anchor, uint64_t hash,
                      struct pg_choice *choice)
{
	const struct pg_ca_index ix = pg_router_index(r);
	struct pg_backend *b = &r->maps->backends[id];
	const uint32_t epoch = LOAD(&b->epoch);
	struct pg_capacity_slot *s;
	uint32_t stamp;

	choice->d_blocks = UINT32_MAX;
	if (hash && pg_ca_stamp(&ix, hash, id, &stamp))
		choice->d_blocks = (uint32_t)LOAD(&b->ca_clock) - stamp;
	if (!r->caps)
		return;
	s = &r->caps->slot[id];
	pthread_mutex_lock(&s->mu);
	slot_of(r, id, epoch);
	if (s->cc.kind == PG_CC_SLOTS) {
		/* every copy busy: computed cold in another slot, whatever
		 * the capacity, so its answer teaches none */
		if (busy(&s->recent, anchor))
			choice->d_blocks = UINT32_MAX;
		choice->d_seqs = (uint8_t)pg_cc_recent_take(&s->recent, anchor);
		choice->seq_taken = true;
	} else {
		choice->d_seqs = (uint8_t)pg_cc_recent_send(&s->recent, anchor);
	}
	pthread_mutex_unlock(&s->mu);
}

void pg_capacity_done(const struct pg_router *r, uint16_t id, uint64_t anchor)
{
	const uint32_t epoch = LOAD(&r->maps->backends[id].epoch);
	struct pg_capacity_slot *s;

	if (!r->caps)
		return;
	s = &r->caps->slot[id];
	pthread_mutex_lock(&s->mu);
	if (s->live && s->epoch == epoch)
		pg_cc_recent_done(&s->recent, anchor);
	pthread_mutex_unlock(&s->mu);
}

void pg_capacity_answer(const struct pg_router *r, const struct pg_choice *choice,
                        enum pg_cc_kind kind, enum pg_cc_verdict v)
{
	const uint16_t id = choice->backend;
	struct pg_capacity_slot *s;
	uint32_t epoch;

	if (!r->caps || !id || v == PG_CC_UNKNOWN || choice->d_blocks == UINT32_MAX ||
	    choice->matched <= choice->shared)
		return;
	epoch = LOAD(&r->maps->backends[id].epoch);
	s = &r->caps->slot[id];
	pthread_mutex_lock(&s->mu);
	slot_of(r, id, epoch);
	if (kind != PG_CC_ANY_KIND && kind != s->cc.kind)
		pg_cc_set_kind(&s->cc, kind);
	if (pg_cc_observe(&s->cc, choice->d_blocks, choice->d_seqs, v == PG_CC_HELD))
		publish(r, id, epoch, s);
	pthread_mutex_unlock(&s->mu);
}

bool pg_capacity_holds(const struct pg_router *r, uint16_t id, uint64_t anchor)
{
	const uint32_t bound = LOAD(&r->maps->backends[id].ca_learned_seqs);
	struct pg_capacity_slot *s;
	bool held;

	if (!r->caps)
		return true;
	s = &r->caps->slot[id];
	/* (a hint read unlocked: only a per-slot cache pays for the lock) */
	if (!bound && LOAD(&s->cc.kind) != PG_CC_SLOTS)
		return true;
	pthread_mutex_lock(&s->mu);
	if (!s->live)
		held = !bound;
	else if (s->cc.kind == PG_CC_SLOTS) /* computed in an idle copy, or cold */
		held = !busy(&s->recent, anchor) &&
		       (!bound || pg_cc_recent_idle(&s->recent, anchor) < bound);
	else
		held = pg_cc_recent_distance(&s->recent, anchor) < bound;
	pthread_mutex_unlock(&s->mu);
	return held;
}

bool pg_capacity_full(const struct pg_router *r, uint16_t id)
{
	const uint32_t bound = LOAD(&r->maps->backends[id].ca_learned_seqs);
	struct pg_capacity_slot *s;
	bool full;

	if (!bound || !r->caps)
		return false;
	s = &r->caps->slot[id];
	pthread_mutex_lock(&s->mu);
	full = s->live && s->recent.n >= bound;
	pthread_mutex_unlock(&s->mu);
	return full;
}

enum pg_cc_verdict pg_capacity_ttft_verdict(double pred_ms, double saved_ms, double ttft_ms)
{
	if (!(saved_ms >= PG_CAPACITY_TTFT_MIN_MS) || !(ttft_ms >= 0))
		return PG_CC_UNKNOWN;
	return ttft_ms > pred_ms + saved_ms / 2 ? PG_CC_LOST : PG_CC_HELD;
}
