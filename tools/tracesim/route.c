// SPDX-License-Identifier: MIT
/*
 * tracesim: each request as the gateway sees it, routed by the strategy
 * under test, and its first token learned from (tracesim.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "control/control.h"
#include "lib/scrape.h"
#include "router/capacity.h"
#include "members/health.h"
#include "lib/names.h"
#include "router/route.h"
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

/* The reference rules, beside prefixgate's strategies (lib/names.h). */
static bool is_ref(const char *s)
{
	return !strcmp(s, "ref-cache-first") || !strcmp(s, "ref-predicted-ttft");
}

bool ts_strategy_known(const char *s)
{
	enum pg_strategy x;

	return is_ref(s) || !pg_strategy_parse(s, strlen(s), &x);
}

/* The strategy under test's choice at gateway g, through its routing
 * core as the gateway's workers call it (pg_route_key) with the key and
 * blocks the request's text would give; *held_out: what it believed the
 * chosen one holds, in tokens. */
static uint16_t choose(struct ts_world *w, struct ts_gw *g, const struct ts_rec *r,
                       struct pg_key_blocks *kb, struct ts_job *j)
{
	const uint64_t k = prefix_hash(r, w->o.prefix_length / PG_CA_CHARS_PER_TOKEN);
	struct pg_key key = {
	    .hash = k, .anchor = k, .tokens = r->input, .source = PG_KEY_SRC_PROMPT};
	uint16_t b;

	if (is_ref(w->o.strategy))
		return choose_ref(w, r, !strcmp(w->o.strategy, "ref-cache-first"));
	kb->anchor = k;
	kb->anchor_len = w->o.prefix_length;
	kb->whole = mix(prefix_hash(r, r->input), 3);
	b = pg_route_key(&g->r, 0, 0, &key, kb, NULL, next_rnd(w), 0, PG_PRIO_STANDARD, &j->ch);
	j->anchor = key.anchor;
	w->decisions[j->ch.decision]++;
	return b;
}

uint32_t ts_work_on(uint32_t tokens, const struct pg_choice *ch, uint16_t b)
{
	const uint32_t held = ch->est[0].id == b ? ch->est[0].matched : 0;

	return tokens > held ? tokens - held : 1;
}

void ts_dispatch(struct ts_world *w, const struct ts_rec *r)
{
	static struct pg_key_blocks kb;
	struct ts_job *j = calloc(1, sizeof(*j));
	/* the gateway it reaches: at random, unless there is one */
	const unsigned gi = w->o.gateways > 1 ? (unsigned)(next_rnd(w) % w->o.gateways) : 0;
	struct ts_gw *g = &w->gw[gi];
	struct pg_backend *x;
	uint16_t b;

	if (!j)
		abort();
	ts_fleet_deliver(w);
	ts_tick(w);
	kb.n = gw_chain(r, kb.chain);
	b = choose(w, g, r, &kb, j);
	if (!b)
		abort(); /* every simulated instance is always usable */
	x = &g->be[b];
	j->rec = r;
	j->b = b;
	j->g = (uint8_t)gi;
	j->own = ts_work_on(r->input, &j->ch, b);
	pg_inflight_take(&g->r, b, j->ch.decision);
	pg_load_take(&g->r, b, j->own, &j->lt, w->now);
	j->sr.nhashes = kv_chain(r, &j->kv);
	j->sr.hashes = j->kv;
	j->sr.prompt_tokens = r->input;
	j->sr.max_tokens = r->output ? r->output : 1;
	if (w->o.no_stream) { /* its ticket, for the ticks (pg_load_due) */
		j->next = w->live;
		if (w->live)
			w->live->prev = j;
		w->live = j;
	}
	ts_fleet_changed(w, gi, b);
	w->sent[b]++;
	w->log[w->nlog++] = (struct ts_sent){w->now, b, r->input};
	if ((double)x->prefill_tokens > w->max_queue)
		w->max_queue = (double)x->prefill_tokens;
	sim_submit(w->inst[b], &j->sr, w->now);
}

/* Gateway g's health thread reads instance i's /metrics: what it reports
 * of its queue, stored as the gateway stores it; g's workers then check
 * their answers there against it (proxy/exchange.c pg_proxy_reports: at
 * once here, within PG_REPORTS_PASS_MS there). */
static void scrape(struct ts_world *w, struct ts_gw *g, unsigned i, uint64_t now_ms)
{
	struct sim_stats st;
	struct pg_scrape s;

	sim_get_stats(w->inst[i], &st);
	pg_scrape_init(&s);
	s.value[PG_SCRAPE_WAITING] = st.waiting;
	s.value[PG_SCRAPE_RUNNING] = st.running;
	s.seen = 1u << PG_SCRAPE_WAITING | 1u << PG_SCRAPE_RUNNING;
	pg_health_store_scrape(&g->be[i], &s, g->be[i].takes, now_ms,
	                       now_ms + 3ull * w->o.scrape_ms);
	g->scraped_ms[i] = now_ms;
	for (struct ts_job *j = w->live; j; j = j->next)
		if (j->g == g->id && j->b == i && pg_load_due(&g->r, &j->lt, now_ms))
			ts_fleet_changed(w, j->g, j->b);
}

/* The gateways' health threads (members/health.c): every instance each
 * --scrape-interval, and one whose queue is blind (router/work.h
 * pg_work_blind) pg_scrape_blind_ms after its last read. */
static void scrapes(struct ts_world *w)
{
	const unsigned step = pg_scrape_blind_ms(w->o.scrape_ms);

	while (w->o.scrape_ms && w->now >= w->scrape) {
		const uint64_t ms = w->scrape / 1000000;
		const bool round = w->scrape >= w->round;

		for (unsigned k = 0; k < w->o.gateways; k++)
			for (unsigned i = 1; i <= w->o.n; i++)
				if (round || (pg_work_blind(&w->gw[k].be[i]) &&
				              ms >= w->gw[k].scraped_ms[i] + step))
					scrape(w, &w->gw[k], i, ms);
		if (round)
			w->round += (uint64_t)w->o.scrape_ms * 1000000;
		w->scrape += (uint64_t)step * 1000000;
	}
}

void ts_tick(struct ts_world *w)
{
	scrapes(w);
	while (w->now >= w->tick) {
		for (unsigned g = 0; g < w->o.gateways; g++)
			pg_router_tick(&w->gw[g].r, w->tick / 1000000);
		/* the workers' tick: answers past their predicted first token on
		 * a measured speed leave the queue */
		for (struct ts_job *j = w->live; j; j = j->next)
			if (pg_load_due(&w->gw[j->g].r, &j->lt, w->tick / 1000000))
				ts_fleet_changed(w, j->g, j->b);
		w->tick += (uint64_t)PG_CONTROL_TICK_MS * 1000000;
	}
}

/* An answer that did not stream is whole: its head, its usage. */
static void answered(struct ts_world *w, struct ts_job *j)
{
	struct ts_gw *g = &w->gw[j->g];

	pg_load_answered(&g->r, &j->lt, w->now);
	if (j->prev)
		j->prev->next = j->next;
	else
		w->live = j->next;
	if (j->next)
		j->next->prev = j->prev;
}

void ts_on_token(void *ctx, struct sim_req *sr, bool last)
{
	struct ts_world *w = ctx;
	struct ts_job *j = (struct ts_job *)sr;
	struct ts_gw *g = &w->gw[j->g];

	ts_fleet_deliver(w);
	ts_tick(w);
	if (!j->first) {
		const double ttft = (double)(w->now - j->lt.w.sent_ns) / 1e6;

		j->first = true;
		w->ttft[w->nttft++] = ttft;
		w->err_abs += fabs(ttft - j->lt.w.pred_ms);
		w->err_sum += ttft - j->lt.w.pred_ms;
		if (w->dump)
			fprintf(w->dump, "%zu %u %u %.1f %.1f %u %u %.0f\n",
			        (size_t)(j->rec - w->first), j->rec->input, j->b, ttft,
			        j->lt.w.pred_ms, j->rec->input - j->own, sr->cached_tokens,
			        j->lt.w.ahead);
		if (!w->o.no_stream) /* else the gateway sees no first token */
			pg_load_first(&g->r, j->g, NULL, &j->lt, w->now);
		/* its usage: what the instance had cached of it */
		pg_capacity_answer(&g->r, &j->ch, PG_CC_PAGED,
		                   pg_cc_verdict(j->ch.matched, j->ch.shared, j->rec->input,
		                                 sr->cached_tokens, j->rec->input));
		ts_fleet_changed(w, j->g, j->b);
	}
	if (last) {
		if (w->o.no_stream)
			answered(w, j);
		pg_inflight_release(&g->r, j->b);
		ts_fleet_changed(w, j->g, j->b);
		free(j->kv);
		free(j);
	}
}
