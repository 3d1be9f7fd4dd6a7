// SPDX-License-Identifier: MIT
/* The rise/fall state machine of active health checks; when a backend is
 * scraped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "members/health.h"
#include "router/work.h"

/* Feed a string of results ('+' pass, '-' fail) and return the transitions
 * as a string ('U' became unhealthy, 'H' became healthy, '.' none). */
static void run(const char *results, unsigned rise, unsigned fall, char *out)
{
	struct pg_health_state st = {0};

	for (; *results; results++) {
		int c = pg_health_result(&st, *results == '+', rise, fall);

		*out++ = c < 0 ? 'U' : c > 0 ? 'H' : '.';
	}
	*out = '\0';
}

static void test_transitions(void **state)
{
	static const struct {
		const char *in;
		unsigned rise, fall;
		const char *want;
	} cases[] = {
	    {"+++", 2, 3, "..."},             /* healthy stays healthy */
	    {"--+--+---", 2, 3, "........U"}, /* fall needs failures in a row */
	    {"---++", 2, 3, "..U.H"},         /* rise needs passes in a row */
	    {"---+-++", 2, 3, "..U...H"},     /* a failure resets the rise run */
	    {"-", 1, 1, "U"},
	    {"-+-+", 1, 1, "UHUH"},
	    {"------", 2, 3, "..U..."}, /* reported once */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char got[32];

		run(cases[i].in, cases[i].rise, cases[i].fall, got);
		assert_string_equal(got, cases[i].want);
	}
}

/* A blind backend's scrapes: a fifth of the interval, 50 ms at least,
 * never slower than the interval itself. */
static void test_blind_interval(void **state)
{
	static const unsigned cases[][2] = {
	    {250, 50}, {1000, 200}, {100, 50}, {50, 50}, {600000, 120000}, {260, 52}, {249, 50},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(pg_scrape_blind_ms(cases[i][0]), cases[i][1]);
}

/* Blind: a queue of ours or the fleet's on a speed not measured. */
static void test_blind(void **state)
{
	struct pg_backend b = {0};

	(void)state;
	assert_false(pg_work_blind(&b)); /* nothing queued */
	b.prefill_reqs = 1;
	assert_true(pg_work_blind(&b));
	b.prefill_reqs = 0;
	b.peer_prefill_reqs = 2;
	assert_true(pg_work_blind(&b));
	b.fit_rate = 12000; /* measured: first tokens drain it */
	assert_false(pg_work_blind(&b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transitions),
	    cmocka_unit_test(test_blind_interval),
	    cmocka_unit_test(test_blind),
	};

	return cmocka_run_group_tests_name("health", tests, NULL, NULL);
}
