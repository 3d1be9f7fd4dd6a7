// SPDX-License-Identifier: MIT
/*
 * cache_aware's choice rule (balancer.h, pg_balance_cached), table-driven:
 * a cached holder, the threshold and MaxLoadGap, ties, determinism, and
 * NewConversationChoices (the least recently sent of the first N ring
 * candidates, where the anchor went before, pg_backend.recent's decay).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/balancer.h"

static struct pg_backend backends[PG_MAX_BACKENDS];

/* ids 1..n active members, every count 0 */
static void members(unsigned n)
{
	memset(backends, 0, sizeof(backends));
	for (unsigned id = 1; id <= n; id++)
		backends[id].flags = PG_BACKEND_ACTIVE;
}

static void test_choice_rule(void **state)
{
	static const struct {
		const char *why;
		int32_t in_flight[5]; /* ids 1..4 */
		uint16_t holder[2];
		size_t nholder;
		bool specific;
		uint16_t want;
		uint8_t decision;
	} cases[] = {
	    {"own history cached: its holder", {0, 0, 0, 0}, {3}, 1, true, 3, PG_DEC_CACHED},
	    {"holder at the threshold: the anchor's ring",
	     {0, 0, 10, 0},
	     {3},
	     1,
	     true,
	     1,
	     PG_DEC_AFFINITY},
	    {"holder far busier than the rest (mean 1.5 + 4 < 6)",
	     {0, 0, 6, 0},
	     {3},
	     1,
	     true,
	     1,
	     PG_DEC_AFFINITY},
	    {"holder just within the gap (mean 1.25 + 4 >= 5)",
	     {0, 0, 5, 0},
	     {3},
	     1,
	     true,
	     3,
	     PG_DEC_CACHED},
	    {"an idle newcomer does not pull it away",
	     {4, 4, 6, 0},
	     {3},
	     1,
	     true,
	     3,
	     PG_DEC_CACHED},
	    {"only a shared prefix matched: the anchor decides",
	     {0, 0, 0, 0},
	     {3},
	     1,
	     false,
	     1,
	     PG_DEC_AFFINITY},
	    {"two holders: the anchor's ring order",
	     {0, 0, 0, 0},
	     {4, 2},
	     2,
	     true,
	     2,
	     PG_DEC_CACHED},
	    {"first holder busy: the next", {0, 10, 0, 0}, {2, 4}, 2, true, 4, PG_DEC_CACHED},
	    {"nothing cached, anchor's first busy",
	     {10, 0, 0, 0},
	     {0},
	     0,
	     false,
	     2,
	     PG_DEC_OVERFLOW},
	    {"all at the threshold: least loaded",
	     {10, 12, 11, 10},
	     {3},
	     1,
	     true,
	     1,
	     PG_DEC_OVERFLOW},
	};
	const uint16_t ring[] = {1, 2, 3, 4};
	const struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_CACHE_AWARE,
	                                 .prefix_length = 4096,
	                                 .concurrency_threshold = 10,
	                                 .max_load_gap = 4};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_cached c = {.holder = cases[i].holder,
		                      .nholder = cases[i].nholder,
		                      .specific = cases[i].specific,
		                      .max_load_gap = 4};
		struct pg_choice ch, again;
		uint16_t id;

		members(4);
		for (unsigned b = 1; b <= 4; b++)
			backends[b].in_flight = cases[i].in_flight[b - 1];
		id = pg_balance_cached(&cfg, backends, 4, ring, 4, &c, NULL, 0, 7, false, &ch);
		if (id != cases[i].want || ch.decision != cases[i].decision)
			fail_msg("%s: got %u (%s %u), want %u (%u)", cases[i].why, id, "decision",
			         ch.decision, cases[i].want, cases[i].decision);
		/* Same inputs, same choice (the deterministic part). */
		assert_int_equal(
		    pg_balance_cached(&cfg, backends, 4, ring, 4, &c, NULL, 0, 7, false, &again),
		    id);
	}
	/* A holder that left is never chosen; load never fails a request. */
	{
		struct pg_cached c = {.holder = (const uint16_t[]){2},
		                      .nholder = 1,
		                      .specific = true,
		                      .max_load_gap = 4};
		struct pg_choice ch;

		members(4);
		backends[2].flags = 0;
		backends[1].in_flight = backends[3].in_flight = backends[4].in_flight = 500;
		assert_int_not_equal(
		    pg_balance_cached(&cfg, backends, 4, ring, 4, &c, NULL, 0, 1, false, &ch), 2);
		assert_int_not_equal(ch.backend, 0);
		members(0);
		assert_int_equal(
		    pg_balance_cached(&cfg, backends, 4, ring, 4, &c, NULL, 0, 1, false, &ch), 0);
	}
}

/* CacheAwareConfig.NewConversationChoices: what nothing cached places goes
 * to the least recently sent of the anchor's first N ring candidates. */
static void test_new_conversation_choices(void **state)
{
	enum { R = PG_CA_RECENT_ONE };
	static const struct {
		const char *why;
		uint32_t choices;
		int32_t in_flight[4]; /* ids 1..4, the ring's order */
		uint32_t recent[4];
		bool explicit_key;
		uint16_t holder; /* a specific match's holder, or 0 */
		uint16_t want;
		uint8_t decision;
	} cases[] = {
	    {"one choice: the ring's first, however busy lately",
	     1,
	     {0, 0, 0, 0},
	     {50 * R, 0, 0, 0},
	     false,
	     0,
	     1,
	     PG_DEC_AFFINITY},
	    {"three: the least recently sent of the first three",
	     3,
	     {0, 0, 0, 0},
	     {50 * R, 25 * R, 0, 0},
	     false,
	     0,
	     3,
	     PG_DEC_BALANCED},
	    {"two: the fourth is never looked at",
	     2,
	     {0, 0, 0, 0},
	     {50 * R, 25 * R, 0, 0},
	     false,
	     0,
	     2,
	     PG_DEC_BALANCED},
	    {"within one request of the first: a tie, ring order",
	     3,
	     {0, 0, 0, 0},
	     {10 * R, 9 * R, 9 * R, 0},
	     false,
	     0,
	     1,
	     PG_DEC_AFFINITY},
	    {"more than one request below: it wins",
	     3,
	     {0, 0, 0, 0},
	     {10 * R, 9 * R - 1, 10 * R, 0},
	     false,
	     0,
	     2,
	     PG_DEC_BALANCED},
	    {"the first at the threshold: the next, as overflow",
	     3,
	     {10, 0, 0, 0},
	     {0, 5 * R, 4 * R, 0},
	     false,
	     0,
	     2,
	     PG_DEC_OVERFLOW},
	    {"the first at the threshold, the third far less sent",
	     3,
	     {10, 0, 0, 0},
	     {0, 5 * R, 4 * R - 1, 0},
	     false,
	     0,
	     3,
	     PG_DEC_BALANCED},
	    {"the first three at the threshold: PREFIX_AWARE's rule",
	     3,
	     {10, 10, 10, 0},
	     {0, 0, 0, 50 * R},
	     false,
	     0,
	     4,
	     PG_DEC_OVERFLOW},
	    {"an explicit key keeps the ring",
	     3,
	     {0, 0, 0, 0},
	     {50 * R, 0, 0, 0},
	     true,
	     0,
	     1,
	     PG_DEC_EXPLICIT_KEY},
	    {"a cached holder that fits still wins",
	     4,
	     {0, 0, 0, 0},
	     {0, 0, 0, 50 * R},
	     false,
	     4,
	     4,
	     PG_DEC_CACHED},
	    {"the least sent far busier in flight (mean 2.25 + 4 < 9): the next least sent",
	     3,
	     {0, 0, 9, 0},
	     {50 * R, 40 * R, 0, 0},
	     false,
	     0,
	     2,
	     PG_DEC_BALANCED},
	    {"a newcomer (nothing sent yet) takes new conversations",
	     4,
	     {1, 1, 1, 0},
	     {40 * R, 38 * R, 41 * R, 0},
	     false,
	     0,
	     4,
	     PG_DEC_BALANCED},
	};
	const uint16_t ring[] = {1, 2, 3, 4};
	const struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_CACHE_AWARE,
	                                 .prefix_length = 4096,
	                                 .concurrency_threshold = 10,
	                                 .max_load_gap = 4};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint16_t holder[1] = {cases[i].holder};
		struct pg_cached c = {.holder = holder,
		                      .nholder = cases[i].holder != 0,
		                      .specific = cases[i].holder != 0,
		                      .max_load_gap = 4,
		                      .choices = cases[i].choices};
		struct pg_choice ch, again;
		uint16_t id;

		members(4);
		for (unsigned b = 1; b <= 4; b++) {
			backends[b].in_flight = cases[i].in_flight[b - 1];
			backends[b].recent = cases[i].recent[b - 1];
		}
		id = pg_balance_cached(&cfg, backends, 4, ring, 4, &c, NULL, 0, 7,
		                       cases[i].explicit_key, &ch);
		if (id != cases[i].want || ch.decision != cases[i].decision)
			fail_msg("%s: got %u (decision %u), want %u (%u)", cases[i].why, id,
			         ch.decision, cases[i].want, cases[i].decision);
		assert_int_equal(ch.ncand, 4);
		/* Same inputs, same choice. */
		assert_int_equal(pg_balance_cached(&cfg, backends, 4, ring, 4, &c, NULL, 0, 99,
		                                   cases[i].explicit_key, &again),
		                 id);
	}
	/* An excluded (already tried) candidate is passed over like a busy one. */
	{
		struct pg_cached c = {.max_load_gap = 4, .choices = 3};
		struct pg_idset ex = {{0}};
		struct pg_choice ch;

		members(4);
		backends[1].recent = 50 * R;
		pg_idset_add(&ex, 3);
		assert_int_equal(
		    pg_balance_cached(&cfg, backends, 4, ring, 4, &c, &ex, 0, 1, false, &ch), 2);
	}
}

/* With NewConversationChoices above 1, where the anchor went before
 * (placed) keeps the conversation there while it can take it. */
static void test_placed_anchor(void **state)
{
	enum { R = PG_CA_RECENT_ONE };
	static const struct {
		const char *why;
		int32_t in_flight[4];
		uint16_t placed;
		uint16_t want;
		uint8_t decision;
	} cases[] = {
	    {"placed on the third: it stays, though the second is less sent",
	     {0, 0, 0, 0},
	     3,
	     3,
	     PG_DEC_AFFINITY},
	    {"placed on the first: affinity", {0, 0, 0, 0}, 1, 1, PG_DEC_AFFINITY},
	    {"placed on the second, the first busy: it stays",
	     {10, 0, 0, 0},
	     2,
	     2,
	     PG_DEC_AFFINITY},
	    {"placed on a backend at the threshold: placed again",
	     {0, 0, 10, 0},
	     3,
	     2,
	     PG_DEC_BALANCED},
	    {"placed far busier than the rest (mean 2 + 4 < 8): placed again",
	     {0, 0, 8, 0},
	     3,
	     2,
	     PG_DEC_BALANCED},
	    {"placed on a fourth candidate, past the choices: it stays",
	     {0, 0, 0, 0},
	     4,
	     4,
	     PG_DEC_AFFINITY},
	};
	const uint16_t ring[] = {1, 2, 3, 4};
	const struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_CACHE_AWARE,
	                                 .prefix_length = 4096,
	                                 .concurrency_threshold = 10,
	                                 .max_load_gap = 4};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint16_t placed[1] = {cases[i].placed};
		struct pg_cached c = {
		    .max_load_gap = 4, .choices = 3, .placed = placed, .nplaced = 1};
		struct pg_choice ch;
		uint16_t id;

		members(4);
		backends[1].recent = 50 * R; /* the least recently sent is 2 */
		backends[3].recent = 50 * R;
		for (unsigned b = 1; b <= 4; b++)
			backends[b].in_flight = cases[i].in_flight[b - 1];
		id = pg_balance_cached(&cfg, backends, 4, ring, 4, &c, NULL, 0, 7, false, &ch);
		if (id != cases[i].want || ch.decision != cases[i].decision)
			fail_msg("%s: got %u (decision %u), want %u (%u)", cases[i].why, id,
			         ch.decision, cases[i].want, cases[i].decision);
	}
}

/* pg_backend.recent decays with time constant PG_CA_RECENT_MS; with one
 * unit added per request it settles at the rate x the time constant. */
static void test_recent_decay(void **state)
{
	uint32_t r = 0;

	(void)state;
	assert_int_equal(pg_recent_decay(1000, 0), 1000);
	assert_int_equal(pg_recent_decay(100000, PG_CA_RECENT_MS), 36787); /* e^-1 */
	assert_int_equal(pg_recent_decay(UINT32_MAX, 0), UINT32_MAX);
	assert_int_equal(pg_recent_decay(PG_CA_RECENT_ONE, 100 * PG_CA_RECENT_MS), 0);
	for (int tick = 0; tick < 2000; tick++) /* 200 s of 100 ms ticks, 10 req/s */
		r = pg_recent_decay(r, 100) + PG_CA_RECENT_ONE;
	assert_in_range(r, 199 * PG_CA_RECENT_ONE, 201 * PG_CA_RECENT_ONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_choice_rule),
	    cmocka_unit_test(test_new_conversation_choices),
	    cmocka_unit_test(test_placed_anchor),
	    cmocka_unit_test(test_recent_decay),
	};

	return cmocka_run_group_tests_name("choice", tests, NULL, NULL);
}
