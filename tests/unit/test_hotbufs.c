// SPDX-License-Identifier: MIT
/*
 * Which provided buffers are posted (proxy/hotbufs.h): the one given back
 * last is posted first; at most depth are posted; a receive that lacked a
 * buffer doubles the depth once, up to all of them; a tick with none halves
 * it back to PG_HOTBUFS_MIN; every buffer is always in one place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "proxy/hotbufs.h"

#define NBUFS 128

/* Post everything hotbufs hands out; how many. */
static unsigned post_all(struct pg_hotbufs *h, int *bids)
{
	unsigned n = 0;
	int bid;

	while ((bid = pg_hotbufs_next(h)) >= 0)
		bids[n++] = bid;
	return n;
}

static void test_hottest_first(void **state)
{
	struct pg_hotbufs h;
	int bids[NBUFS];

	(void)state;
	assert_int_equal(pg_hotbufs_init(&h, NBUFS), 0);
	assert_int_equal(post_all(&h, bids), PG_HOTBUFS_MIN);
	for (unsigned i = 0; i < PG_HOTBUFS_MIN; i++)
		assert_int_equal(bids[i], (int)i); /* bid 0 first at the start */
	assert_int_equal(h.posted, PG_HOTBUFS_MIN);
	/* Three receives fill buffers 0, 1, 2; 2 comes back, then 0. */
	for (int i = 0; i < 3; i++)
		pg_hotbufs_filled(&h);
	pg_hotbufs_give(&h, 2);
	pg_hotbufs_give(&h, 0);
	/* Three posted again: 0 (the latest back), 2, then one never used. */
	assert_int_equal(post_all(&h, bids), 3);
	assert_int_equal(bids[0], 0);
	assert_int_equal(bids[1], 2);
	assert_int_equal(bids[2], PG_HOTBUFS_MIN);
	assert_int_equal(h.posted + h.nfree + 1, NBUFS); /* buffer 1 is out */
	pg_hotbufs_free(&h);
}

static void test_depth_grows_once_per_posting(void **state)
{
	struct pg_hotbufs h;
	int bids[NBUFS];

	(void)state;
	assert_int_equal(pg_hotbufs_init(&h, NBUFS), 0);
	assert_int_equal(post_all(&h, bids), PG_HOTBUFS_MIN);
	for (unsigned i = 0; i < PG_HOTBUFS_MIN; i++)
		pg_hotbufs_filled(&h);
	/* Many receives lacked a buffer in one turn: the depth doubles once. */
	for (int i = 0; i < 50; i++)
		pg_hotbufs_lacked(&h);
	assert_int_equal(post_all(&h, bids), 2 * PG_HOTBUFS_MIN);
	assert_int_equal(h.depth, 2 * PG_HOTBUFS_MIN);
	/* Lacking again and again: up to every buffer, never more. */
	for (int turn = 0; turn < 10; turn++) {
		pg_hotbufs_lacked(&h);
		post_all(&h, bids);
	}
	assert_int_equal(h.depth, NBUFS);
	assert_int_equal(h.posted, NBUFS - PG_HOTBUFS_MIN); /* 16 are out */
	assert_int_equal(h.nfree, 0);
	assert_int_equal(pg_hotbufs_next(&h), -1);
	pg_hotbufs_free(&h);
}

static void test_tick_shrinks_unneeded_depth(void **state)
{
	struct pg_hotbufs h;
	int bids[NBUFS];

	(void)state;
	assert_int_equal(pg_hotbufs_init(&h, NBUFS), 0);
	for (int turn = 0; turn < 3; turn++) {
		pg_hotbufs_lacked(&h);
		post_all(&h, bids);
	}
	assert_int_equal(h.depth, 8 * PG_HOTBUFS_MIN);
	pg_hotbufs_tick(&h); /* it lacked since the last tick: kept */
	assert_int_equal(h.depth, 8 * PG_HOTBUFS_MIN);
	pg_hotbufs_tick(&h);
	assert_int_equal(h.depth, 4 * PG_HOTBUFS_MIN);
	/* Posted buffers stay posted: none more until fewer than depth are. */
	assert_int_equal(post_all(&h, bids), 0);
	for (unsigned i = 0; i < 7 * PG_HOTBUFS_MIN; i++) { /* filled, used, given back */
		pg_hotbufs_filled(&h);
		pg_hotbufs_give(&h, (uint16_t)i);
	}
	assert_int_equal(post_all(&h, bids), 3 * PG_HOTBUFS_MIN);
	for (int i = 0; i < 5; i++)
		pg_hotbufs_tick(&h);
	assert_int_equal(h.depth, PG_HOTBUFS_MIN); /* never below */
	pg_hotbufs_free(&h);
}

/* Random turns: receives fill, connections give back, some lack; the
 * counts always add up, no buffer is handed out twice, and the depth stays
 * within its bounds. */
static void test_every_buffer_in_one_place(void **state)
{
	struct pg_hotbufs h;
	int bids[NBUFS], ring[NBUFS], out[NBUFS];
	unsigned nring = 0, nout = 0;
	uint64_t rng = 0x9E3779B97F4A7C15ull;
	char where[NBUFS]; /* f free, p posted, o out */

	(void)state;
	memset(where, 'f', sizeof(where));
	assert_int_equal(pg_hotbufs_init(&h, NBUFS), 0);
	for (int turn = 0; turn < 20000; turn++) {
		unsigned n = post_all(&h, bids);

		for (unsigned i = 0; i < n; i++) {
			assert_int_equal(where[bids[i]], 'f');
			where[bids[i]] = 'p';
			ring[nring++] = bids[i];
		}
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		/* Receives fill from the ring's head, in order. */
		for (unsigned k = (unsigned)(rng % 40); k--;) {
			if (!nring) {
				pg_hotbufs_lacked(&h);
				continue;
			}
			where[ring[0]] = 'o';
			out[nout++] = ring[0];
			memmove(ring, ring + 1, --nring * sizeof(*ring));
			pg_hotbufs_filled(&h);
		}
		for (unsigned k = (unsigned)(rng >> 8) % 40; k-- && nout;) {
			unsigned i = (unsigned)(rng >> (16 + k % 32)) % nout;

			where[out[i]] = 'f';
			pg_hotbufs_give(&h, (uint16_t)out[i]);
			out[i] = out[--nout];
		}
		if (turn % 100 == 0)
			pg_hotbufs_tick(&h);
		assert_int_equal(h.posted, nring);
		assert_int_equal(h.nfree + h.posted + nout, NBUFS);
		assert_true(h.depth >= PG_HOTBUFS_MIN && h.depth <= NBUFS);
	}
	pg_hotbufs_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hottest_first),
	    cmocka_unit_test(test_depth_grows_once_per_posting),
	    cmocka_unit_test(test_tick_shrinks_unneeded_depth),
	    cmocka_unit_test(test_every_buffer_in_one_place),
	};

	return cmocka_run_group_tests_name("hotbufs", tests, NULL, NULL);
}
