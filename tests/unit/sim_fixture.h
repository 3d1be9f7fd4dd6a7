/* SPDX-License-Identifier: MIT */
/*
 * What the mockllm timing model's tests share (test_mockllm_sim.c: the
 * model; test_mockllm_match.c: what a new request would meet, and speed
 * changes; test_mockllm_interference.c: prefill chunks beside decode steps,
 * blocks a request brings; test_mockllm_slots.c: llama.cpp's per-sequence
 * cache): a world of NREQ request slots driven by a fake clock, event by
 * event, each output token's time recorded.
 */
#ifndef PG_TEST_SIM_FIXTURE_H
#define PG_TEST_SIM_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/mockllm/prompt.h"
#include "../../tools/mockllm/sim.h"

#define MS     1000000ull
#define MAXTOK 64
#define NREQ   8

struct rec {
	struct sim_req r;
	uint64_t *hashes;
	uint64_t tok_at[MAXTOK]; /* time of each output token */
	bool done;
};

struct world {
	struct sim *s;
	uint64_t now;
	struct rec req[NREQ];
};

static inline void on_token(void *ctx, struct sim_req *r, bool last)
{
	struct world *w = ctx;
	struct rec *rc = (struct rec *)r; /* r is the first member */

	assert_true(r->tokens_out >= 1 && r->tokens_out <= MAXTOK);
	rc->tok_at[r->tokens_out - 1] = w->now;
	if (last) {
		assert_int_equal(r->state, SIM_IDLE);
		rc->done = true;
	}
}

/* Drive the simulation event by event until time `until`. */
static inline void run_until(struct world *w, uint64_t until)
{
	for (int guard = 0; guard < 100000; guard++) {
		uint64_t t = sim_next_event(w->s);

		if (t > until)
			break;
		if (t > w->now)
			w->now = t;
		sim_advance(w->s, w->now);
	}
	w->now = until;
}

static inline void world_init(struct world *w, const struct sim_params *p)
{
	struct sim_params d;

	memset(w, 0, sizeof(*w));
	if (!p) {
		sim_default_params(&d);
		p = &d;
	}
	w->s = sim_create(p, on_token, w);
	assert_non_null(w->s);
}

static inline void world_free(struct world *w)
{
	for (int i = 0; i < NREQ; i++)
		free(w->req[i].hashes);
	sim_destroy(w->s);
}

/* Submit request i for prompt text[0..len) at the current time, its hashes
 * as mockllm's routes.c makes them; output blocks up to max_blocks (0: none;
 * a slot cache keeps the output if not 0); held of its prompt blocks
 * brought along (pulled from a prefill instance). */
static inline void submit_held(struct world *w, int i, const char *text, size_t len,
                               uint32_t max_tokens, uint64_t max_blocks, size_t held)
{
	struct rec *rc = &w->req[i];

	memset(&rc->r, 0, sizeof(rc->r));
	free(rc->hashes);
	assert_int_equal(prompt_request_hashes(text, len, max_tokens, max_blocks, &rc->hashes,
	                                       &rc->r.nhashes, &rc->r.nhashes_done),
	                 0);
	rc->r.hashes = rc->hashes;
	rc->r.text = text; /* a slot cache's (sim_params.slots): kept by the caller */
	rc->r.len = len;
	rc->r.keep_output = max_blocks > 0;
	rc->r.nhashes_held = held;
	rc->r.prompt_tokens = (uint32_t)kv_prompt_tokens(len);
	rc->r.max_tokens = max_tokens;
	rc->done = false;
	memset(rc->tok_at, 0, sizeof(rc->tok_at));
	sim_submit(w->s, &rc->r, w->now);
}

static inline void submit_blocks(struct world *w, int i, const char *text, size_t len,
                                 uint32_t max_tokens, uint64_t max_blocks)
{
	submit_held(w, i, text, len, max_tokens, max_blocks, 0);
}

static inline void submit(struct world *w, int i, const char *text, size_t len, uint32_t max_tokens)
{
	submit_blocks(w, i, text, len, max_tokens, 0);
}

static inline char *text_of(size_t len, unsigned seed)
{
	char *t = malloc(len);
	uint64_t x = 0x2545f4914f6cdd1dull * (seed + 1);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		t[i] = (char)('a' + x % 26);
	}
	return t;
}

static inline uint64_t ttft(const struct world *w, int i)
{
	return w->req[i].tok_at[0] - w->req[i].r.t_submit;
}

#endif /* PG_TEST_SIM_FIXTURE_H */
