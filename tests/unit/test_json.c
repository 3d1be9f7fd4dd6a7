// SPDX-License-Identifier: MIT
/*
 * JSON parser tests: a table of valid and invalid documents, then token
 * structure, the depth limit, UTF-8 validation, string decoding (escapes,
 * surrogates), member lookup and integer ranges.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/json.h"

struct doc {
	const char *text;
	size_t len; /* 0: strlen(text) */
	bool valid;
};

/* clang-format off */
static const struct doc docs[] = {
	{"{}", 0, true},
	{"[]", 0, true},
	{" \t\r\n{ \"a\" : [ 1 , 2 ] } \n", 0, true},
	{"0", 0, true},
	{"-0", 0, true},
	{"-12.5e+3", 0, true},
	{"1E-2", 0, true},
	{"0.0", 0, true},
	{"\"\"", 0, true},
	{"true", 0, true},
	{"false", 0, true},
	{"null", 0, true},
	{"\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"", 0, true},
	{"\"\\ud800\"", 0, true},            /* lone surrogate: grammar allows it */
	{"\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", 0, true},
	{"\"\xed\x9f\xbf\"", 0, true},       /* U+D7FF */
	{"\"\xf4\x8f\xbf\xbf\"", 0, true},   /* U+10FFFF */
	{"[[[[[]]]]]", 0, true},
	{"{\"a\":{\"b\":{\"c\":null}},\"d\":[true,false]}", 0, true},
	{"\"a\x7f\"", 0, true},              /* DEL is not a control character in JSON */

	{"", 0, false},
	{"   ", 0, false},
	{"{", 0, false},
	{"}", 0, false},
	{"[1,]", 0, false},
	{"{\"a\":1,}", 0, false},
	{"{,}", 0, false},
	{"[,1]", 0, false},
	{"{\"a\" 1}", 0, false},
	{"{\"a\":}", 0, false},
	{"{1:2}", 0, false},
	{"{'a':1}", 0, false},
	{"[1 2]", 0, false},
	{"01", 0, false},
	{"-", 0, false},
	{"+1", 0, false},
	{"1.", 0, false},
	{".5", 0, false},
	{"1e", 0, false},
	{"1e+", 0, false},
	{"NaN", 0, false},
	{"Infinity", 0, false},
	{"tru", 0, false},
	{"nul", 0, false},
	{"truex", 0, false},
	{"\"abc", 0, false},
	{"\"a\\", 0, false},
	{"\"\\x\"", 0, false},
	{"\"\\u12\"", 0, false},
	{"\"\\u12g4\"", 0, false},
	{"\"a\nb\"", 0, false},              /* raw control character */
	{"\"a\tb\"", 0, false},
	{"\"\x00\"", 3, false},
	{"{} {}", 0, false},
	{"[] x", 0, false},
	{"{}\x00", 3, false},
	{"/* c */ {}", 0, false},
	{"\xef\xbb\xbf{}", 0, false},        /* BOM */
	{"[\"\x80\"]", 0, false},            /* lone continuation byte */
	{"\"\xc0\xaf\"", 0, false},          /* overlong '/' */
	{"\"\xc1\xbf\"", 0, false},
	{"\"\xe0\x80\xaf\"", 0, false},      /* overlong 3-byte */
	{"\"\xf0\x80\x80\xaf\"", 0, false},  /* overlong 4-byte */
	{"\"\xed\xa0\x80\"", 0, false},      /* encoded surrogate U+D800 */
	{"\"\xf4\x90\x80\x80\"", 0, false},  /* above U+10FFFF */
	{"\"\xf5\x80\x80\x80\"", 0, false},
	{"\"\xff\"", 0, false},
	{"\"\xc3\"", 0, false},              /* truncated 2-byte */
	{"\"\xe2\x82\"", 0, false},          /* truncated 3-byte */
	{"\"\xf0\x9f\x98\"", 0, false},      /* truncated 4-byte */
	{"\"\xe2\x82", 0, false},            /* truncated at end of input */
	{"\xc3\xa9", 0, false},              /* non-ASCII outside a string */
};
/* clang-format on */

static void test_table(void **state)
{
	struct pg_json js = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		size_t len = docs[i].len ? docs[i].len : strlen(docs[i].text);
		int rc = pg_json_parse(&js, docs[i].text, len);

		if ((rc == 0) != docs[i].valid)
			fail_msg("doc %zu (%s): rc %d, expected %s; err at %zu: %s", i,
			         docs[i].text, rc, docs[i].valid ? "valid" : "invalid", js.err_pos,
			         js.err_msg ? js.err_msg : "-");
		if (rc)
			assert_non_null(js.err_msg);
	}
	pg_json_free(&js);
}

static void test_structure(void **state)
{
	static const char doc[] = "{\"a\": [1, {\"x\": 2}, \"s\"], \"b\": true, \"c\": {}}";
	struct pg_json js = {0};
	uint32_t k;

	(void)state;
	assert_int_equal(pg_json_parse(&js, doc, strlen(doc)), 0);
	/* {  "a" [  1  {  "x" 2  "s"  "b" true "c" {} */
	assert_int_equal(js.ntok, 12);
	assert_int_equal(js.tok[0].type, PG_JSON_OBJECT);
	assert_int_equal(js.tok[0].size, 3);
	assert_int_equal(js.tok[0].next, 12);
	assert_int_equal(js.tok[0].end, strlen(doc));
	assert_int_equal(js.tok[2].type, PG_JSON_ARRAY);
	assert_int_equal(js.tok[2].size, 3);
	assert_int_equal(js.tok[2].next, 8);
	assert_int_equal(js.tok[4].type, PG_JSON_OBJECT);
	assert_int_equal(js.tok[4].next, 7);
	/* iterate members */
	k = pg_json_first(0);
	assert_true(pg_json_str_eq(&js, k, "a", 1));
	k = pg_json_member_next(&js, k);
	assert_true(pg_json_str_eq(&js, k, "b", 1));
	assert_int_equal(js.tok[k + 1].type, PG_JSON_TRUE);
	k = pg_json_member_next(&js, k);
	assert_true(pg_json_str_eq(&js, k, "c", 1));
	assert_int_equal(js.tok[k + 1].size, 0);
	assert_int_equal(pg_json_find(&js, 0, "c", 1), 11);
	assert_int_equal(pg_json_find(&js, 0, "x", 1), -1); /* not a top-level member */
	assert_int_equal(pg_json_find(&js, 2, "a", 1), -1); /* not an object */
	assert_int_equal(pg_json_find(&js, 4, "x", 1), 6);
	/* the same struct reused for another document */
	assert_int_equal(pg_json_parse(&js, "[]", 2), 0);
	assert_int_equal(js.ntok, 1);
	pg_json_free(&js);
}

static char *nest(unsigned depth, char open, char close)
{
	char *s = malloc(2 * depth + 1);

	memset(s, open, depth);
	memset(s + depth, close, depth);
	s[2 * depth] = 0;
	return s;
}

static void test_depth(void **state)
{
	struct pg_json js = {0};
	char *s;

	(void)state;
	s = nest(PG_JSON_MAX_DEPTH, '[', ']');
	assert_int_equal(pg_json_parse(&js, s, strlen(s)), 0);
	assert_int_equal(js.ntok, PG_JSON_MAX_DEPTH);
	free(s);
	s = nest(PG_JSON_MAX_DEPTH + 1, '[', ']');
	assert_int_equal(pg_json_parse(&js, s, strlen(s)), -1);
	assert_string_equal(js.err_msg, "nested deeper than 256");
	free(s);
	/* unbalanced and very deep: must fail cleanly, not recurse */
	s = nest(100000, '[', '[');
	assert_int_equal(pg_json_parse(&js, s, strlen(s)), -1);
	free(s);
	pg_json_free(&js);
}

static void test_decode(void **state)
{
	static const struct {
		const char *json, *text;
		size_t text_len;
	} cases[] = {
	    {"\"plain\"", "plain", 5},
	    {"\"a\\nb\\\"c\\\\d\\/e\\tf\\rg\\bh\\fi\"", "a\nb\"c\\d/e\tf\rg\bh\fi", 17},
	    {"\"\\u00e9\"", "\xc3\xa9", 2},
	    {"\"\\u20AC\"", "\xe2\x82\xac", 3},
	    {"\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4},
	    {"\"\\uD83D\\uDE00x\"", "\xf0\x9f\x98\x80x", 5},
	    {"\"\\ud83dx\"", "\xef\xbf\xbdx", 4}, /* high alone */
	    {"\"\\ude00\"", "\xef\xbf\xbd", 3},   /* low alone */
	    {"\"\\ud83d\\u0041\"",
	     "\xef\xbf\xbd"
	     "A",
	     4}, /* high + non-low */
	    {"\"\\ud83d\\ud83d\\ude00\"", "\xef\xbf\xbd\xf0\x9f\x98\x80", 7},
	    {"\"\\ud83d\"", "\xef\xbf\xbd", 3}, /* high at end */
	    {"\"\\u0000\"", "\0", 1},
	    {"\"caf\xc3\xa9\"", "caf\xc3\xa9", 5},
	};
	struct pg_json js = {0};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n;

		assert_int_equal(pg_json_parse(&js, cases[i].json, strlen(cases[i].json)), 0);
		n = pg_json_str_copy(&js, 0, buf, sizeof(buf));
		assert_int_equal(n, cases[i].text_len);
		assert_memory_equal(buf, cases[i].text, n);
		assert_true(pg_json_str_eq(&js, 0, cases[i].text, cases[i].text_len));
		assert_false(pg_json_str_eq(&js, 0, cases[i].text, cases[i].text_len - 1));
		/* a short buffer gets a prefix and the full length */
		assert_int_equal(pg_json_str_copy(&js, 0, buf, 1), cases[i].text_len);
	}
	pg_json_free(&js);
}

static void test_find_and_compare(void **state)
{
	static const char doc[] =
	    "{\"k\\u0065y\":1,\"key\":2,\"ke\":3,\"kf\":4,\"\\u00e9\":5,\"z\":6}";
	struct pg_json js = {0};
	int64_t v;

	(void)state;
	assert_int_equal(pg_json_parse(&js, doc, strlen(doc)), 0);
	/* names compare unescaped; duplicates: the last one wins */
	v = pg_json_find(&js, 0, "key", 3);
	assert_true(v > 0);
	assert_int_equal(pg_json_get_i64(&js, (uint32_t)v, &v), 0);
	assert_int_equal(v, 2);
	v = pg_json_find(&js, 0, "\xc3\xa9", 2);
	assert_true(v > 0);
	assert_int_equal(pg_json_find(&js, 0, "k", 1), -1);
	/* several names in one pass: the same answers */
	{
		static const struct pg_json_name names[] = {{"z", 1}, {"key", 3}, {"k", 1}};
		int64_t val[3];

		assert_true(pg_json_find_n(&js, 0, names, 3, val));
		assert_int_equal(val[0], pg_json_find(&js, 0, "z", 1));
		assert_int_equal(val[1], pg_json_find(&js, 0, "key", 3));
		assert_int_equal(val[1], 4);
		assert_int_equal(val[2], -1);
		assert_false(pg_json_find_n(&js, 2, names, 3, val)); /* a number */
		assert_int_equal(val[0], -1);
	}
	/* names at 1 "key"(escaped), 3 "key", 5 "ke", 7 "kf", 9 "é", 11 "z" */
	assert_int_equal(pg_json_str_cmp(&js, 1, 3), 0);
	assert_true(pg_json_str_cmp(&js, 5, 3) < 0);
	assert_true(pg_json_str_cmp(&js, 3, 7) < 0);
	assert_true(pg_json_str_cmp(&js, 1, 7) < 0);
	assert_true(pg_json_str_cmp(&js, 9, 11) > 0); /* code point order */
	assert_true(pg_json_str_cmp(&js, 11, 9) < 0);
	pg_json_free(&js);
}

static void test_numbers(void **state)
{
	static const struct {
		const char *json;
		int rc;
		int64_t v;
	} cases[] = {
	    {"0", 0, 0},
	    {"-0", 0, 0},
	    {"4096", 0, 4096},
	    {"-17", 0, -17},
	    {"9223372036854775807", 0, INT64_MAX},
	    {"-9223372036854775808", 0, INT64_MIN},
	    {"9223372036854775808", -ERANGE, 0},
	    {"-9223372036854775809", -ERANGE, 0},
	    {"100000000000000000000000", -ERANGE, 0},
	    {"1.0", -EINVAL, 0},
	    {"1e3", -EINVAL, 0},
	    {"\"1\"", -EINVAL, 0},
	    {"true", -EINVAL, 0},
	};
	struct pg_json js = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v = 12345;

		assert_int_equal(pg_json_parse(&js, cases[i].json, strlen(cases[i].json)), 0);
		if (pg_json_get_i64(&js, 0, &v) != cases[i].rc)
			fail_msg("%s: expected rc %d", cases[i].json, cases[i].rc);
		if (!cases[i].rc)
			assert_true(v == cases[i].v);
		else
			assert_true(v == 12345); /* untouched */
	}
	pg_json_free(&js);
}

/* The string scan looks at many bytes a step (json.c): every byte value at
 * every offset of a string longer than a few steps, and every string length
 * up to the end of the input, so each path (AVX2 and SSE2 wide steps, the
 * narrow ones, the last bytes) meets each kind of byte. Each input is its
 * own allocation, so ASan sees a read past the end. */
#define SCAN_LEN 200

static void scan_positions(void)
{
	static const char *const seqs[] = {"\\n",          "\\u00e9",          "\\\"", "\xc3\xa9",
	                                   "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\x7f"};
	struct pg_json js = {0};
	char *d;

	for (unsigned b = 0; b < 256; b++) {
		bool plain = b >= 0x20 && b < 0x80 && b != '"' && b != '\\';

		for (size_t i = 0; i < SCAN_LEN; i++) {
			d = malloc(SCAN_LEN + 2);
			memset(d, 'a', SCAN_LEN + 2);
			d[0] = d[SCAN_LEN + 1] = '"';
			d[1 + i] = (char)b;
			if ((pg_json_parse(&js, d, SCAN_LEN + 2) == 0) != plain)
				fail_msg("byte 0x%02x at offset %zu (AVX2 %d)", b, i,
				         pg_json_avx2(-1));
			if (plain)
				assert_true(js.tok[0].end == SCAN_LEN + 1 && js.tok[0].flags == 0);
			else if (b != '"' &&
			         (b != '\\' ||
			          i + 1 < SCAN_LEN)) /* a last backslash escapes the quote */
				assert_int_equal(js.err_pos, 1 + i);
			free(d);
		}
	}
	for (size_t q = 0; q < sizeof(seqs) / sizeof(seqs[0]); q++) {
		size_t n = strlen(seqs[q]);

		for (size_t i = 0; i < SCAN_LEN; i++) {
			d = malloc(SCAN_LEN + 2 + n);
			memset(d, 'a', SCAN_LEN + 2 + n);
			d[0] = d[SCAN_LEN + 1 + n] = '"';
			memcpy(d + 1 + i, seqs[q], n);
			assert_int_equal(pg_json_parse(&js, d, SCAN_LEN + 2 + n), 0);
			assert_int_equal(js.tok[0].end, SCAN_LEN + 1 + n);
			assert_int_equal(
			    js.tok[0].flags,
			    (seqs[q][0] == '\\' ? PG_JSON_F_ESCAPED : 0) |
			        ((unsigned char)seqs[q][0] >= 0x80 ? PG_JSON_F_NONASCII : 0));
			free(d);
		}
	}
	for (size_t len = 1; len < SCAN_LEN; len++) {
		d = malloc(len + 1);
		memset(d, 'a', len + 1);
		d[0] = '"';
		assert_int_equal(pg_json_parse(&js, d, len), -1); /* unterminated */
		assert_string_equal(js.err_msg, "unterminated string");
		d[len] = '"';
		assert_int_equal(pg_json_parse(&js, d, len + 1), 0);
		assert_int_equal(js.tok[0].end, len);
		free(d);
	}
	pg_json_free(&js);
}

static void test_scan_positions(void **state)
{
	bool avx2 = pg_json_avx2(-1);

	(void)state;
	scan_positions();
	if (avx2) { /* and the path this CPU does not take */
		pg_json_avx2(0);
		scan_positions();
		pg_json_avx2(1);
	}
}

/* Strict UTF-8 (RFC 3629), written apart from the parser's: the length of
 * the valid sequence at s[0..n), or 0. */
static size_t ref_utf8_seq(const unsigned char *s, size_t n)
{
	unsigned k = s[0] >= 0xf0 ? 3 : s[0] >= 0xe0 ? 2 : 1;
	uint32_t cp = s[0] & (0x3f >> k);

	if (s[0] < 0xc2 || s[0] > 0xf4 || n <= k)
		return 0;
	for (unsigned j = 1; j <= k; j++) {
		if ((s[j] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[j] & 0x3f);
	}
	if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return k + 1;
}

/*
 * Every lead byte with every second byte and a few third and fourth ones,
 * against the reference: at the end of a string (the last bytes take
 * another path), in a short run, and at offsets around the 32-byte blocks
 * of the AVX2 validation (counted from the first non-ASCII byte, where it
 * starts) inside a long run; with AVX2 and, where the CPU has it, without.
 */
static void utf8_exhaustive(void)
{
	static const unsigned char more[][2] = {
	    {0x80, 0x80}, {0xbf, 0xbf}, {0x80, 'x'}, {'x', 'x'}};
	static const int offsets[] = {-2, -1, 0, 2, 3, 28, 29, 30, 31, 32, 33};
	struct pg_json js = {0};
	unsigned char d[160];

	for (unsigned lead = 0x80; lead < 0x100; lead++)
		for (unsigned c1 = 0x20; c1 < 0x100; c1++)
			for (size_t m = 0; m < sizeof(more) / sizeof(more[0]); m++)
				for (size_t o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
					const unsigned char seq[4] = {(unsigned char)lead,
					                              (unsigned char)c1, more[m][0],
					                              more[m][1]};
					size_t n = 0, want = 1, i, k;

					if (c1 == '"' || c1 == '\\')
						continue;
					d[n++] = '"';
					if (offsets[o] == -1) {
						d[n++] = 'a'; /* a short run after ASCII */
					} else if (offsets[o] > 0) {
						d[n++] = 0xc3; /* a long run from this é */
						d[n++] = 0xa9;
						memset(d + n, 'a', (size_t)offsets[o] - 2);
						n += (size_t)offsets[o] - 2;
					}
					memcpy(d + n, seq, 4);
					n += 4;
					if (offsets[o] == -1)
						n += (size_t)sprintf((char *)d + n, "bcdefgh");
					else if (offsets[o] >= 0)
						for (int t = 0; t < 21; t++, n += 3)
							memcpy(d + n, "\xe4\xb8\xad", 3);
					d[n++] = '"';
					for (i = 1; i < n - 1; i += k) {
						k = d[i] < 0x80 ? 1
						                : ref_utf8_seq(d + i, n - 1 - i);
						if (!k) {
							want = 0;
							break;
						}
					}
					if ((pg_json_parse(&js, (char *)d, n) == 0) != want)
						fail_msg(
						    "%02x %02x %02x %02x at %d: want %s (AVX2 %d)",
						    lead, c1, more[m][0], more[m][1], offsets[o],
						    want ? "valid" : "invalid", pg_json_avx2(-1));
					if (!want && js.err_pos != i)
						fail_msg("%02x %02x at %d: error at %zu, want %zu",
						         lead, c1, offsets[o], js.err_pos, i);
				}
	pg_json_free(&js);
}

static void test_utf8_exhaustive(void **state)
{
	bool avx2 = pg_json_avx2(-1);

	(void)state;
	utf8_exhaustive();
	if (avx2) {
		pg_json_avx2(0);
		utf8_exhaustive();
		pg_json_avx2(1);
	}
}

/* Truncations and single-byte corruptions of a valid document never crash
 * (ASan build) and never read past the length given. */
static void test_mutations(void **state)
{
	static const char doc[] =
	    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	    "\"text\":\"h\\u00e9llo \\ud83d\\ude00 \xe2\x82\xac\"}]}],\"n\":-1.5e3}";
	static const unsigned char bytes[] = {0,   '"', '\\', '{',  '}',  '[',  ']',  ',', ':',
	                                      'u', '0', 0x80, 0xc3, 0xed, 0xf4, 0xff, ' '};
	struct pg_json js = {0};
	size_t len = strlen(doc);
	char *buf = malloc(len);
	unsigned ok = 0;

	(void)state;
	for (size_t cut = 0; cut <= len; cut++) {
		char *t = malloc(cut ? cut : 1);

		memcpy(t, doc, cut);
		ok += pg_json_parse(&js, t, cut) == 0;
		free(t);
	}
	assert_int_equal(ok, 1); /* only the whole document */
	for (size_t i = 0; i < len; i++) {
		for (size_t b = 0; b < sizeof(bytes); b++) {
			memcpy(buf, doc, len);
			buf[i] = (char)bytes[b];
			if (!pg_json_parse(&js, buf, len) && js.tok[0].type == PG_JSON_OBJECT)
				for (uint32_t k = 0; k < js.ntok; k++)
					assert_true(js.tok[k].next <= js.ntok);
		}
	}
	free(buf);
	pg_json_free(&js);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_structure),
	    cmocka_unit_test(test_depth),
	    cmocka_unit_test(test_decode),
	    cmocka_unit_test(test_find_and_compare),
	    cmocka_unit_test(test_numbers),
	    cmocka_unit_test(test_scan_positions),
	    cmocka_unit_test(test_utf8_exhaustive),
	    cmocka_unit_test(test_mutations),
	};

	return cmocka_run_group_tests_name("json", tests, NULL, NULL);
}
