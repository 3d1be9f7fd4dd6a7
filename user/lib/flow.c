// SPDX-License-Identifier: MIT
/* Flow control's order (flow.h). */
#include <string.h>

#include "lib/flow.h"

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

unsigned pg_flow_tenant(struct pg_flow_tenants *ts, uint64_t key, const char *label)
{
	const unsigned n = PG_FLOW_TENANTS - 1; /* slots 1..n; 0 is "other" */

	if (!key)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		struct pg_flow_tenant *t = &ts->t[1 + (key + i) % n];
		uint64_t k = LOAD(&t->key);

		if (k == key)
			return (unsigned)(t - ts->t);
		if (k)
			continue;
		if (__atomic_compare_exchange_n(&t->key, &k, key, false, __ATOMIC_ACQ_REL,
		                                __ATOMIC_RELAXED)) {
			/* the label is only read for metrics: a reader that sees
			 * the key first sees an empty one for a moment */
			strncpy(t->label, label ? label : "", sizeof(t->label) - 1);
			if (!LOAD(&t->weight)) { /* not configured */
				STORE(&t->weight, 1);
				STORE(&t->prio, -1);
			}
			return (unsigned)(t - ts->t);
		}
		if (k == key) /* another thread added it meanwhile */
			return (unsigned)(t - ts->t);
	}
	return 0;
}

void pg_flow_seen(struct pg_flow_tenants *ts, unsigned t, uint64_t now_ms)
{
	/* one store a millisecond at most: the line is every worker's */
	if (t < PG_FLOW_TENANTS && LOAD(&ts->t[t].seen_ms) != now_ms)
		STORE(&ts->t[t].seen_ms, now_ms);
}

void pg_flow_share(const struct pg_flow_tenants *ts, uint64_t now_ms, struct pg_flow_share *s)
{
	s->least = UINT64_MAX;
	s->when_ms = now_ms;
	for (unsigned i = 0; i < PG_FLOW_TENANTS; i++) {
		uint64_t seen = LOAD(&ts->t[i].seen_ms);

		if (seen && seen + PG_FLOW_PRESENT_MS >= now_ms) {
			uint64_t v = LOAD(&ts->t[i].vtc);

			if (v < s->least)
				s->least = v;
		}
	}
}

bool pg_flow_ahead(const struct pg_flow_tenants *ts, const struct pg_flow_share *s, unsigned t)
{
	const uint64_t burst = (uint64_t)PG_FLOW_BURST_WORK * 1000;

	return t < PG_FLOW_TENANTS && s->least != UINT64_MAX &&
	       LOAD(&ts->t[t].vtc) > s->least + burst;
}

static void fifo_push(struct pg_flow_fifo *f, struct pg_flow_item *it, bool tenant)
{
	struct pg_flow_item **prev = tenant ? &it->tprev : &it->cprev;
	struct pg_flow_item **next = tenant ? &it->tnext : &it->cnext;

	*prev = f->tail;
	*next = NULL;
	if (f->tail)
		*(tenant ? &f->tail->tnext : &f->tail->cnext) = it;
	else
		f->head = it;
	f->tail = it;
}

static void fifo_del(struct pg_flow_fifo *f, struct pg_flow_item *it, bool tenant)
{
	struct pg_flow_item *prev = tenant ? it->tprev : it->cprev;
	struct pg_flow_item *next = tenant ? it->tnext : it->cnext;

	if (prev)
		*(tenant ? &prev->tnext : &prev->cnext) = next;
	else
		f->head = next;
	if (next)
		*(tenant ? &next->tprev : &next->cprev) = prev;
	else
		f->tail = prev;
}

/* Tenant t has a request queued again: lifted to one burst below the
 * least counter of the tenants that have (PG_FLOW_BURST_WORK, in counter
 * units: work x 1000 / weight, so a burst of work x weight), so that
 * idling banks no more credit than that. */
static void lift(struct pg_flow_tenants *ts, unsigned t)
{
	const uint64_t burst = (uint64_t)PG_FLOW_BURST_WORK * 1000;
	uint64_t least = UINT64_MAX, mine = LOAD(&ts->t[t].vtc);

	for (unsigned i = 0; i < PG_FLOW_TENANTS; i++)
		if (i != t && LOAD(&ts->t[i].queued)) {
			uint64_t v = LOAD(&ts->t[i].vtc);

			if (v < least)
				least = v;
		}
	if (least != UINT64_MAX && least > burst && mine < least - burst)
		STORE(&ts->t[t].vtc, least - burst);
}

static void insert(struct pg_flow_q *q, struct pg_flow_tenants *ts, struct pg_flow_item *it,
                   uint64_t now_ms)
{
	const unsigned c = it->prio, t = it->tenant;

	it->enq_ms = now_ms;
	it->queued = true;
	fifo_push(&q->cls[c], it, false);
	fifo_push(&q->ten[c][t], it, true);
	q->mask[c][t / 64] |= 1ull << (t % 64);
	q->n++;
	q->n_cls[c]++;
	q->bytes += it->bytes;
	if (it->deadline_ms && (!q->next_deadline_ms || it->deadline_ms < q->next_deadline_ms))
		q->next_deadline_ms = it->deadline_ms;
	if (!__atomic_fetch_add(&ts->t[t].queued, 1, __ATOMIC_RELAXED))
		lift(ts, t);
}

void pg_flow_remove(struct pg_flow_q *q, struct pg_flow_tenants *ts, struct pg_flow_item *it)
{
	const unsigned c = it->prio, t = it->tenant;

	if (!it->queued)
		return;
	it->queued = false;
	fifo_del(&q->cls[c], it, false);
	fifo_del(&q->ten[c][t], it, true);
	if (!q->ten[c][t].head)
		q->mask[c][t / 64] &= ~(1ull << (t % 64));
	q->n--;
	q->n_cls[c]--;
	q->bytes -= it->bytes;
	__atomic_fetch_sub(&ts->t[t].queued, 1, __ATOMIC_RELAXED);
}

enum pg_flow_push pg_flow_push(struct pg_flow_q *q, struct pg_flow_tenants *ts,
                               struct pg_flow_item *it, const struct pg_flow_limits *lim,
                               uint64_t now_ms, struct pg_flow_item **shed)
{
	struct pg_flow_item *victim = q->cls[PG_PRIO_SHEDDABLE].tail;

	*shed = NULL;
	if (it->prio >= PG_PRIO_COUNT)
		it->prio = PG_PRIO_STANDARD;
	if (it->tenant >= PG_FLOW_TENANTS)
		it->tenant = 0;
	if (q->n + 1 <= lim->max_requests && (uint64_t)q->bytes + it->bytes <= lim->max_bytes) {
		insert(q, ts, it, now_ms);
		return PG_FLOW_QUEUED;
	}
	/* full: the newest sheddable request makes room for one that is not */
	if (it->prio == PG_PRIO_SHEDDABLE || !victim || q->n > lim->max_requests ||
	    (uint64_t)q->bytes - victim->bytes + it->bytes > lim->max_bytes)
		return PG_FLOW_REFUSED;
	pg_flow_remove(q, ts, victim);
	insert(q, ts, it, now_ms);
	*shed = victim;
	return PG_FLOW_SHED;
}

/* Of the tenants with a request queued in class c, the one with the least
 * counter (the lowest slot among equals). */
static unsigned least_served(const struct pg_flow_q *q, const struct pg_flow_tenants *ts,
                             unsigned c)
{
	uint64_t least = UINT64_MAX;
	unsigned best = 0;

	for (unsigned w = 0; w < PG_FLOW_TENANTS / 64; w++)
		for (uint64_t m = q->mask[c][w]; m; m &= m - 1) {
			unsigned t = w * 64 + (unsigned)__builtin_ctzll(m);
			uint64_t v = LOAD(&ts->t[t].vtc);

			if (v < least) {
				least = v;
				best = t;
			}
		}
	return best;
}

struct pg_flow_item *pg_flow_next(const struct pg_flow_q *q, const struct pg_flow_tenants *ts,
                                  const struct pg_flow_limits *lim, uint64_t now_ms)
{
	struct pg_flow_item *starved = NULL;
	const bool turn = now_ms >= q->jump_ms; /* for a starved one */
	int top = -1;

	for (unsigned c = 0; c < PG_PRIO_COUNT; c++) {
		const struct pg_flow_item *h = q->cls[c].head;

		if (!h)
			continue;
		if (top < 0) {
			top = (int)c;
			continue;
		}
		/* a lower class's oldest, starved: the oldest of those first */
		if (turn && now_ms >= h->enq_ms + lim->starve_ms &&
		    (!starved || h->enq_ms < starved->enq_ms))
			starved = q->cls[c].head;
	}
	if (starved)
		return starved;
	if (top < 0)
		return NULL;
	return q->ten[top][least_served(q, ts, (unsigned)top)].head;
}

struct pg_flow_item *pg_flow_pop(struct pg_flow_q *q, struct pg_flow_tenants *ts,
                                 const struct pg_flow_limits *lim, uint64_t now_ms)
{
	struct pg_flow_item *it = pg_flow_next(q, ts, lim, now_ms);

	if (!it)
		return NULL;
	if (it->prio > pg_flow_top(q)) /* starved, before a higher class */
		q->jump_ms = now_ms + lim->starve_ms;
	pg_flow_remove(q, ts, it);
	return it;
}

uint64_t pg_flow_rank(const struct pg_flow_q *q, const struct pg_flow_tenants *ts,
                      const struct pg_flow_limits *lim, uint64_t now_ms,
                      const struct pg_flow_item *it)
{
	const uint64_t field = (1ull << 58) - 1;
	uint64_t vtc;

	if (!it)
		return UINT64_MAX;
	if (it->prio > pg_flow_top(q) && now_ms >= q->jump_ms &&
	    now_ms >= it->enq_ms + lim->starve_ms)
		return it->enq_ms < field ? it->enq_ms : field;
	vtc = LOAD(&ts->t[it->tenant].vtc);
	return (uint64_t)(it->prio + 1) << 58 | (vtc < field ? vtc : field);
}

void pg_flow_charge(struct pg_flow_tenants *ts, const struct pg_flow_item *it)
{
	struct pg_flow_tenant *t = &ts->t[it->tenant < PG_FLOW_TENANTS ? it->tenant : 0];
	uint32_t w = LOAD(&t->weight);

	__atomic_fetch_add(&t->vtc, it->cost * 1000 / (w ? w : 1), __ATOMIC_RELAXED);
	__atomic_fetch_add(&t->fleet_out, it->cost, __ATOMIC_RELAXED);
}

unsigned pg_flow_heard(struct pg_flow_tenants *ts, uint64_t key, const char *label, uint64_t served)
{
	const unsigned i = pg_flow_tenant(ts, key, label);
	struct pg_flow_tenant *t = &ts->t[i];
	uint32_t w = LOAD(&t->weight);

	if (served) {
		__atomic_fetch_add(&t->vtc, served * 1000 / (w ? w : 1), __ATOMIC_RELAXED);
		__atomic_fetch_add(&t->peer_served, served, __ATOMIC_RELAXED);
	}
	return i;
}

struct pg_flow_item *pg_flow_expired(struct pg_flow_q *q, uint64_t now_ms)
{
	uint64_t next = 0;

	if (!q->next_deadline_ms || now_ms < q->next_deadline_ms)
		return NULL;
	for (unsigned c = 0; c < PG_PRIO_COUNT; c++)
		for (struct pg_flow_item *it = q->cls[c].head; it; it = it->cnext) {
			if (!it->deadline_ms)
				continue;
			if (it->deadline_ms <= now_ms)
				return it;
			if (!next || it->deadline_ms < next)
				next = it->deadline_ms;
		}
	q->next_deadline_ms = next;
	return NULL;
}
