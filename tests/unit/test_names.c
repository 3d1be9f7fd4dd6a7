// SPDX-License-Identifier: MIT
/*
 * The routing enums' names (lib/names.h): every strategy parses back from
 * both spellings, every load signal from its name, decision names are
 * distinct, key sources are named, and the lists name each value once, in
 * order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "lib/key.h"
#include "lib/names.h"

static void test_strategies(void **state)
{
	char buf[128];
	enum pg_strategy s;

	(void)state;
	for (unsigned i = 0; i < PG_STRATEGY_COUNT; i++) {
		const char *name = pg_strategy_name((enum pg_strategy)i);
		const char *flag = pg_strategy_flag((enum pg_strategy)i);

		assert_int_equal(strlen(name), strlen(flag));
		assert_int_equal(pg_strategy_parse(name, strlen(name), &s), 0);
		assert_int_equal(s, i);
		assert_int_equal(pg_strategy_parse(flag, strlen(flag), &s), 0);
		assert_int_equal(s, i);
	}
	assert_int_equal(pg_strategy_parse("prefix", 6, &s), -1);
	assert_string_equal(pg_strategy_flag((enum pg_strategy)PG_STRATEGY_COUNT), "unknown");
	assert_string_equal(pg_strategy_name((enum pg_strategy)PG_STRATEGY_COUNT), "UNKNOWN");
	assert_string_equal(pg_strategy_list(buf, sizeof(buf), true, ", ", " or "),
	                    "RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE or CACHE_AWARE");
	assert_string_equal(pg_strategy_list(buf, sizeof(buf), false, " | ", " | "),
	                    "random | least_outstanding_requests | prefix_aware | cache_aware");
	pg_strategy_list(buf, 10, false, ", ", ", "); /* truncated, terminated */
	assert_string_equal(buf, "random, l");
}

static void test_load_signals(void **state)
{
	char buf[64];
	enum pg_load_signal s;

	(void)state;
	for (unsigned i = 0; i < PG_LOAD_SIGNAL_COUNT; i++) {
		assert_int_equal(
		    pg_load_signal_parse(pg_load_signal_name((enum pg_load_signal)i), &s), 0);
		assert_int_equal(s, i);
	}
	assert_int_equal(pg_load_signal_parse("BOTH", &s), 0);
	assert_int_equal(s, PG_LOAD_BOTH);
	assert_int_equal(pg_load_signal_parse("queue", &s), -1);
	assert_string_equal(pg_load_signal_list(buf, sizeof(buf), "|"), "inflight|backend|both");
}

static void test_decisions(void **state)
{
	(void)state;
	for (unsigned i = 0; i < PG_DEC_MAX; i++) {
		assert_string_not_equal(pg_decision_name(i), "unknown");
		for (unsigned j = 0; j < i; j++)
			assert_string_not_equal(pg_decision_name(i), pg_decision_name(j));
	}
	assert_string_equal(pg_decision_name(PG_DEC_EXPLICIT_KEY), "explicit_key");
	assert_string_equal(pg_decision_name(PG_DEC_MAX), "unknown");
}

static void test_key_sources(void **state)
{
	(void)state;
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_RAW), "raw");
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_MESSAGES), "messages");
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_HEADER), "header");
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_CACHE_FIELD), "prompt_cache_key");
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_PROMPT), "prompt");
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_INPUT), "input");
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_PREVIOUS_RESPONSE),
	                    "previous_response_id");
	assert_string_equal(pg_key_source_name(PG_KEY_SRC_COUNT), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_strategies),
	    cmocka_unit_test(test_load_signals),
	    cmocka_unit_test(test_decisions),
	    cmocka_unit_test(test_key_sources),
	};

	return cmocka_run_group_tests_name("names", tests, NULL, NULL);
}
