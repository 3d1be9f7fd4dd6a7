// SPDX-License-Identifier: MIT
/*
 * pg_json_parse_window (json.h): arrays past the window keep only their
 * first elements, and everything after is still checked as strictly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/json.h"

static void test_cut(void **state)
{
	/* '[' at 6; "aa" at 7, "bb" at 12, "cc" at 17: a window of 8 keeps the
	 * elements that start within 8 bytes of the '[' */
	const char *doc = "{\"m\":[\"aa\",\"bb\",\"cc\",[1,{\"x\":2}]],\"k\":\"v\"}";
	struct pg_json js = {0}, full = {0};
	int64_t m, k;

	(void)state;
	assert_int_equal(pg_json_parse_window(&js, doc, strlen(doc), 8), 0);
	assert_int_equal(pg_json_parse(&full, doc, strlen(doc)), 0);
	m = pg_json_find(&js, 0, "m", 1);
	k = pg_json_find(&js, 0, "k", 1);
	assert_true(m > 0 && k > 0);
	assert_int_equal(js.tok[m].type, PG_JSON_ARRAY);
	assert_true(js.tok[m].flags & PG_JSON_F_PARTIAL);
	assert_int_equal(js.tok[m].size, 2);
	assert_true(pg_json_str_eq(&js, (uint32_t)m + 2, "bb", 2));
	assert_int_equal(js.tok[m].next, m + 3);
	/* the array spans what it spans in the full parse */
	assert_int_equal(js.tok[m].end, full.tok[pg_json_find(&full, 0, "m", 1)].end);
	assert_true(pg_json_str_eq(&js, (uint32_t)k, "v", 1));
	assert_int_equal(js.ntok, full.ntok - 6);
	/* a window that reaches every element: the full parse */
	assert_int_equal(pg_json_parse_window(&js, doc, strlen(doc), 4096), 0);
	assert_int_equal(js.ntok, full.ntok);
	assert_false(js.tok[m].flags & PG_JSON_F_PARTIAL);
	/* the first element is always kept; objects are whole */
	assert_int_equal(pg_json_parse_window(&js, "[{\"a\":1,\"b\":2},3]", 17, 1), 0);
	assert_int_equal(js.tok[0].size, 1);
	assert_int_equal(js.tok[1].size, 2);
	assert_int_equal(js.ntok, 6);
	pg_json_free(&js);
	pg_json_free(&full);
}

/* Errors past the window: the same verdict, position and message. */
static void test_strict_past_window(void **state)
{
	static const char *const bad[] = {
	    "[1,2,3,]",       "[1,2,[3,{\"a\":01}]]",
	    "[1,2,\"\xff\"]", "[1,2,\"\\x\"]",
	    "[1,2,\"\x01\"]", "[1,2,{\"a\" 1}]",
	    "[1,2,tru]",      "[1,2,{\"\xc0\":1}]",
	    "[1,2,[3}]",      "[1,2,3",
	    "[1,2] x",        "[1,2,\"\\u12\"]",
	};
	struct pg_json js = {0}, full = {0};
	char deep[600];
	size_t n = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(pg_json_parse_window(&js, bad[i], strlen(bad[i]), 1), -1);
		assert_int_equal(pg_json_parse(&full, bad[i], strlen(bad[i])), -1);
		assert_int_equal(js.err_pos, full.err_pos);
		assert_string_equal(js.err_msg, full.err_msg);
		assert_int_equal(js.ntok, 0);
	}
	/* nesting past the window still counts toward the depth limit: the
	 * outer array and 256 more is one too many, 255 more is not */
	for (int inner = PG_JSON_MAX_DEPTH; inner >= PG_JSON_MAX_DEPTH - 1; inner--) {
		n = (size_t)sprintf(deep, "[1,");
		memset(deep + n, '[', (size_t)inner);
		memset(deep + n + inner, ']', (size_t)inner);
		n += 2 * (size_t)inner;
		deep[n++] = ']';
		if (inner == PG_JSON_MAX_DEPTH) {
			assert_int_equal(pg_json_parse_window(&js, deep, n, 1), -1);
			assert_string_equal(js.err_msg, "nested deeper than 256");
		} else {
			assert_int_equal(pg_json_parse_window(&js, deep, n, 1), 0);
			assert_int_equal(js.ntok, 2); /* the array and 1 */
		}
	}
	pg_json_free(&js);
	pg_json_free(&full);
}

/* A large array: few tokens, whatever its length. */
static void test_large(void **state)
{
	const size_t n = 1 << 20;
	char *doc = malloc(n + 64);
	struct pg_json js = {0};
	size_t len = 0;

	(void)state;
	assert_non_null(doc);
	len += (size_t)sprintf(doc, "{\"a\":[");
	while (len < n)
		len += (size_t)sprintf(doc + len, "{\"role\":\"user\",\"content\":\"x\\n y\"},");
	len += (size_t)sprintf(doc + len, "0],\"k\":true}");
	assert_int_equal(pg_json_parse_window(&js, doc, len, 4096), 0);
	assert_true(js.ntok < 4096 / 4); /* the full parse: about 150,000 */
	assert_int_equal(js.tok[pg_json_find(&js, 0, "k", 1)].type, PG_JSON_TRUE);
	assert_int_equal(js.tok[0].next, js.ntok);
	pg_json_free(&js);
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cut),
	    cmocka_unit_test(test_strict_past_window),
	    cmocka_unit_test(test_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
