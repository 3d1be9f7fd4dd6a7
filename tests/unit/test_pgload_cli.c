// SPDX-License-Identifier: MIT
/*
 * pgload's command line: --header lines (accepted ones are appended to the
 * request head verbatim with CRLF; malformed ones are refused) and
 * --first-index, plus the closed-loop defaults they must not disturb.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <getopt.h>
#include <cmocka.h>

#include "../../tools/pgload/pgload.h"

/* Parse a NULL-terminated argument list (argv[0] added). */
static int parse(struct pg_opts *o, const char *const *args)
{
	char *argv[16];
	int argc = 0;

	argv[argc++] = (char *)"pgload";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	optind = 0; /* glibc: rescan from the start */
	return pg_parse_args(argc, argv, o);
}

static void test_headers(void **state)
{
	static const struct {
		const char *args[5];
		int rc;
		const char *headers; /* when rc == 0 */
	} cases[] = {
	    {{NULL}, 0, ""},
	    {{"--header", "X-Mock-Chunks: 1", NULL}, 0, "X-Mock-Chunks: 1\r\n"},
	    {{"--header", "A: 1", "--header", "B:2", NULL}, 0, "A: 1\r\nB:2\r\n"},
	    {{"--header", "X-Empty:", NULL}, 0, "X-Empty:\r\n"},
	    {{"--header", "no colon", NULL}, -1, NULL},
	    {{"--header", ": value", NULL}, -1, NULL},
	    {{"--header", "Bad Name: v", NULL}, -1, NULL},
	    {{"--header", "X-A: line\r\nX-B: smuggled", NULL}, -1, NULL},
	    {{"--header", "X-Tab: a\tb", NULL}, -1, NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_opts o;
		int rc = parse(&o, cases[i].args);

		assert_int_equal(rc, cases[i].rc);
		if (rc == 0) {
			assert_string_equal(o.headers, cases[i].headers);
			assert_int_equal(o.headers_len, strlen(cases[i].headers));
		}
	}
}

static void test_headers_cap(void **state)
{
	static char big[300];
	const char *args[] = {"--header", big, "--header", big, NULL};
	struct pg_opts o;

	(void)state;
	memset(big, 'v', sizeof(big) - 1);
	memcpy(big, "X-Big: ", 7);
	/* one fits (299 + CRLF), two exceed the 511 bytes the head can carry */
	assert_int_equal(parse(&o, args + 2), 0);
	assert_int_equal(o.headers_len, 301);
	assert_int_equal(parse(&o, args), -1);
}

static void test_first_index(void **state)
{
	static const struct {
		const char *args[3];
		int rc;
		uint64_t want;
	} cases[] = {
	    {{NULL}, 0, 0},
	    {{"--first-index", "1000000000", NULL}, 0, 1000000000},
	    {{"--first-index", "-1", NULL}, -1, 0},
	    {{"--first-index", "x", NULL}, -1, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_opts o;

		assert_int_equal(parse(&o, cases[i].args), cases[i].rc);
		if (cases[i].rc == 0) {
			assert_true(o.first_index == cases[i].want);
			assert_int_equal(o.concurrency, 16); /* closed loop default */
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_headers),
	    cmocka_unit_test(test_headers_cap),
	    cmocka_unit_test(test_first_index),
	};

	return cmocka_run_group_tests_name("pgload_cli", tests, NULL, NULL);
}
