// SPDX-License-Identifier: MIT
/*
 * tracesim: the replay loop, the gateway's view, the report (tracesim.h).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mockllm/sim.h"
#include "lib/balancer.h"
#include "lib/cachechoice.h"
#include "lib/cacheidx.h"
#include "lib/ring.h"
#include "lib/work.h"
#include "tracesim.h"

#define MAXI 64

struct opts {
	const char *trace, *strategy;
	double load, cache_frac, lambda, kappa;
	bool shared, verbose;
	unsigned slow_inst; /* --slow I:F:AT: instance I to F x speed at AT (fraction of the run) */
	double slow_factor, slow_at;
	size_t requests;
	const char *dump;
	unsigned n, prefix_length, threshold;
	double speed[MAXI + 1];
};

struct job {
	struct sim_req sr; /* first member: the sim's callbacks get it */
	const struct ts_rec *rec;
	uint64_t *kv;
	uint16_t b;
	uint32_t own;
	struct pg_work_ticket wt;
	bool first;
};

/* One dispatch, for shares over time. */
struct logrec {
	uint64_t t;
	uint16_t b;
	uint32_t tokens;
};
#define MAX_LOG (1u << 20)

struct world {
	struct opts o;
	struct sim *inst[MAXI + 1];
	struct pg_backend *be;
	struct pg_ca_index ix;
	struct pg_ring *ring;
	struct pg_fit fit[MAXI + 1];
	uint64_t seed[MAXI + 1];
	uint64_t now, rnd;
	__u64 requests;
	/* results */
	double *ttft;
	size_t nttft;
	uint64_t sent[MAXI + 1], decisions[PG_DEC_MAX], dec_by[MAXI + 1][PG_DEC_MAX];
	double abs_err, sum_err, max_queue;
	struct logrec *log;
	size_t nlog;
};

static struct world g_w;
static const struct ts_rec *g_first;
static FILE *g_dump;

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return h ? h : 1;
}

static uint64_t next_rnd(struct world *w)
{
	uint64_t z = (w->rnd += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The key text's first `tokens` tokens, hashed (PREFIX_AWARE's key, and
 * cache_aware's anchor of a completions prompt). */
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

/* The gateway's chain of PG_CA_BLOCK-byte blocks (4 bytes a token). */
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

/* mockllm's block hashes (16-token blocks; the last token never cached). */
static size_t kv_chain(const struct ts_rec *r, uint64_t **out)
{
	const uint32_t per = TS_BLOCK_TOKENS / KV_BLOCK_TOKENS;
	size_t n = r->input ? (r->input - 1) / KV_BLOCK_TOKENS : 0;
	uint64_t *kv = malloc((n ? n : 1) * sizeof(*kv)), h = 0;

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

static bool usable(uint16_t id, void *arg)
{
	struct world *w = arg;

	return id && id <= w->o.n && pg_backend_usable(&w->be[id], w->now / 1000000);
}

struct excluding {
	struct world *w;
	bool ex[MAXI + 1];
};

static bool usable_not_ex(uint16_t id, void *arg)
{
	struct excluding *x = arg;

	return usable(id, x->w) && !x->ex[id];
}

/* What the index believes each backend holds of chain[0..n), in tokens:
 * the longest match and its holders, then the longest among the others,
 * and so on. */
static void matches(struct world *w, const uint64_t *chain, uint32_t n, uint32_t *held)
{
	struct excluding x = {.w = w};

	memset(held, 0, sizeof(*held) * (w->o.n + 1));
	for (int tier = 0; tier < 4; tier++) {
		struct pg_ca_match m;

		pg_ca_match(&w->ix, chain, n, usable_not_ex, &x, &m);
		if (!m.blocks)
			break;
		for (unsigned i = 0; i < m.n; i++) {
			held[m.holder[i]] = m.blocks * TOK_PER_GBLOCK;
			x.ex[m.holder[i]] = true;
		}
	}
}

/* A backend's fit, published as the gateway does (pg_backend.fit_*). */
static void publish(struct pg_backend *x, const struct pg_fit *f)
{
	x->fit_rate = (uint32_t)(1e6 / f->cur.ms_per_ktok);
	x->fit_overhead_us = (uint32_t)(f->cur.overhead_ms * 1000);
	x->fit_decode_us = (uint32_t)(f->cur.ms_per_decode * 1000);
}

/* The reference rules: each instance's real cache and queue (what
 * mockllm's /mock/match answers; tools/bench/refrouter.py's rules). */
static uint16_t choose_ref(struct world *w, const struct ts_rec *r, bool cache_first)
{
	struct sim_match m[MAXI + 1];
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
	/* the holder: within a block of the longest match, the quickest */
	for (uint16_t i = 1; i <= w->o.n; i++)
		if (m[i].cached_tokens + TS_BLOCK_TOKENS >= longest + 0 &&
		    m[i].cached_tokens >=
		        (longest > TS_BLOCK_TOKENS ? longest - TS_BLOCK_TOKENS : 0) &&
		    (!h || m[i].predicted_ttft_ms < m[h].predicted_ttft_ms))
			h = i;
	/* passed over only when every other instance is far less loaded */
	for (uint16_t i = 1; i <= w->o.n; i++) {
		double qh = m[h].queue_tokens / m[h].prefill_tokens_per_s,
		       qi = m[i].queue_tokens / m[i].prefill_tokens_per_s;

		if (i != h && !(qh > 4 * qi + 1.0))
			return h;
	}
	return w->o.n > 1 ? best : h;
}

static void dispatch(struct world *w, const struct ts_rec *r)
{
	static uint64_t chain[PG_CA_MAX_BLOCKS];
	uint32_t held[MAXI + 1];
	uint16_t cand[PG_RING_CANDIDATES];
	const uint32_t nb = gw_chain(r, chain);
	const uint64_t key = prefix_hash(r, w->o.prefix_length / PG_CA_CHARS_PER_TOKEN);
	size_t ncand = pg_ring_candidates(w->ring, key, cand);
	struct pg_route_cfg rc = {.concurrency_threshold = w->o.threshold,
	                          .max_load_gap = PG_CA_GAP_DEFAULT,
	                          .new_choices = 1,
	                          .prefix_length = w->o.prefix_length};
	struct pg_choice ch = {0};
	struct job *j = calloc(1, sizeof(*j));
	const char *s = w->o.strategy;
	struct pg_backend *x;
	struct pg_speed sp;
	uint16_t b;

	pg_ca_tick(&w->ix);
	if (!strncmp(s, "ref-", 4)) {
		matches(w, chain, nb, held);
		b = choose_ref(w, r, !strcmp(s, "ref-cache-first"));
	} else if (!strcmp(s, "random") || !strcmp(s, "lor") || !strcmp(s, "pa")) {
		rc.strategy = !strcmp(s, "random") ? PG_STRATEGY_RANDOM
		              : !strcmp(s, "lor")  ? PG_STRATEGY_LEAST_OUTSTANDING
		                                   : PG_STRATEGY_PREFIX_AWARE;
		matches(w, chain, nb, held);
		b = pg_balance(&rc, w->be, w->o.n, cand, ncand, NULL, w->now / 1000000, next_rnd(w),
		               false, &ch);
	} else {
		uint16_t hid[MAXI];
		uint32_t htok[MAXI], shared = 0;
		struct pg_ca_req rq;
		size_t nh = 0;
		uint64_t anchor = key;

		if (w->o.shared) {
			uint32_t sb = pg_ca_shared(&w->ix, chain, nb, w->o.n);

			shared = sb * TOK_PER_GBLOCK;
			/* the anchor lies in the shared head: the continuation decides */
			if (sb * PG_CA_BLOCK >= w->o.prefix_length)
				anchor = sb < nb ? chain[sb] : mix(prefix_hash(r, r->input), 3);
			ncand = pg_ring_candidates(w->ring, anchor, cand);
		}
		matches(w, chain, nb, held);
		for (uint16_t i = 1; i <= w->o.n; i++)
			if (held[i] > shared) {
				hid[nh] = i;
				htok[nh++] = held[i];
			}
		rq = (struct pg_ca_req){.prompt_tokens = r->input,
		                        .shared_tokens = shared,
		                        .held = hid,
		                        .held_tokens = htok,
		                        .nheld = nh,
		                        .choices = 1,
		                        .work_base = w->o.lambda,
		                        .work_queued = w->o.kappa};
		b = pg_balance_cached(w->be, w->o.n, cand, ncand, &rq, NULL, w->now / 1000000,
		                      false, &ch);
	}
	if (!b)
		abort();
	x = &w->be[b];
	w->decisions[ch.decision]++;
	w->dec_by[b][ch.decision]++;
	pg_ca_record(&w->ix, chain, nb, b);
	j->rec = r;
	j->b = b;
	j->own = r->input > held[b] ? r->input - held[b] : 1;
	pg_work_speed(x, &sp);
	pg_work_take(x, &j->wt, j->own, &sp, w->now);
	j->sr.nhashes = kv_chain(r, &j->kv);
	j->sr.hashes = j->kv;
	j->sr.prompt_tokens = r->input;
	j->sr.max_tokens = r->output ? r->output : 1;
	x->in_flight++;
	w->sent[b]++;
	if (w->nlog < MAX_LOG)
		w->log[w->nlog++] = (struct logrec){w->now, b, r->input};
	if ((double)x->prefill_tokens > w->max_queue)
		w->max_queue = (double)x->prefill_tokens;
	sim_submit(w->inst[b], &j->sr, w->now);
}

static void on_token(void *ctx, struct sim_req *sr, bool last)
{
	struct world *w = &g_w;
	struct job *j = (struct job *)sr;
	struct pg_backend *x = &w->be[j->b];

	(void)ctx;
	if (!j->first) {
		struct pg_speed sp;
		double ttft;

		j->first = true;
		pg_work_speed(x, &sp);
		ttft = pg_work_first(x, &j->wt, sp.overhead_ms, w->now);
		w->ttft[w->nttft++] = ttft;
		if (g_dump)
			fprintf(g_dump, "%ld %u %u %.1f %.1f %u %u %.0f\n",
			        (long)(j->rec - g_first), j->rec->input, j->b, ttft, j->wt.pred_ms,
			        j->rec->input - j->own, sr->cached_tokens, j->wt.ahead);
		w->abs_err += fabs(ttft - j->wt.pred_ms);
		w->sum_err += ttft - j->wt.pred_ms;
		pg_fit_observe(&w->fit[j->b], w->now / 1000000, j->wt.ahead, j->wt.decoding, ttft);
		publish(x, &w->fit[j->b]);
	}
	if (last) {
		x->in_flight--;
		free(j->kv);
		free(j);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);

	return n ? v[i < n ? i : n - 1] : 0;
}

static const char usage[] =
    "usage: tracesim --trace FILE [--load RHO] [--instances N] [--strategy S]\n"
    "                [--cache-frac F] [--lambda L] [--prefix-length N]\n"
    "                [--threshold N] [--speed I:F]...\n";

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"trace", 1, 0, 't'},
	                                   {"load", 1, 0, 'l'},
	                                   {"instances", 1, 0, 'n'},
	                                   {"strategy", 1, 0, 's'},
	                                   {"cache-frac", 1, 0, 'c'},
	                                   {"lambda", 1, 0, 'L'},
	                                   {"kappa", 1, 0, 'K'},
	                                   {"prefix-length", 1, 0, 'p'},
	                                   {"threshold", 1, 0, 'T'},
	                                   {"speed", 1, 0, 'S'},
	                                   {"no-shared", 0, 0, 'N'},
	                                   {"requests", 1, 0, 'R'},
	                                   {"dump", 1, 0, 'D'},
	                                   {"slow", 1, 0, 'W'},
	                                   {"verbose", 0, 0, 'v'},
	                                   {"help", 0, 0, 'h'},
	                                   {0, 0, 0, 0}};
	struct world *w = &g_w;
	struct opts *o = &w->o;
	struct pg_trace pt = {0};
	struct {
		struct ts_rec *r;
		size_t n;
	} t;
	struct sim_params sp;
	struct pg_ring_member mem[MAXI];
	struct pg_speed prior = {PG_SPEED_OVERHEAD_DEFAULT, 1e6 / PG_SPEED_RATE_DEFAULT, 0};
	uint64_t work, distinct, cap_tokens, total_q = 0, total_h = 0;
	double speedup, fleet_rate = 0;
	size_t next = 0;
	bool slowed = false;
	uint64_t slow_t = 0;
	int c;

	*o = (struct opts){.strategy = "work",
	                   .load = 0.9,
	                   .cache_frac = 1.0 / 3,
	                   .n = 8,
	                   .prefix_length = 4096,
	                   .threshold = 10,
	                   .lambda = PG_CA_WORK_BASE,
	                   .kappa = PG_CA_WORK_QUEUED,
	                   .shared = true};
	for (unsigned i = 0; i <= MAXI; i++)
		o->speed[i] = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o->trace = optarg;
			break;
		case 'l':
			o->load = atof(optarg);
			break;
		case 'n':
			o->n = (unsigned)atoi(optarg);
			break;
		case 's':
			o->strategy = optarg;
			break;
		case 'c':
			o->cache_frac = atof(optarg);
			break;
		case 'L':
			o->lambda = atof(optarg);
			break;
		case 'K':
			o->kappa = atof(optarg);
			break;
		case 'N':
			o->shared = false;
			break;
		case 'R':
			o->requests = (size_t)atol(optarg);
			break;
		case 'D':
			o->dump = optarg;
			break;
		case 'W':
			if (sscanf(optarg, "%u:%lf:%lf", &o->slow_inst, &o->slow_factor,
			           &o->slow_at) != 3 ||
			    o->slow_inst < 1 || o->slow_inst > MAXI || !(o->slow_factor > 0)) {
				fprintf(stderr, "tracesim: --slow I:F:AT\n");
				return 2;
			}
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'p':
			o->prefix_length = (unsigned)atoi(optarg);
			break;
		case 'T':
			o->threshold = (unsigned)atoi(optarg);
			break;
		case 'S': {
			unsigned i;
			double f;

			if (sscanf(optarg, "%u:%lf", &i, &f) != 2 || i < 1 || i > MAXI ||
			    !(f > 0)) {
				fprintf(stderr, "tracesim: --speed I:F\n");
				return 2;
			}
			o->speed[i] = f;
			break;
		}
		default:
			fputs(usage, c == 'h' ? stdout : stderr);
			return c == 'h' ? 0 : 2;
		}
	}
	if (!o->trace || o->n < 1 || o->n > MAXI) {
		fputs(usage, stderr);
		return 2;
	}
	if (pg_trace_load(&pt, o->trace) || pg_trace_uncached(&pt, &work, &distinct))
		return 1;
	t.n = o->requests && o->requests < pt.n ? o->requests : pt.n;
	t.r = calloc(pt.n, sizeof(*t.r));
	for (size_t i = 0; i < pt.n; i++)
		t.r[i] = (struct ts_rec){.t_ms = pt.req[i].ts_ms - pt.req[0].ts_ms,
		                         .input = pt.req[i].input_len,
		                         .output = pt.req[i].output_len,
		                         .nids = pt.req[i].nids,
		                         .ids = pt.ids + pt.req[i].first_id};
	g_first = t.r;
	if (o->dump && !(g_dump = fopen(o->dump, "w"))) {
		perror(o->dump);
		return 1;
	}
	cap_tokens = (uint64_t)(o->cache_frac * (double)distinct * TS_BLOCK_TOKENS / o->n);
	sim_default_params(&sp);
	sp.kv_capacity_tokens = cap_tokens;
	for (unsigned i = 1; i <= o->n; i++)
		fleet_rate += sp.prefill_tokens_per_s * o->speed[i];
	speedup = o->load * fleet_rate * pg_trace_span_s(&pt) / (double)work;

	w->be = calloc(PG_MAX_BACKENDS, sizeof(*w->be));
	w->ring = calloc(1, sizeof(*w->ring));
	w->ix.capacity_blocks = pg_ca_capacity_blocks(cap_tokens);
	w->ix.nslots = pg_ca_slots_for(cap_tokens, 1024);
	w->ix.slots = calloc(w->ix.nslots, sizeof(*w->ix.slots));
	w->ix.backends = w->be;
	w->ix.requests = &w->requests;
	w->ttft = calloc(t.n, sizeof(*w->ttft));
	w->log = calloc(MAX_LOG, sizeof(*w->log));
	for (unsigned i = 1; i <= o->n; i++) {
		char name[32];
		struct sim_params p = sp;

		sim_scale_params(&p, o->speed[i]);
		w->inst[i] = sim_create(&p, on_token, w);
		w->be[i].flags = PG_BACKEND_ACTIVE;
		snprintf(name, sizeof(name), "127.0.0.1:%u", 8000 + i);
		w->seed[i] = pg_ring_seed(name, strlen(name));
		mem[i - 1] = (struct pg_ring_member){.id = (uint16_t)i, .seed = w->seed[i]};
		pg_fit_init(&w->fit[i], &prior);
	}
	pg_ring_build(w->ring, mem, o->n);

	for (;;) {
		uint64_t ta =
		    next < t.n ? (uint64_t)((double)t.r[next].t_ms * 1e6 / speedup) : UINT64_MAX;
		uint64_t te = UINT64_MAX;
		unsigned ie = 0;

		for (unsigned i = 1; i <= o->n; i++) {
			uint64_t e = sim_next_event(w->inst[i]);

			if (e < te) {
				te = e;
				ie = i;
			}
		}
		if (ta == UINT64_MAX && te == UINT64_MAX)
			break;
		if (o->slow_inst && !slowed && next >= (size_t)(o->slow_at * (double)t.n)) {
			sim_set_speed(w->inst[o->slow_inst],
			              o->speed[o->slow_inst] * o->slow_factor);
			slowed = true;
			slow_t = w->now;
		}
		if (te <= ta) {
			w->now = te;
			sim_advance(w->inst[ie], te);
		} else {
			w->now = ta;
			dispatch(w, &t.r[next++]);
		}
	}

	qsort(w->ttft, w->nttft, sizeof(double), cmp_double);
	{
		double sum = 0;

		for (size_t i = 0; i < w->nttft; i++)
			sum += w->ttft[i];
		for (unsigned i = 1; i <= o->n; i++) {
			struct sim_stats st;

			sim_get_stats(w->inst[i], &st);
			total_q += st.prefix_queries;
			total_h += st.prefix_hits;
		}
		printf("%-8s load %.2f ttft mean %7.0f p50 %7.0f p90 %7.0f p99 %7.0f ms  "
		       "hit %.3f  err %+.0f/%.0f ms  maxq %.0f  share",
		       o->strategy, o->load, sum / (double)w->nttft, pct(w->ttft, w->nttft, 0.5),
		       pct(w->ttft, w->nttft, 0.9), pct(w->ttft, w->nttft, 0.99),
		       (double)total_h / (double)total_q, w->sum_err / (double)w->nttft,
		       w->abs_err / (double)w->nttft, w->max_queue);
		for (unsigned i = 1; i <= o->n; i++)
			printf(" %.3f", (double)w->sent[i] / (double)t.n);
		{
			double tot = 0;
			struct sim_stats st[MAXI + 1];

			for (unsigned i = 1; i <= o->n; i++) {
				sim_get_stats(w->inst[i], &st[i]);
				tot += (double)(st[i].prefix_queries);
			}
			printf("  work");
			for (unsigned i = 1; i <= o->n; i++)
				printf(" %.3f", (double)(st[i].prefix_queries) / tot);
		}
		printf("\n");
		if (slowed) {
			/* the slowed instance's share of prompt tokens, 10 s windows */
			printf(
			    "  slowed %u to %.2fx at %.1f s; its share of prompt tokens by 10 s:",
			    o->slow_inst, o->slow_factor, (double)slow_t / 1e9);
			for (int k = -3; k < 12; k++) {
				double tot = 0, mine = 0;
				int64_t lo = (int64_t)slow_t + (int64_t)k * 10000000000ll;

				for (size_t i = 0; i < w->nlog; i++)
					if ((int64_t)w->log[i].t >= lo &&
					    (int64_t)w->log[i].t < lo + 10000000000ll) {
						tot += w->log[i].tokens;
						mine += w->log[i].b == o->slow_inst
						            ? w->log[i].tokens
						            : 0;
					}
				printf(" %s%.3f", k == 0 ? "| " : "", tot ? mine / tot : 0);
			}
			printf("\n");
		}
		if (o->verbose)
			for (unsigned i = 1; i <= o->n; i++)
				printf(
				    "  fit %u: overhead %.1f ms, rate %.0f tok/s, decode %.2f ms  "
				    "cached %llu balanced %llu affinity %llu\n",
				    i, w->fit[i].cur.overhead_ms, 1e6 / w->fit[i].cur.ms_per_ktok,
				    w->fit[i].cur.ms_per_decode,
				    (unsigned long long)w->dec_by[i][PG_DEC_CACHED],
				    (unsigned long long)w->dec_by[i][PG_DEC_BALANCED],
				    (unsigned long long)w->dec_by[i][PG_DEC_AFFINITY]);
	}
	return 0;
}
