// SPDX-License-Identifier: MIT
/*
 * The simulated instance (what `mockllm --help` summarises).
 *
 * Tokens. A prompt's text is cut into tokens of KV_TOKEN_BYTES (4) bytes, the
 * usual ~4 characters per token of English BPE; prompt_tokens = ceil(len/4).
 *
 * Prefix cache. vLLM automatic prefix caching, see kvcache.h: 16-token blocks,
 * chained block hashes, cached tokens = 16 x the leading blocks found, the
 * last prompt token always computed, LRU eviction (leaf-first) beyond
 * --kv-capacity-tokens. The lookup happens when a request is scheduled (its
 * prefill starts): prefix_cache_queries += prompt tokens, prefix_cache_hits
 * += cached tokens. Its blocks are inserted when its prefill completes.
 * Generated tokens are cached too, as vLLM's V1 KV cache manager and SGLang's
 * radix cache do: when a request's last token is out, the full blocks of
 * (prompt text + the output text it was sent), hashed as one text
 * (sim_req.nhashes_done, chained after the prompt's blocks; the last token
 * again not counted, its KV never computed), are inserted, so a chat's next
 * turn, which re-sends the reply after the prompt, finds both cached. They
 * are inserted at the end rather than as each block fills (vLLM): simpler,
 * and the same for every request that completes; a cancelled request leaves
 * only its prompt blocks. mockllm --no-cache-output caches prompt blocks
 * only (the model before output caching). The cache's capacity is not
 * shared with the running requests' working KV.
 *
 * Scheduling and prefill: first come, first served. The instance computes
 * prefill_tokens_per_s prompt tokens per second, for one request at a time,
 * in arrival order; only uncached tokens are computed (at least one). This is
 * the fluid limit of vLLM's scheduler with chunked prefill: each step's token
 * budget goes to the oldest unfinished prefill first, and a request leaves
 * the waiting queue (and has its prefix looked up) only when the budget
 * reaches it, so a request queued behind another with the same prefix finds
 * that prefix cached. (Processor sharing, every prefill at rate/k, would make
 * k simultaneous requests all wait for all of them, and none would see the
 * others' blocks.) At most max_num_seqs requests run (prefill, overhead or
 * decode); the others wait: vllm:num_requests_waiting.
 *
 * Time to first token = waiting + prefill + ttft_overhead_ms (scheduling,
 * sampling and the first decode step: load-independent).
 *
 * Decode. After its first token a request produces one token every
 * decode_ms_per_token x (1 + decode_batch_factor x (running - 1)) ms, the
 * running count taken when the interval starts: larger batches are mildly
 * slower per token (memory-bound decode).
 *
 * Interference (max_num_batched_tokens > 0, mockllm --interference): vLLM's
 * chunked prefill runs each step as one batch of the running requests'
 * decode tokens plus a chunk of the oldest unfinished prefill, up to the
 * step's token budget. So while a prefill is in progress, a decode step
 * takes the decode time above plus the chunk's time: chunk = min(budget -
 * d, the prefill's tokens left) at the prefill rate, d the requests
 * decoding (running - 1: the prefilling one takes no decode token), both
 * taken when the interval starts (sim_step_ms). A long prefill thus makes
 * every other running request's inter-token latency spike for its
 * duration, which is what prefill/decode disaggregation removes. The
 * prefill itself keeps its rate (TTFT as without interference): the
 * decode tokens are not taken from its budget. Without a budget (0, the
 * default of sim_default_params and tracesim) prefill and decode do not
 * slow each other down.
 *
 * Blocks brought by a request (sim_req.nhashes_held, a decode instance's
 * request whose prompt KV was pulled from a prefill instance): at
 * admission the request's cached blocks are the more of those the lookup
 * finds and those it brought, so only the rest is prefilled (at least the
 * last token). The lookup's own hits are the prefix cache's hits; the
 * tokens the brought blocks add are external hits, out of the tokens the
 * lookup did not find (external queries), as vLLM counts a KV connector's.
 *
 * Calibration (Llama 3.1 70B on vLLM, the published SageMaker figures): a lone
 * 8,000-token prompt has TTFT 280 ms uncached and 63 ms when all but ~50
 * tokens are cached, so overhead + 8000/rate = 280 ms and
 * overhead + 50/rate ~= 63 ms: rate = 36,600 tokens/s, overhead = 61.5 ms.
 * (A chat prompt's rendering adds 4 tokens of generation prompt, 0.1 ms:
 * the calibration holds for the rendered prompt's token count.)
 * Decode 25 ms/token (40 tokens/s per stream), +0.2% per extra running
 * request (x1.5 at 256). Cache: 100,000 tokens (6,250 blocks), a plausible
 * share of a 70B model's KV memory on an 8-GPU node left to cached prefixes.
 *
 * Time scale (--time-scale K, sim_scale_params): every simulated duration is
 * divided by K, so a benchmark can push K times the request rate through the
 * same model and report latencies x K. Only what is not simulated (loopback,
 * the router, scheduling delays of the host) is magnified by K in those
 * reports; the benchmark says which K it used.
 *
 * Slots (mockllm --slots N, sim_params.slots): the cache is llama.cpp's
 * server's instead, N slots of one sequence each (slots.h). A request
 * takes its slot when it is admitted (the lookup above), the slot holds its
 * prompt when its prefill ends and its output too when it completes (not
 * with --no-cache-output); a request cancelled during its prefill leaves
 * its slot the common prefix only. Each running request holds a slot, so N
 * run at most: the others wait, as llama.cpp defers a task no slot is free
 * for.
 *
 * Speed (mockllm --speed F, sim_set_speed): an instance F times faster than
 * the model its flags describe is sim_scale_params(F) of them, composed with
 * the time scale (K x F in all). sim_set_speed changes it while running,
 * always relative to the parameters the simulation was created with. What is
 * under way keeps its end time: the prefill in progress, an overhead phase,
 * the decode interval already started; the next ones use the new rates. That
 * is a step change at the next prefill, not a re-timing of the current one.
 *
 * What a new request would meet (sim_match, mockllm's /mock/match): its
 * cached tokens by the lookup's own rule, without touching the LRU; and the
 * prefill tokens ahead of it. Those are what is left of the prefill in
 * progress, uncached x (end - now) / (end - start) (at a rate unchanged
 * since it started: uncached - (now - start) x rate), plus, for each waiting
 * request, its uncached tokens as a peek at its submission found them
 * (sim_req.est_uncached). A waiting request may find more cached when it is
 * scheduled (a request queued ahead with the same prefix inserts it first),
 * or less (evicted meanwhile); the estimate is not revised. The predicted
 * TTFT, (queue + own uncached tokens) / rate + overhead, leaves out a wait
 * for a running slot (max_num_seqs) and divides the prefill in progress's
 * remaining tokens by the current rate even if it started at another.
 */
#include <math.h>
#include <stdlib.h>

#include "sim.h"
#include "slots.h"

/* Simulated durations are capped (~31.7 years): an instance slowed to a
 * crawl must not overflow the clock. */
#define SIM_MAX_NS 1e18

struct sim {
	struct sim_params p;    /* in effect: base at speed */
	struct sim_params base; /* as created */
	double speed;
	sim_token_fn fn;
	void *ctx;
	struct kv_cache *kv;
	struct slots *slots;                   /* sim_params.slots: the cache instead of kv */
	struct sim_req *wait_head, *wait_tail; /* FIFO */
	uint32_t waiting;
	uint64_t wait_tokens;       /* est_uncached of the waiting requests */
	struct sim_req *prefilling; /* the one request being prefilled */
	uint32_t running;           /* prefill + overhead + decode */
	struct heap timers;         /* prefill end, first token, next token */
	uint64_t queries, hits, prompt_tokens, gen_tokens;
	uint64_t ext_queries, ext_hits;
};

void sim_default_params(struct sim_params *p)
{
	p->prefill_tokens_per_s = 36600;
	p->decode_ms_per_token = 25;
	p->decode_batch_factor = 0.002;
	p->ttft_overhead_ms = 61.5;
	p->max_num_seqs = 256;
	p->kv_capacity_tokens = 100000;
	p->max_num_batched_tokens = 0;
	p->slots = 0;
}

void sim_scale_params(struct sim_params *p, double k)
{
	if (!(k > 0))
		return;
	p->prefill_tokens_per_s *= k;
	p->decode_ms_per_token /= k;
	p->ttft_overhead_ms /= k;
}

struct sim *sim_create(const struct sim_params *p, sim_token_fn fn, void *ctx)
{
	struct sim *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->p = *p;
	if (s->p.max_num_seqs == 0)
		s->p.max_num_seqs = 1;
	if (!(s->p.prefill_tokens_per_s > 0))
		s->p.prefill_tokens_per_s = 1;
	if (p->slots)
		s->p.max_num_seqs = p->slots; /* a running request holds a slot */
	s->base = s->p;
	s->speed = 1;
	s->fn = fn;
	s->ctx = ctx;
	s->kv = kv_create(p->kv_capacity_tokens);
	s->slots = p->slots ? slots_create(p->slots) : NULL;
	if (!s->kv || (p->slots && !s->slots)) {
		sim_destroy(s);
		return NULL;
	}
	return s;
}

void sim_destroy(struct sim *s)
{
	if (!s)
		return;
	kv_destroy(s->kv);
	slots_destroy(s->slots);
	heap_free(&s->timers);
	free(s);
}

static uint64_t ns_capped(double ns)
{
	return ns < SIM_MAX_NS ? (uint64_t)ns : (uint64_t)SIM_MAX_NS;
}

static uint64_t ms_to_ns(double ms)
{
	return ns_capped(round(ms * 1e6));
}

/* Tokens a prefill computes: the uncached ones, at least the last. */
static uint32_t uncached_of(uint32_t prompt_tokens, uint32_t cached_tokens)
{
	return prompt_tokens > cached_tokens ? prompt_tokens - cached_tokens : 1;
}

/* The timer heap only grows by doubling and holds at most max_num_seqs
 * nodes: failing to grow it means the process is out of memory. */
static void schedule(struct sim *s, struct sim_req *r, uint64_t due)
{
	if (heap_push(&s->timers, &r->timer, due) == -1)
		abort();
}

static void wait_del(struct sim *s, struct sim_req *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		s->wait_head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		s->wait_tail = r->prev;
	r->prev = r->next = NULL;
	s->waiting--;
	s->wait_tokens -= r->est_uncached;
}

double sim_step_ms(const struct sim_params *p, uint32_t running, uint64_t prefill_left)
{
	uint32_t b = running ? running : 1, d = running ? running - 1 : 0;
	double ms = p->decode_ms_per_token * (1.0 + p->decode_batch_factor * (b - 1));
	uint64_t chunk;

	if (!p->max_num_batched_tokens || !prefill_left || d >= p->max_num_batched_tokens)
		return ms;
	chunk = p->max_num_batched_tokens - d;
	if (chunk > prefill_left)
		chunk = prefill_left;
	return ms + (double)chunk / p->prefill_tokens_per_s * 1000;
}

static uint64_t prefill_left(const struct sim_req *r, uint64_t now);

/* The decode interval that starts at t. */
static double decode_interval_ms(const struct sim *s, uint64_t t)
{
	uint64_t left = 0;

	if (s->p.max_num_batched_tokens && s->prefilling)
		left = prefill_left(s->prefilling, t);
	return sim_step_ms(&s->p, s->running, left);
}

/* Leading blocks of r cached for it: the lookup's (peek: without touching
 * the LRU) or those it brought, the more. */
static size_t blocks_of(const struct sim_req *r, size_t found)
{
	size_t held = r->nhashes_held < r->nhashes ? r->nhashes_held : r->nhashes;

	return found > held ? found : held;
}

/* The tokens r would find cached now, nothing touched. */
static uint32_t peek_cached(const struct sim *s, const struct sim_req *r)
{
	uint32_t cached;

	if (s->slots && slots_choose(s->slots, r->text, r->len, &cached) != -1)
		return cached;
	if (s->slots)
		return 0;
	return (uint32_t)(blocks_of(r, kv_peek(s->kv, r->hashes, r->nhashes)) * KV_BLOCK_TOKENS);
}

/* Start the oldest waiting request's prefill at t if the prefill engine is
 * free and a running slot is open. Its prefix is looked up now. */
static void admit(struct sim *s, uint64_t t)
{
	struct sim_req *r = s->wait_head;
	uint32_t uncached;
	size_t found = 0;

	if (!r || s->prefilling || s->running >= s->p.max_num_seqs)
		return;
	wait_del(s, r);
	s->queries += r->prompt_tokens;
	if (s->slots) { /* an idle slot: every running request holds one */
		r->slot = slots_choose(s->slots, r->text, r->len, &r->cached_tokens);
		slots_take(s->slots, r->slot);
		s->hits += r->cached_tokens;
	} else {
		found = kv_lookup(s->kv, r->hashes, r->nhashes);
		r->cached_tokens = (uint32_t)(blocks_of(r, found) * KV_BLOCK_TOKENS);
		s->hits += found * KV_BLOCK_TOKENS;
	}
	if (r->nhashes_held) {
		s->ext_queries += r->prompt_tokens - found * KV_BLOCK_TOKENS;
		s->ext_hits += r->cached_tokens - found * KV_BLOCK_TOKENS;
	}
	uncached = uncached_of(r->prompt_tokens, r->cached_tokens);
	r->state = SIM_PREFILL;
	r->t_prefill_start = t;
	s->prefilling = r;
	s->running++;
	schedule(s, r, t + ns_capped(ceil(uncached / s->p.prefill_tokens_per_s * 1e9)));
}

void sim_submit(struct sim *s, struct sim_req *r, uint64_t now)
{
	r->state = SIM_WAITING;
	r->cached_tokens = 0;
	r->est_uncached = uncached_of(r->prompt_tokens, peek_cached(s, r));
	s->wait_tokens += r->est_uncached;
	r->tokens_out = 0;
	r->t_submit = now;
	r->t_first_token = 0;
	if (r->max_tokens == 0)
		r->max_tokens = 1;
	heap_node_init(&r->timer);
	r->next = NULL;
	r->prev = s->wait_tail;
	if (s->wait_tail)
		s->wait_tail->next = r;
	else
		s->wait_head = r;
	s->wait_tail = r;
	s->waiting++;
	admit(s, now);
}

void sim_cancel(struct sim *s, struct sim_req *r, uint64_t now)
{
	switch (r->state) {
	case SIM_IDLE:
		return;
	case SIM_WAITING:
		wait_del(s, r);
		break;
	case SIM_PREFILL:
		s->prefilling = NULL;
		if (s->slots) /* what lay past the common prefix was overwritten */
			slots_truncate(s->slots, r->slot,
			               (size_t)r->cached_tokens * KV_TOKEN_BYTES);
		/* fall through */
	case SIM_OVERHEAD:
	case SIM_DECODE:
		heap_remove(&s->timers, &r->timer);
		s->running--;
		if (s->slots)
			slots_release(s->slots, r->slot);
		break;
	}
	r->state = SIM_IDLE;
	admit(s, now);
}

/* r's timer is due at t: prefill done, or an output token. */
static void timer_due(struct sim *s, struct sim_req *r, uint64_t t)
{
	bool last;

	if (r->state == SIM_PREFILL) {
		if (s->slots)
			slots_set(s->slots, r->slot, r->text, r->len); /* out of memory: empty */
		else
			kv_insert(s->kv, r->hashes, r->nhashes);
		s->prompt_tokens += r->prompt_tokens;
		r->state = SIM_OVERHEAD;
		s->prefilling = NULL;
		schedule(s, r, t + ms_to_ns(s->p.ttft_overhead_ms));
		admit(s, t);
		return;
	}
	if (r->state == SIM_OVERHEAD) {
		r->state = SIM_DECODE;
		r->t_first_token = t;
	}
	r->tokens_out++;
	s->gen_tokens++;
	last = r->tokens_out >= r->max_tokens;
	if (last) {
		if (s->slots && r->keep_output)
			slots_append_output(s->slots, r->slot, r->tokens_out);
		if (s->slots)
			slots_release(s->slots, r->slot);
		else if (r->nhashes_done > r->nhashes)
			kv_insert(s->kv, r->hashes, r->nhashes_done);
		r->state = SIM_IDLE;
		s->running--;
	} else {
		schedule(s, r, t + ms_to_ns(decode_interval_ms(s, t)));
	}
	s->fn(s->ctx, r, last);
	if (last)
		admit(s, t);
}

void sim_advance(struct sim *s, uint64_t now)
{
	struct heap_node *n;

	while ((n = heap_pop_due(&s->timers, now)))
		timer_due(s, container_of(n, struct sim_req, timer), n->due);
}

uint64_t sim_next_event(const struct sim *s)
{
	struct heap_node *top = heap_top(&s->timers);

	return top ? top->due : UINT64_MAX;
}

void sim_get_stats(const struct sim *s, struct sim_stats *st)
{
	st->running = s->running;
	st->waiting = s->waiting;
	st->prefix_queries = s->queries;
	st->prefix_hits = s->hits;
	st->prompt_tokens = s->prompt_tokens;
	st->generation_tokens = s->gen_tokens;
	st->external_queries = s->ext_queries;
	st->external_hits = s->ext_hits;
	st->kv_usage = s->p.kv_capacity_tokens ? (double)kv_blocks_held(s->kv) * KV_BLOCK_TOKENS /
	                                             (double)s->p.kv_capacity_tokens
	                                       : 0;
	if (s->slots)
		st->kv_usage = (double)slots_held(s->slots) / s->slots->n;
}

/* Prefill tokens r (being prefilled) has left at now, rounded up. */
static uint64_t prefill_left(const struct sim_req *r, uint64_t now)
{
	uint64_t end = r->timer.due, start = r->t_prefill_start;

	if (now >= end || end <= start)
		return 0;
	return (uint64_t)ceil(uncached_of(r->prompt_tokens, r->cached_tokens) *
	                      ((double)(end - now) / (double)(end - start)));
}

void sim_match(const struct sim *s, const uint64_t *hashes, size_t n, uint32_t prompt_tokens,
               uint64_t now, struct sim_match *out)
{
	sim_match_text(s, NULL, 0, hashes, n, prompt_tokens, now, out);
}

void sim_match_text(const struct sim *s, const char *text, size_t len, const uint64_t *hashes,
                    size_t n, uint32_t prompt_tokens, uint64_t now, struct sim_match *out)
{
	struct sim_req r = {.hashes = hashes, .nhashes = n, .text = text, .len = len};
	uint32_t cached = peek_cached(s, &r);

	out->prompt_tokens = prompt_tokens;
	out->cached_tokens = cached;
	out->waiting = s->waiting;
	out->running = s->running;
	out->queue_tokens = s->wait_tokens + (s->prefilling ? prefill_left(s->prefilling, now) : 0);
	out->prefill_tokens_per_s = s->p.prefill_tokens_per_s;
	out->ttft_overhead_ms = s->p.ttft_overhead_ms;
	out->predicted_ttft_ms = (double)(out->queue_tokens + uncached_of(prompt_tokens, cached)) /
	                             s->p.prefill_tokens_per_s * 1000 +
	                         s->p.ttft_overhead_ms;
}

void sim_set_speed(struct sim *s, double f)
{
	if (!(f > 0))
		return;
	s->p = s->base;
	sim_scale_params(&s->p, f);
	s->speed = f;
}

double sim_speed(const struct sim *s)
{
	return s->speed;
}

const struct sim_params *sim_params_now(const struct sim *s)
{
	return &s->p;
}

void sim_bypass(struct sim *s, struct sim_req *r, uint32_t gen_tokens)
{
	if (s->slots) { /* no slot idle: computed elsewhere, as if uncached */
		int i = slots_choose(s->slots, r->text, r->len, &r->cached_tokens);

		if (i != -1) {
			slots_take(s->slots, i);
			slots_set(s->slots, i, r->text, r->len);
			slots_release(s->slots, i);
		}
	} else {
		r->cached_tokens =
		    (uint32_t)(kv_lookup(s->kv, r->hashes, r->nhashes) * KV_BLOCK_TOKENS);
		kv_insert(s->kv, r->hashes, r->nhashes);
	}
	s->queries += r->prompt_tokens;
	s->hits += r->cached_tokens;
	s->prompt_tokens += r->prompt_tokens;
	s->gen_tokens += gen_tokens;
}
