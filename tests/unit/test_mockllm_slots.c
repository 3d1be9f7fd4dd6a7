// SPDX-License-Identifier: MIT
/*
 * mockllm --slots (slots.h, sim.c): llama.cpp's per-sequence cache. The
 * slot a prompt takes (the longest common prefix if more than a tenth of
 * it, else the least recently used idle slot; never a busy one), its cached
 * tokens (that common prefix, the last token computed), what a slot keeps
 * (the prompt, then the output; cut back to the common prefix when a
 * prefill is cancelled); and in the timing model: two slots serve two
 * conversations turn after turn from cache, three thrash them (the issue's
 * llama.cpp finding), a shared system prompt is all that three find, and
 * a running request holds its slot (the third of three waits).
 */
#include "sim_fixture.h"

#include "../../tools/mockllm/slots.h"

/* Output token texts 0..n-1, as a slot keeps them after a prompt. */
static size_t output_text(char *dst, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		memcpy(dst + (size_t)k * KV_TOKEN_BYTES, prompt_output_token(k), KV_TOKEN_BYTES);
	return (size_t)n * KV_TOKEN_BYTES;
}

static void hold(struct slots *ss, int i, const char *text, size_t len)
{
	slots_take(ss, i);
	assert_int_equal(slots_set(ss, i, text, len), 0);
	slots_release(ss, i);
}

static void test_choice(void **state)
{
	struct slots *ss = slots_create(2);
	char *a = text_of(400, 1), *b = text_of(400, 2), buf[1200];
	uint32_t c = 7;

	(void)state;
	assert_null(slots_create(0));
	assert_null(slots_create(SLOTS_MAX + 1));
	/* empty: the first least recently used */
	assert_int_equal(slots_choose(ss, a, 400, &c), 0);
	assert_int_equal(c, 0);
	hold(ss, 0, a, 400);
	assert_int_equal(slots_held(ss), 1);
	/* the same prompt: all of it but its last token (100 tokens) */
	assert_int_equal(slots_choose(ss, a, 400, &c), 0);
	assert_int_equal(c, 99);
	/* a longer one: the slot's 100 */
	memcpy(buf, a, 400);
	memcpy(buf + 400, b, 80);
	assert_int_equal(slots_choose(ss, buf, 480, &c), 0);
	assert_int_equal(c, 100);
	/* another: the least recently used (slot 1 was never used) */
	assert_int_equal(slots_choose(ss, b, 400, &c), 1);
	assert_int_equal(c, 0);
	/* 8 tokens of 100 in common: not a tenth, the LRU slot; 12: slot 0 */
	memcpy(buf, a, 32);
	memcpy(buf + 32, b, 368);
	assert_int_equal(slots_choose(ss, buf, 400, &c), 1);
	assert_int_equal(c, 0);
	memcpy(buf, a, 48);
	memcpy(buf + 48, b, 352);
	assert_int_equal(slots_choose(ss, buf, 400, &c), 0);
	assert_int_equal(c, 12);
	/* a busy slot is not taken, whatever it holds; none idle: -1 */
	slots_take(ss, 0);
	assert_int_equal(slots_choose(ss, a, 400, &c), 1);
	assert_int_equal(c, 0);
	slots_take(ss, 1);
	assert_int_equal(slots_choose(ss, a, 400, &c), -1);
	slots_release(ss, 1);
	slots_release(ss, 0); /* now the most recently used */
	/* a token in common is a whole one: 394 bytes are 98 */
	memcpy(buf, a, 400);
	buf[394] ^= 1;
	assert_int_equal(slots_choose(ss, buf, 400, &c), 0);
	assert_int_equal(c, 98);
	/* output stays after the prompt; a truncated slot keeps its head */
	slots_take(ss, 0);
	assert_int_equal(slots_append_output(ss, 0, 5), 0);
	slots_release(ss, 0);
	memcpy(buf, a, 400);
	output_text(buf + 400, 5);
	memcpy(buf + 420, b, 100);
	assert_int_equal(slots_choose(ss, buf, 520, &c), 0);
	assert_int_equal(c, 105);
	slots_truncate(ss, 0, 200);
	assert_int_equal(slots_choose(ss, buf, 520, &c), 0);
	assert_int_equal(c, 50);
	slots_destroy(ss);
	free(a);
	free(b);
}

static void slot_world(struct world *w, uint32_t slots)
{
	struct sim_params p;

	sim_default_params(&p);
	p.slots = slots;
	p.decode_ms_per_token = 1;
	world_init(w, &p);
}

/* One turn of conversation k (request k): its prompt grows by the reply
 * to its last turn, if any (max_tokens output tokens, kept in its slot),
 * and 400 bytes of new text; sent alone, run to its end. Returns the
 * cached tokens it found. */
#define TURN_OUT 8
static uint32_t turn(struct world *w, char *conv, size_t *len, unsigned k, unsigned seed)
{
	char *more = text_of(400, seed);

	if (w->req[k].done) /* the reply to its last turn */
		*len += output_text(conv + *len, TURN_OUT);
	memcpy(conv + *len, more, 400);
	*len += 400;
	free(more);
	submit_blocks(w, (int)k, conv, *len, TURN_OUT, 1);
	run_until(w, w->now + 10000 * MS);
	assert_true(w->req[k].done);
	return w->req[k].r.cached_tokens;
}

/* Two slots, two conversations in turn: every later turn finds its whole
 * previous prompt and reply; three: none finds anything (each takes the
 * least recently used slot, the one the next conversation needed). */
static void test_two_slots(void **state)
{
	static char conv[3][8192];

	(void)state;
	for (unsigned convs = 2; convs <= 3; convs++) {
		struct world w;
		size_t len[3] = {0};
		struct sim_stats st;

		slot_world(&w, 2);
		for (unsigned t = 0; t < 6; t++)
			for (unsigned k = 0; k < convs; k++) {
				size_t before = len[k];
				uint32_t cached = turn(&w, conv[k], &len[k], k, 10 * t + k);

				if (t && convs == 2) /* its prompt and reply */
					assert_int_equal(cached,
					                 (before + TURN_OUT * KV_TOKEN_BYTES) /
					                     KV_TOKEN_BYTES);
				else
					assert_int_equal(cached, 0);
			}
		sim_get_stats(w.s, &st);
		assert_true(convs == 2 ? st.prefix_hits > 0 : st.prefix_hits == 0);
		assert_true(st.kv_usage == 1.0);
		world_free(&w);
	}
}

/* Three conversations after one system prompt, two slots: each turn takes
 * the slot that has the system prompt and the last conversation (the
 * longest common prefix, a third of the prompt or more), the other slot
 * never used, and finds the system prompt only: llama.cpp's way without
 * its RAM prompt cache (--cache-ram), which mockllm does not simulate. */
static void test_shared_head(void **state)
{
	static char conv[3][8192];
	char *sys = text_of(800, 99);
	size_t len[3];
	struct world w;

	(void)state;
	slot_world(&w, 2);
	for (unsigned k = 0; k < 3; k++) {
		memcpy(conv[k], sys, 800);
		len[k] = 800;
	}
	for (unsigned t = 0; t < 4; t++)
		for (unsigned k = 0; k < 3; k++) {
			uint32_t cached = turn(&w, conv[k], &len[k], k, 10 * t + k);

			assert_int_equal(cached, t || k ? 200 : 0);
		}
	world_free(&w);
	free(sys);
}

/* A running request holds its slot: of three at once on two slots, the
 * third waits for one to finish. A prefill cancelled leaves its slot the
 * common prefix only. sim_match_text answers what a slot would give,
 * touching nothing. */
static void test_busy_and_cancel(void **state)
{
	char *t[3] = {text_of(4000, 1), text_of(4000, 2), text_of(4000, 3)}, both[4000];
	struct sim_stats st;
	struct sim_match m;
	struct world w;

	(void)state;
	slot_world(&w, 2);
	for (int i = 0; i < 3; i++)
		submit(&w, i, t[i], 4000, 4);
	sim_get_stats(w.s, &st);
	assert_int_equal(st.running, 1); /* prefills go one at a time */
	assert_int_equal(st.waiting, 2);
	run_until(&w, w.now + 40 * MS); /* both slots' prefills done */
	sim_get_stats(w.s, &st);
	assert_int_equal(st.running, 2);
	assert_int_equal(st.waiting, 1);
	run_until(&w, w.now + 10000 * MS);
	for (int i = 0; i < 3; i++)
		assert_true(w.req[i].done);
	/* slots: t[2] (it took the least recently used) and t[1] */
	sim_match_text(w.s, t[1], 4000, NULL, 0, 1000, w.now, &m);
	assert_int_equal(m.cached_tokens, 999);
	sim_match_text(w.s, t[0], 4000, NULL, 0, 1000, w.now, &m);
	assert_int_equal(m.cached_tokens, 0);
	/* half of t[1], then other text: its slot, 500 tokens; cancelled in
	 * its prefill, the slot keeps those 500 */
	memcpy(both, t[1], 2000);
	memcpy(both + 2000, t[0], 2000);
	submit(&w, 3, both, 4000, 4);
	assert_int_equal(w.req[3].r.cached_tokens, 500);
	assert_int_equal(w.req[3].r.state, SIM_PREFILL);
	sim_cancel(w.s, &w.req[3].r, w.now);
	sim_match_text(w.s, t[1], 4000, NULL, 0, 1000, w.now, &m);
	assert_int_equal(m.cached_tokens, 500);
	world_free(&w);
	for (int i = 0; i < 3; i++)
		free(t[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_choice),
	    cmocka_unit_test(test_two_slots),
	    cmocka_unit_test(test_shared_head),
	    cmocka_unit_test(test_busy_and_cancel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
