// SPDX-License-Identifier: MIT
/*
 * Which provided buffers are posted (proxy/hotbufs.h): the one given back
 * last is posted first; at most depth are posted; a turn in which a
 * receive lacked a buffer doubles the depth once, up to all of them; quiet
 * ticks halve it back to PG_HOTBUFS_MIN; every buffer is always in one
 * place, and a buffer given back twice stops the process.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
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
	for (unsigned i = 0; i < 3; i++)
		pg_hotbufs_filled(&h, i);
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

/* Every posted buffer filled (the ring empty), then given back. */
static void fill_and_give(struct pg_hotbufs *h, const int *bids, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		pg_hotbufs_filled(h, (unsigned)bids[i]);
	for (unsigned i = 0; i < n; i++)
		pg_hotbufs_give(h, (unsigned)bids[i]);
}

static void test_depth_grows_once_per_posting(void **state)
{
	struct pg_hotbufs h;
	int bids[NBUFS];
	unsigned n;

	(void)state;
	assert_int_equal(pg_hotbufs_init(&h, NBUFS), 0);
	n = post_all(&h, bids);
	assert_int_equal(n, PG_HOTBUFS_MIN);
	fill_and_give(&h, bids, n);
	/* Many receives lacked a buffer in one turn: the depth doubles once
	 * per posting, 16 -> 32 -> 64 -> 128, never past every buffer. */
	for (unsigned want = 2 * PG_HOTBUFS_MIN; want <= 2 * NBUFS; want *= 2) {
		for (int i = 0; i < 50; i++)
			pg_hotbufs_lacked(&h);
		n = post_all(&h, bids);
		assert_int_equal(h.depth, want > NBUFS ? NBUFS : want);
		assert_int_equal(n, h.depth);
		fill_and_give(&h, bids, n);
	}
	/* No lack: the same depth at the next posting. */
	assert_int_equal(post_all(&h, bids), NBUFS);
	assert_int_equal(h.nfree, 0);
	assert_int_equal(pg_hotbufs_next(&h), -1);
	pg_hotbufs_free(&h);
}

static void test_quiet_ticks_shrink_depth(void **state)
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
	/* Quiet ticks, but one lacking tick among them starts the count anew. */
	for (int i = 0; i < PG_HOTBUFS_QUIET_TICKS - 1; i++)
		pg_hotbufs_tick(&h);
	pg_hotbufs_lacked(&h);
	pg_hotbufs_tick(&h);
	for (int i = 0; i < PG_HOTBUFS_QUIET_TICKS - 1; i++)
		pg_hotbufs_tick(&h);
	assert_int_equal(h.depth, 8 * PG_HOTBUFS_MIN);
	pg_hotbufs_tick(&h);
	assert_int_equal(h.depth, 4 * PG_HOTBUFS_MIN);
	h.lacked = false; /* (the lack above was before the halving) */
	/* Posted buffers stay posted: none more until fewer than depth are. */
	assert_int_equal(post_all(&h, bids), 0);
	for (unsigned i = 0; i < 7 * PG_HOTBUFS_MIN; i++) { /* filled, used, given back */
		pg_hotbufs_filled(&h, i);
		pg_hotbufs_give(&h, i);
	}
	assert_int_equal(post_all(&h, bids), 3 * PG_HOTBUFS_MIN);
	for (int i = 0; i < 10 * PG_HOTBUFS_QUIET_TICKS; i++)
		pg_hotbufs_tick(&h);
	assert_int_equal(h.depth, PG_HOTBUFS_MIN); /* never below */
	pg_hotbufs_free(&h);
}

/* Random turns: receives fill from the ring's head in order, connections
 * give back, some receives lack; what is posted is always the top of a
 * model stack of the given-back buffers, as many as the depth allows, the
 * counts add up and no buffer is in two places. */
static void test_every_buffer_in_one_place(void **state)
{
	struct pg_hotbufs h;
	int bids[NBUFS], ring[NBUFS], out[NBUFS], stack[NBUFS];
	unsigned nring = 0, nout = 0, nstack = NBUFS, grew = 0, shrank = 0;
	uint64_t rng = 0x9E3779B97F4A7C15ull;

	(void)state;
	for (unsigned i = 0; i < NBUFS; i++)
		stack[i] = (int)(NBUFS - 1 - i);
	assert_int_equal(pg_hotbufs_init(&h, NBUFS), 0);
	for (int turn = 0; turn < 20000; turn++) {
		unsigned depth_was = h.depth, n = post_all(&h, bids), room;

		/* Doubled at most once, then filled up to it from the top. */
		assert_true(h.depth == depth_was || h.depth == depth_was * 2 || h.depth == NBUFS);
		grew += h.depth > depth_was;
		room = h.depth > nring ? h.depth - nring : 0;
		assert_int_equal(n, room < nstack ? room : nstack);
		for (unsigned i = 0; i < n; i++) {
			assert_int_equal(bids[i], stack[--nstack]);
			ring[nring++] = bids[i];
		}
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		/* Small turns mostly (a quiet load), a burst now and then. */
		for (unsigned k = (unsigned)(rng % (turn % 1000 < 900 ? 12 : 60)); k--;) {
			if (!nring) {
				pg_hotbufs_lacked(&h);
				continue;
			}
			pg_hotbufs_filled(&h, (unsigned)ring[0]);
			out[nout++] = ring[0];
			memmove(ring, ring + 1, --nring * sizeof(*ring));
		}
		for (unsigned k = (unsigned)(rng >> 8) % 14; k-- && nout;) {
			unsigned i = (unsigned)(rng >> (16 + k % 32)) % nout;

			pg_hotbufs_give(&h, (unsigned)out[i]);
			stack[nstack++] = out[i];
			out[i] = out[--nout];
		}
		if (turn % 10 == 0) {
			unsigned before = h.depth;

			pg_hotbufs_tick(&h);
			shrank += h.depth < before;
		}
		assert_int_equal(h.posted, nring);
		assert_int_equal(h.nfree, nstack);
		assert_int_equal(h.nfree + h.posted + nout, NBUFS);
		assert_true(h.depth >= PG_HOTBUFS_MIN && h.depth <= NBUFS);
	}
	/* The walk made the ring deeper and shallower again, many times. */
	assert_true(grew > 10 && shrank > 10);
	pg_hotbufs_free(&h);
}

/* Runs f in a child; true if it was killed by SIGABRT. */
static bool aborts(void (*f)(void))
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (!pid) {
		f();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void give_twice(void)
{
	struct pg_hotbufs h;
	int bids[NBUFS];

	pg_hotbufs_init(&h, NBUFS);
	post_all(&h, bids);
	pg_hotbufs_filled(&h, (unsigned)bids[0]);
	pg_hotbufs_give(&h, (unsigned)bids[0]);
	pg_hotbufs_give(&h, (unsigned)bids[0]);
}

static void give_posted(void)
{
	struct pg_hotbufs h;
	int bids[NBUFS];

	pg_hotbufs_init(&h, NBUFS);
	post_all(&h, bids);
	pg_hotbufs_give(&h, (unsigned)bids[1]); /* posted, never filled */
}

static void filled_unposted(void)
{
	struct pg_hotbufs h;

	pg_hotbufs_init(&h, NBUFS);
	pg_hotbufs_filled(&h, NBUFS - 1); /* free, not posted */
}

static void test_misuse_stops(void **state)
{
	(void)state;
	assert_true(aborts(give_twice));
	assert_true(aborts(give_posted));
	assert_true(aborts(filled_unposted));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hottest_first),
	    cmocka_unit_test(test_depth_grows_once_per_posting),
	    cmocka_unit_test(test_quiet_ticks_shrink_depth),
	    cmocka_unit_test(test_every_buffer_in_one_place),
	    cmocka_unit_test(test_misuse_stops),
	};

	return cmocka_run_group_tests_name("hotbufs", tests, NULL, NULL);
}
