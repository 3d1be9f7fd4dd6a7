// SPDX-License-Identifier: MIT
/* tracesim: options, the simulated fleet, the replay loop (tracesim.h). */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/fleet.h"
#include "lib/names.h"
#include "router/cache.h"
#include "router/capacity.h"
#include "tracesim.h"

/* --help; its %g and %d are the defaults usage() fills in. */
static const char usage_fmt[] =
    "usage: tracesim --trace FILE [--strategy S] [--load RHO] [--instances N]\n"
    "                [--cache-frac F] [--prefix-length N] [--threshold N]\n"
    "                [--speed I:F]... [--slow I:F:AT] [--requests N]\n"
    "                [--lambda L] [--kappa K] [--gateways N] [--load-delay MS]\n"
    "                [--cache-delay MS] [--prior-speed F] [--seed N] [--spread]\n"
    "                [--no-stream] [--scrape-interval MS] [--decode-ms MS]\n"
    "                [--json FILE] [--dump FILE] [--verbose]\n"
    "       tracesim --replay JOURNAL\n"
    "\n"
    "Replays a Mooncake-format request trace (tools/bench/data/) over N simulated\n"
    "instances (mockllm's timing model and prefix cache) in simulated time, routed by\n"
    "prefixgate's own routing code or a reference rule, and prints TTFT, the hit rate\n"
    "and the TTFT prediction error. Deterministic; a run of the whole trace takes a\n"
    "second or two.\n"
    "\n"
    "  --strategy S     random | least_outstanding_requests | prefix_aware |\n"
    "                   cache_aware (default) | ref-cache-first | ref-predicted-ttft\n"
    "                   (the references see each instance's real cache and queue)\n"
    "  --load RHO       arrivals at the trace's own times, compressed so that the\n"
    "                   prefill work with perfect caching is RHO x the fleet's prefill\n"
    "                   capacity (pgload --load's definition; default 0.9)\n"
    "  --instances N    1-64 (default 8); each mockllm's defaults (36,600 prefill\n"
    "                   tokens/s, 61.5 ms overhead, 25 ms a token), no output caching\n"
    "  --cache-frac F   the instances' caches hold F of the trace's distinct blocks in\n"
    "                   all (default 1/3); the gateway's --cache-capacity says the same\n"
    "  --prefix-length N, --threshold N  PrefixLength (default 4096) and\n"
    "                   ConcurrencyThreshold (default 10)\n"
    "  --speed I:F      instance I runs F times faster (repeatable)\n"
    "  --slow I:F:AT    instance I drops to F x its speed once the fraction AT of the\n"
    "                   requests was sent; its share is printed by 10 s windows\n"
    "  --requests N     the first N requests only\n"
    "  --lambda L, --kappa K  cache_aware's PG_CA_WORK_BASE and PG_CA_WORK_QUEUED\n"
    "                   (defaults %g and %g), to sweep them\n"
    "  --gateways N     a fleet of N gateways (1-%d), each request to one of them at\n"
    "                   random, sharing what they share over NATS\n"
    "  --load-delay MS, --cache-delay MS  how late a gateway's queues, and its cache\n"
    "                   decisions, reach the others (defaults %d and %d: the fleet\n"
    "                   thread's poll and its batches' period)\n"
    "  --prior-speed F  the gateways' defaults are F x the instances' speed (the\n"
    "                   instances run 1/F times as fast; default 1; make bench runs\n"
    "                   mockllm 4 times faster than the gateway's defaults: 0.25)\n"
    "  --no-stream      clients that do not stream: the gateways see each answer's\n"
    "                   head once it is whole, never a first token\n"
    "  --scrape-interval MS  the gateways read the instances' queues (their /metrics)\n"
    "                   every MS (default 250, --metrics-scrape-interval's; 0: never),\n"
    "                   an instance whose queue is blind more often, as they do\n"
    "  --decode-ms MS   each decoded token takes MS at speed 1 (mockllm\n"
    "                   --decode-ms-per-token; default 25): with --no-stream, how long\n"
    "                   an answer's head comes after its first token\n"
    "  --seed N         seed of the random choices (RANDOM's, and which gateway each\n"
    "                   request reaches; default 0)\n"
    "  --spread         requests of one arrival time spread evenly until the next (the\n"
    "                   Mooncake trace's times come in 3 s steps, about ten at once)\n"
    "  --json FILE      the figures as JSON too\n"
    "  --dump FILE      one line a request: index, prompt tokens, instance, TTFT,\n"
    "                   predicted TTFT, tokens believed cached, cached, work ahead\n"
    "  --verbose        shares and learned speeds by instance\n"
    "  --replay JOURNAL a gateway's --route-journal given to tracesim's routing core\n"
    "                   at the gateway's clock (its configuration, members, keys,\n"
    "                   first tokens, answers, ticks; no instance simulated): each\n"
    "                   decision compared with the gateway's, exit 1 if any differs\n";

static void usage(FILE *out)
{
	fprintf(out, usage_fmt, PG_CA_WORK_BASE, PG_CA_WORK_QUEUED, TS_MAX_GATEWAYS,
	        PG_FLEET_POLL_MS, PG_FLEET_CACHE_GAP_MS);
}

static int parse(int argc, char **argv, struct ts_opts *o)
{
	static const struct option lo[] = {{"trace", 1, 0, 't'},
	                                   {"strategy", 1, 0, 's'},
	                                   {"load", 1, 0, 'l'},
	                                   {"instances", 1, 0, 'n'},
	                                   {"cache-frac", 1, 0, 'c'},
	                                   {"prefix-length", 1, 0, 'p'},
	                                   {"threshold", 1, 0, 'T'},
	                                   {"speed", 1, 0, 'S'},
	                                   {"slow", 1, 0, 'W'},
	                                   {"requests", 1, 0, 'R'},
	                                   {"lambda", 1, 0, 'L'},
	                                   {"kappa", 1, 0, 'K'},
	                                   {"json", 1, 0, 'j'},
	                                   {"dump", 1, 0, 'D'},
	                                   {"verbose", 0, 0, 'v'},
	                                   {"gateways", 1, 0, 'G'},
	                                   {"load-delay", 1, 0, 'd'},
	                                   {"cache-delay", 1, 0, 'e'},
	                                   {"prior-speed", 1, 0, 'P'},
	                                   {"seed", 1, 0, 'E'},
	                                   {"spread", 0, 0, 'A'},
	                                   {"no-stream", 0, 0, 'N'},
	                                   {"scrape-interval", 1, 0, 'I'},
	                                   {"decode-ms", 1, 0, 'M'},
	                                   {"replay", 1, 0, 'Y'},
	                                   {"help", 0, 0, 'h'},
	                                   {0, 0, 0, 0}};
	unsigned i;
	double f;
	int c;

	*o = (struct ts_opts){.strategy = "cache_aware",
	                      .load = 0.9,
	                      .cache_frac = 1.0 / 3,
	                      .n = 8,
	                      .prefix_length = PG_PREFIX_LENGTH_DEFAULT,
	                      .threshold = PG_CONCURRENCY_DEFAULT,
	                      .lambda = PG_CA_WORK_BASE,
	                      .kappa = PG_CA_WORK_QUEUED,
	                      .gateways = 1,
	                      .load_delay = PG_FLEET_POLL_MS,
	                      .cache_delay = PG_FLEET_CACHE_GAP_MS,
	                      .prior = 1,
	                      .choices = PG_CA_CHOICES_DEFAULT,
	                      .scrape_ms = 250};
	for (i = 0; i <= TS_MAX_INSTANCES; i++)
		o->speed[i] = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			o->trace = optarg;
			break;
		case 's':
			o->strategy = optarg;
			break;
		case 'l':
			o->load = atof(optarg);
			break;
		case 'n':
			o->n = (unsigned)atoi(optarg);
			break;
		case 'c':
			o->cache_frac = atof(optarg);
			break;
		case 'p':
			o->prefix_length = (unsigned)atoi(optarg);
			break;
		case 'T':
			o->threshold = (unsigned)atoi(optarg);
			break;
		case 'R':
			o->requests = (size_t)atol(optarg);
			break;
		case 'L':
			o->lambda = atof(optarg);
			break;
		case 'K':
			o->kappa = atof(optarg);
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'D':
			o->dump = optarg;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'G':
			o->gateways = (unsigned)atoi(optarg);
			break;
		case 'd':
			o->load_delay = atof(optarg);
			break;
		case 'e':
			o->cache_delay = atof(optarg);
			break;
		case 'P':
			o->prior = atof(optarg);
			break;
		case 'E':
			o->seed = strtoull(optarg, NULL, 0);
			break;
		case 'A':
			o->spread = true;
			break;
		case 'N':
			o->no_stream = true;
			break;
		case 'I':
			o->scrape_ms = (unsigned)atoi(optarg);
			break;
		case 'M':
			o->decode_ms = atof(optarg);
			break;
		case 'Y':
			o->replay = optarg;
			break;
		case 'S':
			if (sscanf(optarg, "%u:%lf", &i, &f) != 2 || i < 1 ||
			    i > TS_MAX_INSTANCES || !(f > 0)) {
				fprintf(stderr, "tracesim: --speed I:F, I in 1-%d, F > 0\n",
				        TS_MAX_INSTANCES);
				return 2;
			}
			o->speed[i] = f;
			break;
		case 'W':
			if (sscanf(optarg, "%u:%lf:%lf", &o->slow_inst, &o->slow_factor,
			           &o->slow_at) != 3 ||
			    o->slow_inst < 1 || o->slow_inst > TS_MAX_INSTANCES ||
			    !(o->slow_factor > 0) || !(o->slow_at >= 0 && o->slow_at < 1)) {
				fprintf(stderr, "tracesim: --slow I:F:AT, F > 0, AT in [0, 1)\n");
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!o->trace == !o->replay || optind < argc) {
		usage(stderr);
		return 2;
	}
	if (o->n < 1 || o->n > TS_MAX_INSTANCES || o->slow_inst > o->n || !(o->load > 0) ||
	    !(o->cache_frac > 0) || !ts_strategy_known(o->strategy)) {
		fprintf(stderr,
		        "tracesim: --instances 1-%d, --load and --cache-frac above 0, "
		        "--slow on one of them, --strategy as --help lists\n",
		        TS_MAX_INSTANCES);
		return 2;
	}
	if (o->gateways < 1 || o->gateways > TS_MAX_GATEWAYS || !(o->load_delay >= 0) ||
	    !(o->cache_delay >= 0) || !(o->prior > 0) || !(o->decode_ms >= 0)) {
		fprintf(stderr,
		        "tracesim: --gateways 1-%d, --load-delay, --cache-delay and --decode-ms at "
		        "least 0, --prior-speed above 0\n",
		        TS_MAX_GATEWAYS);
		return 2;
	}
	return 0;
}

/* Each run of requests with one arrival time, spread evenly until the
 * next time (the last run stays). */
static void spread(struct ts_rec *recs, size_t n)
{
	for (size_t i = 0, k; i < n; i = k) {
		for (k = i + 1; k < n && recs[k].t_ms == recs[i].t_ms;)
			k++;
		if (k == n)
			break;
		for (size_t m = i + 1; m < k; m++)
			recs[m].t_ms += (recs[k].t_ms - recs[i].t_ms) * (m - i) / (k - i);
	}
}

static uint64_t ts_clock(const struct pg_router *r)
{
	return ((const struct ts_gw *)r)->w->now;
}

static void ts_sent(const struct pg_router *r, unsigned worker, uint16_t id, uint32_t epoch,
                    const uint64_t *chain, uint32_t n, bool request)
{
	const struct ts_gw *g = (const struct ts_gw *)r;

	(void)worker;
	(void)epoch;
	(void)request;
	ts_fleet_decided(g->w, g->id, chain, n, id);
}

static void ts_learned(const struct pg_router *r, unsigned worker, uint16_t id, uint32_t epoch,
                       const struct pg_fit_obs *obs)
{
	const struct ts_gw *g = (const struct ts_gw *)r;

	(void)worker;
	(void)epoch;
	ts_fleet_learned(g->w, g->id, id, obs);
}

static const struct pg_router_out ts_out = {.sent = ts_sent, .learned = ts_learned};

int ts_setup_gw(struct ts_world *w, unsigned gi, uint32_t slots, uint32_t capacity_blocks)
{
	struct ts_gw *g = &w->gw[gi];
	const unsigned n = w->o.n;
	struct pg_state *st = calloc(1, sizeof(*st));
	enum pg_strategy s;

	_Static_assert(offsetof(struct ts_gw, r) == 0, "the router first: ts_clock");
	g->w = w;
	g->id = gi;
	g->be = calloc(PG_MAX_BACKENDS, sizeof(*g->be));
	g->maps = (struct pg_maps){
	    .backends = g->be, .rings = w->ring, .state = st, .npools = 1, .ca_slots = slots};
	g->maps.ca = calloc(g->maps.ca_slots, sizeof(*g->maps.ca));
	g->r = (struct pg_router){.maps = &g->maps,
	                          .speeds = pg_speeds_new(),
	                          .caps = pg_capacities_new(),
	                          .out = &ts_out,
	                          .clock = ts_clock,
	                          .ca_work_base = w->o.lambda,
	                          .ca_work_queued = w->o.kappa};
	if (!g->be || !st || !g->maps.ca || !g->r.speeds || !g->r.caps)
		return -1;
	if (!pg_strategy_parse(w->o.strategy, strlen(w->o.strategy), &s))
		st->strategy = (uint32_t)s; /* else a reference rule: no core */
	st->prefix_length = w->o.prefix_length;
	st->concurrency_threshold = w->o.threshold;
	st->ca_choices = w->o.choices;
	st->ca_capacity_blocks = capacity_blocks;
	st->nbackends = n;
	for (unsigned i = 1; i <= n; i++) {
		g->be[i].flags = PG_BACKEND_ACTIVE;
		g->be[i].epoch = 1;
		/* as the gateway's control thread adds a member: nothing the
		 * index holds is its, its speed its pool's */
		g->be[i].ca_clock = (uint64_t)capacity_blocks + 1;
		pg_router_activate(&g->r, i);
	}
	pg_load_share_speeds(&g->r);
	return 0;
}

/* The fleet and the gateways' view of it; the trace's records from pt. */
static int setup(struct ts_world *w, const struct pg_trace *pt, struct ts_rec *recs)
{
	struct pg_ring_member mem[TS_MAX_INSTANCES];
	uint64_t work, distinct, cap;
	struct sim_params sp;
	double fleet_rate = 0;

	if (pg_trace_uncached(pt, &work, &distinct) || !work)
		return -1;
	for (size_t i = 0; i < w->nrec; i++)
		recs[i] = (struct ts_rec){.t_ms = pt->req[i].ts_ms - pt->req[0].ts_ms,
		                          .input = pt->req[i].input_len,
		                          .output = pt->req[i].output_len,
		                          .nids = pt->req[i].nids,
		                          .ids = pt->ids + pt->req[i].first_id};
	w->first = recs;
	if (w->o.spread)
		spread(recs, w->nrec);
	cap = (uint64_t)(w->o.cache_frac * (double)distinct * TS_BLOCK_TOKENS / w->o.n);
	sim_default_params(&sp);
	sp.kv_capacity_tokens = cap;
	if (w->o.decode_ms > 0)
		sp.decode_ms_per_token = w->o.decode_ms;
	/* the gateways' defaults are --prior-speed x the instances' speed */
	for (unsigned i = 1; i <= w->o.n; i++)
		w->o.speed[i] /= w->o.prior;
	for (unsigned i = 1; i <= w->o.n; i++)
		fleet_rate += sp.prefill_tokens_per_s * w->o.speed[i];
	/* pgload --load: S = RHO x C x D / W over the whole trace */
	w->speedup = w->o.load * fleet_rate * pg_trace_span_s(pt) / (double)work;
	w->ring = calloc(1, sizeof(*w->ring));
	w->ttft = calloc(w->nrec, sizeof(*w->ttft));
	w->log = calloc(w->nrec, sizeof(*w->log));
	if (!w->ring || !w->ttft || !w->log)
		return -1;
	for (unsigned g = 0; g < w->o.gateways; g++)
		if (ts_setup_gw(w, g, pg_ca_slots_for(cap, 1024), pg_ca_capacity_blocks(cap)))
			return -1;
	for (unsigned i = 1; i <= w->o.n; i++) {
		struct sim_params p = sp;
		char name[32];

		sim_scale_params(&p, w->o.speed[i]);
		if (!(w->inst[i] = sim_create(&p, ts_on_token, w)))
			return -1;
		snprintf(name, sizeof(name), "127.0.0.1:%u", 8000 + i);
		mem[i - 1] = (struct pg_ring_member){.id = (uint16_t)i,
		                                     .seed = pg_ring_seed(name, strlen(name))};
	}
	pg_ring_build(w->ring, mem, w->o.n);
	return 0;
}

/* Every arrival and every instance event, in time order. */
static void replay(struct ts_world *w)
{
	size_t next = 0;

	for (;;) {
		uint64_t ta = next < w->nrec
		                  ? (uint64_t)((double)w->first[next].t_ms * 1e6 / w->speedup)
		                  : UINT64_MAX,
		         te = UINT64_MAX;
		unsigned ie = 0;

		for (unsigned i = 1; i <= w->o.n; i++) {
			uint64_t e = sim_next_event(w->inst[i]);

			if (e < te) {
				te = e;
				ie = i;
			}
		}
		if (ta == UINT64_MAX && te == UINT64_MAX)
			return;
		if (w->o.slow_inst && !w->slowed &&
		    next >= (size_t)(w->o.slow_at * (double)w->nrec)) {
			sim_set_speed(w->inst[w->o.slow_inst],
			              w->o.speed[w->o.slow_inst] * w->o.slow_factor);
			w->slowed = true;
			w->slow_t = w->now;
		}
		if (te <= ta) {
			w->now = te;
			sim_advance(w->inst[ie], te);
		} else {
			w->now = ta;
			ts_dispatch(w, &w->first[next++]);
		}
	}
}

int main(int argc, char **argv)
{
	static struct ts_world w;
	struct pg_trace pt = {0};
	struct ts_rec *recs;
	int rc = parse(argc, argv, &w.o);

	if (rc)
		return rc == 1 ? 0 : rc;
	w.rnd = w.o.seed;
	if (w.o.replay)
		return ts_replay(&w, stdout) ? 1 : 0;
	if (pg_trace_load(&pt, w.o.trace))
		return 1;
	w.nrec = w.o.requests && w.o.requests < pt.n ? w.o.requests : pt.n;
	recs = calloc(w.nrec ? w.nrec : 1, sizeof(*recs));
	if (!recs || setup(&w, &pt, recs)) {
		fprintf(stderr, "tracesim: out of memory, or an empty trace\n");
		return 1;
	}
	if (w.o.dump && !(w.dump = fopen(w.o.dump, "w"))) {
		perror(w.o.dump);
		return 1;
	}
	replay(&w);
	if (w.dump)
		fclose(w.dump);
	return ts_report(&w, stdout) ? 1 : 0;
}
