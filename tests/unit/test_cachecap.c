// SPDX-License-Identifier: MIT
/*
 * lib/cachecap.h against reference engines fed random conversation
 * traffic: a per-slot cache of K sequences (llama.cpp's server) and a
 * paged LRU cache of T blocks (vLLM's), each exact. The learned capacity
 * reaches K sequences, or T blocks, within a stated number of answers from
 * a prior far off, stays there under 10% of answers wrong, moves on no one
 * outlier, follows a capacity that changes; the recency list gives the
 * distances a full history does, and a per-slot cache's hits and misses
 * with requests in flight.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "lib/cachecap.h"

/* The prior both runs start from: the default --cache-capacity in blocks. */
#define PRIOR 2048
#define CONVS 32  /* conversations at a time, at most */
#define STACK 512 /* blocks the reference's LRU stack ranks */

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* Move-to-front list: where id is (its LRU stack distance), cap if not. */
static unsigned mtf(uint64_t *list, unsigned *n, unsigned cap, uint64_t id)
{
	unsigned i = 0;

	while (i < *n && list[i] != id)
		i++;
	if (i == *n) {
		if (*n < cap)
			(*n)++;
		else
			i = cap - 1; /* the least recent falls off */
	}
	memmove(&list[1], &list[0], i * sizeof(*list));
	list[0] = id;
	return i;
}

static unsigned where(const uint64_t *list, unsigned n, uint64_t id)
{
	for (unsigned i = 0; i < n; i++)
		if (list[i] == id)
			return i;
	return n;
}

struct conv {
	uint64_t anchor;
	unsigned blocks; /* its prompt so far, sent */
	bool sent;
};

/* An engine, exactly: slots > 0, K sequences each held whole; else an
 * LRU of T blocks, a prefix's blocks touched deepest first. Either way
 * every block's LRU stack distance is kept (STACK deep), for d_blocks. */
struct engine {
	unsigned slots, t;
	uint64_t stack[STACK], seqs[PG_CC_SEQS];
	unsigned nstack, nseqs, nconv;
	struct conv conv[CONVS];
	uint64_t seed, anchors;
	struct pg_cc_recent recent;
};

/* slots sequences, or t blocks; conversations enough to fill it twice. */
static void engine_init(struct engine *e, unsigned slots, unsigned t, uint64_t seed)
{
	memset(e, 0, sizeof(*e));
	e->slots = slots;
	e->t = t;
	e->seed = seed;
	e->nconv = slots ? 2 * slots + 2 : t / 10;
	for (unsigned i = 0; i < e->nconv; i++)
		e->conv[i].anchor = ++e->anchors;
	pg_cc_recent_init(&e->recent);
}

static uint64_t block_id(const struct conv *c, unsigned j)
{
	return c->anchor << 16 | j;
}

/* One request of a random conversation: its next turn adds 1-4 blocks; a
 * long one ends and a new one begins. Returns true if it teaches (its
 * conversation was sent before), with its distances and whether the
 * engine still held it. */
static bool engine_step(struct engine *e, uint32_t *d_blocks, uint32_t *d_seqs, bool *held)
{
	struct conv *c = &e->conv[rnd(&e->seed) % e->nconv];
	unsigned grow = 1 + (unsigned)(rnd(&e->seed) % 4);
	bool teaches = c->sent;

	if (c->blocks + grow > 40) { /* a new conversation in its place */
		*c = (struct conv){.anchor = ++e->anchors};
		teaches = false;
	}
	*d_seqs = pg_cc_recent_send(&e->recent, c->anchor);
	if (teaches) {
		/* the deepest block of what was sent is the prefix's oldest */
		unsigned pos = where(e->stack, e->nstack, block_id(c, c->blocks - 1));

		*d_blocks = pos;
		*held = e->slots ? where(e->seqs, e->nseqs, c->anchor) < e->slots : pos < e->t;
	}
	c->blocks += grow;
	c->sent = true;
	for (unsigned j = c->blocks; j-- > 0;)
		mtf(e->stack, &e->nstack, STACK, block_id(c, j));
	if (e->slots)
		mtf(e->seqs, &e->nseqs, e->slots, c->anchor);
	return teaches;
}

struct run {
	unsigned answers; /* observations fed */
	unsigned settled; /* answers after which the capacity stayed right */
	unsigned right;   /* predictions right, over the last half */
	unsigned judged;  /* ... out of */
	unsigned flipped; /* answers fed wrong */
	unsigned moves;   /* times the capacity moved */
};

/* n answers of e into c, each wrong with probability noise (in 1/1000);
 * right(c): the capacity is the engine's. */
static void drive(struct engine *e, struct pg_cc *c, unsigned n, unsigned noise,
                  bool (*right)(const struct pg_cc *, const struct engine *), struct run *r)
{
	memset(r, 0, sizeof(*r));
	while (r->answers < n) {
		uint32_t db, ds;
		bool held;

		if (!engine_step(e, &db, &ds, &held))
			continue;
		if (r->answers >= n / 2) {
			r->judged++;
			r->right += pg_cc_holds(c, db, ds) == held;
		}
		if (rnd(&e->seed) % 1000 < noise) {
			held = !held;
			r->flipped++;
		}
		r->moves += pg_cc_observe(c, db, ds, held);
		r->answers++;
		if (!right(c, e))
			r->settled = r->answers;
	}
}

static bool slots_right(const struct pg_cc *c, const struct engine *e)
{
	return pg_cc_seqs(c) == e->slots;
}

/* T blocks: no sequence bound, and the blocks within 10%. */
static bool blocks_right(const struct pg_cc *c, const struct engine *e)
{
	uint32_t b = pg_cc_blocks(c);

	return !pg_cc_seqs(c) && b + e->t / 10 >= e->t && b <= e->t + e->t / 10;
}

/* SEEDS runs of one engine from the prior: the capacity right after at
 * most settle answers, and at least accuracy (per mille) of the second
 * half's predictions right, in every run. */
#define SEEDS 6

static void runs(const char *what, unsigned slots, unsigned t, unsigned noise, unsigned n,
                 enum pg_cc_kind kind, unsigned settle, unsigned accuracy)
{
	unsigned worst = 0, least = 1000;

	for (uint64_t seed = 1; seed <= SEEDS; seed++) {
		struct engine e;
		struct pg_cc c;
		struct run r;

		engine_init(&e, slots, t, seed * 7919);
		pg_cc_init(&c, PRIOR, kind);
		drive(&e, &c, n, noise, slots ? slots_right : blocks_right, &r);
		if (r.settled > worst)
			worst = r.settled;
		if (r.right * 1000 / r.judged < least)
			least = r.right * 1000 / r.judged;
		if (slots) /* the blocks were not what bounds it */
			assert_int_equal(pg_cc_blocks(&c), PRIOR);
	}
	if (settle < n)
		print_message("# %s %u, %u%% wrong: right after %u answers at most, %u.%u%% of "
		              "predictions right at least\n",
		              what, slots ? slots : t, noise / 10, worst, least / 10, least % 10);
	else
		print_message("# %s %u, %u%% wrong: %u.%u%% of predictions right at least\n", what,
		              slots ? slots : t, noise / 10, least / 10, least % 10);
	assert_true(worst <= settle);
	assert_true(least >= accuracy);
}

/* A per-slot cache of K sequences, its kind known or not: K within 80
 * answers (K 1 to 8), every prediction right after. */
static void test_slots(void **state)
{
	(void)state;
	for (unsigned k = 1; k <= 8; k *= 2) {
		runs("slots", k, 0, 0, 2000, PG_CC_ANY_KIND, 80, 1000);
		runs("slots (kind known)", k, 0, 0, 2000, PG_CC_SLOTS, 80, 1000);
	}
}

/* A paged cache of T blocks, from a prior 6 to 25 times too large: known
 * to be paged, T (within 10%) within 200 answers, 99% of predictions
 * right after; its kind not known, 99% right, a bound in sequences
 * sometimes taken for part of it (conversations of like sizes make it as
 * good an explanation). */
static void test_blocks(void **state)
{
	(void)state;
	for (unsigned t = 80; t <= 320; t *= 2) {
		runs("blocks (kind known)", 0, t, 0, 3000, PG_CC_PAGED, 200, 990);
		runs("blocks", 0, t, 0, 3000, PG_CC_ANY_KIND, UINT32_MAX, 990);
	}
}

/* 10% of answers wrong (early evictions, TTFT misread): K within 128
 * answers, T (paged) within 10% within 640; 97% of predictions of what the
 * engine holds right after. */
static void test_noise(void **state)
{
	(void)state;
	for (unsigned k = 2; k <= 4; k *= 2)
		runs("slots", k, 0, 100, 3000, PG_CC_ANY_KIND, 128, 970);
	for (unsigned t = 150; t <= 300; t += 150)
		runs("blocks (kind known)", 0, t, 100, 4000, PG_CC_PAGED, 640, 970);
}

/* Settled, one answer wrong anywhere changes nothing; from nothing, the
 * third answer that agrees moves it, not the second. */
static void test_outlier(void **state)
{
	struct engine e;
	struct pg_cc c;
	struct run r;

	(void)state;
	engine_init(&e, 2, 0, 7);
	pg_cc_init(&c, PRIOR, PG_CC_ANY_KIND);
	drive(&e, &c, 500, 0, slots_right, &r);
	assert_int_equal(pg_cc_seqs(&c), 2);
	assert_false(pg_cc_observe(&c, 0, 0, false));    /* lost at distance 0 */
	assert_false(pg_cc_observe(&c, 5000, 40, true)); /* held far away */
	assert_int_equal(pg_cc_seqs(&c), 2);
	assert_int_equal(pg_cc_blocks(&c), PRIOR);

	pg_cc_init(&c, PRIOR, PG_CC_ANY_KIND);
	assert_false(pg_cc_observe(&c, 30, 1, false));
	assert_false(pg_cc_observe(&c, 31, 1, false));
	assert_true(pg_cc_observe(&c, 29, 1, false));
	assert_int_equal(pg_cc_seqs(&c), 1);
	assert_int_equal(pg_cc_blocks(&c), PRIOR);
}

/* The engine's capacity changes (a restart with other flags): the
 * estimate follows within 3 windows of answers (the window must first
 * hold more of the new engine's answers than of the old's). */
static void test_changes(void **state)
{
	static const unsigned steps[] = {4, 2, 6, 1};
	unsigned worst = 0;

	(void)state;
	for (uint64_t seed = 1; seed <= SEEDS; seed++) {
		struct engine e;
		struct pg_cc c;
		struct run r;

		engine_init(&e, steps[0], 0, seed);
		e.nconv = 14; /* enough to overflow each */
		pg_cc_init(&c, PRIOR, PG_CC_ANY_KIND);
		for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			e.slots = steps[i]; /* a restart: an empty cache */
			e.nseqs = 0;
			drive(&e, &c, 800, 0, slots_right, &r);
			assert_int_equal(pg_cc_seqs(&c), steps[i]);
			if (i && r.settled > worst)
				worst = r.settled;
		}
	}
	print_message("# slots 4, 2, 6, 1: each right after %u answers at most\n", worst);
	assert_true(worst <= 3 * PG_CC_WINDOW);
}

/* The recency list against a full history: its distance is the number of
 * distinct others used since (ids last used after it), 64 at most; 80 ids
 * overflow it, then 40 ids, one dropped now and then, do not. */
static void test_recent(void **state)
{
	uint64_t last[81], seed = 3; /* step + 1 of each id's last use; 0: none */
	struct pg_cc_recent r;

	(void)state;
	for (unsigned ids = 80; ids >= 40; ids -= 40) {
		memset(last, 0, sizeof(last));
		pg_cc_recent_init(&r);
		assert_int_equal(pg_cc_recent_distance(&r, 5), PG_CC_SEQS);
		for (unsigned step = 0; step < 10000; step++) {
			uint64_t id = 1 + rnd(&seed) % ids;
			unsigned want = PG_CC_SEQS, distinct = 0;

			if (last[id]) {
				for (unsigned j = 1; j <= ids; j++)
					distinct += last[j] > last[id];
				want = distinct < PG_CC_SEQS ? distinct : PG_CC_SEQS;
			}
			assert_int_equal(pg_cc_recent_distance(&r, id), want);
			assert_int_equal(pg_cc_recent_send(&r, id), want);
			assert_int_equal(pg_cc_recent_distance(&r, id), 0);
			last[id] = step + 1;
			if (ids < PG_CC_SEQS && step % 97 == 0) { /* dropped: new again */
				pg_cc_recent_drop(&r, id);
				last[id] = 0;
				assert_int_equal(pg_cc_recent_distance(&r, id), PG_CC_SEQS);
			}
		}
		if (ids < PG_CC_SEQS) { /* every id used and not dropped since */
			unsigned used = 0;

			for (unsigned j = 1; j <= ids; j++)
				used += last[j] != 0;
			assert_int_equal(r.n, used);
		} else {
			assert_int_equal(r.n, PG_CC_SEQS);
		}
	}
}

/* A per-slot cache (llama.cpp's server) against the list: K slots, a
 * request computed in an idle slot holding its sequence (a hit), else in
 * the least recently used idle slot (a miss, evicting it). With at most
 * K - 1 requests in flight, the oldest ending first, the list's distance
 * (pg_cc_recent_take) predicts every hit and miss, a second request of a
 * sequence whose copy is busy included; and its copies go idle again. */
static void test_slot_copies(void **state)
{
	enum { K = 3, IDS = 5, STEPS = 20000 };
	uint64_t seq[K] = {0}, used[K] = {0}, fl_id[K], seed = 11;
	bool busy[K] = {false};
	unsigned fl_slot[K], nfl = 0, copies = 0;
	struct pg_cc_recent r;

	(void)state;
	pg_cc_recent_init(&r);
	for (unsigned step = 1; step <= STEPS; step++) {
		const uint64_t id = 1 + rnd(&seed) % IDS;
		int slot = -1, lru = -1;
		uint32_t d;

		if (nfl == K - 1 || (nfl && rnd(&seed) % 2)) { /* the oldest ends */
			busy[fl_slot[0]] = false;
			pg_cc_recent_done(&r, fl_id[0]);
			memmove(&fl_slot[0], &fl_slot[1], (K - 1) * sizeof(fl_slot[0]));
			memmove(&fl_id[0], &fl_id[1], (K - 1) * sizeof(fl_id[0]));
			nfl--;
		}
		for (int i = 0; i < K; i++) {
			if (busy[i])
				continue;
			if (seq[i] == id)
				slot = i;
			if (lru < 0 || used[i] < used[lru])
				lru = i;
		}
		for (unsigned i = 0; i < nfl && slot < 0; i++)
			if (fl_id[i] == id) { /* a copy of it busy: another copy */
				copies++;
				break;
			}
		assert_int_equal(pg_cc_recent_idle(&r, id) < K, slot >= 0);
		d = pg_cc_recent_take(&r, id);
		assert_int_equal(d < K, slot >= 0);
		if (slot < 0)
			slot = lru;
		seq[slot] = id;
		used[slot] = step;
		busy[slot] = true;
		fl_slot[nfl] = (unsigned)slot;
		fl_id[nfl++] = id;
	}
	assert_true(copies > 100); /* the case was met */
	while (nfl)
		pg_cc_recent_done(&r, fl_id[--nfl]);
	for (uint32_t i = 0; i < r.n; i++)
		assert_int_equal(r.busy[i], 0);
}

/* Live sequences: those on the list within the capacity. */
static void test_live(void **state)
{
	struct pg_cc_recent r;
	struct pg_cc c;

	(void)state;
	pg_cc_recent_init(&r);
	pg_cc_init(&c, 100, PG_CC_ANY_KIND);
	for (uint64_t id = 1; id <= 5; id++)
		pg_cc_recent_send(&r, id);
	assert_int_equal(pg_cc_live(&c, &r), 5);
	c.seqs = 3;
	assert_int_equal(pg_cc_live(&c, &r), 3);
	assert_true(pg_cc_holds(&c, 99, 2));
	assert_false(pg_cc_holds(&c, 100, 2));
	assert_false(pg_cc_holds(&c, 99, 3));
	pg_cc_set_default(&c, 200);
	assert_true(pg_cc_holds(&c, 150, 0));
}

static void test_verdict(void **state)
{
	(void)state;
	/* the engine counts 10% more tokens than the gateway's estimate */
	assert_int_equal(pg_cc_verdict(1000, 0, 1200, 1100, 1320), PG_CC_HELD);
	assert_int_equal(pg_cc_verdict(1000, 0, 1200, 560, 1320), PG_CC_HELD);
	assert_int_equal(pg_cc_verdict(1000, 0, 1200, 540, 1320), PG_CC_LOST);
	assert_int_equal(pg_cc_verdict(1000, 0, 1200, 0, 1320), PG_CC_LOST);
	/* a shared head of 400 kept by the others' traffic: not this prefix */
	assert_int_equal(pg_cc_verdict(1000, 400, 1200, 440, 1320), PG_CC_LOST);
	assert_int_equal(pg_cc_verdict(1000, 400, 1200, 800, 1320), PG_CC_HELD);
	/* nothing the instance alone was believed to hold, or no count */
	assert_int_equal(pg_cc_verdict(400, 400, 1200, 0, 1320), PG_CC_UNKNOWN);
	assert_int_equal(pg_cc_verdict(1000, 0, 1200, 0, 0), PG_CC_UNKNOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_slots),       cmocka_unit_test(test_blocks),
	    cmocka_unit_test(test_noise),       cmocka_unit_test(test_outlier),
	    cmocka_unit_test(test_changes),     cmocka_unit_test(test_recent),
	    cmocka_unit_test(test_slot_copies), cmocka_unit_test(test_live),
	    cmocka_unit_test(test_verdict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
