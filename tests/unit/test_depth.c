// SPDX-License-Identifier: MIT
/*
 * The queue depth bound (doc/routing.md, Routing under load: how deep
 * one instance's queue may grow): many requests that open with one hot
 * prefix, sent to a loaded fleet of cache_aware instances, never leave
 * one instance's queue deeper than DEPTH_RATIO x the mean of the others'
 * plus DEPTH_SLACK requests.
 *
 * What bounds it: a prefix more than one instance's share of the
 * requests went through is taken as held by every instance (the shared
 * head, pg_ca_shared in router/index.c), so past it nothing is "cached"
 * on one instance alone and the cost rule (router/cache.h) compares the
 * queues themselves, within its ties (PG_CA_TIE_MS or PG_CA_TIE_FRAC of
 * the lowest). Without the shared head the first holder's cache saves
 * (1 + lambda) x the hot prefix's prefill, and lambda grows with the
 * queues: it would take every request.
 *
 * The fleet: 4 instances, each a first come, first served engine of
 * RATE tokens/s that keeps every prefix it was sent; requests every
 * GAP_MS, each HOT_CHARS of the hot prefix and SUFFIX_CHARS of its own,
 * so that once every instance holds the prefix the fleet is loaded at
 * LOAD of its capacity. The routing core runs on its own context over
 * shared memory (as test_room.c), its first tokens at the engines' times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/ring.h"
#include "router/cache.h"
#include "router/load.h"
#include "router/route.h"

#define NINST        4
#define NREQ         400
#define HOT_CHARS    16384 /* 4,096 tokens every request opens with */
#define SUFFIX_CHARS 2048  /* 512 tokens of its own */
#define RATE         10000.0
#define LOAD         0.95
/* The bound the test holds the rule to. */
#define DEPTH_RATIO 1.5
#define DEPTH_SLACK 1

static struct pg_maps maps;
static struct pg_router r;
static uint64_t now_ns = 1000000000ull;

static uint64_t clock_of(const struct pg_router *router)
{
	(void)router;
	return now_ns;
}

/* One request on its instance: when the engine gives its first token. */
struct job {
	struct pg_load_ticket t;
	uint64_t first_ns;
	bool pending;
};

static struct job jobs[NREQ];
static uint64_t free_ns[NINST + 1]; /* each engine's end of work */
static bool holds[NINST + 1];       /* each engine has the hot prefix */

static int setup(void **state)
{
	struct pg_ring_member mem[NINST];
	struct pg_ring *ring;
	char err[128];

	(void)state;
	if (pg_maps_open(&maps, false, "", 0, err, sizeof(err)))
		return -1;
	r = (struct pg_router){.maps = &maps,
	                       .clock = clock_of,
	                       .ca_work_base = PG_CA_WORK_BASE,
	                       .ca_work_queued = PG_CA_WORK_QUEUED};
	for (unsigned id = 1; id <= NINST; id++) {
		/* measured at the engines' speed, 20 ms of overhead */
		const struct pg_speed sp = {20, 1e6 / RATE, 0};

		maps.backends[id].flags = PG_BACKEND_ACTIVE;
		maps.backends[id].epoch = 1;
		pg_work_publish_speed(&maps.backends[id], &sp);
		maps.backends[id].fit_obs = PG_FIT_OWN_MIN;
		pg_router_activate(&r, id);
		mem[id - 1] = (struct pg_ring_member){.id = (uint16_t)id, .seed = id * 7919};
	}
	ring = pg_maps_pool_ring_begin(&maps, 0);
	pg_ring_build(ring, mem, NINST);
	pg_maps_pool_ring_publish(&maps, 0, ring);
	maps.state[0].strategy = PG_STRATEGY_CACHE_AWARE;
	maps.state[0].prefix_length = PG_PREFIX_LENGTH_DEFAULT;
	maps.state[0].concurrency_threshold = PG_CONCURRENCY_DEFAULT;
	maps.state[0].ca_choices = PG_CA_CHOICES_DEFAULT;
	maps.state[0].ca_capacity_blocks = 1u << 16;
	maps.state[0].nbackends = NINST;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pg_maps_close(&maps);
	return 0;
}

/* Text of n characters from seed (letters and spaces). */
static void text_of(char *t, size_t n, uint64_t seed)
{
	uint64_t x = 0x2545f4914f6cdd1dull * (seed + 1);

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		t[i] = x % 6 ? (char)('a' + x % 26) : ' ';
	}
}

/* Every first token due by t, in the engines' order. */
static void firsts_until(uint64_t t)
{
	for (;;) {
		struct job *next = NULL;

		for (size_t i = 0; i < NREQ; i++)
			if (jobs[i].pending && jobs[i].first_ns <= t &&
			    (!next || jobs[i].first_ns < next->first_ns))
				next = &jobs[i];
		if (!next)
			return;
		now_ns = next->first_ns;
		pg_load_first(&r, 0, NULL, &next->t, now_ns);
		next->pending = false;
	}
}

/* Request i arrives now: routed by the core, its work queued on the
 * instance chosen (as the gateway's dispatch takes it), and its first
 * token due when that engine has done the part of the prompt it does not
 * hold. */
static uint16_t arrive(size_t i, char *body)
{
	struct pg_route_input in = {.api = PG_API_RAW,
	                            .body = body,
	                            .body_len = HOT_CHARS + SUFFIX_CHARS,
	                            .complete = true};
	const uint32_t per_tok = PG_CA_CHARS_PER_TOKEN;
	struct pg_choice ch;
	struct pg_key key;
	uint16_t id;
	uint32_t held, work, engine_work;
	uint64_t start;

	text_of(body + HOT_CHARS, SUFFIX_CHARS, i + 1);
	id = pg_route_worker(&r, 0, &in, NULL, i, &key, &ch);
	assert_true(id >= 1 && id <= NINST);
	held = ch.est[0].id == id ? ch.est[0].matched : 0;
	work = key.tokens > held ? key.tokens - held : 1;
	pg_inflight_take(&r, id, ch.decision);
	pg_load_take(&r, id, work, &jobs[i].t, now_ns);
	engine_work = (HOT_CHARS * !holds[id] + SUFFIX_CHARS) / per_tok;
	holds[id] = true;
	start = free_ns[id] > now_ns ? free_ns[id] : now_ns;
	free_ns[id] = start + (uint64_t)(engine_work / RATE * 1e9);
	jobs[i].first_ns = free_ns[id];
	jobs[i].pending = true;
	return id;
}

/* The deepest queue against the mean of the others, after every
 * decision: within DEPTH_RATIO of it plus PG_CA_SHARED_USES requests
 * throughout (the hot prefix's first requests go where it is held until
 * it counts as shared, and that queue drains at its engine's pace), plus
 * DEPTH_SLACK once that has passed (the run's second half). */
static void test_hot_prefix_depth(void **state)
{
	const double suffix_ms = SUFFIX_CHARS / PG_CA_CHARS_PER_TOKEN / RATE * 1000;
	const uint64_t gap_ns = (uint64_t)(suffix_ms / NINST / LOAD * 1e6);
	char *body = malloc(HOT_CHARS + SUFFIX_CHARS);
	unsigned sent[NINST + 1] = {0}, deepest_seen = 0;

	(void)state;
	assert_non_null(body);
	text_of(body, HOT_CHARS, 0);
	for (size_t i = 0; i < NREQ; i++) {
		unsigned depth[NINST + 1], deepest = 1, others = 0;
		double bound;

		firsts_until(now_ns + gap_ns);
		now_ns += gap_ns - (now_ns - 1000000000ull) % gap_ns;
		sent[arrive(i, body)]++;
		for (unsigned id = 1; id <= NINST; id++) {
			depth[id] = maps.backends[id].prefill_reqs;
			if (depth[id] > depth[deepest])
				deepest = id;
		}
		for (unsigned id = 1; id <= NINST; id++)
			others += id == deepest ? 0 : depth[id];
		bound = DEPTH_RATIO * others / (NINST - 1) +
		        (i < NREQ / 2 ? PG_CA_SHARED_USES : DEPTH_SLACK);
		if (depth[deepest] > bound)
			fail_msg("request %zu: instance %u holds %u queued, the others %u in all",
			         i, deepest, depth[deepest], others);
		if (depth[deepest] > deepest_seen)
			deepest_seen = depth[deepest];
	}
	/* the fleet was loaded (queues formed), and every instance served */
	print_message("deepest queue %u; sent %u %u %u %u\n", deepest_seen, sent[1], sent[2],
	              sent[3], sent[4]);
	assert_true(deepest_seen > PG_CA_SHARED_USES);
	for (unsigned id = 1; id <= NINST; id++)
		assert_true(sent[id] > NREQ / NINST / 2);
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_hot_prefix_depth, setup, teardown),
	};

	return cmocka_run_group_tests_name("depth", tests, NULL, NULL);
}
