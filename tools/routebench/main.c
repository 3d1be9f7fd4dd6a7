// SPDX-License-Identifier: MIT
/*
 * routebench: the cost of one routing decision, as the workers pay it
 * (pg_route_worker: key extraction, ring lookup, choice, and for cache_aware the
 * index probes and the record), for each strategy and fleet size, on
 * shared-memory maps in this process: no sockets, no other noise.
 *
 * Bodies: 32 KiB OpenAI chat requests, a 4 KiB system prompt then the turns
 * of one of 512 conversations; each round sends every conversation's next
 * turn, so cache_aware's index holds every conversation's history (the
 * common case) and matches most of each request. Prints p50/p99/max per
 * strategy and backend count, and the ring rebuild time, as a table.
 *
 * --body: where each body is when it is routed.
 *  - cold (the default): where the round wrote it, among --convs bodies
 *    (20 MiB at 512), so mostly out of the CPU's caches;
 *  - warm: written into one receive buffer just before it is routed
 *    (untimed), as a worker's recv() leaves the body it routes next in the
 *    CPU's cache; between routes nothing else evicts the gateway's own
 *    state (the index, the backend table), so this is the optimistic case;
 *  - both: a row of each.
 * The table's "body" column says which.
 *
 * --arrival: how each body reaches the router.
 *  - whole (the default): all of it at once, parsed when routed;
 *  - pieces: in receive buffers (PG_BUFSZ), as a worker gets a long body:
 *    from PG_PARSE_AHEAD_MIN bytes held, each piece is parsed as it comes
 *    (json.h pg_json_stream; untimed: the worker does it while the rest is
 *    on the wire), and the time is that of the last piece's parse and the
 *    routing, as the gateway's decision histogram measures it. The pieces
 *    are cut so that the last is a whole buffer: the most a worker is left
 *    with, whatever the body's length. The last
 *    column, "cpu p50", adds the pieces parsed ahead: the CPU the key costs
 *    in all. Bodies shorter than PG_PARSE_AHEAD_MIN and one buffer more
 *    are parsed whole (they would be their last piece).
 *  - both: a row of each.
 *
 * Wall-clock figures on a shared VM are noisy; for a repeatable count run it
 * under valgrind --tool=callgrind --toggle-collect=pg_route_worker (instructions
 * per call).
 *
 * The table's "ring rebuild" is one full build of the fleet's ring
 * (pg_ring_build), wall time.
 *
 * --rebuild times the ring alone instead, REPS times per fleet size, in
 * this thread's CPU time (other load on the machine inflates it less than
 * wall time), median and min:
 *  - full: pg_ring_build, the whole table as at start-up, with the scan
 *    pg_ring_build picks here (avx512 or portable), then with the portable
 *    one;
 *  - remove, add: pg_member_remove and pg_member_add of one member, as a
 *    DELETE or POST /backends runs them (each rebuilds the ring through
 *    pg_control_rebuild_ring, which updates the last table).
 *
 * usage: routebench [--rounds N] [--backends 2,16,64,255] [--body-kib K]
 *                   [--convs N] [--only STRATEGY] [--body cold|warm|both]
 *                   [--arrival whole|pieces|both] [--choices N]
 * (--convs: conversations per round, default 512; fewer keep memory and
 * callgrind time down for large bodies; --choices: cache_aware's
 * CacheAwareConfig.NewConversationChoices, default PG_CA_CHOICES_DEFAULT)
 *        routebench --rebuild [--reps REPS] [--backends 2,16,64,255]
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "router/index.h"
#include "lib/ring.h"
#include "config/config.h"
#include "control/control.h"
#include "members/members.h"
#include "gateway.h"
#include "lib/json.h"
#include "proxy/worker.h"
#include "sys/log.h"
#include "state/maps.h"
#include "router/route.h"
#include "state/routestats.h"

/* Conversations (bodies) per round: --convs, at most CONVS_MAX. */
#define CONVS_MAX 4096

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Pseudo-random words, deterministic from seed. */
static size_t words(char *out, size_t n, uint64_t seed)
{
	static const char *const w[] = {"model",  "cache",  "token",  "prefix", "route",  "query",
	                                "answer", "kernel", "socket", "buffer", "stream", "vector"};
	size_t len = 0;

	while (len + 8 < n) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		len += (size_t)sprintf(out + len, "%s ", w[(seed >> 33) % 12]);
	}
	out[len] = 0;
	return len;
}

/* Conversation c at turn t: body of about kib KiB. */
static size_t body(char *out, size_t cap, unsigned c, unsigned t, size_t kib)
{
	static char sys[4096], turn[2048];
	size_t len, target = kib * 1024;

	words(sys, sizeof(sys), 1);
	len = (size_t)snprintf(
	    out, cap,
	    "{\"model\":\"m\",\"max_tokens\":16,\"messages\":[{\"role\":\"system\","
	    "\"content\":\"%s\"}",
	    sys);
	for (unsigned k = 0; len + sizeof(turn) + 64 < cap; k++) {
		if (k > t && len >= target)
			break;
		words(turn, k % 2 ? 1200 : 400, (uint64_t)c << 20 | k);
		len +=
		    (size_t)snprintf(out + len, cap - len, ",{\"role\":\"%s\",\"content\":\"%s\"}",
		                     k % 2 ? "assistant" : "user", turn);
	}
	len += (size_t)snprintf(out + len, cap - len, "]}");
	return len;
}

/* --choices: CacheAwareConfig.NewConversationChoices */
static unsigned new_choices = PG_CA_CHOICES_DEFAULT;

static void setup(struct pg_gateway *gw, struct pg_config *cfg, unsigned nbackends)
{
	static char addrs[PG_MAX_BACKENDS][32];
	static char *list[PG_MAX_BACKENDS];
	char err[256];

	memset(gw, 0, sizeof(*gw));
	memset(cfg, 0, sizeof(*cfg));
	cfg->route.prefix_length = PG_PREFIX_LENGTH_DEFAULT;
	cfg->route.concurrency_threshold = PG_CONCURRENCY_DEFAULT;
	cfg->route.new_choices = new_choices;
	cfg->cache_capacity = PG_CA_CAPACITY_DEFAULT;
	for (unsigned i = 0; i < nbackends; i++) {
		snprintf(addrs[i], sizeof(addrs[i]), "127.0.%u.%u:8000", i / 250, 1 + i % 250);
		list[i] = addrs[i];
	}
	cfg->backends = list;
	cfg->nbackends = nbackends;
	gw->cfg = cfg;
	gw->rstats = pg_rstats_create(1); /* one worker: this thread, recording as a worker does */
	if (!gw->rstats) {
		fprintf(stderr, "routebench: setup: out of memory\n");
		exit(1);
	}
	if (pg_maps_open(&gw->maps, false, "",
	                 pg_ca_slots_for(cfg->cache_capacity, PG_CA_SLOTS_MIN), err, sizeof(err)) ||
	    pg_control_init(gw, err, sizeof(err))) {
		fprintf(stderr, "routebench: setup: %s\n", err);
		exit(1);
	}
	gw->maps.state->ca_capacity_blocks = pg_ca_capacity_blocks(cfg->cache_capacity);
}

/* Median and min of v[0..n-1], in ms (sorts v). */
static void med_min(uint64_t *v, unsigned n, double *med, double *min)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	*med = v[n / 2] / 1e6;
	*min = v[0] / 1e6;
}

/* The fleet of setup() as ring members (ids 1..n). */
static void fleet_members(struct pg_ring_member *m, unsigned n, char (*addr)[32])
{
	for (unsigned i = 0; i < n; i++) {
		snprintf(addr[i], sizeof(addr[i]), "127.0.%u.%u:8000", i / 250, 1 + i % 250);
		m[i].id = (uint16_t)(i + 1);
		m[i].seed = pg_ring_seed(addr[i], strlen(addr[i]));
	}
}

/* --rebuild: see the top of the file. */
static int bench_rebuild(const unsigned *fleets, unsigned nfleets, unsigned reps)
{
	static struct pg_ring_member m[PG_MAX_BACKENDS];
	static char addr[PG_MAX_BACKENDS][32];
	struct pg_ring *ring = malloc(sizeof(*ring));
	uint64_t *t[4];
	char err[256];
	bool failed;

	if (reps == 0) {
		fprintf(stderr, "routebench: --reps must be at least 1\n");
		return 2;
	}
	for (int i = 0; i < 4; i++)
		if (!(t[i] = calloc(reps, sizeof(*t[i]))))
			return 1;
	if (!ring)
		return 1;
	printf("ring rebuild, CPU ms, median (min) of %u runs\n", reps);
	printf("%8s %8s %16s %16s %16s %16s\n", "backends", "scan", "full", "full portable",
	       "remove one", "add one");
	for (unsigned f = 0; f < nfleets; f++) {
		const unsigned n = fleets[f];
		double med[4], min[4];
		struct pg_gateway gw;
		struct pg_config cfg;

		setup(&gw, &cfg, n);
		fleet_members(m, n, addr);
		/* One kind at a time, AVX-512 last: its instructions can lower the
		 * core's clock for a while after them, and so slow what follows. */
		for (unsigned r = 0; r < reps; r++) {
			uint64_t c0 = cpu_ns();

			pg_ring_build_with(ring, m, n, PG_RING_SCAN_PORTABLE);
			t[1][r] = cpu_ns() - c0;
		}
		failed = false;
		for (unsigned r = 0; r < reps && !failed; r++) {
			uint64_t c0 = cpu_ns();

			failed = pg_member_remove(&gw, addr[n - 1], err, sizeof(err)) < 0;
			t[2][r] = cpu_ns() - c0;
			c0 = cpu_ns();
			failed = failed || pg_member_add(&gw, addr[n - 1], err, sizeof(err)) < 0;
			t[3][r] = cpu_ns() - c0;
		}
		if (failed) {
			fprintf(stderr, "routebench: %s: %s\n", addr[n - 1], err);
			return 1;
		}
		for (unsigned r = 0; r < reps; r++) {
			uint64_t c0 = cpu_ns();

			pg_ring_build(ring, m, n);
			t[0][r] = cpu_ns() - c0;
		}
		for (int i = 0; i < 4; i++)
			med_min(t[i], reps, &med[i], &min[i]);
		printf("%8u %8s", n, pg_ring_scan_name(PG_RING_SCAN_AUTO, n));
		for (int i = 0; i < 4; i++)
			printf(" %7.2f (%6.2f)", med[i], min[i]);
		printf("\n");
		pg_maps_close(&gw.maps);
	}
	for (int i = 0; i < 4; i++)
		free(t[i]);
	free(ring);
	return 0;
}

int main(int argc, char **argv)
{
	static const enum pg_strategy strategies[] = {PG_STRATEGY_PREFIX_AWARE,
	                                              PG_STRATEGY_CACHE_AWARE};
	unsigned fleets[8] = {2, 16, 64, 255}, nfleets = 4, rounds = 8, reps = 15;
	bool rebuild_only = false;
	size_t kib = 32, cap;
	static size_t blen[CONVS_MAX];
	unsigned convs = 512;
	char *bodies;
	const char *only = NULL, *where = "cold", *arrival = "whole";
	static const char *const wheres[] = {"cold", "warm"};
	static const char *const arrivals[] = {"whole", "pieces"};
	static struct pg_json_stream ps;
	struct pg_key_scratch ks = {0}; /* kept from key to key, as a worker's is */
	char *rx;
	static struct pg_ring_member members[PG_MAX_BACKENDS];
	static char addrs[PG_MAX_BACKENDS][32];
	struct pg_ring *ring;
	uint64_t *lat;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rebuild")) {
			rebuild_only = true;
			continue;
		}
		if (i + 1 == argc) {
			fprintf(stderr, "routebench: %s needs a value (see the usage in main.c)\n",
			        argv[i]);
			return 2;
		}
		if (!strcmp(argv[i], "--rounds"))
			rounds = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--reps"))
			reps = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--only"))
			only = argv[i + 1];
		else if (!strcmp(argv[i], "--body-kib"))
			kib = (size_t)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--convs"))
			convs = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--body"))
			where = argv[i + 1];
		else if (!strcmp(argv[i], "--arrival"))
			arrival = argv[i + 1];
		else if (!strcmp(argv[i], "--choices"))
			new_choices = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--backends")) {
			nfleets = 0;
			for (char *p = strtok(argv[i + 1], ","); p && nfleets < 8;
			     p = strtok(NULL, ","))
				fleets[nfleets++] = (unsigned)atoi(p);
			for (unsigned f = 0; f < nfleets; f++)
				if (fleets[f] < 1 || fleets[f] > PG_MAX_BACKENDS - 1) {
					fprintf(stderr,
					        "routebench: --backends: each count in 1..%d\n",
					        PG_MAX_BACKENDS - 1);
					return 2;
				}
		} else {
			fprintf(stderr, "routebench: unknown option %s (see the usage in main.c)\n",
			        argv[i]);
			return 2;
		}
		i++;
	}
	if (strcmp(where, "cold") && strcmp(where, "warm") && strcmp(where, "both")) {
		fprintf(stderr, "routebench: --body: cold, warm or both\n");
		return 2;
	}
	if (strcmp(arrival, "whole") && strcmp(arrival, "pieces") && strcmp(arrival, "both")) {
		fprintf(stderr, "routebench: --arrival: whole, pieces or both\n");
		return 2;
	}
	if (new_choices < 1 || new_choices > PG_RING_CANDIDATES) {
		fprintf(stderr, "routebench: --choices: 1..%d\n", PG_RING_CANDIDATES);
		return 2;
	}
	if (convs < 1 || convs > CONVS_MAX) {
		fprintf(stderr, "routebench: --convs: 1..%d\n", CONVS_MAX);
		return 2;
	}
	pg_log_level = PG_LOG_ERROR;
	if (rebuild_only)
		return bench_rebuild(fleets, nfleets, reps);
	cap = kib * 1024 + 8192; /* a body ends within a turn past kib KiB */
	bodies = malloc(cap * convs);
	lat = calloc(2 * (size_t)rounds * convs, sizeof(*lat));
	ring = malloc(sizeof(*ring));
	rx = malloc(cap);
	if (!bodies || !lat || !ring || !rx)
		return 1;
	printf("routing cost per request (pg_route_worker), %zu KiB chat bodies, %u conversations "
	       "x %u "
	       "turns\n",
	       kib, convs, rounds);
	printf("%-13s %8s %9s %9s %9s %10s %12s %5s %7s %8s\n", "strategy", "backends", "p50 us",
	       "p99 us", "max us", "matched", "ring rebuild", "body", "arrival", "cpu p50");
	for (unsigned f = 0; f < nfleets; f++) {
		/* each strategy, body cold and warm, arriving whole and in pieces */
		for (unsigned k = 0; k < sizeof(strategies) / sizeof(strategies[0]) * 4; k++) {
			const size_t s = k / 4, w = k / 2 % 2, a = k % 2;
			const bool warm = w == 1, pieces = a == 1;
			struct pg_gateway gw;
			struct pg_config cfg;
			struct pg_route_cfg rc;
			uint64_t matched = 0, t0, rebuild, *cpu = lat + (size_t)rounds * convs;
			size_t n = 0, window;

			if ((only && strcmp(only, pg_strategy_flag(strategies[s]))) ||
			    (strcmp(where, "both") && strcmp(where, wheres[w])) ||
			    (strcmp(arrival, "both") && strcmp(arrival, arrivals[a])))
				continue;
			setup(&gw, &cfg, fleets[f]);
			pg_router_cfg(&gw.router, 0, &rc);
			rc.strategy = strategies[s];
			pg_control_set_routing(&gw, &rc, "routebench");
			window = pg_route_key_window(&rc);
			fleet_members(members, fleets[f], addrs);
			t0 = now_ns();
			pg_ring_build(ring, members, fleets[f]);
			rebuild = now_ns() - t0;
			for (unsigned t = 0; t < rounds; t++) {
				/* Cold: a round's bodies first, so that only routing is
				 * timed (and profiled). */
				for (unsigned c = 0; c < convs && !warm; c++)
					blen[c] = body(bodies + (size_t)c * cap, cap, c, t, kib);
				for (unsigned c = 0; c < convs; c++) {
					struct pg_route_input in = {
					    .api = PG_API_CHAT, .complete = true, .scratch = &ks};
					struct pg_choice ch;
					struct pg_key key;
					uint64_t ahead = 0;

					in.body = bodies + (size_t)c * cap;
					in.body_len = blen[c];
					if (warm) { /* written just before, untimed */
						in.body = rx;
						in.body_len = body(rx, cap, c, t, kib);
					}
					if (pieces &&
					    in.body_len >= PG_PARSE_AHEAD_MIN + PG_BUFSZ) {
						/* the last piece a whole buffer: the worst case,
						 * the same for every body length */
						size_t npieces =
						    (in.body_len - PG_PARSE_AHEAD_MIN) / PG_BUFSZ;

						t0 = now_ns();
						pg_json_stream_init(&ps, window);
						for (size_t h = in.body_len - npieces * PG_BUFSZ;
						     h < in.body_len; h += PG_BUFSZ)
							pg_json_stream_feed(&ps, in.body, h, false);
						ahead = now_ns() - t0;
						in.pre = &ps;
					}
					t0 = now_ns();
					if (in.pre)
						pg_json_stream_feed(&ps, in.body, in.body_len,
						                    true);
					pg_route_worker(&gw.router, 0, &in, NULL, t0, &key, &ch);
					lat[n] = now_ns() - t0;
					cpu[n] = lat[n] + ahead;
					n++;
					matched += (uint64_t)ch.matched *
					           PG_CA_CHARS_PER_TOKEN; /* tokens: to bytes */
				}
			}
			qsort(lat, n, sizeof(*lat), cmp_u64);
			qsort(cpu, n, sizeof(*cpu), cmp_u64);
			printf("%-13s %8u %9.1f %9.1f %9.1f %9.0f%% %10.0f us %5s %7s %8.1f\n",
			       pg_strategy_flag(strategies[s]), fleets[f], lat[n / 2] / 1e3,
			       lat[n * 99 / 100] / 1e3, lat[n - 1] / 1e3,
			       100.0 * (double)matched / ((double)n * (double)kib * 1024),
			       rebuild / 1e3, wheres[w], arrivals[a], cpu[n / 2] / 1e3);
			pg_maps_close(&gw.maps);
			pg_rstats_free(gw.rstats);
		}
	}
	pg_json_stream_free(&ps);
	pg_key_scratch_free(&ks);
	free(rx);
	free(ring);
	free(lat);
	free(bodies);
	return 0;
}
