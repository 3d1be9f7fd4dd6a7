// SPDX-License-Identifier: MIT
/*
 * An instance's cache capacity (cachecap.h): a recency list of sequences,
 * and the pair of thresholds that misclassifies fewest recent answers.
 */
#include <string.h>
#include "lib/cachecap.h"

/* K_seqs past the list: no bound (pg_cc.seqs 0). */
#define SEQ_ANY (PG_CC_SEQS + 1)
/* K_blocks at most (d_blocks are 32-bit). */
#define BLOCKS_MAX UINT32_MAX

uint32_t pg_cc_recent_distance(const struct pg_cc_recent *r, uint64_t id)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->id[i] == id)
			return i;
	return PG_CC_SEQS;
}

/* The entry at d (PG_CC_SEQS: a new one; the least recent falls off a
 * full list) to the front, as id, busy. */
static void to_front(struct pg_cc_recent *r, uint32_t d, uint64_t id, uint8_t busy)
{
	uint32_t move = d;

	if (d == PG_CC_SEQS)
		move = r->n < PG_CC_SEQS ? r->n++ : PG_CC_SEQS - 1;
	memmove(&r->id[1], &r->id[0], move * sizeof(r->id[0]));
	memmove(&r->busy[1], &r->busy[0], move * sizeof(r->busy[0]));
	r->id[0] = id;
	r->busy[0] = busy;
}

uint32_t pg_cc_recent_send(struct pg_cc_recent *r, uint64_t id)
{
	uint32_t d = pg_cc_recent_distance(r, id);

	to_front(r, d, id, d == PG_CC_SEQS ? 0 : r->busy[d]);
	return d;
}

uint32_t pg_cc_recent_idle(const struct pg_cc_recent *r, uint64_t id)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->id[i] == id && !r->busy[i])
			return i;
	return PG_CC_SEQS;
}

uint32_t pg_cc_recent_take(struct pg_cc_recent *r, uint64_t id)
{
	const uint32_t d = pg_cc_recent_idle(r, id);

	to_front(r, d, id, 1);
	return d;
}

void pg_cc_recent_done(struct pg_cc_recent *r, uint64_t id)
{
	for (uint32_t i = 0; i < r->n; i++)
		if (r->id[i] == id && r->busy[i]) {
			r->busy[i]--;
			return;
		}
}

void pg_cc_recent_drop(struct pg_cc_recent *r, uint64_t id)
{
	uint32_t d = pg_cc_recent_distance(r, id);

	if (d == PG_CC_SEQS)
		return;
	memmove(&r->id[d], &r->id[d + 1], (r->n - d - 1) * sizeof(r->id[0]));
	memmove(&r->busy[d], &r->busy[d + 1], (r->n - d - 1) * sizeof(r->busy[0]));
	r->n--;
}

void pg_cc_init(struct pg_cc *c, uint32_t dflt_blocks, enum pg_cc_kind kind)
{
	memset(c, 0, sizeof(*c));
	c->dflt_blocks = dflt_blocks ? dflt_blocks : 1;
	c->kind = (uint8_t)kind;
}

void pg_cc_set_default(struct pg_cc *c, uint32_t dflt_blocks)
{
	c->dflt_blocks = dflt_blocks ? dflt_blocks : 1;
}

/* Predicted held under (kb, ks). */
static bool predicts(const struct pg_cc_obs *o, uint32_t kb, uint32_t ks)
{
	return o->blocks < kb && o->seqs < ks;
}

/* How far kb is from cur, as a ratio >= 1. */
static double ratio(uint32_t kb, uint32_t cur)
{
	return kb > cur ? (double)kb / cur : (double)cur / kb;
}

struct fit {
	uint32_t cost, kb, ks;
	double far; /* how far from the current pair */
};

/* How far (kb, ks) is from the current pair: the log ratios of each
 * measure, summed (no bound on sequences counted as PG_CC_SEQS + 1); in a
 * per-slot cache the blocks' 4 times. */
static double distance(uint8_t kind, uint32_t kb, uint32_t ks, uint32_t cur_b, uint32_t cur_s)
{
	double b = ratio(kb, cur_b);

	if (kind == PG_CC_SLOTS)
		b *= b * b * b;
	return b * ratio(ks, cur_s);
}

/* a is nearer the current pair than b; as near: the fewer misclassified,
 * then the larger. */
static bool nearer(const struct fit *a, const struct fit *b)
{
	if (a->far != b->far)
		return a->far < b->far;
	if (a->cost != b->cost)
		return a->cost < b->cost;
	return a->ks != b->ks ? a->ks > b->ks : a->kb > b->kb;
}

/* A refit's search: the window sorted by d_blocks, the current pair. */
struct search {
	const struct pg_cc_obs *o;
	uint32_t n, cur_b, cur_s;
	uint8_t kind;
	uint32_t min;   /* the fewest misclassified answers found */
	uint32_t limit; /* with pick: candidates that misclassify no more */
	bool pick;
	struct fit best; /* ... the nearest of them */
};

/* A candidate pair that misclassifies cost answers. */
static void consider(struct search *s, uint32_t kb, uint32_t ks, uint32_t cost)
{
	struct fit f = {cost, kb, ks, distance(s->kind, kb, ks, s->cur_b, s->cur_s)};

	if (cost < s->min)
		s->min = cost;
	if (s->pick && cost <= s->limit && nearer(&f, &s->best))
		s->best = f;
}

/*
 * A move changes one measure (two that move at once fit the noise of a
 * window too well). The blocks: the threshold kb sweeps up through the
 * answers (sorted by d_blocks), each value passed turning its answers
 * into predicted hits if the sequences let them.
 */
static void blocks_moves(struct search *s, uint32_t ks)
{
	const struct pg_cc_obs *o = s->o;
	uint32_t cost = 0, lo = 1, n = s->n, b = s->cur_b;

	for (uint32_t i = 0; i < n; i++)
		cost += o[i].held; /* kb 0: every answer a predicted miss */
	for (uint32_t i = 0;;) {
		/* kb in [lo, hi]: all alike; the nearest to the current */
		uint32_t hi = i < n ? o[i].blocks : BLOCKS_MAX;

		if (lo <= hi)
			consider(s, b < lo ? lo : b > hi ? hi : b, ks, cost);
		if (i == n || hi == BLOCKS_MAX)
			return;
		for (; i < n && o[i].blocks == hi; i++) /* kb past hi */
			if (o[i].seqs < ks)
				cost += o[i].held ? -1u : 1u;
		lo = hi + 1;
	}
}

/* The sequences: with the blocks kept, each ks from counts of the
 * answers below them by d_seqs. */
static void seqs_moves(struct search *s, uint32_t kb)
{
	uint32_t held[SEQ_ANY] = {0}, lost[SEQ_ANY] = {0}, cost = 0;

	for (uint32_t i = 0; i < s->n; i++) {
		const struct pg_cc_obs *o = &s->o[i];

		if (o->blocks >= kb)
			cost += o->held; /* a predicted miss whatever ks */
		else if (o->held)
			held[o->seqs]++;
		else
			lost[o->seqs]++;
	}
	for (uint32_t d = 0; d < SEQ_ANY; d++)
		cost += held[d]; /* ks 0: every answer a predicted miss */
	for (uint32_t ks = 1; ks <= SEQ_ANY; ks++) {
		cost += lost[ks - 1] - held[ks - 1]; /* d_seqs ks - 1 now below */
		consider(s, kb, ks, cost);
	}
}

/* The pairs a move may go to: one measure changed, from the current pair
 * or from the prior (so that a pair both of whose measures moved, the
 * noise or a change of the engine taken for a bound, can go back to an
 * explanation by one). A paged cache holds tokens alone. */
static void moves(struct search *s, const struct pg_cc *c)
{
	blocks_moves(s, s->cur_s);
	if (s->cur_s != SEQ_ANY)
		blocks_moves(s, SEQ_ANY);
	if (c->kind == PG_CC_PAGED)
		return;
	seqs_moves(s, s->cur_b);
	if (s->cur_b != c->dflt_blocks)
		seqs_moves(s, c->dflt_blocks);
}

/* When the current pair misclassifies more than twice as many answers of
 * the window as the best pair would, plus PG_CC_MARGIN, it moves to the
 * nearest pair within one answer of the best (so that the next answer
 * does not move it back). */
static bool refit(struct pg_cc *c)
{
	struct pg_cc_obs o[PG_CC_WINDOW];
	struct search s = {.o = o,
	                   .n = c->n,
	                   .cur_b = pg_cc_blocks(c),
	                   .cur_s = c->seqs ? c->seqs : SEQ_ANY,
	                   .kind = c->kind,
	                   .min = UINT32_MAX};
	uint32_t cur = 0;

	c->since_fit = 0;
	for (uint32_t i = 0; i < s.n; i++) { /* insertion sort by d_blocks */
		struct pg_cc_obs x = c->obs[i];
		uint32_t j = i;

		for (; j && o[j - 1].blocks > x.blocks; j--)
			o[j] = o[j - 1];
		o[j] = x;
		cur += predicts(&x, s.cur_b, s.cur_s) != x.held;
	}
	moves(&s, c);
	if (cur <= s.min + s.min / 2 + (c->kind == PG_CC_SLOTS ? PG_CC_MARGIN_SLOTS : PG_CC_MARGIN))
		return false;
	s.pick = true;
	s.limit = s.min + 1;
	s.best = (struct fit){UINT32_MAX, 0, 0, 1e300};
	moves(&s, c);
	c->blocks = s.best.kb;
	c->seqs = s.best.ks == SEQ_ANY ? 0 : s.best.ks;
	c->moves++;
	return true;
}

bool pg_cc_observe(struct pg_cc *c, uint32_t d_blocks, uint32_t d_seqs, bool held)
{
	struct pg_cc_obs o = {d_blocks, (uint8_t)(d_seqs < PG_CC_SEQS ? d_seqs : PG_CC_SEQS), held};

	c->obs[c->head] = o;
	c->head = (c->head + 1) % PG_CC_WINDOW;
	if (c->n < PG_CC_WINDOW)
		c->n++;
	c->answers++;
	/* a wrong prediction asks for a refit; a window's worth of right ones
	 * too (the answers that left it may have held the current pair up) */
	if (pg_cc_holds(c, d_blocks, o.seqs) != held || ++c->since_fit >= PG_CC_WINDOW)
		return refit(c);
	return false;
}

enum pg_cc_verdict pg_cc_verdict(uint32_t predicted, uint32_t shared, uint32_t prompt,
                                 uint32_t cached, uint32_t prompt_engine)
{
	uint64_t own, found;

	if (predicted <= shared || !prompt || !prompt_engine)
		return PG_CC_UNKNOWN;
	own = predicted - shared;
	/* the engine's tokens in the gateway's estimate */
	found = (uint64_t)cached * prompt / prompt_engine;
	return found >= shared + (own + 1) / 2 ? PG_CC_HELD : PG_CC_LOST;
}
