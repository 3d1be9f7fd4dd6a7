// SPDX-License-Identifier: MIT
/*
 * What a new request would meet at a mockllm instance (sim_match, behind
 * /mock/match), driven by a fake clock: the cached tokens its prefill would
 * find, without touching the LRU; the prefill tokens queued ahead of it (the
 * rest of the prefill in progress, each waiting request's estimate taken at
 * its submission and not revised); a predicted TTFT that the request then
 * meets; and speed changes (sim_set_speed): a step change of rates seen by
 * the next prefill and overhead phase, the prefill in progress keeping its
 * end time, always relative to the parameters the instance was created with.
 */
#include "sim_fixture.h"

/* 14,640 bytes: 3,660 tokens, 100 ms of prefill at the default rate */
#define LEN100 14640

static void match(struct world *w, const char *text, size_t len, struct sim_match *m)
{
	uint64_t *h;
	size_t n, nd;

	assert_int_equal(prompt_request_hashes(text, len, 1, 0, &h, &n, &nd), 0);
	sim_match(w->s, h, n, (uint32_t)kv_prompt_tokens(len), w->now, m);
	free(h);
}

/* An idle instance: nothing queued; a prompt seen before finds its blocks,
 * by the prefill's own rule, and the prediction is what the request meets. */
static void test_match_idle(void **state)
{
	struct world w;
	struct sim_match m;
	char *a = text_of(32000, 1), *b = text_of(32000, 1);
	uint32_t want_cached = (32000 - 200) / KV_BLOCK_BYTES * KV_BLOCK_TOKENS;

	(void)state;
	world_init(&w, NULL);
	match(&w, a, 32000, &m);
	assert_int_equal(m.prompt_tokens, 8000);
	assert_int_equal(m.cached_tokens, 0);
	assert_int_equal(m.queue_tokens, 0);
	assert_int_equal(m.waiting + m.running, 0);
	assert_true(m.prefill_tokens_per_s == 36600 && m.ttft_overhead_ms == 61.5);
	/* 8000 / 36600 s + 61.5 ms */
	assert_true(m.predicted_ttft_ms > 280.07 && m.predicted_ttft_ms < 280.09);
	submit(&w, 0, a, 32000, 1);
	run_until(&w, 1000 * MS);
	assert_true(w.req[0].done);

	memset(b + 31800, 'Z', 200); /* the last ~50 tokens differ */
	match(&w, b, 32000, &m);
	assert_int_equal(m.cached_tokens, want_cached);
	submit(&w, 1, b, 32000, 1);
	run_until(&w, 2000 * MS);
	assert_int_equal(w.req[1].r.cached_tokens, m.cached_tokens);
	assert_in_range(ttft(&w, 1), (uint64_t)(m.predicted_ttft_ms * MS) - MS / 100,
	                (uint64_t)(m.predicted_ttft_ms * MS) + MS / 100);
	free(a);
	free(b);
	world_free(&w);
}

/*
 * Three uncached requests of 100 ms of prefill at t = 0; at 50 ms a fourth
 * has half of the first and both others ahead of it: 1,830 + 2 x 3,660
 * tokens, 250 ms, then its own 100 ms and the overhead, which it meets.
 */
static void test_queue_tokens(void **state)
{
	struct world w;
	struct sim_match m;
	char *t[4];

	(void)state;
	world_init(&w, NULL);
	for (int i = 0; i < 4; i++)
		t[i] = text_of(LEN100, 10 + (unsigned)i);
	for (int i = 0; i < 3; i++)
		submit(&w, i, t[i], LEN100, 1);
	match(&w, t[3], LEN100, &m);
	assert_int_equal(m.queue_tokens, 3 * 3660);
	assert_int_equal(m.running, 1);
	assert_int_equal(m.waiting, 2);
	run_until(&w, 50 * MS);
	match(&w, t[3], LEN100, &m);
	assert_int_equal(m.queue_tokens, 1830 + 2 * 3660);
	/* (9,150 + 3,660) / 36,600 s + 61.5 ms = 411.5 ms */
	assert_true(m.predicted_ttft_ms > 411.49 && m.predicted_ttft_ms < 411.51);
	submit(&w, 3, t[3], LEN100, 1);
	run_until(&w, 150 * MS); /* the second's prefill half done, one waiting */
	match(&w, t[0], LEN100, &m);
	assert_int_equal(m.queue_tokens, 1830 + 2 * 3660);
	assert_int_equal(m.cached_tokens, 3648); /* the first's blocks are in */
	run_until(&w, 10000 * MS);
	assert_true(w.req[3].done);
	assert_in_range(ttft(&w, 3), 411 * MS, 412 * MS);
	match(&w, t[0], LEN100, &m);
	assert_int_equal(m.queue_tokens, 0);
	assert_int_equal(m.waiting + m.running, 0);
	for (int i = 0; i < 4; i++)
		free(t[i]);
	world_free(&w);
}

/*
 * A waiting request counts its uncached tokens as a peek found them at its
 * submission: requests queued behind one with the same prefix count it
 * whole, though each will find it cached when scheduled (the estimate is
 * not revised). Leaving the queue, by admission or cancellation, takes
 * exactly its estimate off.
 */
static void test_queue_estimate_kept(void **state)
{
	struct world w;
	struct sim_match m;
	char *t[3], *other = text_of(LEN100, 99);

	(void)state;
	world_init(&w, NULL);
	for (int i = 0; i < 3; i++) {
		t[i] = text_of(32000, 60);
		memset(t[i] + 31800, 'A' + i, 200);
		submit(&w, i, t[i], 32000, 1);
	}
	assert_int_equal(w.req[1].r.est_uncached, 8000);
	match(&w, other, LEN100, &m);
	assert_int_equal(m.queue_tokens, 3 * 8000);
	sim_cancel(w.s, &w.req[2].r, w.now);
	match(&w, other, LEN100, &m);
	assert_int_equal(m.queue_tokens, 2 * 8000);
	assert_int_equal(m.waiting, 1);
	run_until(&w, 219 * MS); /* the first's prefill ends at 218.6 ms */
	match(&w, other, LEN100, &m);
	/* the second is being prefilled now, its 64 uncached tokens nearly done */
	assert_int_equal(w.req[1].r.state, SIM_PREFILL);
	assert_int_equal(w.req[1].r.cached_tokens, 31744 / KV_BLOCK_BYTES * KV_BLOCK_TOKENS);
	assert_true(m.queue_tokens <= 64);
	run_until(&w, 10000 * MS);
	match(&w, other, LEN100, &m);
	assert_int_equal(m.queue_tokens, 0);
	for (int i = 0; i < 3; i++)
		free(t[i]);
	free(other);
	world_free(&w);
}

/*
 * Half speed from 50 ms on: the prefill in progress keeps its end (100 ms),
 * its overhead phase, starting after the change, takes 123 ms; the next
 * prefill runs at 18,300 tokens/s. The prediction at 50 ms divides the
 * first's 1,830 remaining tokens by the new rate too: 50 ms too long.
 */
static void test_speed_step(void **state)
{
	struct world w;
	struct sim_match m;
	char *a = text_of(LEN100, 1), *b = text_of(LEN100, 2);

	(void)state;
	world_init(&w, NULL);
	assert_true(sim_speed(w.s) == 1);
	submit(&w, 0, a, LEN100, 3);
	run_until(&w, 50 * MS);
	sim_set_speed(w.s, 0.5);
	assert_true(sim_speed(w.s) == 0.5);
	assert_true(sim_params_now(w.s)->prefill_tokens_per_s == 18300);
	assert_true(sim_params_now(w.s)->ttft_overhead_ms == 123);
	assert_true(sim_params_now(w.s)->decode_ms_per_token == 50);
	match(&w, b, LEN100, &m);
	assert_true(m.prefill_tokens_per_s == 18300 && m.ttft_overhead_ms == 123);
	assert_int_equal(m.queue_tokens, 1830);
	/* (1,830 + 3,660) / 18,300 s + 123 ms */
	assert_true(m.predicted_ttft_ms > 422.99 && m.predicted_ttft_ms < 423.01);
	submit(&w, 1, b, LEN100, 1);
	run_until(&w, 10000 * MS);
	assert_true(w.req[0].done && w.req[1].done);
	assert_in_range(ttft(&w, 0), 223 * MS, 223 * MS + 1);
	/* decode intervals started after the change: 50 ms, x 1.002 as b runs */
	assert_int_equal(w.req[0].tok_at[1] - w.req[0].tok_at[0], 50100000);
	/* b: waits to 100 ms, 200 ms of prefill, 123 ms: 373 ms from 50 ms */
	assert_in_range(ttft(&w, 1), 373 * MS, 373 * MS + 1);
	free(a);
	free(b);
	world_free(&w);
}

/* Each factor applies to the parameters the instance was created with (two
 * changes do not compound); back to 1, they are those exactly; a factor
 * that is not > 0 changes nothing. */
static void test_speed_relative_to_created(void **state)
{
	static const double bad[] = {0, -1, 0.0 / 0.0};
	struct sim_params p;
	struct world w;

	(void)state;
	sim_default_params(&p);
	sim_scale_params(&p, 4); /* as --time-scale 4 */
	world_init(&w, &p);
	sim_set_speed(w.s, 2);
	sim_set_speed(w.s, 3);
	assert_true(sim_params_now(w.s)->prefill_tokens_per_s == 36600 * 4 * 3);
	assert_true(sim_params_now(w.s)->kv_capacity_tokens == p.kv_capacity_tokens);
	assert_true(sim_params_now(w.s)->max_num_seqs == p.max_num_seqs);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sim_set_speed(w.s, bad[i]);
		assert_true(sim_speed(w.s) == 3);
	}
	sim_set_speed(w.s, 1);
	assert_memory_equal(sim_params_now(w.s), &p, sizeof(p));
	world_free(&w);
}

/* A prefill at a crawl (1e-6 of a slow rate) ends at the capped time
 * instead of overflowing the clock. */
static void test_speed_crawl_capped(void **state)
{
	struct sim_params p;
	struct world w;
	char *a = text_of(LEN100, 3);

	(void)state;
	sim_default_params(&p);
	p.prefill_tokens_per_s = 1;
	world_init(&w, &p);
	sim_set_speed(w.s, 1e-6);
	submit(&w, 0, a, LEN100, 1);
	assert_true(sim_next_event(w.s) == (uint64_t)1e18);
	free(a);
	world_free(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_match_idle),
	    cmocka_unit_test(test_queue_tokens),
	    cmocka_unit_test(test_queue_estimate_kept),
	    cmocka_unit_test(test_speed_step),
	    cmocka_unit_test(test_speed_relative_to_created),
	    cmocka_unit_test(test_speed_crawl_capped),
	};

	return cmocka_run_group_tests_name("mockllm_match", tests, NULL, NULL);
}
