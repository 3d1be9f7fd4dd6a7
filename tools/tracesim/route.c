// SPDX-License-Identifier: MIT
/*
 * tracesim: each request as the gateway sees it, routed by the strategy
 * under test, and its first token learned from (tracesim.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/balancer.h"
#include "lib/cachechoice.h"
#include "tracesim.h"

/* Chain step of the synthetic block hashes. */
static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return h ? h : 1;
}

static uint64_t next_rnd(struct ts_world *w)
{
	uint64_t z = (w->rnd += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The prompt's first `tokens` tokens, named (PREFIX_AWARE's key, and
 * cache_aware's anchor of a /v1/completions prompt). */
static uint64_t prefix_hash(const struct ts_rec *r, uint32_t tokens)
{
	uint64_t h = 7;
	uint32_t full, rem;

	if (tokens > r->input)
		tokens = r->input;
	full = tokens / TS_BLOCK_TOKENS;
	rem = tokens % TS_BLOCK_TOKENS;
	for (uint32_t i = 0; i < full && i < r->nids; i++)
		h = mix(h, r->ids[i]);
	if (rem && full < r->nids)
		h = mix(h, ((uint64_t)rem << 32) | r->ids[full]);
	return h;
}

/* The gateway's block chain: PG_CA_BLOCK bytes a block, 4 a token. */
#define TOK_PER_GBLOCK (PG_CA_BLOCK / PG_CA_CHARS_PER_TOKEN)
static uint32_t gw_chain(const struct ts_rec *r, uint64_t *chain)
{
	const uint32_t per = TS_BLOCK_TOKENS / TOK_PER_GBLOCK;
	uint32_t n = r->input / TOK_PER_GBLOCK;
	uint64_t h = 0;

	if (n > PG_CA_MAX_BLOCKS)
		n = PG_CA_MAX_BLOCKS;
	for (uint32_t g = 0; g < n; g++) {
		if (g / per >= r->nids)
			return g;
		h = mix(h, (uint64_t)r->ids[g / per] * per + g % per);
		chain[g] = h;
	}
	return n;
}

/* The instance's block hashes (16-token blocks; the last token is never
 * cached), malloc'd into *out. */
static size_t kv_chain(const struct ts_rec *r, uint64_t **out)
{
	const uint32_t per = TS_BLOCK_TOKENS / KV_BLOCK_TOKENS;
	size_t n = r->input ? (r->input - 1) / KV_BLOCK_TOKENS : 0;
	uint64_t *kv = malloc((n ? n : 1) * sizeof(*kv)), h = 0;

	if (!kv)
		abort();
	for (size_t k = 0; k < n; k++) {
		if (k / per >= r->nids) {
			n = k;
			break;
		}
		h = mix(h ^ 0x5555, (uint64_t)r->ids[k / per] * per + k % per);
		kv[k] = h;
	}
	*out = kv;
	return n;
}

/* pg_ca_look's holder rule: gateway g's usable members. */
struct ts_look {
	const struct ts_world *w;
	const struct ts_gw *g;
};

static bool usable(uint16_t id, void *arg)
{
	const struct ts_look *l = arg;

	return id && id <= l->w->o.n && pg_backend_usable(&l->g->be[id], l->w->now / 1000000);
}

/* The reference rules: each instance's real cache and queue. predicted
 * TTFT: the lowest. cache-first: the instance holding the longest cached
 * prefix (matches within a block of it tie, the quickest wins), passed over
 * only when its queue is more than 4 times every other's plus a second,
 * for the quickest then (refrouter.py's defaults). */
static uint16_t choose_ref(struct ts_world *w, const struct ts_rec *r, bool cache_first)
{
	struct sim_match m[TS_MAX_INSTANCES + 1];
	uint64_t *kv;
	size_t nkv = kv_chain(r, &kv);
	uint16_t best = 0, h = 0;
	uint32_t longest = 0;

	for (uint16_t i = 1; i <= w->o.n; i++) {
		sim_match(w->inst[i], kv, nkv, r->input, w->now, &m[i]);
		if (m[i].cached_tokens > longest)
			longest = m[i].cached_tokens;
		if (!best || m[i].predicted_ttft_ms < m[best].predicted_ttft_ms ||
		    (m[i].predicted_ttft_ms == m[best].predicted_ttft_ms &&
		     m[i].queue_tokens < m[best].queue_tokens))
			best = i;
	}
	free(kv);
	if (!cache_first)
		return best;
	for (uint16_t i = 1; i <= w->o.n; i++)
		if (m[i].cached_tokens + TS_BLOCK_TOKENS >= longest &&
		    (!h || m[i].predicted_ttft_ms < m[h].predicted_ttft_ms))
			h = i;
	for (uint16_t i = 1; i <= w->o.n; i++) {
		double qh = m[h].queue_tokens / m[h].prefill_tokens_per_s,
		       qi = m[i].queue_tokens / m[i].prefill_tokens_per_s;

		if (i != h && !(qh > 4 * qi + 1.0))
			return h;
	}
	return w->o.n > 1 ? best : h;
}

static const struct {
	const char *name;
	int strategy; /* enum pg_strategy, or -1: a reference rule */
} strategies[] = {
    {"random", PG_STRATEGY_RANDOM},
    {"least_outstanding_requests", PG_STRATEGY_LEAST_OUTSTANDING},
    {"prefix_aware", PG_STRATEGY_PREFIX_AWARE},
    {"cache_aware", PG_STRATEGY_CACHE_AWARE},
    {"ref-cache-first", -1},
    {"ref-predicted-ttft", -1},
};

bool ts_strategy_known(const char *s)
{
	for (size_t i = 0; i < sizeof(strategies) / sizeof(strategies[0]); i++)
		if (!strcmp(s, strategies[i].name))
			return true;
	return false;
}

/* The strategy under test's choice at gateway g; *held_out: what it
 * believed the chosen one holds, in tokens. */
static uint16_t choose(struct ts_world *w, struct ts_gw *g, const struct ts_rec *r,
                       const uint64_t *chain, uint32_t nb, uint32_t *held_out)
{
	const char *s = w->o.strategy;
	const uint64_t key = prefix_hash(r, w->o.prefix_length / PG_CA_CHARS_PER_TOKEN);
	uint16_t cand[PG_RING_CANDIDATES], b;
	struct pg_choice ch = {0};
	struct pg_ca_look look;

	*held_out = 0;
	if (!strncmp(s, "ref-", 4))
		return choose_ref(w, r, !strcmp(s, "ref-cache-first"));
	if (!strcmp(s, "cache_aware")) {
		struct pg_ca_req rq = {.prompt_tokens = r->input,
		                       .choices = 1,
		                       .work_base = w->o.lambda,
		                       .work_queued = w->o.kappa};
		struct ts_look l = {w, g};
		size_t ncand;

		pg_ca_look(&g->ix, chain, nb, key, w->o.prefix_length,
		           mix(prefix_hash(r, r->input), 3), false, w->o.n, usable, &l, &look);
		pg_ca_req_from(&rq, &look);
		ncand = pg_ring_candidates(w->ring, look.anchor, cand);
		b = pg_balance_cached(g->be, w->o.n, cand, ncand, &rq, NULL, w->now / 1000000,
		                      false, &ch);
		*held_out = ch.matched;
	} else {
		struct pg_route_cfg rc = {.concurrency_threshold = w->o.threshold,
		                          .prefix_length = w->o.prefix_length};

		for (size_t i = 0; i < sizeof(strategies) / sizeof(strategies[0]); i++)
			if (!strcmp(s, strategies[i].name))
				rc.strategy = (enum pg_strategy)strategies[i].strategy;
		b = pg_balance(&rc, g->be, w->o.n, cand, pg_ring_candidates(w->ring, key, cand),
		               NULL, w->now / 1000000, next_rnd(w), false, &ch);
	}
	w->decisions[ch.decision]++;
	return b;
}

void ts_dispatch(struct ts_world *w, const struct ts_rec *r)
{
	static uint64_t chain[PG_CA_MAX_BLOCKS];
	const uint32_t nb = gw_chain(r, chain);
	struct ts_job *j = calloc(1, sizeof(*j));
	/* the gateway it reaches: at random, unless there is one */
	const unsigned gi = w->o.gateways > 1 ? (unsigned)(next_rnd(w) % w->o.gateways) : 0;
	struct ts_gw *g = &w->gw[gi];
	struct pg_backend *x;
	struct pg_speed sp;
	uint32_t held;
	uint16_t b;

	if (!j)
		abort();
	ts_fleet_deliver(w);
	pg_ca_tick(&g->ix);
	b = choose(w, g, r, chain, nb, &held);
	if (!b)
		abort(); /* every simulated instance is always usable */
	x = &g->be[b];
	pg_ca_record(&g->ix, chain, nb, b);
	ts_fleet_decided(w, gi, chain, nb, b);
	j->rec = r;
	j->b = b;
	j->g = (uint8_t)gi;
	j->own = r->input > held ? r->input - held : 1;
	pg_work_speed(x, &sp);
	pg_work_take(x, &j->wt, j->own, &sp, w->now);
	j->sr.nhashes = kv_chain(r, &j->kv);
	j->sr.hashes = j->kv;
	j->sr.prompt_tokens = r->input;
	j->sr.max_tokens = r->output ? r->output : 1;
	x->in_flight++;
	ts_fleet_changed(w, gi, b);
	w->sent[b]++;
	w->log[w->nlog++] = (struct ts_sent){w->now, b, r->input};
	if ((double)x->prefill_tokens > w->max_queue)
		w->max_queue = (double)x->prefill_tokens;
	sim_submit(w->inst[b], &j->sr, w->now);
}

/* A backend's fit published as the gateway publishes it (state/load.c:
 * from PG_FIT_OWN_MIN first tokens on), and the members with fewer taken at
 * the median speed of the others (pg_load_share_speeds, each control
 * tick). */
void ts_publish(struct ts_world *w, struct ts_gw *g, uint16_t b)
{
	const struct pg_fit *f = &g->fit[b];
	struct pg_backend *x = &g->be[b];
	struct pg_speed med;

	x->fit_obs = (uint32_t)f->n;
	if (f->n >= PG_FIT_OWN_MIN)
		pg_work_publish_speed(x, &f->cur);
	if (!pg_work_median_speed(g->be, w->o.n, 0, &med))
		return;
	for (unsigned i = 1; i <= w->o.n; i++)
		if (g->be[i].fit_obs < PG_FIT_OWN_MIN)
			pg_work_publish_speed(&g->be[i], &med);
}

void ts_on_token(void *ctx, struct sim_req *sr, bool last)
{
	struct ts_world *w = ctx;
	struct ts_job *j = (struct ts_job *)sr;
	struct ts_gw *g = &w->gw[j->g];
	struct pg_backend *x = &g->be[j->b];

	ts_fleet_deliver(w);
	if (!j->first) {
		struct pg_fit_obs obs;
		struct pg_speed sp;
		double ttft;

		j->first = true;

		pg_work_speed(x, &sp);
		ttft = pg_work_first(x, &j->wt, sp.overhead_ms, w->now);
		w->ttft[w->nttft++] = ttft;
		w->err_abs += fabs(ttft - j->wt.pred_ms);
		w->err_sum += ttft - j->wt.pred_ms;
		if (w->dump)
			fprintf(w->dump, "%zu %u %u %.1f %.1f %u %u %.0f\n",
			        (size_t)(j->rec - w->first), j->rec->input, j->b, ttft,
			        j->wt.pred_ms, j->rec->input - j->own, sr->cached_tokens,
			        j->wt.ahead);
		if (pg_work_learn(&g->fit[j->b], x, &j->wt, w->now, &obs))
			ts_fleet_learned(w, j->g, j->b, &obs);
		ts_publish(w, g, j->b);
		ts_fleet_changed(w, j->g, j->b);
	}
	if (last) {
		x->in_flight--;
		ts_fleet_changed(w, j->g, j->b);
		free(j->kv);
		free(j);
	}
}
