/* SPDX-License-Identifier: MIT */
/*
 * tracesim: replays a request trace (Mooncake's format, tools/pgload/trace.h)
 * over simulated instances (mockllm's timing model and prefix cache,
 * tools/mockllm/sim.h) in simulated time, routed by prefixgate's own
 * routing core (user/router/: one struct pg_router per simulated gateway,
 * over tables of its own, driven as the gateway drives it: pg_route_key,
 * the work tickets, pg_router_tick every PG_CONTROL_TICK_MS) or by the
 * reference rules that see each instance's real cache and queue (what
 * mockllm's /mock/match answers; tools/bench/refrouter.py's rules).
 * Deterministic: the same flags give the same figures. What `make bench`
 * measures with real processes in minutes, this computes in a second or
 * two, to design the rule by (doc/routing.md, Routing under load).
 *
 * The trace's requests carry no text, only block ids; the gateway's view
 * and the instances' are built from them as the real text would give them:
 * PG_CA_BLOCK-byte blocks for the gateway's index (4 bytes a token), 16-token
 * blocks for the instances' caches, each chained over its prefix, and the
 * PREFIX_AWARE key and the anchor as the first PrefixLength characters of a
 * /v1/completions prompt.
 *
 * A fleet of gateways (--gateways N, fleet.c): each request reaches one of
 * them at random, as an L4 balancer (or pgload) spreads them; each has its
 * own backend table, index and fits, and hears the others' queues and
 * cache decisions after the delays their NATS messages take.
 */
#ifndef TRACESIM_H
#define TRACESIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../mockllm/sim.h"
#include "../pgload/trace.h"
#include "lib/fleet_msg.h"
#include "lib/ring.h"
#include "router/load.h"
#include "router/router.h"

#define TS_MAX_INSTANCES 64
#define TS_MAX_GATEWAYS  16
#define TS_BLOCK_TOKENS  PG_TRACE_BLOCK_TOKENS

/* One request of the trace. */
struct ts_rec {
	uint64_t t_ms;   /* arrival, ms from the trace's start */
	uint32_t input;  /* prompt tokens */
	uint32_t output; /* output tokens */
	uint32_t nids;   /* prefix blocks of TS_BLOCK_TOKENS tokens */
	const uint32_t *ids;
};

struct ts_opts {
	const char *trace, *strategy, *json, *dump;
	double load, cache_frac, lambda, kappa;
	unsigned n, prefix_length, threshold;
	size_t requests; /* 0: all */
	bool verbose;
	double speed[TS_MAX_INSTANCES + 1]; /* by instance, 1-based */
	unsigned slow_inst;                 /* --slow I:F:AT (0: none) */
	double slow_factor, slow_at;
	unsigned gateways;              /* --gateways N */
	double load_delay, cache_delay; /* ms a peer's LOAD / CACHE takes to arrive */
	double prior;                   /* the gateways' prior speed, x the instances' */
	uint64_t seed;
	bool spread;        /* --spread */
	bool no_stream;     /* --no-stream */
	unsigned scrape_ms; /* --scrape-interval: the gateways read the instances' queues */
	double decode_ms;   /* --decode-ms: ms a decoded token at speed 1 (0: mockllm's) */
	unsigned choices;   /* NewConversationChoices (a journal's; else the default) */
	const char *replay; /* --replay: a gateway's route journal (replay.c) */
};

/* One request in flight on a simulated instance. */
struct ts_job {
	struct sim_req sr; /* first member: the sim's callbacks get it */
	const struct ts_rec *rec;
	uint64_t *kv;
	uint16_t b;
	uint8_t g;    /* the gateway that routed it */
	uint32_t own; /* its work there, as the gateway believed */
	struct pg_load_ticket lt;
	struct pg_choice ch; /* its gateway's decision */
	uint64_t anchor;     /* its conversation, as the decision named it */
	bool first;
	struct ts_job *prev, *next; /* the world's answers not whole yet (--no-stream) */
};

/* One dispatch, for shares over time. */
struct ts_sent {
	uint64_t t_ns;
	uint16_t b;
	uint32_t tokens;
};

/* One gateway: its routing core over its own tables (backends, the
 * world's ring, its state and index), and what each peer last told it of
 * each instance (fleet.c). */
struct ts_world;
struct ts_gw {
	struct pg_router r;
	struct pg_maps maps;
	struct pg_backend *be; /* maps.backends */
	struct ts_world *w;
	unsigned id; /* its index in the world's gateways */
	struct pg_fleet_load heard[TS_MAX_GATEWAYS][TS_MAX_INSTANCES + 1];
	uint64_t scraped_ms[TS_MAX_INSTANCES + 1]; /* its last read of each one's queue */
};

/* Messages on their way between gateways, in the order they arrive. */
struct ts_msg {
	uint64_t sent_ns, due_ns;
	uint8_t from;
	uint16_t b;
	struct pg_fleet_load load; /* LOAD */
	uint32_t head_age_us, first_age_us;
	uint32_t n; /* CACHE: the chain, malloc'd */
	uint64_t *chain;
	struct pg_fit_obs obs; /* FIT */
};
struct ts_fifo {
	struct ts_msg *m;
	size_t head, tail, cap;
};

struct ts_world {
	struct ts_opts o;
	const struct ts_rec *first; /* the trace's records */
	size_t nrec;
	struct sim *inst[TS_MAX_INSTANCES + 1];
	struct ts_gw gw[TS_MAX_GATEWAYS];
	struct pg_ring *ring; /* every gateway's: the same members */
	struct ts_fifo loadq, cacheq, fitq;
	uint64_t now;        /* ns */
	uint64_t tick;       /* the gateways' next pg_router_tick, ns */
	uint64_t scrape;     /* ... their next look at whom to scrape */
	uint64_t round;      /* ... and their next scrape of every instance */
	struct ts_job *live; /* --no-stream: answers not whole yet (their tickets) */
	uint64_t rnd;
	double speedup; /* trace time / replay time */
	/* what happened */
	double *ttft;
	size_t nttft;
	uint64_t sent[TS_MAX_INSTANCES + 1], decisions[PG_DEC_MAX];
	double err_sum, err_abs, max_queue;
	struct ts_sent *log;
	size_t nlog;
	bool slowed;
	uint64_t slow_t;
	FILE *dump;
};

/* main.c: gateway gi's routing core over an empty table of o.n members
 * (nothing measured: the defaults, as a gateway starts), the world's ring,
 * an empty index of slots for instances of capacity_blocks each, the
 * strategy under test. */
int ts_setup_gw(struct ts_world *w, unsigned gi, uint32_t slots, uint32_t capacity_blocks);

/* route.c: a request's work on instance b as its gateway's choice ch
 * estimated it (the gateway's pg_work_on): its prompt less what b was
 * believed to hold, at least a token. */
uint32_t ts_work_on(uint32_t tokens, const struct pg_choice *ch, uint16_t b);
/* The request arrives now; route it and submit it. */
void ts_dispatch(struct ts_world *w, const struct ts_rec *r);
/* The instances' token callback (sim_token_fn), ctx the world. */
void ts_on_token(void *ctx, struct sim_req *r, bool last);
/* Whether strategy names one tracesim knows. */
bool ts_strategy_known(const char *s);

/* The gateways' periodic work (pg_router_tick), due by now. */
void ts_tick(struct ts_world *w);

/* fleet.c: gateway g's queue on instance b changed, it decided to send a
 * request with the block chain chain[0..n) to b, it learned obs of b's
 * speed: each reaches the other gateways later; deliver what has arrived
 * by now. No-ops for one gateway. */
void ts_fleet_changed(struct ts_world *w, unsigned g, uint16_t b);
void ts_fleet_decided(struct ts_world *w, unsigned g, const uint64_t *chain, uint32_t n,
                      uint16_t b);
void ts_fleet_learned(struct ts_world *w, unsigned g, uint16_t b, const struct pg_fit_obs *obs);
void ts_fleet_deliver(struct ts_world *w);

/* replay.c: --replay: the journal's events given to gateway 0's routing
 * core, its decisions compared with the journal's; 0 when all agree. */
int ts_replay(struct ts_world *w, FILE *out);

/* report.c: the figures, as text on out and, if o.json, as JSON. */
int ts_report(const struct ts_world *w, FILE *out);

#endif /* TRACESIM_H */
