// SPDX-License-Identifier: MIT
/*
 * pg_json_find_fixed (json_find.h; pg_json_find_n is it with a table known
 * at run time) gives a plain reference lookup's result, written here one
 * name at a time with pg_json_str_eq: on every object member of a table of
 * documents (escaped names, duplicates, names that are prefixes of others,
 * nested objects) and on tokens that are not objects, for the name sets
 * key.c looks up, inline with constant tables and called with run-time ones.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/json_find.h"

static const struct pg_json_name msg[] = {{"role", 4}, {"content", 7}};
static const struct pg_json_name part[] = {{"type", 4}, {"text", 4}};
static const struct pg_json_name item[] = {{"type", 4}, {"role", 4}, {"content", 7}};
static const struct pg_json_name top[] = {
    {"prompt_cache_key", 16}, {"stream", 6}, {"tools", 5},
    {"messages", 8},          {"prompt", 6}, {"system", 6},
    {"instructions", 12},     {"input", 5},  {"previous_response_id", 20}};

static const char *const docs[] = {
    "{}",
    "[]",
    "\"role\"",
    "{\"role\":\"user\",\"content\":\"hi\"}",
    "{\"content\":\"hi\",\"role\":\"user\"}",
    "{\"role\":\"user\",\"role\":\"assistant\",\"content\":null}",
    "{\"r\\u006fle\":\"user\",\"cont\\u0065nt\":[{\"type\":\"text\",\"text\":\"a\"}]}",
    "{\"rol\":1,\"roles\":2,\"contents\":3,\"Content\":4,\"content \":5}",
    "{\"x\":{\"role\":\"user\"},\"content\":\"c\"}",
    "{\"\":0,\"type\":\"message\",\"role\":\"user\",\"content\":\"c\",\"text\":\"t\"}",
    "{\"model\":\"m\",\"messages\":[],\"stream\":true,\"tools\":null,\"prompt\":\"p\","
    "\"system\":\"s\",\"instructions\":\"i\",\"input\":\"x\",\"prompt_cache_key\":\"k\","
    "\"previous_response_id\":\"r\",\"stream\":false}",
    "{\"messages\\u0000\":1,\"me\\/ssages\":2,\"messages\":3}",
    "[{\"role\":\"a\"},{\"role\":\"b\",\"content\":\"c\"},7]",
};

/* The reference: each name alone, the last member of that name wins. */
static bool reference(const struct pg_json *js, uint32_t obj, const struct pg_json_name *names,
                      size_t n, int64_t *val)
{
	bool is_obj = obj < js->ntok && js->tok[obj].type == PG_JSON_OBJECT;

	for (size_t i = 0; i < n; i++) {
		uint32_t k = pg_json_first(obj);

		val[i] = -1;
		for (uint32_t m = 0; is_obj && m < js->tok[obj].size;
		     m++, k = pg_json_member_next(js, k))
			if (pg_json_str_eq(js, k, names[i].s, names[i].len))
				val[i] = k + 1;
	}
	return is_obj;
}

/* The lookups on token obj of js, names[0..n), agree with the reference. */
static void same(const struct pg_json *js, uint32_t obj, const struct pg_json_name *names, size_t n)
{
	int64_t want[9], got[9];
	bool a, b;

	a = reference(js, obj, names, n, want);
	assert_true(pg_json_find_n(js, obj, names, n, got) == a);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(want[i], got[i]);
	switch (n) { /* constant tables, as key.c calls it */
	case 2:
		b = names == msg ? pg_json_find_fixed(js, obj, msg, 2, got)
		                 : pg_json_find_fixed(js, obj, part, 2, got);
		break;
	case 3:
		b = pg_json_find_fixed(js, obj, item, 3, got);
		break;
	default:
		b = pg_json_find_fixed(js, obj, top, 9, got);
	}
	assert_int_equal(a, b);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(want[i], got[i]);
}

static void test_same_as_find_n(void **state)
{
	struct pg_json js = {0};
	unsigned objects = 0;

	(void)state;
	for (size_t d = 0; d < sizeof(docs) / sizeof(docs[0]); d++) {
		assert_int_equal(pg_json_parse(&js, docs[d], strlen(docs[d])), 0);
		/* every token, and one past the last (not an object either) */
		for (uint32_t k = 0; k <= js.ntok; k++) {
			objects += k < js.ntok && js.tok[k].type == PG_JSON_OBJECT;
			same(&js, k, msg, 2);
			same(&js, k, part, 2);
			same(&js, k, item, 3);
			same(&js, k, top, 9);
		}
	}
	assert_true(objects >= 12);
	pg_json_free(&js);
}

static void test_values(void **state)
{
	static const char doc[] =
	    "{\"role\":\"user\",\"r\\u006fle\":\"assistant\",\"x\":1,\"content\":\"c\"}";
	struct pg_json js = {0};
	int64_t f[2];

	(void)state;
	assert_int_equal(pg_json_parse(&js, doc, strlen(doc)), 0);
	assert_true(pg_json_find_fixed(&js, 0, msg, 2, f));
	assert_true(pg_json_str_eq(&js, (uint32_t)f[0], "assistant", 9)); /* the last "role" */
	assert_true(pg_json_str_eq(&js, (uint32_t)f[1], "c", 1));
	assert_false(pg_json_find_fixed(&js, 2, msg, 2, f)); /* a string */
	assert_int_equal(f[0], -1);
	assert_int_equal(f[1], -1);
	pg_json_free(&js);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_as_find_n),
	    cmocka_unit_test(test_values),
	};

	return cmocka_run_group_tests_name("json_find", tests, NULL, NULL);
}
