// SPDX-License-Identifier: MIT
/*
 * mockllm timing model, driven by a fake clock: the calibration points
 * (lone 8,000-token prompt: TTFT ~280 ms uncached, ~63 ms when all but ~50
 * tokens are cached), decode pacing, first-come-first-served prefill with
 * cache hits for requests queued behind a shared prefix, the
 * max_num_seqs limit with its waiting queue, cancellation and counters;
 * output caching: a chat prompt ends with the generation prompt, so prompt +
 * reply is a prefix of the next turn, which finds their full blocks cached.
 */
#include "sim_fixture.h"

static void test_calibration(void **state)
{
	struct world w;
	char *a = text_of(32000, 1), *b = text_of(32000, 2);
	struct sim_stats st;

	(void)state;
	world_init(&w, NULL);
	submit(&w, 0, a, 32000, 1);
	run_until(&w, 10000 * MS);
	assert_true(w.req[0].done);
	/* 61.5 ms + 8000 / 36600 s = 280.08 ms */
	assert_in_range(ttft(&w, 0), 279 * MS, 281 * MS);
	assert_int_equal(w.req[0].r.cached_tokens, 0);

	/* same prompt except its last 200 bytes (~50 tokens) */
	memcpy(b, a, 32000 - 200);
	submit(&w, 1, b, 32000, 1);
	run_until(&w, 20000 * MS);
	assert_true(w.req[1].done);
	assert_int_equal(w.req[1].r.cached_tokens,
	                 (32000 - 200) / KV_BLOCK_BYTES * KV_BLOCK_TOKENS);
	assert_in_range(ttft(&w, 1), 62 * MS, 64 * MS);

	sim_get_stats(w.s, &st);
	assert_int_equal(st.prefix_queries, 16000);
	assert_int_equal(st.prefix_hits, w.req[1].r.cached_tokens);
	assert_int_equal(st.prompt_tokens, 16000);
	assert_int_equal(st.generation_tokens, 2);
	assert_int_equal(st.running, 0);
	free(a);
	free(b);
	world_free(&w);
}

static void test_decode_pacing(void **state)
{
	struct world w;
	char *a = text_of(400, 3);

	(void)state;
	world_init(&w, NULL);
	submit(&w, 0, a, 400, 10);
	run_until(&w, 10000 * MS);
	assert_true(w.req[0].done);
	assert_int_equal(w.req[0].r.tokens_out, 10);
	for (int k = 1; k < 10; k++) /* lone request: exactly 25 ms apart */
		assert_int_equal(w.req[0].tok_at[k] - w.req[0].tok_at[k - 1], 25 * MS);
	free(a);
	world_free(&w);
}

static void test_fcfs_prefill(void **state)
{
	static const struct {
		int n;                 /* requests of 3,660 uncached tokens at once */
		uint64_t lo[4], hi[4]; /* TTFT of each, ms: 100 ms of prefill each, in order */
	} tab[] = {
	    {1, {161}, {162}},
	    {2, {161, 261}, {162, 262}},
	    {4, {161, 261, 361, 461}, {162, 262, 362, 462}},
	};

	(void)state;
	for (size_t t = 0; t < sizeof(tab) / sizeof(tab[0]); t++) {
		struct world w;
		struct sim_stats st;
		char *txt[4];

		world_init(&w, NULL);
		for (int i = 0; i < tab[t].n; i++) {
			/* 14,640 bytes = 3,660 tokens, nothing cached */
			txt[i] = text_of(14640, 20 + (unsigned)i);
			submit(&w, i, txt[i], 14640, 1);
		}
		sim_get_stats(w.s, &st);
		assert_int_equal(st.running, 1);
		assert_int_equal(st.waiting, tab[t].n - 1);
		run_until(&w, 10000 * MS);
		for (int i = 0; i < tab[t].n; i++) {
			assert_true(w.req[i].done);
			assert_in_range(ttft(&w, i), tab[t].lo[i] * MS, tab[t].hi[i] * MS);
			free(txt[i]);
		}
		world_free(&w);
	}
}

/* Requests arriving together with the same long prefix: the first computes
 * it, the ones queued behind find it cached when their turn comes. */
static void test_shared_prefix_queued(void **state)
{
	struct world w;
	struct sim_stats st;
	char *t[3];

	(void)state;
	world_init(&w, NULL);
	for (int i = 0; i < 3; i++) {
		t[i] = text_of(32000, 60);          /* same 8,000-token prefix ... */
		memset(t[i] + 31800, 'A' + i, 200); /* ... different last 50 tokens */
		submit(&w, i, t[i], 32000, 1);
	}
	run_until(&w, 10000 * MS);
	assert_int_equal(w.req[0].r.cached_tokens, 0);
	assert_int_equal(w.req[1].r.cached_tokens, 31744 / KV_BLOCK_BYTES * KV_BLOCK_TOKENS);
	assert_int_equal(w.req[2].r.cached_tokens, w.req[1].r.cached_tokens);
	/* 218.6 ms for the first prefill, then ~1.7 ms for each other one */
	assert_in_range(ttft(&w, 1), 281 * MS, 283 * MS);
	assert_in_range(ttft(&w, 2), 283 * MS, 285 * MS);
	sim_get_stats(w.s, &st);
	assert_int_equal(st.prefix_hits, 2 * w.req[1].r.cached_tokens);
	for (int i = 0; i < 3; i++)
		free(t[i]);
	world_free(&w);
}

static void test_max_num_seqs(void **state)
{
	struct sim_params p;
	struct world w;
	struct sim_stats st;
	char *t[3];

	(void)state;
	sim_default_params(&p);
	p.max_num_seqs = 2;
	world_init(&w, &p);
	for (int i = 0; i < 3; i++) {
		t[i] = text_of(400, 30 + (unsigned)i);
		submit(&w, i, t[i], 400, 10);
	}
	run_until(&w, 150 * MS); /* both prefills done (~3 ms each), decoding */
	sim_get_stats(w.s, &st);
	assert_int_equal(st.running, 2);
	assert_int_equal(st.waiting, 1);
	assert_int_equal(w.req[2].r.state, SIM_WAITING);
	run_until(&w, 10000 * MS);
	for (int i = 0; i < 3; i++)
		assert_true(w.req[i].done);
	/* the third is admitted only when one of the first two finishes */
	assert_true(w.req[2].tok_at[0] > w.req[0].tok_at[9]);
	sim_get_stats(w.s, &st);
	assert_int_equal(st.running + st.waiting, 0);
	for (int i = 0; i < 3; i++)
		free(t[i]);
	world_free(&w);
}

static void test_cancel(void **state)
{
	struct world w;
	struct sim_stats st;
	char *a = text_of(14640, 40), *b = text_of(14640, 41);

	(void)state;
	world_init(&w, NULL);
	submit(&w, 0, a, 14640, 3);
	submit(&w, 1, b, 14640, 3);
	run_until(&w, 50 * MS); /* the first is half way through its prefill */
	sim_cancel(w.s, &w.req[0].r, w.now);
	assert_int_equal(w.req[0].r.state, SIM_IDLE);
	assert_int_equal(w.req[1].r.state, SIM_PREFILL);
	run_until(&w, 10000 * MS);
	assert_false(w.req[0].done);
	assert_true(w.req[1].done);
	/* started at 50 ms: 50 + 100 + 61.5 */
	assert_in_range(ttft(&w, 1), 211 * MS, 212 * MS);
	sim_get_stats(w.s, &st);
	assert_int_equal(st.running + st.waiting, 0);
	assert_int_equal(st.generation_tokens, 3);
	assert_int_equal(st.prompt_tokens, 3660); /* the cancelled one never finished */
	free(a);
	free(b);
	world_free(&w);
}

static void test_batch_slows_decode(void **state)
{
	struct sim_params p;
	struct world w;
	char *t[4];

	(void)state;
	sim_default_params(&p);
	p.decode_batch_factor = 0.1;
	world_init(&w, &p);
	for (int i = 0; i < 4; i++) {
		t[i] = text_of(40, 50 + (unsigned)i);
		submit(&w, i, t[i], 40, 3);
	}
	run_until(&w, 10000 * MS);
	/* 4 running: 25 ms x (1 + 0.1 x 3) = 32.5 ms per token */
	assert_int_equal(w.req[0].tok_at[1] - w.req[0].tok_at[0], 32500000);
	for (int i = 0; i < 4; i++)
		free(t[i]);
	world_free(&w);
}

/*
 * --time-scale K: every simulated duration is the default's / K, so TTFT
 * (uncached and cached) and decode pacing times K give the default model's.
 * K <= 0 leaves the parameters alone.
 */
static void test_time_scale(void **state)
{
	static const struct {
		double k;
		double want_factor; /* durations are the default's x this */
	} cases[] = {{1, 1}, {4, 0.25}, {8, 0.125}, {0.5, 2}, {0, 1}, {-2, 1}};

	(void)state;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct sim_params p;
		struct world w;
		char *a = text_of(32000, 60), *b = text_of(32000, 60);
		double f = cases[c].want_factor;

		sim_default_params(&p);
		sim_scale_params(&p, cases[c].k);
		assert_true(p.kv_capacity_tokens == 100000 && p.max_num_seqs == 256);
		world_init(&w, &p);
		submit(&w, 0, a, 32000, 2);
		run_until(&w, 100000 * MS);
		assert_true(w.req[0].done);
		/* uncached: 280.08 ms x f; decode 25 ms x f */
		assert_in_range(ttft(&w, 0), (uint64_t)(279 * MS * f), (uint64_t)(281 * MS * f));
		assert_in_range(w.req[0].tok_at[1] - w.req[0].tok_at[0],
		                (uint64_t)(25 * MS * f) - 1, (uint64_t)(25 * MS * f) + 1);
		/* all but ~50 tokens cached: ~63 ms x f */
		b[31900] ^= 1;
		submit(&w, 1, b, 32000, 1);
		run_until(&w, 200000 * MS);
		assert_true(w.req[1].done);
		assert_in_range(ttft(&w, 1), (uint64_t)(62 * MS * f), (uint64_t)(64 * MS * f));
		free(a);
		free(b);
		world_free(&w);
	}
}

/* The chat prompt mockllm renders for body, and the output text of n tokens. */
static char *render(const char *body, size_t *len)
{
	struct prompt_req pr;
	const char *err;
	char *t;

	assert_int_equal(prompt_parse(body, strlen(body), true, &pr, &err), 0);
	t = malloc(pr.len + 1);
	memcpy(t, pr.text, pr.len);
	*len = pr.len;
	prompt_free(&pr);
	return t;
}

static void output_text(char *out, uint32_t n)
{
	out[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(strlen(prompt_output_token(i)), KV_TOKEN_BYTES);
		strcat(out, prompt_output_token(i));
	}
}

/* Request i for text[0..len) with its output of max_tokens tokens cached
 * when it completes (mockllm without --no-cache-output). */
static void submit_cached(struct world *w, int i, const char *text, size_t len, uint32_t max_tokens)
{
	struct sim_params p;

	sim_default_params(&p);
	submit_blocks(w, i, text, len, max_tokens, kv_capacity_blocks(p.kv_capacity_tokens));
}

/*
 * Turn 1 = turn 0's prompt + the reply turn 0 was sent + a new user turn:
 * it finds every full block of (turn 0's prompt + reply) cached. Without
 * output caching (nhashes_done 0) only turn 0's prompt blocks.
 */
static void test_output_cached(void **state)
{
	static const char t0[] = "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a "
	                         "terse assistant who answers in one line.\"},{\"role\":\"user\","
	                         "\"content\":\"Name a colour, any colour at all, please.\"}]}";
	char reply[MAXTOK * KV_TOKEN_BYTES + 1], body[1024];
	size_t len0, len1;
	char *p0, *p1;

	(void)state;
	output_text(reply, 50);
	snprintf(body, sizeof(body),
	         "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a terse assistant who "
	         "answers in one line.\"},{\"role\":\"user\",\"content\":\"Name a colour, any "
	         "colour at all, please.\"},{\"role\":\"assistant\",\"content\":\"%s\"},"
	         "{\"role\":\"user\",\"content\":\"Another one.\"}]}",
	         reply);
	p0 = render(t0, &len0);
	p1 = render(body, &len1);
	/* the generation prompt ends turn 0; turn 1 starts with it + the reply */
	assert_true(len0 > 14 && memcmp(p0 + len0 - 14, "<|assistant|>\n", 14) == 0);
	assert_true(len1 > len0 + strlen(reply));
	assert_memory_equal(p1, p0, len0);
	assert_memory_equal(p1 + len0, reply, strlen(reply));

	for (int cache_output = 1; cache_output >= 0; cache_output--) {
		struct world w;
		size_t full = (kv_prompt_tokens(len0 + strlen(reply)) - 1) / KV_BLOCK_TOKENS;

		world_init(&w, NULL);
		submit_cached(&w, 0, p0, len0, 50);
		if (!cache_output)
			w.req[0].r.nhashes_done = 0;
		else
			assert_int_equal(w.req[0].r.nhashes_done, full);
		run_until(&w, 10000 * MS);
		assert_true(w.req[0].done);
		submit(&w, 1, p1, len1, 1);
		run_until(&w, 20000 * MS);
		assert_true(w.req[1].done);
		assert_true(full > w.req[0].r.nhashes);
		assert_int_equal(w.req[1].r.cached_tokens,
		                 (cache_output ? full : w.req[0].r.nhashes) * KV_BLOCK_TOKENS);
		world_free(&w);
	}
	free(p0);
	free(p1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_calibration),        cmocka_unit_test(test_decode_pacing),
	    cmocka_unit_test(test_fcfs_prefill),       cmocka_unit_test(test_shared_prefix_queued),
	    cmocka_unit_test(test_max_num_seqs),       cmocka_unit_test(test_cancel),
	    cmocka_unit_test(test_batch_slows_decode), cmocka_unit_test(test_time_scale),
	    cmocka_unit_test(test_output_cached),
	};

	return cmocka_run_group_tests_name("mockllm_sim", tests, NULL, NULL);
}
