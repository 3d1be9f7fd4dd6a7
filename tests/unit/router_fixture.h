/* SPDX-License-Identifier: MIT */
/*
 * What the routing core's tests share (test_room.c, test_capacity.c): a
 * router on shared-memory maps, no gateway, its clock the test's.
 */
#ifndef PG_TEST_ROUTER_FIXTURE_H
#define PG_TEST_ROUTER_FIXTURE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "lib/ring.h"
#include "router/capacity.h"
#include "router/load.h"
#include "router/route.h"

static struct pg_maps maps;
static struct pg_router r;
static uint64_t now_ns = 1000000000ull; /* the router's clock */

static inline uint64_t clock_of(const struct pg_router *router)
{
	(void)router;
	return now_ns;
}

/* n idle members, at the defaults (no speed measured), strategy s. */
static inline int setup_n(unsigned n, enum pg_strategy s)
{
	struct pg_ring_member mem[8];
	struct pg_ring *ring;
	char err[128];

	if (pg_maps_open(&maps, false, "", 0, err, sizeof(err)))
		return -1;
	r = (struct pg_router){.maps = &maps, .clock = clock_of};
	for (unsigned id = 1; id <= n; id++) {
		maps.backends[id].flags = PG_BACKEND_ACTIVE;
		maps.backends[id].epoch = 1;
		pg_router_activate(&r, id);
		mem[id - 1] = (struct pg_ring_member){.id = (uint16_t)id, .seed = id * 7919};
	}
	ring = pg_maps_pool_ring_begin(&maps, 0);
	pg_ring_build(ring, mem, n);
	pg_maps_pool_ring_publish(&maps, 0, ring);
	maps.state[0].strategy = s;
	maps.state[0].prefix_length = PG_PREFIX_LENGTH_DEFAULT;
	maps.state[0].concurrency_threshold = PG_CONCURRENCY_DEFAULT;
	maps.state[0].nbackends = n;
	return 0;
}

static inline int setup(void **state)
{
	(void)state;
	return setup_n(2, PG_STRATEGY_PREFIX_AWARE);
}

static inline int teardown(void **state)
{
	(void)state;
	pg_maps_close(&maps);
	return 0;
}

static inline uint64_t now_ms(void)
{
	return now_ns / 1000000;
}

#endif /* PG_TEST_ROUTER_FIXTURE_H */
