// SPDX-License-Identifier: MIT
/*
 * pgload's inter-token latency and distributions (itl.c): gaps from
 * content events as they are read, batches of events in one read, a reset
 * between responses, appending to the run's list, and the report's mean
 * and nearest-rank percentiles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/pgload/itl.h"

#define MS 1000000ull

static void test_gaps(void **state)
{
	static const struct {
		uint64_t at;  /* ms */
		unsigned k;   /* events read then */
		unsigned n;   /* gaps after it */
		uint64_t sum; /* ms */
		uint64_t max; /* ms */
	} steps[] = {
	    {100, 0, 0, 0, 0},     /* nothing */
	    {100, 1, 0, 0, 0},     /* the first event: TTFT, no gap */
	    {125, 1, 1, 25, 25},   /* 25 ms */
	    {150, 1, 2, 50, 25},   /* 25 ms */
	    {260, 3, 5, 160, 110}, /* 110 ms, then 0 and 0: one read, three events */
	    {270, 1, 6, 170, 110}, /* 10 ms */
	};
	static const uint64_t want[] = {25, 25, 110, 0, 0, 10};
	struct pg_itl t = {0};

	(void)state;
	pg_itl_reset(&t);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		pg_itl_events(&t, steps[i].at * MS, steps[i].k);
		assert_int_equal(t.gap.n, steps[i].n);
		assert_int_equal(t.sum_ns, steps[i].sum * MS);
		assert_int_equal(t.max_ns, steps[i].max * MS);
	}
	for (size_t i = 0; i < t.gap.n; i++)
		assert_int_equal(t.gap.v[i], want[i] * MS);
	assert_false(t.oom);

	/* the next response starts afresh */
	pg_itl_reset(&t);
	pg_itl_events(&t, 400 * MS, 1);
	assert_int_equal(t.gap.n, 0);
	pg_itl_events(&t, 430 * MS, 1);
	assert_int_equal(t.gap.n, 1);
	assert_int_equal(t.gap.v[0], 30 * MS);
	assert_int_equal(t.sum_ns, 30 * MS);
	assert_int_equal(t.max_ns, 30 * MS);
	pg_itl_free(&t);
}

/* A first event at time 0 (a clock that starts there) still counts. */
static void test_time_zero(void **state)
{
	struct pg_itl t = {0};

	(void)state;
	pg_itl_reset(&t);
	pg_itl_events(&t, 0, 1);
	pg_itl_events(&t, 5 * MS, 1);
	assert_int_equal(t.gap.n, 1);
	assert_in_range(t.gap.v[0], 5 * MS - 1, 5 * MS);
	pg_itl_free(&t);
}

static void test_append(void **state)
{
	struct pg_gaps run = {0};
	uint64_t v[200];

	(void)state;
	for (int i = 0; i < 200; i++)
		v[i] = (uint64_t)i;
	assert_int_equal(pg_gaps_append(&run, v, 0), 0);
	assert_int_equal(run.n, 0);
	for (int r = 0; r < 5; r++)
		assert_int_equal(pg_gaps_append(&run, v, 200), 0);
	assert_int_equal(run.n, 1000);
	assert_true(run.cap >= 1000);
	for (size_t i = 0; i < run.n; i++)
		assert_int_equal(run.v[i], i % 200);
	pg_gaps_free(&run);
	assert_null(run.v);
	assert_int_equal(run.n, 0);
}

static void test_dist(void **state)
{
	static const struct {
		size_t n;
		uint64_t v[10]; /* ms */
		double out[4];  /* mean, p50, p90, p99 in ms */
	} tab[] = {
	    {0, {0}, {-1, -1, -1, -1}},
	    {1, {7}, {7, 7, 7, 7}},
	    {2, {30, 10}, {20, 10, 30, 30}},
	    /* 10 samples: p50 is the 5th, p90 the 9th, p99 the 10th */
	    {10, {10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, {5.5, 5, 9, 10}},
	    {4, {25, 25, 25, 81}, {39, 25, 81, 81}},
	};

	(void)state;
	for (size_t t = 0; t < sizeof(tab) / sizeof(tab[0]); t++) {
		uint64_t v[10];
		double out[4];

		for (size_t i = 0; i < tab[t].n; i++)
			v[i] = tab[t].v[i] * MS;
		pg_dist(v, tab[t].n, out);
		for (int i = 0; i < 4; i++)
			assert_float_equal(out[i], tab[t].out[i], 1e-9);
	}
}

/* 100 gaps of 1..100 ms: percentiles are the 50th, 90th, 99th values. */
static void test_dist_hundred(void **state)
{
	uint64_t v[100];
	double out[4];

	(void)state;
	for (int i = 0; i < 100; i++)
		v[i] = (uint64_t)(100 - i) * MS;
	pg_dist(v, 100, out);
	assert_float_equal(out[0], 50.5, 1e-9);
	assert_float_equal(out[1], 50, 1e-9);
	assert_float_equal(out[2], 90, 1e-9);
	assert_float_equal(out[3], 99, 1e-9);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gaps),         cmocka_unit_test(test_time_zero),
	    cmocka_unit_test(test_append),       cmocka_unit_test(test_dist),
	    cmocka_unit_test(test_dist_hundred),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
