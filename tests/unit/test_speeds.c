// SPDX-License-Identifier: MIT
/*
 * Which speed each backend is routed on (router/load.c): its own fit once it
 * has PG_FIT_OWN_MIN first tokens, its pool's (the median of the members
 * that have) until then, the defaults while none has. A few short prompts
 * can make an instance look several times slower than it is; routed on
 * that, it would get no new work to learn otherwise from.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>
#include "router/load.h"
#include "router/router.h"

/* The routing core alone, over a table of its own: no gateway. */
static struct pg_maps maps;
static struct pg_router r;

static int setup(void **state)
{
	(void)state;
	memset(&maps, 0, sizeof(maps));
	memset(&r, 0, sizeof(r));
	maps.backends = calloc(PG_MAX_BACKENDS, sizeof(*maps.backends));
	r.maps = &maps;
	r.speeds = pg_speeds_new();
	if (!maps.backends || !r.speeds)
		return -1;
	maps.npools = 1;
	for (unsigned id = 1; id <= 3; id++) {
		maps.backends[id].flags = PG_BACKEND_ACTIVE;
		maps.backends[id].epoch = 1;
	}
	r.backend_hwm = 3;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pg_speeds_free(r.speeds);
	free(maps.backends);
	return 0;
}

/* n whole TTFTs of backend id at rate tokens/s and overhead_ms, prompts of
 * tokens0, tokens0 + step, ...; *now_ns advances. */
static void observe(uint16_t id, unsigned n, double rate, double overhead_ms, uint32_t tokens0,
                    uint32_t step, uint64_t *now_ns)
{
	for (unsigned i = 0; i < n; i++) {
		const uint32_t tokens = tokens0 + i * step;
		const struct pg_fit_obs o = {
		    .whole = true,
		    .tokens = tokens,
		    .y_us = (uint32_t)((overhead_ms + tokens * 1000.0 / rate) * 1000)};

		*now_ns += 50000000;
		pg_load_observe(&r, id, 1, &o, *now_ns);
	}
}

static double rate_of(uint16_t id)
{
	struct pg_speed sp;

	pg_work_speed(&maps.backends[id], &sp);
	return 1e6 / sp.ms_per_ktok;
}

static void test_own_fit_from_min(void **state)
{
	uint64_t now = 1000000000ull;
	const struct pg_backend *b = maps.backends;

	(void)state;
	/* nothing learned: the defaults, for all */
	assert_true(rate_of(1) == PG_SPEED_RATE_DEFAULT && rate_of(3) == PG_SPEED_RATE_DEFAULT);
	/* 1 learns its speed from 20; 2 saw 5 first tokens that make it look
	 * slow (short prompts, a slow moment): not routed on */
	observe(1, 20, 146000, 15, 1000, 1000, &now);
	observe(2, PG_FIT_OWN_MIN - 3, 30000, 25, 300, 50, &now);
	assert_int_equal(b[2].fit_obs, PG_FIT_OWN_MIN - 3);
	assert_int_equal(b[2].fit_rate, 0);
	assert_true(rate_of(1) > 100000);
	/* the control thread's tick: 2 and 3 take the pool's speed, 1's, and
	 * 2's fit goes on from it rather than from the defaults */
	pg_load_share_speeds(&r);
	assert_int_equal(b[2].fit_rate, b[1].fit_rate);
	assert_true(fabs(1e6 / r.speeds->slot[2].fit.prior.ms_per_ktok - b[1].fit_rate) < 2);
	assert_true(fabs(r.speeds->slot[2].fit.prior.overhead_ms * 1000 - b[1].fit_overhead_us) <
	            2);
	assert_int_equal(b[3].fit_rate, b[1].fit_rate);
	assert_int_equal(b[3].fit_overhead_us, b[1].fit_overhead_us);
	/* 2 is slower indeed: from its 8th first token its own speed counts */
	observe(2, 10, 50000, 15, 1000, 1000, &now);
	assert_true(b[2].fit_obs >= PG_FIT_OWN_MIN);
	assert_true(rate_of(2) < 0.6 * rate_of(1));
	pg_load_share_speeds(&r);
	assert_true(rate_of(2) < 0.6 * rate_of(1)); /* its own, kept */
	/* the pool's speed is now the median of 1 and 2 */
	assert_true(b[3].fit_rate == b[1].fit_rate || b[3].fit_rate == b[2].fit_rate);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_own_fit_from_min, setup, teardown),
	};

	return cmocka_run_group_tests_name("speeds", tests, NULL, NULL);
}
