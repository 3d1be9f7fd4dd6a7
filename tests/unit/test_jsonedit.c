// SPDX-License-Identifier: MIT
/*
 * The JSON member editor (user/lib/jsonedit.c): exact outputs, table-driven,
 * then random objects and edits checked against the reference of
 * tests/fuzz/jsonedit_ref.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "../fuzz/jsonedit_ref.h"

#define SET(n, v)                                                                                  \
	{                                                                                          \
		n, sizeof(n) - 1, v, sizeof(v) - 1                                                 \
	}
#define DEL(n)                                                                                     \
	{                                                                                          \
		n, sizeof(n) - 1, NULL, 0                                                          \
	}

static void test_table(void **state)
{
	static const struct {
		const char *in;
		struct pg_jedit e[3];
		size_t n;
		const char *out;
	} cases[] = {
	    /* replace, byte-exact around it */
	    {"{\"model\":\"m\", \"max_tokens\" : 500 ,\"stream\":true}",
	     {SET("max_tokens", "1"), SET("stream", "false")},
	     2,
	     "{\"model\":\"m\", \"max_tokens\" : 1 ,\"stream\":false}"},
	    /* add after the last member, before the closing whitespace */
	    {"{\"a\":1 }", {SET("b", "{\"x\":null}")}, 1, "{\"a\":1,\"b\":{\"x\":null} }"},
	    {"{}", {SET("b", "2")}, 1, "{\"b\":2}"},
	    {" { } \n", {SET("b", "2")}, 1, " {\"b\":2 } \n"},
	    /* delete: first, middle, last, only */
	    {"{\"a\":1, \"b\":2, \"c\":3}", {DEL("a")}, 1, "{\"b\":2, \"c\":3}"},
	    {"{\"a\":1, \"b\":2, \"c\":3}", {DEL("b")}, 1, "{\"a\":1, \"c\":3}"},
	    {"{\"a\":1, \"b\":2, \"c\":3}", {DEL("c")}, 1, "{\"a\":1, \"b\":2}"},
	    {"{ \"a\" : [1, 2] }", {DEL("a")}, 1, "{ }"},
	    {"{\"a\":1,\"b\":2}", {DEL("a"), DEL("b")}, 2, "{}"},
	    /* absent: nothing changes */
	    {"{ \"a\":1 }", {DEL("z")}, 1, "{ \"a\":1 }"},
	    /* duplicates: the first replaced, the rest dropped */
	    {"{\"a\":1,\"b\":2,\"a\":3}", {SET("a", "9")}, 1, "{\"a\":9,\"b\":2}"},
	    {"{\"a\":1,\"b\":2,\"a\":3}", {DEL("a")}, 1, "{\"b\":2}"},
	    /* names compare unescaped; the name keeps its spelling */
	    {"{\"m\\u0061x_tokens\":5}", {SET("max_tokens", "1")}, 1, "{\"m\\u0061x_tokens\":1}"},
	    /* string values replaced whole, quotes included */
	    {"{\"s\":\"a,b\",\"t\":0}", {SET("s", "\"z\"")}, 1, "{\"s\":\"z\",\"t\":0}"},
	    /* delete and add in one call */
	    {"{\"stream_options\":{\"include_usage\":true},\"stream\":true}",
	     {DEL("stream_options"), SET("stream", "false"), SET("kv", "{}")},
	     3,
	     "{\"stream\":false,\"kv\":{}}"},
	};
	struct pg_json js = {0};
	struct pg_buf out = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *err;

		assert_int_equal(pg_json_parse(&js, cases[i].in, strlen(cases[i].in)), 0);
		pg_buf_reset(&out);
		assert_int_equal(pg_json_edit(&js, cases[i].e, cases[i].n, &out), 0);
		if (out.len != strlen(cases[i].out) || memcmp(out.p, cases[i].out, out.len))
			fail_msg("case %zu: got %.*s, want %s", i, (int)out.len, out.p,
			         cases[i].out);
		err = jedit_check(cases[i].in, strlen(cases[i].in), cases[i].e, cases[i].n, out.p,
		                  out.len);
		if (err)
			fail_msg("case %zu: reference: %s", i, err);
	}
	/* not an object: refused, nothing written */
	assert_int_equal(pg_json_parse(&js, "[1]", 3), 0);
	pg_buf_reset(&out);
	{
		struct pg_jedit e = SET("a", "1");

		assert_int_equal(pg_json_edit(&js, &e, 1, &out), -1);
	}
	assert_int_equal(out.len, 0);
	pg_json_free(&js);
	pg_buf_free(&out);
}

/* --- random objects ------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static unsigned rnd(unsigned n)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (unsigned)((rng * 0x2545F4914F6CDD1Dull) >> 33) % n;
}

static const char *const names[] = {"a",   "b",    "max_tokens", "stream", "m\\u0061x_tokens",
                                    "c d", "\\\"q"};
static const char *const plain[] = {"a", "b", "max_tokens", "stream", "max_tokens", "c d", "\"q"};
static const char *const values[] = {"1",    "-2.5e3", "\"x, y}\"",         "[1, {\"a\": 2}]", "{}",
                                     "null", "true",   "{\"stream\": [ ]}", "\"\\\"\""};
static const char *const ws[] = {"", " ", "\n\t", "  "};

static void random_object(char *buf, size_t cap)
{
	size_t len = 0;
	unsigned n = rnd(6);

	len += (size_t)snprintf(buf + len, cap - len, "%s{", ws[rnd(4)]);
	for (unsigned i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%s%s\"%s\"%s:%s%s%s", i ? "," : "",
		                        ws[rnd(4)], names[rnd(7)], ws[rnd(4)], ws[rnd(4)],
		                        values[rnd(9)], ws[rnd(4)]);
	snprintf(buf + len, cap - len, "}%s", ws[rnd(4)]);
}

static void test_random_against_reference(void **state)
{
	struct pg_json js = {0};
	struct pg_buf out = {0};
	char in[2048];

	(void)state;
	for (int t = 0; t < 20000; t++) {
		struct pg_jedit e[4];
		unsigned n = rnd(5);
		const char *err;

		random_object(in, sizeof(in));
		for (unsigned i = 0; i < n; i++) {
			const char *nm = plain[rnd(7)], *v = rnd(3) ? values[rnd(9)] : NULL;

			e[i] = (struct pg_jedit){nm, strlen(nm), v, v ? strlen(v) : 0};
		}
		assert_int_equal(pg_json_parse(&js, in, strlen(in)), 0);
		pg_buf_reset(&out);
		assert_int_equal(pg_json_edit(&js, e, n, &out), 0);
		err = jedit_check(in, strlen(in), e, n, out.p, out.len);
		if (err)
			fail_msg("%s: %s -> %.*s", err, in, (int)out.len, out.p);
	}
	pg_json_free(&js);
	pg_buf_free(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_random_against_reference),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
