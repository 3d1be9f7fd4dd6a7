/* SPDX-License-Identifier: MIT */
/*
 * What the ring tests share (test_ring.c: the routing contract's promises;
 * test_ring_build.c: the table's bytes, every scan, updates): fixed-seed
 * keys, members, and how keys spread over them.
 */
#ifndef PG_TEST_RING_FIXTURE_H
#define PG_TEST_RING_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "lib/ring.h"

#define NKEYS 100000

/* splitmix64: a small deterministic generator for keys and shuffles. */
static inline uint64_t next_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t *keys(void)
{
	static uint64_t k[NKEYS];
	static int done;
	uint64_t st = 42;

	if (!done) {
		for (size_t i = 0; i < NKEYS; i++)
			k[i] = next_rand(&st);
		done = 1;
	}
	return k;
}

static inline uint64_t ident_seed(unsigned i)
{
	char buf[32];
	int len = snprintf(buf, sizeof(buf), "10.0.%u.%u:8000", i / 250, i % 250 + 1);

	return pg_ring_seed(buf, (size_t)len);
}

/* Members for identities 0..n-1 with ids 1..n. */
static inline void members(struct pg_ring_member *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		m[i].id = (uint16_t)(i + 1);
		m[i].seed = ident_seed((unsigned)i);
	}
}

static inline struct pg_ring *new_ring(void)
{
	struct pg_ring *r = malloc(sizeof(*r));

	assert_non_null(r);
	/* Garbage, so a build that forgets an entry is caught. */
	memset(r, 0xa5, sizeof(*r));
	return r;
}

static inline uint16_t owner(const struct pg_ring *r, uint64_t key)
{
	uint16_t c[PG_RING_CANDIDATES];

	return pg_ring_candidates(r, key, c) ? c[0] : 0;
}

/* Keys per id over the NKEYS keys; returns max/min over ids present in m. */
static inline double key_spread(const struct pg_ring *r, const struct pg_ring_member *m, size_t n)
{
	static unsigned count[PG_MAX_BACKENDS];
	unsigned lo = NKEYS, hi = 0;

	memset(count, 0, sizeof(count));
	for (size_t i = 0; i < NKEYS; i++)
		count[owner(r, keys()[i])]++;
	assert_int_equal(count[0], 0);
	for (size_t i = 0; i < n; i++) {
		lo = count[m[i].id] < lo ? count[m[i].id] : lo;
		hi = count[m[i].id] > hi ? count[m[i].id] : hi;
	}
	assert_true(lo > 0);
	return (double)hi / lo;
}

/* Same over slots (the exact share of the key space each member owns). */
static inline double slot_spread(const struct pg_ring *r, const struct pg_ring_member *m, size_t n)
{
	static unsigned count[PG_MAX_BACKENDS];
	unsigned lo = PG_RING_SLOTS, hi = 0;

	memset(count, 0, sizeof(count));
	for (uint32_t s = 0; s < PG_RING_SLOTS; s++)
		count[r->slot[s][0]]++;
	for (size_t i = 0; i < n; i++) {
		lo = count[m[i].id] < lo ? count[m[i].id] : lo;
		hi = count[m[i].id] > hi ? count[m[i].id] : hi;
	}
	assert_true(lo > 0);
	return (double)hi / lo;
}

#endif /* PG_TEST_RING_FIXTURE_H */
