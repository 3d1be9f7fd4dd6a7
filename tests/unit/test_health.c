// SPDX-License-Identifier: MIT
/* The rise/fall state machine of active health checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include "members/health.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_transitions),
	};

	return cmocka_run_group_tests_name("health", tests, NULL, NULL);
}
