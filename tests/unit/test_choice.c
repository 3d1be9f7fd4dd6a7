// SPDX-License-Identifier: MIT
/*
 * cache_aware's choice rule (router/cache.h, pg_balance_cached),
 * table-driven: the cache against the wait in work, idle and saturated
 * fleets, ties and determinism, learned speeds, the shared head, the
 * estimates it reports, NewConversationChoices (the least recently sent of
 * the first N ring candidates, where the anchor went before),
 * pg_backend.recent's decay and the work of a shared head's first prefill.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "router/cache.h"

static struct pg_backend backends[PG_MAX_BACKENDS];
static const uint16_t ring[] = {1, 2, 3, 4};

/* ids 1..n active members, idle */
static void members(unsigned n)
{
	memset(backends, 0, sizeof(backends));
	for (unsigned id = 1; id <= n; id++)
		backends[id].flags = PG_BACKEND_ACTIVE;
}

/* A request of `prompt` tokens, held tokens[i] by backend ids[i]. */
static struct pg_ca_req req(uint32_t prompt, uint32_t shared, const uint16_t *ids,
                            const uint32_t *tokens, size_t n)
{
	return (struct pg_ca_req){.prompt_tokens = prompt,
	                          .shared_tokens = shared,
	                          .held = ids,
	                          .held_tokens = tokens,
	                          .nheld = n,
	                          .choices = 1,
	                          .work_base = PG_CA_WORK_BASE,
	                          .work_queued = PG_CA_WORK_QUEUED};
}

static void test_choice_rule(void **state)
{
	enum { K = 1000 };
	static const struct {
		const char *why;
		uint64_t queued[4]; /* prefill tokens waiting, ids 1..4 */
		uint32_t reqs[4];   /* requests they are */
		uint32_t rate[4];   /* learned prefill rate (0: the default) */
		uint16_t holder;    /* holds `held` tokens of the 8,000 */
		uint32_t held, shared;
		uint16_t want;
		uint8_t decision;
	} cases[] = {
	    {"idle, nothing cached: the anchor's first candidate",
	     {0},
	     {0},
	     {0},
	     0,
	     0,
	     0,
	     1,
	     PG_DEC_AFFINITY},
	    {"idle, 6,000 tokens cached on 3: its holder",
	     {0},
	     {0},
	     {0},
	     3,
	     6000,
	     0,
	     3,
	     PG_DEC_CACHED},
	    {"the holder 2.7 s behind an idle fleet: another takes it",
	     {0, 0, 100 * K, 0},
	     {0, 0, 5, 0},
	     {0},
	     3,
	     6000,
	     0,
	     1,
	     PG_DEC_BALANCED},
	    {"saturated (10 waiting everywhere): the holder keeps it",
	     {100 * K, 100 * K, 100 * K, 100 * K},
	     {10, 10, 10, 10},
	     {0},
	     3,
	     6000,
	     0,
	     3,
	     PG_DEC_CACHED},
	    {"saturated, the holder twice as far behind: it keeps it",
	     {100 * K, 100 * K, 200 * K, 100 * K},
	     {10, 10, 20, 10},
	     {0},
	     3,
	     6000,
	     0,
	     3,
	     PG_DEC_CACHED},
	    {"only the shared head cached on 3: the anchor decides",
	     {0},
	     {0},
	     {0},
	     3,
	     512,
	     512,
	     1,
	     PG_DEC_AFFINITY},
	    {"the fourth twice as fast, idle: the quicker prefill",
	     {0},
	     {0},
	     {0, 0, 0, 73200},
	     0,
	     0,
	     0,
	     4,
	     PG_DEC_BALANCED},
	    {"the first 4% slower by its fit: a tie, ring order",
	     {0},
	     {0},
	     {35100, 0, 0, 0},
	     0,
	     0,
	     0,
	     1,
	     PG_DEC_AFFINITY},
	    {"the first with a queue: the next in the ring",
	     {20 * K, 0, 0, 0},
	     {1, 0, 0, 0},
	     {0},
	     0,
	     0,
	     0,
	     2,
	     PG_DEC_BALANCED},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint16_t ids[1] = {cases[i].holder};
		const uint32_t tok[1] = {cases[i].held};
		struct pg_ca_req rq = req(8000, cases[i].shared, ids, tok, cases[i].holder ? 1 : 0);
		struct pg_choice ch, again;
		uint16_t id;

		members(4);
		for (unsigned b = 1; b <= 4; b++) {
			backends[b].prefill_tokens = cases[i].queued[b - 1];
			backends[b].prefill_reqs = cases[i].reqs[b - 1];
			backends[b].in_flight = (int32_t)cases[i].reqs[b - 1];
			backends[b].fit_rate = cases[i].rate[b - 1];
			if (cases[i].rate[b - 1])
				backends[b].fit_overhead_us = 61500;
		}
		id = pg_balance_cached(backends, 4, ring, 4, &rq, NULL, 0, false, &ch);
		if (id != cases[i].want || ch.decision != cases[i].decision)
			fail_msg("%s: got %u (decision %u), want %u (%u)", cases[i].why, id,
			         ch.decision, cases[i].want, cases[i].decision);
		assert_int_equal(ch.backend, id);
		assert_int_equal(ch.ncand, 4);
		assert_int_equal(ch.est[0].id, id);
		assert_true(ch.est[1].id && ch.est[1].id != id);
		/* same inputs, same choice */
		assert_int_equal(
		    pg_balance_cached(backends, 4, ring, 4, &rq, NULL, 0, false, &again), id);
	}
}

/* The figures the header and the dry run show: the chosen one's and the
 * runner-up's, from the model's defaults (36,600 tokens/s, 61.5 ms). */
static void test_estimates(void **state)
{
	const uint16_t ids[1] = {2};
	const uint32_t tok[1] = {6000};
	struct pg_ca_req rq = req(8000, 0, ids, tok, 1);
	struct pg_choice ch;
	const double ms_per_tok = 1000.0 / PG_SPEED_RATE_DEFAULT;

	(void)state;
	members(3);
	backends[2].prefill_tokens = 3660; /* 100 ms of queue */
	backends[2].prefill_reqs = 1;
	backends[2].in_flight = 1;
	assert_int_equal(pg_balance_cached(backends, 3, ring, 3, &rq, NULL, 0, false, &ch), 2);
	assert_int_equal(ch.matched, 6000);
	assert_int_equal(ch.est[0].matched, 6000);
	assert_float_equal(ch.est[0].wait_ms, 100.0, 0.5);
	assert_float_equal(ch.est[0].prefill_ms, 2000 * ms_per_tok, 0.5);
	assert_float_equal(ch.est[0].saved_ms, 6000 * ms_per_tok, 0.5);
	assert_float_equal(ch.est[0].ttft_ms, 61.5 + 100 + 2000 * ms_per_tok, 0.5);
	/* the runner-up: the ring's first, nothing cached, no queue */
	assert_int_equal(ch.est[1].id, 1);
	assert_int_equal(ch.est[1].matched, 0);
	assert_float_equal(ch.est[1].wait_ms, 0, 0.01);
	assert_float_equal(ch.est[1].ttft_ms, 61.5 + 8000 * ms_per_tok, 0.5);
	/* requests decoding on an instance add its learned cost of each */
	members(2);
	backends[1].fit_rate = PG_SPEED_RATE_DEFAULT;
	backends[1].fit_overhead_us = 61500;
	backends[1].fit_decode_us = 2000;
	backends[1].in_flight = 50; /* past their first token: decoding */
	rq = req(8000, 0, NULL, NULL, 0);
	assert_int_equal(pg_balance_cached(backends, 2, ring, 2, &rq, NULL, 0, false, &ch), 2);
	assert_int_equal(ch.est[1].id, 1);
	assert_float_equal(ch.est[1].wait_ms, 100.0, 0.5);
}

/* Which instances were sent the shared head (test_shared_head_work). */
static bool head_sent_to(uint16_t id, void *arg)
{
	const bool *sent = arg;

	return sent[id];
}

/* A shared head counts held everywhere for the choice, but the one chosen
 * is given the work it really has: the head's first prefill where it was
 * not sent it and the index lists it holding less; the choice itself does
 * not move. */
static void test_shared_head_work(void **state)
{
	const double ms_per_tok = 1000.0 / PG_SPEED_RATE_DEFAULT;
	const uint16_t ids[1] = {2};
	const uint32_t tok[1] = {2000}; /* a shorter head, before it was one */
	bool sent[4] = {false};
	struct pg_ca_req rq = req(12500, 12000, NULL, NULL, 0);
	struct pg_choice ch;

	(void)state;
	members(3);
	rq.head_sent = head_sent_to;
	rq.head_arg = sent;
	/* the anchor's first candidate, never sent the head: all of it */
	assert_int_equal(pg_balance_cached(backends, 3, ring, 3, &rq, NULL, 0, false, &ch), 1);
	assert_int_equal(ch.decision, PG_DEC_AFFINITY);
	assert_int_equal(ch.shared, 12000);
	assert_int_equal(ch.matched, 0);
	assert_int_equal(ch.est[0].matched, 0);
	assert_float_equal(ch.est[0].prefill_ms, 12500 * ms_per_tok, 0.5);
	assert_float_equal(ch.est[0].ttft_ms, 61.5 + 12500 * ms_per_tok, 0.5);
	/* the runner-up is as the choice saw it */
	assert_int_equal(ch.est[1].matched, 12000);
	/* sent it: the head is held */
	sent[1] = true;
	assert_int_equal(pg_balance_cached(backends, 3, ring, 3, &rq, NULL, 0, false, &ch), 1);
	assert_int_equal(ch.matched, 12000);
	assert_int_equal(ch.est[0].matched, 12000);
	assert_float_equal(ch.est[0].prefill_ms, 500 * ms_per_tok, 0.5);
	/* not sent it, listed holding part of it: that part */
	sent[1] = false;
	backends[1].flags = 0;
	rq = req(12500, 12000, ids, tok, 1);
	rq.head_sent = head_sent_to;
	rq.head_arg = sent;
	assert_int_equal(pg_balance_cached(backends, 3, ring, 3, &rq, NULL, 0, false, &ch), 2);
	assert_int_equal(ch.matched, 2000);
	assert_int_equal(ch.est[0].matched, 2000);
	/* no test given: every instance holds it, as before */
	rq.head_sent = NULL;
	assert_int_equal(pg_balance_cached(backends, 3, ring, 3, &rq, NULL, 0, false, &ch), 2);
	assert_int_equal(ch.matched, 12000);
}

/* Who may take it: usable, not excluded; nothing usable is 0. */
static void test_eligible(void **state)
{
	const uint16_t ids[1] = {3};
	const uint32_t tok[1] = {6000};
	struct pg_ca_req rq = req(8000, 0, ids, tok, 1);
	struct pg_idset ex = {{0}};
	struct pg_choice ch;

	(void)state;
	members(4);
	pg_idset_add(&ex, 3); /* the holder was tried: the ring decides */
	assert_int_equal(pg_balance_cached(backends, 4, ring, 4, &rq, &ex, 0, false, &ch), 1);
	backends[1].flags |= PG_BACKEND_DRAINING; /* the ring's first next: still its place */
	rq = req(8000, 0, NULL, NULL, 0);
	assert_int_equal(pg_balance_cached(backends, 4, ring, 4, &rq, NULL, 0, false, &ch), 2);
	assert_int_equal(ch.decision, PG_DEC_AFFINITY);
	assert_int_equal(pg_balance_cached(backends, 4, ring, 4, &rq, NULL, 0, true, &ch), 2);
	assert_int_equal(ch.decision, PG_DEC_EXPLICIT_KEY);
	for (unsigned b = 2; b <= 4; b++)
		backends[b].flags |= PG_BACKEND_UNHEALTHY;
	assert_int_equal(pg_balance_cached(backends, 4, ring, 4, &rq, NULL, 0, false, &ch), 0);
	assert_int_equal(ch.backend, 0);
}

/* Among ties: with NewConversationChoices N > 1, where the anchor went
 * before, else the least recently sent of the first N ring candidates. */
static void test_new_conversation_choices(void **state)
{
	enum { R = PG_CA_RECENT_ONE };
	static const struct {
		const char *why;
		uint32_t choices;
		uint32_t recent[4];
		uint16_t placed;
		bool explicit_key;
		uint16_t want;
		uint8_t decision;
	} cases[] = {
	    {"one choice: the ring's first, however busy lately",
	     1,
	     {50 * R, 0, 0, 0},
	     0,
	     false,
	     1,
	     PG_DEC_AFFINITY},
	    {"three: the least recently sent of the first three",
	     3,
	     {50 * R, 25 * R, 0, 0},
	     0,
	     false,
	     3,
	     PG_DEC_BALANCED},
	    {"two: the fourth is never looked at",
	     2,
	     {50 * R, 25 * R, 0, 0},
	     0,
	     false,
	     2,
	     PG_DEC_BALANCED},
	    {"within one request of the first: a tie, ring order",
	     3,
	     {10 * R, 9 * R, 9 * R, 0},
	     0,
	     false,
	     1,
	     PG_DEC_AFFINITY},
	    {"more than one request below: it wins",
	     3,
	     {10 * R, 9 * R - 1, 10 * R, 0},
	     0,
	     false,
	     2,
	     PG_DEC_BALANCED},
	    {"placed on the third: it stays, though the second is less sent",
	     3,
	     {50 * R, 0, 50 * R, 0},
	     3,
	     false,
	     3,
	     PG_DEC_AFFINITY},
	    {"placed on a fourth candidate, past the choices: it stays",
	     3,
	     {50 * R, 0, 0, 0},
	     4,
	     false,
	     4,
	     PG_DEC_AFFINITY},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const uint16_t placed[1] = {cases[i].placed};
		struct pg_ca_req rq = req(8000, 0, NULL, NULL, 0);
		struct pg_choice ch;
		uint16_t id;

		rq.choices = cases[i].choices;
		rq.placed = placed;
		rq.nplaced = cases[i].placed != 0;
		members(4);
		for (unsigned b = 1; b <= 4; b++)
			backends[b].recent = cases[i].recent[b - 1];
		id = pg_balance_cached(backends, 4, ring, 4, &rq, NULL, 0, cases[i].explicit_key,
		                       &ch);
		if (id != cases[i].want || ch.decision != cases[i].decision)
			fail_msg("%s: got %u (decision %u), want %u (%u)", cases[i].why, id,
			         ch.decision, cases[i].want, cases[i].decision);
	}
	/* the placed one with a queue is no tie: the rest decide */
	{
		const uint16_t placed[1] = {3};
		struct pg_ca_req rq = req(8000, 0, NULL, NULL, 0);
		struct pg_choice ch;

		rq.choices = 3;
		rq.placed = placed;
		rq.nplaced = 1;
		members(4);
		backends[3].prefill_tokens = 50000;
		backends[3].prefill_reqs = 2;
		assert_int_equal(pg_balance_cached(backends, 4, ring, 4, &rq, NULL, 0, false, &ch),
		                 1);
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
	    cmocka_unit_test(test_choice_rule),  cmocka_unit_test(test_estimates),
	    cmocka_unit_test(test_eligible),     cmocka_unit_test(test_new_conversation_choices),
	    cmocka_unit_test(test_recent_decay), cmocka_unit_test(test_shared_head_work),
	};

	return cmocka_run_group_tests_name("choice", tests, NULL, NULL);
}
