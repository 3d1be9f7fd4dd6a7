// SPDX-License-Identifier: MIT
/*
 * Balancer tests: one table of single decisions (which backend, which
 * decision) and a few distribution checks over many draws with a fixed seed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "router/strategy.h"
#include "balance_args.h"

#define A   PG_BACKEND_ACTIVE
#define D   PG_BACKEND_DRAINING
#define DN  PG_BACKEND_DOWN
#define NOW 100000

/* splitmix64: fixed-seed stream of rnd values. */
static uint64_t next_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct be {
	uint16_t id; /* 0 ends the list */
	uint16_t flags;
	int32_t load;
	uint64_t down_until;
};

/* One backend row: id, flags, in_flight, down_until_ms. */
/* clang-format off */
#define B(id, flags, load, until) { (id), (flags), (load), (until) }
/* clang-format on */

static struct pg_backend table[PG_MAX_BACKENDS];

static void load_table(const struct be *b)
{
	memset(table, 0, sizeof(table));
	for (; b->id; b++) {
		table[b->id].flags = b->flags;
		table[b->id].in_flight = b->load;
		table[b->id].down_until_ms = b->down_until;
	}
}

static void test_idset(void **state)
{
	static const unsigned ids[] = {1, 63, 64, 127, 200, 255};
	struct pg_idset s = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		pg_idset_add(&s, ids[i]);
	for (unsigned id = 0; id < PG_MAX_BACKENDS; id++) {
		bool want = false;

		for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
			want |= ids[i] == id;
		assert_int_equal(pg_idset_has(&s, id), want);
	}
}

static void test_usable(void **state)
{
	static const struct {
		uint16_t flags;
		uint64_t down_until;
		bool want;
	} cases[] = {
	    {A, 0, true},
	    {0, 0, false},
	    {D, 0, false},
	    {A | D, 0, false},
	    {A | DN, NOW + 1, false},
	    {A | DN, NOW, true}, /* down_until reached */
	    {A | DN, NOW - 1, true},
	    {A | D | DN, NOW - 1, false},
	    {DN, NOW - 1, false},
	    {A, NOW + 1, true}, /* down_until alone means nothing */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_backend b = {.flags = cases[i].flags,
		                       .down_until_ms = cases[i].down_until};

		if (pg_backend_usable(&b, NOW) != cases[i].want)
			fail_msg("case %zu: flags %#x down_until %llu", i, cases[i].flags,
			         (unsigned long long)cases[i].down_until);
	}
}

/* One decision: the table, candidates and exclusions in, backend and
 * decision out. */
/* clang-format off */
static const struct decision_case {
	const char *name;
	enum pg_strategy strategy;
	uint32_t threshold;
	struct be backends[8];
	unsigned max_id;
	uint16_t cand[PG_RING_CANDIDATES];
	size_t ncand;
	uint16_t exclude[4]; /* 0 ends */
	bool explicit_key;
	uint16_t want;
	enum pg_decision want_dec;
} decision_cases[] = {
	{ "affinity when idle", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 0, 0), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, false,
	  2, PG_DEC_AFFINITY },
	{ "affinity just under threshold", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 9, 0), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, false,
	  2, PG_DEC_AFFINITY },
	{ "affinity with threshold 1", PG_STRATEGY_PREFIX_AWARE, 1,
	  { B(1, A, 0, 0), B(2, A, 0, 0) }, 2, { 2, 1 }, 2, { 0 }, false,
	  2, PG_DEC_AFFINITY },
	{ "negative count counts as under", PG_STRATEGY_PREFIX_AWARE, 1,
	  { B(1, A, 0, 0), B(2, A, -1, 0) }, 2, { 2, 1 }, 2, { 0 }, false,
	  2, PG_DEC_AFFINITY },
	{ "explicit key", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 0, 0), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, true,
	  2, PG_DEC_EXPLICIT_KEY },
	{ "explicit key overflow", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 10, 0), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, true,
	  3, PG_DEC_OVERFLOW },
	{ "overflow to second at threshold", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 10, 0), B(3, A, 9, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, false,
	  3, PG_DEC_OVERFLOW },
	{ "overflow to second with threshold 1", PG_STRATEGY_PREFIX_AWARE, 1,
	  { B(1, A, 0, 0), B(2, A, 1, 0) }, 2, { 2, 1 }, 2, { 0 }, false,
	  1, PG_DEC_OVERFLOW },
	{ "overflow to third", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 10, 0), B(3, A, 50, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, false,
	  1, PG_DEC_OVERFLOW },
	{ "all candidates full: least outstanding candidate", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 12, 0), B(2, A, 10, 0), B(3, A, 11, 0), B(4, A, 20, 0), B(5, A, 13, 0) },
	  5, { 1, 2, 3 }, 3, { 0 }, false,
	  2, PG_DEC_OVERFLOW },
	{ "all candidates full: least outstanding non-candidate", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 12, 0), B(2, A, 13, 0), B(3, A, 14, 0), B(4, A, 15, 0), B(5, A, 11, 0) },
	  5, { 1, 2, 3, 4 }, 4, { 0 }, false,
	  5, PG_DEC_OVERFLOW },
	{ "full and first candidate least: overflow", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 10, 0), B(2, A, 30, 0) }, 2, { 1, 2 }, 2, { 0 }, false,
	  1, PG_DEC_OVERFLOW },
	{ "no candidates: least outstanding", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 3, 0), B(2, A, 2, 0), B(3, A, 4, 0) }, 3, { 0 }, 0, { 0 }, false,
	  2, PG_DEC_OVERFLOW },
	{ "excluded first candidate (retry)", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 0, 0), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 2 }, false,
	  3, PG_DEC_OVERFLOW },
	{ "excluded candidates, fallback skips them", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 10, 0), B(2, A, 0, 0), B(3, A, 0, 0), B(4, A, 40, 0) }, 4, { 2, 3, 1 }, 3,
	  { 2, 3 }, false,
	  1, PG_DEC_OVERFLOW },
	{ "down first candidate", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A | DN, 0, NOW + 1), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 },
	  false, 3, PG_DEC_OVERFLOW },
	{ "down until passed", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A | DN, 0, NOW), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 },
	  false, 2, PG_DEC_AFFINITY },
	{ "draining first candidate", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A | D, 0, 0), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, false,
	  3, PG_DEC_OVERFLOW },
	{ "inactive first candidate", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(3, A, 0, 0) }, 3, { 2, 3, 1 }, 3, { 0 }, false,
	  3, PG_DEC_OVERFLOW },
	{ "candidate beyond max_id", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 0, 0), B(9, A, 0, 0) }, 2, { 9, 2 }, 2, { 0 }, false,
	  2, PG_DEC_OVERFLOW },
	{ "fallback skips unusable less-loaded", PG_STRATEGY_PREFIX_AWARE, 1,
	  { B(1, A, 5, 0), B(2, A | D, 0, 0), B(3, A | DN, 0, NOW + 5), B(4, 0, 0, 0),
	    B(5, A, 4, 0) },
	  5, { 1 }, 1, { 0 }, false,
	  5, PG_DEC_OVERFLOW },
	{ "prefix: nothing usable", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A | D, 0, 0), B(2, A | DN, 0, NOW + 1), B(3, 0, 0, 0) }, 3, { 2, 3, 1 }, 3,
	  { 0 }, false, 0, PG_DEC_OVERFLOW },
	{ "prefix: all excluded", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(1, A, 0, 0), B(2, A, 0, 0) }, 2, { 2, 1 }, 2, { 1, 2 }, false,
	  0, PG_DEC_OVERFLOW },
	{ "prefix: empty table", PG_STRATEGY_PREFIX_AWARE, 10,
	  { B(0, 0, 0, 0) }, 0, { 0 }, 0, { 0 }, false, 0, PG_DEC_OVERFLOW },

	{ "lor: fewest", PG_STRATEGY_LEAST_OUTSTANDING, 10,
	  { B(1, A, 3, 0), B(2, A, 1, 0), B(3, A, 2, 0) }, 3, { 0 }, 0, { 0 }, false,
	  2, PG_DEC_LEAST_OUTSTANDING },
	{ "lor: ignores candidates and threshold", PG_STRATEGY_LEAST_OUTSTANDING, 1,
	  { B(1, A, 3, 0), B(2, A, 100, 0), B(3, A, 2, 0) }, 3, { 2 }, 1, { 0 }, true,
	  3, PG_DEC_LEAST_OUTSTANDING },
	{ "lor: skips unusable and excluded", PG_STRATEGY_LEAST_OUTSTANDING, 10,
	  { B(1, A | D, 0, 0), B(2, A | DN, 0, NOW + 1), B(3, 0, 0, 0), B(4, A, 1, 0),
	    B(5, A, 7, 0), B(6, A, 6, 0) },
	  6, { 0 }, 0, { 4 }, false,
	  6, PG_DEC_LEAST_OUTSTANDING },
	{ "lor: down until passed", PG_STRATEGY_LEAST_OUTSTANDING, 10,
	  { B(1, A, 5, 0), B(2, A | DN, 0, NOW - 1) }, 2, { 0 }, 0, { 0 }, false,
	  2, PG_DEC_LEAST_OUTSTANDING },
	{ "lor: beyond max_id ignored", PG_STRATEGY_LEAST_OUTSTANDING, 10,
	  { B(1, A, 5, 0), B(2, A, 9, 0), B(3, A, 0, 0) }, 2, { 0 }, 0, { 0 }, false,
	  1, PG_DEC_LEAST_OUTSTANDING },
	{ "lor: nothing usable", PG_STRATEGY_LEAST_OUTSTANDING, 10,
	  { B(1, A | D, 0, 0), B(2, 0, 0, 0) }, 2, { 0 }, 0, { 0 }, false,
	  0, PG_DEC_LEAST_OUTSTANDING },

	{ "random: single usable", PG_STRATEGY_RANDOM, 10,
	  { B(1, A | D, 0, 0), B(2, A | DN, 0, NOW + 1), B(3, 0, 0, 0), B(4, A, 1000, 0),
	    B(5, A, 0, 0) },
	  5, { 1 }, 1, { 5 }, false,
	  4, PG_DEC_RANDOM },
	{ "random: nothing usable", PG_STRATEGY_RANDOM, 10,
	  { B(1, A | DN, 0, NOW + 1), B(2, A, 0, 0) }, 2, { 0 }, 0, { 2 }, false,
	  0, PG_DEC_RANDOM },
};
/* clang-format on */

/* The health word the admin API and prefixgatectl (from the maps) show:
 * draining first, then unhealthy (health checks), down (until it
 * expires), up. */
static void test_health_word(void **state)
{
	static const struct {
		uint16_t flags;
		uint64_t down_until;
		const char *want;
	} cases[] = {
	    {A, 0, "up"},
	    {A | PG_BACKEND_UNHEALTHY, 0, "unhealthy"},
	    {A | PG_BACKEND_UNHEALTHY | DN, NOW + 1, "unhealthy"},
	    {A | DN, NOW + 1, "down"},
	    {A | DN, NOW, "up"}, /* down_until reached */
	    {A | D | PG_BACKEND_UNHEALTHY, 0, "draining"},
	    {A | D, 0, "draining"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_backend b = {.flags = cases[i].flags,
		                       .down_until_ms = cases[i].down_until};

		if (strcmp(pg_backend_health(&b, NOW), cases[i].want))
			fail_msg("case %zu: %s, want %s", i, pg_backend_health(&b, NOW),
			         cases[i].want);
	}
}

static void test_decisions(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(decision_cases) / sizeof(decision_cases[0]); i++) {
		const struct decision_case *c = &decision_cases[i];
		struct pg_route_cfg cfg = {.strategy = c->strategy,
		                           .prefix_length = 4096,
		                           .concurrency_threshold = c->threshold};
		struct pg_idset ex = {0};
		struct pg_choice out;
		uint16_t got;

		load_table(c->backends);
		for (size_t k = 0; k < 4 && c->exclude[k]; k++)
			pg_idset_add(&ex, c->exclude[k]);
		/* Several rnd values: single answers must not depend on them. */
		for (uint64_t rnd = 0; rnd < 4; rnd++) {
			uint64_t r = rnd * 0x5555555555555555ull;

			memset(&out, 0xee, sizeof(out));
			got = balance(&cfg, table, c->max_id, c->cand, c->ncand, &ex, NOW, r,
			              c->explicit_key, &out);
			if (got != c->want || out.backend != c->want || out.decision != c->want_dec)
				fail_msg("%s: got backend %u (out %u) decision %u, want %u/%u",
				         c->name, got, out.backend, out.decision, c->want,
				         c->want_dec);
		}
		/* Candidates are reported for prefix_aware only. */
		if (c->strategy == PG_STRATEGY_PREFIX_AWARE) {
			assert_int_equal(out.ncand, c->ncand);
			assert_memory_equal(out.cand, c->cand, c->ncand * sizeof(c->cand[0]));
		} else {
			assert_int_equal(out.ncand, 0);
		}
	}
}

/* exclude may be NULL; more than PG_RING_CANDIDATES candidates are cut. */
static void test_null_exclude_and_long_candidates(void **state)
{
	static const struct be bes[] = {B(1, A, 10, 0),
	                                B(2, A, 10, 0),
	                                B(3, A, 10, 0),
	                                B(4, A, 10, 0),
	                                B(5, A, 0, 0),
	                                B(6, A, 3, 0),
	                                {0}};
	const uint16_t cand[] = {1, 2, 3, 4, 5};
	struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_PREFIX_AWARE,
	                           .concurrency_threshold = 10};
	struct pg_choice out;

	(void)state;
	load_table(bes);
	/* The fifth candidate (5, idle) is not walked, but the fallback finds it
	 * as least outstanding. */
	assert_int_equal(balance(&cfg, table, 6, cand, 5, NULL, NOW, 1, false, &out), 5);
	assert_int_equal(out.decision, PG_DEC_OVERFLOW);
	assert_int_equal(out.ncand, PG_RING_CANDIDATES);
	assert_memory_equal(out.cand, cand, sizeof(out.cand));
	table[5].flags = A | D;
	assert_int_equal(balance(&cfg, table, 6, cand, 5, NULL, NOW, 1, false, &out), 6);
}

/* Uniform over usable: chi-square over 100k draws, never an unusable id. */
static void test_random_uniform(void **state)
{
	static const struct be bes[] = {
	    B(1, A, 0, 0),
	    B(2, A | D, 0, 0),
	    B(3, A, 50, 0),
	    B(4, A | DN, 0, NOW + 1),
	    B(5, A, 0, 0),
	    B(6, 0, 0, 0),
	    B(7, A, 0, 0),
	    B(8, A | DN, 0, NOW),
	    B(9, A, 0, 0),
	    B(10, A, 0, 0),
	    {0},
	};
	/* Usable and not excluded: 1, 3, 5, 7, 8, 9 (10 is excluded). */
	static const uint16_t usable[] = {1, 3, 5, 7, 8, 9};
	const size_t n = sizeof(usable) / sizeof(usable[0]);
	const unsigned draws = 100000;
	struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_RANDOM, .concurrency_threshold = 10};
	unsigned count[PG_MAX_BACKENDS] = {0};
	struct pg_idset ex = {0};
	struct pg_choice out;
	uint64_t st = 12345;
	double chi2 = 0, expect = (double)draws / n;
	unsigned in_usable = 0;

	(void)state;
	load_table(bes);
	pg_idset_add(&ex, 10);
	for (unsigned i = 0; i < draws; i++)
		count[balance(&cfg, table, 10, NULL, 0, &ex, NOW, next_rand(&st), false, &out)]++;
	for (size_t i = 0; i < n; i++) {
		double d = count[usable[i]] - expect;

		chi2 += d * d / expect;
		in_usable += count[usable[i]];
	}
	print_message("# random: chi2 %.2f over %zu ids (df %zu)\n", chi2, n, n - 1);
	assert_int_equal(in_usable, draws);
	/* 20.52 is the 0.1% critical value for 5 degrees of freedom. */
	assert_true(chi2 < 20.52);
}

/* Ties among the least loaded are broken at random: each of 3 tied ids gets
 * over 20% of 10k draws, for LOR and for the prefix_aware fallback. */
static void test_lor_tie_spread(void **state)
{
	static const struct be bes[] = {
	    B(1, A, 5, 0),     B(2, A, 2, 0), B(3, A, 3, 0), B(4, A, 2, 0),
	    B(5, A | D, 0, 0), B(6, A, 2, 0), B(7, A, 9, 0), {0}};
	static const uint16_t tied[] = {2, 4, 6};
	static const enum pg_strategy strategies[] = {PG_STRATEGY_LEAST_OUTSTANDING,
	                                              PG_STRATEGY_PREFIX_AWARE};
	const uint16_t cand[] = {7, 1};

	(void)state;
	load_table(bes);
	for (size_t s = 0; s < 2; s++) {
		struct pg_route_cfg cfg = {.strategy = strategies[s], .concurrency_threshold = 1};
		unsigned count[PG_MAX_BACKENDS] = {0};
		struct pg_choice out;
		uint64_t st = 99;

		for (unsigned i = 0; i < 10000; i++)
			count[balance(&cfg, table, 7, cand, 2, NULL, NOW, next_rand(&st), false,
			              &out)]++;
		print_message("# strategy %d ties: %u %u %u\n", strategies[s], count[2], count[4],
		              count[6]);
		for (size_t t = 0; t < 3; t++)
			assert_true(count[tied[t]] > 2000);
		assert_int_equal(count[2] + count[4] + count[6], 10000);
	}
}

/*
 * --load-signal: which backend least-outstanding picks, per signal, for
 * LOR and for the prefix_aware fallback (the threshold still compares
 * in_flight only). Backends: in_flight, scraped waiting / running, and
 * whether the scrape is still fresh at NOW.
 */
static void test_load_signal(void **state)
{
	static const struct {
		int32_t in_flight;
		uint32_t waiting, running;
		bool fresh;
	} bes[] = {
	    [1] = {1, 9, 1, true},  /* inflight 1, both 10, backend 10 */
	    [2] = {3, 0, 2, true},  /* inflight 3, both 3, backend 2 */
	    [3] = {2, 5, 0, true},  /* inflight 2, both 7, backend 5 */
	    [4] = {4, 0, 0, false}, /* stale: 4 whatever the signal */
	};
	static const struct {
		enum pg_load_signal sig;
		uint16_t want;
	} cases[] = {
	    {PG_LOAD_INFLIGHT, 1},
	    {PG_LOAD_BOTH, 2},
	    {PG_LOAD_BACKEND, 2},
	};
	static const enum pg_strategy strategies[] = {PG_STRATEGY_LEAST_OUTSTANDING,
	                                              PG_STRATEGY_PREFIX_AWARE};
	const uint16_t cand[] = {4}; /* at the threshold: prefix_aware falls back */

	(void)state;
	memset(table, 0, sizeof(table));
	for (unsigned id = 1; id <= 4; id++) {
		table[id].flags = A;
		table[id].in_flight = bes[id].in_flight;
		table[id].waiting = bes[id].waiting;
		table[id].running = bes[id].running;
		table[id].metrics_until_ms = bes[id].fresh ? NOW + 1 : NOW;
	}
	for (size_t s = 0; s < 2; s++) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct pg_route_cfg cfg = {.strategy = strategies[s],
			                           .concurrency_threshold = 4,
			                           .load_signal = cases[i].sig};
			struct pg_choice out;
			uint16_t got = balance(&cfg, table, 4, cand, 1, NULL, NOW, 7, false, &out);

			if (got != cases[i].want)
				fail_msg("strategy %d signal %d: got %u, want %u", strategies[s],
				         cases[i].sig, got, cases[i].want);
		}
	}
	/* The threshold compares in_flight only: a first candidate with a long
	 * backend queue but in_flight under the threshold keeps its key. */
	{
		struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_PREFIX_AWARE,
		                           .concurrency_threshold = 4,
		                           .load_signal = PG_LOAD_BOTH};
		const uint16_t c1[] = {1};
		struct pg_choice out;

		assert_int_equal(balance(&cfg, table, 4, c1, 1, NULL, NOW, 7, false, &out), 1);
		assert_int_equal(out.decision, PG_DEC_AFFINITY);
	}
	/* A stale backend is compared by in_flight under every signal: make
	 * 4 the idlest by in_flight and the others busy. */
	table[4].in_flight = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_LEAST_OUTSTANDING,
		                           .load_signal = cases[i].sig};
		struct pg_choice out;

		assert_int_equal(balance(&cfg, table, 4, NULL, 0, NULL, NOW, 7, false, &out), 4);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_signal),
	    cmocka_unit_test(test_idset),
	    cmocka_unit_test(test_usable),
	    cmocka_unit_test(test_health_word),
	    cmocka_unit_test(test_decisions),
	    cmocka_unit_test(test_null_exclude_and_long_candidates),
	    cmocka_unit_test(test_random_uniform),
	    cmocka_unit_test(test_lor_tie_spread),
	};

	return cmocka_run_group_tests_name("balancer", tests, NULL, NULL);
}
