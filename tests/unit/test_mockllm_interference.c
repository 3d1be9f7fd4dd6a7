// SPDX-License-Identifier: MIT
/*
 * mockllm timing model: chunked-prefill interference (a decode step beside
 * a prefill in progress takes the decode time plus its prefill chunk's, up
 * to the step's token budget; TTFT unchanged; no budget: no interference),
 * and the blocks a request brings (a decode instance's pulled KV: cached
 * whatever the lookup finds, counted as external hits).
 */
#include "sim_fixture.h"

static void test_step_ms(void **state)
{
	static const struct {
		uint32_t budget, running;
		uint64_t left;
		double ms;
	} tab[] = {
	    {2048, 0, 0, 25},     /* nothing running: a lone request's step */
	    {2048, 1, 0, 25},     /* no prefill in progress */
	    {0, 2, 10000, 25.05}, /* no budget: no interference */
	    /* one request decoding beside a long prefill: 2047 tokens of chunk */
	    {2048, 2, 10000, 25.05 + 2047 / 36.6},
	    {2048, 2, 100, 25.05 + 100 / 36.6}, /* the prefill's last 100 tokens */
	    {8192, 2, 10000, 25.05 + 8191 / 36.6},
	    {2048, 11, 10000, 25 * 1.02 + 2038 / 36.6},   /* ten decode tokens in the step */
	    {2048, 3000, 10000, 25 * (1 + 0.002 * 2999)}, /* decodes fill the budget */
	};

	(void)state;
	for (size_t t = 0; t < sizeof(tab) / sizeof(tab[0]); t++) {
		struct sim_params p;

		sim_default_params(&p);
		assert_int_equal(p.max_num_batched_tokens, 0); /* off unless asked */
		p.max_num_batched_tokens = tab[t].budget;
		assert_float_equal(sim_step_ms(&p, tab[t].running, tab[t].left), tab[t].ms, 1e-9);
	}
}

/* Request 0 (100 tokens, 40 out) decodes; at 100 ms request 1 (8,000
 * uncached tokens, 218.6 ms of prefill) arrives. Gaps of request 0 in ns;
 * returns request 1's TTFT. */
static uint64_t two_requests(uint32_t budget, uint64_t gaps[39])
{
	struct sim_params p;
	struct world w;
	char *a = text_of(400, 70), *b = text_of(32000, 71);
	uint64_t ttft1;

	sim_default_params(&p);
	p.max_num_batched_tokens = budget;
	world_init(&w, &p);
	submit(&w, 0, a, 400, 40);
	run_until(&w, 100 * MS);
	submit(&w, 1, b, 32000, 1);
	run_until(&w, 10000 * MS);
	assert_true(w.req[0].done && w.req[1].done);
	for (int k = 1; k < 40; k++)
		gaps[k - 1] = w.req[0].tok_at[k] - w.req[0].tok_at[k - 1];
	ttft1 = ttft(&w, 1);
	free(a);
	free(b);
	world_free(&w);
	return ttft1;
}

static void test_prefill_lengthens_decode(void **state)
{
	uint64_t on[39], off[39], ttft_on, ttft_off, max_on = 0, max_off = 0;
	int spiked = 0;

	(void)state;
	ttft_off = two_requests(0, off);
	ttft_on = two_requests(2048, on);
	/* the prefill's own timing is unchanged: 61.5 ms + 8000 / 36600 s */
	assert_int_equal(ttft_on, ttft_off);
	assert_in_range(ttft_on, 279 * MS, 281 * MS);
	for (int k = 0; k < 39; k++) {
		max_on = on[k] > max_on ? on[k] : max_on;
		max_off = off[k] > max_off ? off[k] : max_off;
		spiked += on[k] > 26 * MS;
	}
	/* without a budget every step is 25 ms (25.05 with two running) */
	assert_in_range(max_off, 25 * MS, 25050000);
	/* with one: a full chunk of 2047 tokens beside the decode token */
	assert_in_range(max_on, 80900000, 81000000);
	/* the steps that started during the 218.6 ms prefill: three */
	assert_int_equal(spiked, 3);
	/* once the prefill is done, steps are back to 25.05 ms, and to 25 ms
	 * when request 1 has finished too */
	assert_int_equal(on[6], 25050000);
	for (int k = 10; k < 39; k++)
		assert_int_equal(on[k], 25 * MS);
}

/* A decode instance's request bringing every block of its 8,000-token
 * prompt: only the last partial block and token are prefilled. */
static void test_held_blocks(void **state)
{
	struct world w;
	struct sim_stats st;
	char *a = text_of(32000, 80);
	size_t n;

	(void)state;
	world_init(&w, NULL);
	n = kv_block_hashes(a, 32000, NULL, 0); /* 499 full blocks */
	submit_held(&w, 0, a, 32000, 1, 0, n);
	run_until(&w, 10000 * MS);
	assert_true(w.req[0].done);
	assert_int_equal(w.req[0].r.cached_tokens, n * KV_BLOCK_TOKENS);
	/* 61.5 ms + 16 tokens / 36600 */
	assert_in_range(ttft(&w, 0), 61 * MS, 62 * MS);
	sim_get_stats(w.s, &st);
	assert_int_equal(st.prefix_queries, 8000);
	assert_int_equal(st.prefix_hits, 0);
	assert_int_equal(st.external_queries, 8000);
	assert_int_equal(st.external_hits, n * KV_BLOCK_TOKENS);

	/* the blocks are in the local cache now: a plain request finds them */
	submit(&w, 1, a, 32000, 1);
	run_until(&w, 20000 * MS);
	assert_int_equal(w.req[1].r.cached_tokens, n * KV_BLOCK_TOKENS);
	sim_get_stats(w.s, &st);
	assert_int_equal(st.prefix_hits, n * KV_BLOCK_TOKENS);
	assert_int_equal(st.external_hits, n * KV_BLOCK_TOKENS); /* unchanged */

	/* brought blocks fewer than the local ones: the local ones count, and
	 * external queries are the tokens the lookup did not find */
	submit_held(&w, 2, a, 32000, 1, 0, 10);
	run_until(&w, 30000 * MS);
	assert_int_equal(w.req[2].r.cached_tokens, n * KV_BLOCK_TOKENS);
	sim_get_stats(w.s, &st);
	assert_int_equal(st.external_queries, 8000 + 8000 - n * KV_BLOCK_TOKENS);
	assert_int_equal(st.external_hits, n * KV_BLOCK_TOKENS);
	free(a);
	world_free(&w);
}

/* A waiting request's estimate counts the blocks it brings. */
static void test_held_estimate(void **state)
{
	struct world w;
	struct sim_match m;
	char *a = text_of(32000, 90), *b = text_of(32000, 91);

	(void)state;
	world_init(&w, NULL);
	submit(&w, 0, a, 32000, 1); /* 8,000 uncached tokens in progress */
	submit_held(&w, 1, b, 32000, 1, 0, kv_block_hashes(b, 32000, NULL, 0));
	assert_int_equal(w.req[1].r.state, SIM_WAITING);
	assert_int_equal(w.req[1].r.est_uncached, 16);
	sim_match(w.s, w.req[0].hashes, 0, 1, w.now, &m);
	assert_int_equal(m.queue_tokens, 8000 + 16);
	free(a);
	free(b);
	world_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_step_ms),
	    cmocka_unit_test(test_prefill_lengthens_decode),
	    cmocka_unit_test(test_held_blocks),
	    cmocka_unit_test(test_held_estimate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
