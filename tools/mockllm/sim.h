/* SPDX-License-Identifier: MIT */
/*
 * Timing model of one simulated vLLM instance, pure: the caller supplies the
 * time (ns) and is called back when a request produces an output token. The
 * model itself is described at the top of sim.c.
 */
#ifndef MOCKLLM_SIM_H
#define MOCKLLM_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "heap.h"
#include "kvcache.h"

struct sim_params {
	double prefill_tokens_per_s; /* instance-wide prefill throughput */
	double decode_ms_per_token;  /* per-token decode time of a lone request */
	double decode_batch_factor;  /* +this fraction per extra running request */
	double ttft_overhead_ms;     /* fixed part of every TTFT */
	uint32_t max_num_seqs;       /* running requests at most; others wait */
	uint64_t kv_capacity_tokens; /* prefix cache size */
	/* Chunked-prefill interference (sim.c): the token budget of a step,
	 * vLLM's --max-num-batched-tokens. 0: prefill chunks do not lengthen
	 * the decode steps beside them (the model before interference). */
	uint32_t max_num_batched_tokens;
	/* > 0: the cache is per sequence, so many slots of llama.cpp's server
	 * (slots.h) instead of the paged one; each running request holds a
	 * slot, so this many run at most (max_num_seqs is not used). */
	uint32_t slots;
};

/* The calibrated defaults (see sim.c). */
void sim_default_params(struct sim_params *p);
/*
 * Run the instance k times faster (k > 0): prefill throughput x k, decode
 * time and TTFT overhead / k. Every simulated duration shrinks by k, so a
 * latency measured against the scaled instance, times k, is the unscaled
 * model's (plus k x whatever the network path added). Cache, batching and
 * max_num_seqs are unchanged.
 */
void sim_scale_params(struct sim_params *p, double k);

/*
 * The decode step (ms) that starts when `running` requests run and the
 * prefill in progress has prefill_left tokens left (0: none): the batch's
 * decode time, plus, with a token budget, the time of the prefill chunk
 * sharing the step, min(budget - decoding requests, prefill_left) tokens
 * at the prefill rate. Pure; what the simulation paces tokens by.
 */
double sim_step_ms(const struct sim_params *p, uint32_t running, uint64_t prefill_left);

enum sim_state {
	SIM_IDLE = 0, /* not submitted, or finished / cancelled */
	SIM_WAITING,  /* queued: another prefill in progress, or max_num_seqs */
	SIM_PREFILL,  /* computing its uncached prompt tokens (one at a time) */
	SIM_OVERHEAD, /* prefill done, first token after the fixed overhead */
	SIM_DECODE,   /* first token out; one more every decode interval */
};

struct sim_req {
	/* Set by the caller before sim_submit; hashes must stay valid until the
	 * request is finished or cancelled. */
	const uint64_t *hashes; /* kv_block_hashes() of the prompt ... */
	size_t nhashes;
	/* ... and hashes[0..nhashes_done), if more, are those of the prompt
	 * followed by the whole output (kv_hasher): cached when the last token
	 * is out. 0 (or nhashes): output blocks are not cached. */
	size_t nhashes_done;
	/* hashes[0..nhashes_held) (<= nhashes): blocks the request brings,
	 * their KV computed elsewhere (pulled from a prefill instance): cached
	 * for it whatever the lookup finds. 0 for a plain request. */
	size_t nhashes_held;
	uint32_t prompt_tokens;
	uint32_t max_tokens; /* output tokens to produce, >= 1 */
	/* Slots (sim_params.slots): the prompt's text, what a slot's common
	 * prefix is taken with (valid until the request is finished or
	 * cancelled), and whether its output stays in the slot after it. */
	const char *text;
	size_t len;
	bool keep_output;
	/* Set by the simulation. */
	enum sim_state state;
	uint32_t cached_tokens; /* known once the request leaves SIM_WAITING */
	uint32_t est_uncached;  /* at submission: tokens it would compute then */
	uint32_t tokens_out;    /* output tokens produced so far */
	uint64_t t_submit, t_first_token;
	/* private */
	int slot;                 /* slots: the one it holds, once admitted */
	struct heap_node timer;   /* SIM_PREFILL / SIM_OVERHEAD / SIM_DECODE */
	uint64_t t_prefill_start; /* SIM_PREFILL: its prefill ends at timer.due */
	struct sim_req *prev, *next;
};

/*
 * Called for each output token, r->tokens_out already counting it. When last
 * is true the simulation has already forgotten r (state SIM_IDLE): the
 * callback may free it. Otherwise it may sim_cancel() it.
 */
typedef void (*sim_token_fn)(void *ctx, struct sim_req *r, bool last);

struct sim_stats {
	uint32_t running, waiting;
	uint64_t prefix_queries, prefix_hits; /* tokens */
	/* requests that brought blocks: tokens not found locally, and those
	 * of them the brought blocks covered (vLLM's external prefix cache) */
	uint64_t external_queries, external_hits;
	uint64_t prompt_tokens, generation_tokens;
	double kv_usage; /* cached tokens held / capacity, 0..1 (slots: slots holding a sequence /
	                    slots) */
};

struct sim;

/* NULL on allocation failure (or slots past SLOTS_MAX). */
struct sim *sim_create(const struct sim_params *p, sim_token_fn fn, void *ctx);
void sim_destroy(struct sim *s);

/* Start r at now (r->state must be SIM_IDLE). It may be admitted at once. */
void sim_submit(struct sim *s, struct sim_req *r, uint64_t now);
/* Forget r (client gone) at now; frees its slot. No callback follows. */
void sim_cancel(struct sim *s, struct sim_req *r, uint64_t now);
/* Run every event due at or before now, in time order. */
void sim_advance(struct sim *s, uint64_t now);
/* When sim_advance next has something to do; UINT64_MAX if never. */
uint64_t sim_next_event(const struct sim *s);

void sim_get_stats(const struct sim *s, struct sim_stats *st);

/* What a request would meet if submitted now (mockllm's /mock/match). */
struct sim_match {
	uint32_t prompt_tokens;
	uint32_t cached_tokens; /* what its prefill would find if it started now */
	uint32_t waiting, running;
	/* Prefill tokens ahead of it: what is left of the prefill in progress,
	 * plus each waiting request's est_uncached. */
	uint64_t queue_tokens;
	double prefill_tokens_per_s, ttft_overhead_ms; /* in effect now */
	/* (queue_tokens + its uncached tokens) / rate + overhead */
	double predicted_ttft_ms;
};

/*
 * Answer for a prompt of prompt_tokens tokens whose kv_block_hashes() are
 * hashes[0..n), s advanced to now. Nothing changes: the cache is only
 * peeked (kv_peek), so asking does not alter what is evicted next.
 */
void sim_match(const struct sim *s, const uint64_t *hashes, size_t n, uint32_t prompt_tokens,
               uint64_t now, struct sim_match *out);
/* The same for the prompt text[0..len) too: what a slot cache
 * (sim_params.slots) compares (sim_match: as an empty prompt's). */
void sim_match_text(const struct sim *s, const char *text, size_t len, const uint64_t *hashes,
                    size_t n, uint32_t prompt_tokens, uint64_t now, struct sim_match *out);

/*
 * Run at f times the speed of the parameters s was created with (f > 0;
 * anything else is ignored): sim_scale_params(f) of those, not of the
 * current ones. Prefills, overhead phases and decode intervals that start
 * from now on use the new parameters; those already under way keep the end
 * time they were given.
 */
void sim_set_speed(struct sim *s, double f);
double sim_speed(const struct sim *s);
/* The parameters in effect (those s was created with, at sim_speed()). */
const struct sim_params *sim_params_now(const struct sim *s);
/*
 * A request answered without the timing model (test knobs): its cache lookup
 * and insertion (of its prompt blocks only) happen at once and it counts in
 * the metrics as if it had produced gen_tokens tokens. Sets
 * r->cached_tokens; r is not kept.
 */
void sim_bypass(struct sim *s, struct sim_req *r, uint32_t gen_tokens);

#endif /* MOCKLLM_SIM_H */
