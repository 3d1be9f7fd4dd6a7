// SPDX-License-Identifier: MIT
/*
 * What an instance's cache keeps, learned from its answers
 * (router/capacity.c), no gateway: a per-slot cache's bound in
 * conversations (no holder past it, no new conversation on a full
 * instance), a conversation whose slot is busy (computed again in another,
 * teaching nothing), the verdict of a stream's first token, the index
 * going by what was learned.
 */
#include "router_fixture.h"

/* A per-slot cache of 2 conversations (llama.cpp's server), sent 3 in
 * turn: each answer says the predicted hit was lost at a distance of 2
 * other conversations; the bound is learned within a few answers, then the
 * third conversation is not taken as held there, the instance is full (a
 * new conversation goes elsewhere among ties), and the block capacity the
 * index goes by is left alone. */
static void test_capacity_slots(void **state)
{
	struct pg_choice ch = {.backend = 1, .matched = 2000, .shared = 0};
	const uint64_t conv[3] = {0x1111, 0x2222, 0x3333};
	int k;

	(void)state;
	r.caps = pg_capacities_new();
	assert_non_null(r.caps);
	maps.state[0].ca_capacity_blocks = 1000;
	for (k = 0; k < 3; k++) /* each sent once, nothing learned yet */
		pg_capacity_sent(&r, 1, conv[k], 0, &ch);
	assert_true(pg_capacity_holds(&r, 1, conv[0]));
	assert_false(pg_capacity_full(&r, 1));
	for (k = 0; k < 12 && !maps.backends[1].ca_learned_seqs; k++) {
		pg_capacity_sent(&r, 1, conv[k % 3], 0, &ch);
		assert_int_equal(ch.d_seqs, 2);
		ch.d_blocks = 40;
		pg_capacity_answer(&r, &ch, PG_CC_SLOTS, PG_CC_LOST);
		if (ch.seq_taken) /* its slot given back */
			pg_capacity_done(&r, 1, conv[k % 3]);
		ch.seq_taken = false;
	}
	assert_true(k <= 4); /* learned within a few answers */
	assert_int_equal(maps.backends[1].ca_learned_seqs, 2);
	assert_true(maps.backends[1].ca_learned_blocks == 0 ||
	            maps.backends[1].ca_learned_blocks == 1000);
	/* the most recent two are held, the third is not; full */
	assert_true(pg_capacity_holds(&r, 1, conv[(k + 2) % 3]));
	assert_false(pg_capacity_holds(&r, 1, conv[k % 3]));
	assert_true(pg_capacity_full(&r, 1));
	/* a second request of a conversation in flight there: not held (its
	 * slot is busy), computed cold in another, its answer teaches none */
	pg_capacity_sent(&r, 1, conv[(k + 2) % 3], 0, &ch);
	assert_true(ch.seq_taken && ch.d_seqs == 0);
	assert_false(pg_capacity_holds(&r, 1, conv[(k + 2) % 3]));
	pg_capacity_sent(&r, 1, conv[(k + 2) % 3], 0, &ch);
	assert_true(ch.d_seqs == PG_CC_SEQS && ch.d_blocks == UINT32_MAX);
	pg_capacity_done(&r, 1, conv[(k + 2) % 3]);
	assert_true(pg_capacity_holds(&r, 1, conv[(k + 2) % 3]));
	/* not a cache_aware prediction, or nothing predicted: nothing learned */
	ch.d_blocks = UINT32_MAX;
	pg_capacity_answer(&r, &ch, PG_CC_SLOTS, PG_CC_HELD);
	assert_int_equal(maps.backends[1].ca_learned_seqs, 2);
	pg_capacities_free(r.caps);
	r.caps = NULL;
}

/* A stream's first token against the prediction: later than halfway to
 * the prediction without the hit is a loss; a saving the model's noise
 * could hide says nothing. */
static void test_capacity_ttft_verdict(void **state)
{
	(void)state;
	assert_int_equal(pg_capacity_ttft_verdict(100, 400, 150), PG_CC_HELD);
	assert_int_equal(pg_capacity_ttft_verdict(100, 400, 299), PG_CC_HELD);
	assert_int_equal(pg_capacity_ttft_verdict(100, 400, 301), PG_CC_LOST);
	assert_int_equal(pg_capacity_ttft_verdict(100, 10, 500), PG_CC_UNKNOWN);
}

/* The index takes what an instance's answers showed before what it
 * reported or what was configured. */
static void test_capacity_index_learned(void **state)
{
	struct pg_ca_index ix;
	uint64_t chain[4] = {11, 12, 13, 14};
	struct pg_ca_match m;

	(void)state;
	maps.state[0].ca_capacity_blocks = 1000;
	ix = pg_router_index(&r);
	pg_ca_record(&ix, chain, 4, 1);
	pg_ca_match(&ix, chain, 4, NULL, NULL, &m);
	assert_int_equal(m.blocks, 4);
	/* 4 other blocks sent since: still held under 1,000, not under 3 */
	pg_ca_record(&ix, (uint64_t[]){21, 22, 23, 24}, 4, 1);
	pg_ca_match(&ix, chain, 4, NULL, NULL, &m);
	assert_int_equal(m.blocks, 4);
	maps.backends[1].ca_learned_blocks = 3;
	pg_ca_match(&ix, chain, 4, NULL, NULL, &m);
	assert_int_equal(m.blocks, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_capacity_slots, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_capacity_ttft_verdict, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_capacity_index_learned, setup, teardown),
	};

	return cmocka_run_group_tests_name("capacity", tests, NULL, NULL);
}
