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

/* --target: one, a comma list, repeated; the first replaces the default. */
static void test_targets(void **state)
{
	static const struct {
		const char *args[7];
		int rc;
		unsigned n;
		const char *joined;
	} cases[] = {
	    {{NULL}, 0, 1, "127.0.0.1:8080"},
	    {{"--target", "127.0.0.1:9000", NULL}, 0, 1, "127.0.0.1:9000"},
	    {{"--target", "127.0.0.1:1,127.0.0.2:2", NULL}, 0, 2, "127.0.0.1:1,127.0.0.2:2"},
	    {{"--target", "127.0.0.1:1", "--target", "10.0.0.1:2,10.0.0.2:3", NULL},
	     0,
	     3,
	     "127.0.0.1:1,10.0.0.1:2,10.0.0.2:3"},
	    {{"--target", "1.1.1.1:1,1.1.1.1:2,1.1.1.1:3,1.1.1.1:4", "--target",
	      "1.1.1.1:5,1.1.1.1:6,1.1.1.1:7,1.1.1.1:8", NULL},
	     0,
	     8,
	     NULL},
	    {{"--target", "1.1.1.1:1,1.1.1.1:2,1.1.1.1:3,1.1.1.1:4,1.1.1.1:5", "--target",
	      "1.1.1.1:6,1.1.1.1:7,1.1.1.1:8,1.1.1.1:9", NULL},
	     -1,
	     0,
	     NULL},
	    {{"--target", "127.0.0.1:1,", NULL}, -1, 0, NULL},
	    {{"--target", "localhost:80", NULL}, -1, 0, NULL},
	    {{"--target", "127.0.0.1:0", NULL}, -1, 0, NULL},
	    {{"--target", "127.0.0.1", NULL}, -1, 0, NULL},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_opts o;

		assert_int_equal(parse(&o, cases[i].args), cases[i].rc);
		if (cases[i].rc)
			continue;
		assert_int_equal(o.ntargets, cases[i].n);
		if (cases[i].joined)
			assert_string_equal(o.target, cases[i].joined);
	}
	{
		const char *args[] = {"--target", "127.0.0.1:1,10.1.2.3:65535", NULL};
		struct pg_opts o;

		assert_int_equal(parse(&o, args), 0);
		assert_string_equal(o.targets[1].name, "10.1.2.3:65535");
		assert_string_equal(o.targets[1].host, "10.1.2.3");
		assert_int_equal(o.targets[1].port, 65535);
	}
}

/* agentic and short-chat change some defaults, never a given option. */
static void test_workload_defaults(void **state)
{
	const char *mt[] = {"--workload", "multi-turn", NULL};
	const char *ag[] = {"--workload", "agentic", NULL};
	const char *ag_sys[] = {"--system-tokens", "500", "--workload", "agentic", NULL};
	const char *sc[] = {"--workload", "short-chat", NULL};
	const char *sc_set[] = {"--workload",  "short-chat", "--conversations", "9",
	                        "--max-turns", "3",          "--user-tokens",   "7",
	                        NULL};
	const char *sc_bad[] = {"--workload", "short-chat", "--min-turns", "8", NULL};
	const char *replay[] = {"--workload", "multi-turn", "--history", "replay", NULL};
	const char *hist_bad[] = {"--history", "log", NULL};
	struct pg_opts o;

	(void)state;
	assert_int_equal(parse(&o, replay), 0);
	assert_int_equal(o.history, PG_HIST_REPLAY);
	assert_int_equal(parse(&o, hist_bad), -1);
	assert_int_equal(parse(&o, mt), 0);
	assert_int_equal(o.history, PG_HIST_SERVER); /* the default */
	assert_int_equal(o.conversations, 64);
	assert_int_equal(o.max_turns, 12);
	assert_int_equal(o.system_tokens, 64);
	assert_int_equal(parse(&o, ag), 0);
	assert_int_equal(o.system_tokens, 10000);
	assert_int_equal(o.conversations, 64);
	assert_int_equal(o.tools, 4);
	assert_int_equal(o.tool_tokens, 450);
	assert_string_equal(o.label, "agentic");
	assert_int_equal(parse(&o, ag_sys), 0);
	assert_int_equal(o.system_tokens, 500);
	assert_int_equal(parse(&o, sc), 0);
	assert_int_equal(o.conversations, 256);
	assert_int_equal(o.min_turns, 2);
	assert_int_equal(o.max_turns, 6);
	assert_int_equal(o.user_tokens, 24);
	assert_int_equal(o.assistant_tokens, 48);
	assert_int_equal(o.system_tokens, 0);
	assert_int_equal(o.history_tokens, 800);
	assert_int_equal(parse(&o, sc_set), 0);
	assert_int_equal(o.conversations, 9);
	assert_int_equal(o.max_turns, 3);
	assert_int_equal(o.user_tokens, 7);
	assert_int_equal(o.assistant_tokens, 48);
	assert_int_equal(parse(&o, sc_bad), -1); /* 8 > the default 6 */
}

/* The trace workload's options: what it needs, what excludes what, what
 * is only for it; and its defaults (open loop to the end of its part). */
static void test_trace_options(void **state)
{
	static const struct {
		const char *args[11];
		int rc;
	} cases[] = {
	    {{"--workload", "trace", "--trace", "t.jsonl", NULL}, 0},
	    {{"--workload", "trace", "--trace", "t", "--load", "0.8", "--capacity-tokens-per-s",
	      "292800", NULL},
	     0},
	    {{"--workload", "trace", "--trace", "t", "--speedup", "2.5", NULL}, 0},
	    {{"--workload", "trace", NULL}, -1}, /* no --trace */
	    {{"--workload", "trace", "--trace", "t", "--load", "1", NULL}, -1},
	    {{"--workload", "trace", "--trace", "t", "--capacity-tokens-per-s", "1000", NULL}, -1},
	    {{"--workload", "trace", "--trace", "t", "--load", "1", "--capacity-tokens-per-s", "9",
	      "--speedup", "2", NULL},
	     -1},
	    {{"--workload", "trace", "--trace", "t", "--rate", "5", NULL}, -1},
	    {{"--workload", "trace", "--trace", "t", "--concurrency", "5", NULL}, -1},
	    {{"--workload", "trace", "--trace", "t", "--first-index", "5", NULL}, -1},
	    {{"--workload", "trace", "--trace", "t", "--load", "0", NULL}, -1},
	    {{"--workload", "trace", "--trace", "t", "--trace-requests", "0", NULL}, -1},
	    {{"--trace", "t", NULL}, -1}, /* not the trace workload */
	    {{"--workload", "agentic", "--speedup", "2", NULL}, -1},
	};
	const char *given[] = {
	    "--workload", "trace", "--trace",      "t",    "--path",        "/v1/chat/completions",
	    "--duration", "5",     "--timeout-ms", "1000", "--trace-start", "7",
	    NULL};
	struct pg_opts o;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(parse(&o, cases[i].args), cases[i].rc);
	assert_int_equal(parse(&o, cases[0].args), 0);
	assert_string_equal(o.trace_path, "t.jsonl");
	assert_string_equal(o.path, "/v1/completions");
	assert_int_equal(o.timeout_ms, PG_TRACE_TIMEOUT_MS);
	assert_true(o.duration_s == 0 && o.requests == 0 && o.rate == 0 && o.concurrency == 0);
	assert_true(o.load == 0 && o.speedup == 0 && o.trace_start == 0 && o.trace_requests == 0);
	assert_string_equal(o.label, "trace");
	assert_int_equal(parse(&o, cases[1].args), 0);
	assert_true(o.load == 0.8 && o.capacity_tps == 292800);
	assert_int_equal(parse(&o, given), 0);
	assert_string_equal(o.path, "/v1/chat/completions");
	assert_true(o.duration_s == 5);
	assert_int_equal(o.timeout_ms, 1000);
	assert_int_equal(o.trace_start, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_headers),           cmocka_unit_test(test_headers_cap),
	    cmocka_unit_test(test_first_index),       cmocka_unit_test(test_targets),
	    cmocka_unit_test(test_workload_defaults), cmocka_unit_test(test_trace_options),
	};

	return cmocka_run_group_tests_name("pgload_cli", tests, NULL, NULL);
}
