// SPDX-License-Identifier: MIT
/*
 * pg_json_stream (json.h): an input fed in pieces parses exactly as the
 * whole of it does with pg_json_parse_window(): the same verdict, error
 * position and message, and the same tokens, wherever the pieces end. Each
 * piece is given from a fresh copy of the input so far, as a receive
 * buffer that grows may move.
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

static const char *const docs[] = {
    "{}", "[]", "[ ]", "{ }", "0", "-12.5e+3", "true", "false ", " null", "\"\"", "\"plain text\"",
    "\"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\ud83d\\ude00\"",
    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
    "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
    "{\"role\":\"user\",\"content\":\"h\xc3\xa9llo\\nthere\"}],\"stream\":true,"
    "\"max_tokens\":16,\"temperature\":0.5,\"stop\":null,\"prompt_cache_key\":\"k\"}",
    "[1,[2,[3,[4,{\"a\":[5,6,{}]}]]],\"x\",{\"b\":{\"c\":[]}}]",
    " { \"a\" : [ 1 , 2 ] , \"b\" : { } } \n",
    "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,\"long array\",[1,2],{\"k\":0}]",
    /* errors, some of them only visible at the end */
    "", " ", "[1,2,", "[1,2,]", "{\"a\" 1}", "{\"a\":}", "[tru]", "[truex]", "[1true]", "[01]",
    "[1.]", "[1e]", "[-]", "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "\"unterminated", "\"cut \xc3",
    "\"bad \xc0\xaf\"", "\"surrogate \xed\xa0\x80\"", "\"ctl \x01\"", "[1] x", "[1]]", "{\"a\":1,}",
    "{1:2}", "nul",
    /* runs long enough for the AVX2 string and UTF-8 scans, cut anywhere */
    "[\"\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80 "
    "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80 "
    "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80 "
    "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80 "
    "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80 "
    "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80 "
    "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80 "
    "\xc3\xa9\xe6\x97\xa5\xe6\x9c\xac\xf0\x9f\x98\x80\","
    "\"0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789\"]",
    "[\"\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6"
    "\x97\xa5"
    "\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97"
    "\xa5"
    "\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xe6\x97"
    "\xa5"
    "\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5\xed\xa0\x80\"]", /* a surrogate, late */
};

static void expect_same(const struct pg_json *a, int arc, const struct pg_json *b, int brc)
{
	assert_int_equal(arc, brc);
	if (arc) {
		assert_int_equal(a->err_pos, b->err_pos);
		assert_string_equal(a->err_msg, b->err_msg);
		return;
	}
	assert_int_equal(a->ntok, b->ntok);
	for (uint32_t i = 0; i < a->ntok; i++) {
		const struct pg_json_tok *x = &a->tok[i], *y = &b->tok[i];

		assert_int_equal(x->start, y->start);
		assert_int_equal(x->end, y->end);
		assert_int_equal(x->next, y->next);
		assert_int_equal(x->size, y->size);
		assert_int_equal(x->type, y->type);
		assert_int_equal(x->flags, y->flags);
	}
}

/* Feed doc in pieces of step bytes (the last one final), each from its own
 * copy; compare with the whole windowed parse. */
static void feed_in_steps(struct pg_json_stream *ps, const char *doc, size_t len, size_t step,
                          size_t window)
{
	struct pg_json whole = {0};
	int wrc = pg_json_parse_window(&whole, doc, len, window);
	char *copy = NULL;
	size_t have = 0;
	int rc;

	pg_json_stream_init(ps, window);
	for (;;) {
		have = have + step < len ? have + step : len;
		free(copy);
		copy = malloc(have + 1);
		assert_non_null(copy);
		memcpy(copy, doc, have);
		rc = pg_json_stream_feed(ps, copy, have, have == len);
		if (have == len)
			break;
		if (rc != 1) /* an error already: the whole parse has the same */
			break;
	}
	if (rc != 1)
		expect_same(&ps->js, rc, &whole, wrc);
	else
		fail_msg("a final feed still wants more");
	/* feeding again changes nothing */
	assert_int_equal(pg_json_stream_feed(ps, copy, have, true), rc);
	free(copy);
	pg_json_free(&whole);
}

static void test_every_split(void **state)
{
	struct pg_json_stream ps = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		size_t len = strlen(docs[i]);

		for (size_t step = 1; step <= len + 1; step++) {
			feed_in_steps(&ps, docs[i], len, step, 0);
			feed_in_steps(&ps, docs[i], len, step, 4); /* arrays cut */
		}
	}
	pg_json_stream_free(&ps);
}

/* Every split into two pieces, at every byte: each stop point is hit with
 * the input ending exactly there. */
static void test_two_pieces(void **state)
{
	struct pg_json_stream ps = {0};
	struct pg_json whole = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
		size_t len = strlen(docs[i]);
		int wrc;

		for (size_t cut = 0; cut <= len; cut++) {
			for (size_t window = 0; window <= 4; window += 4) {
				int rc;

				wrc = pg_json_parse_window(&whole, docs[i], len, window);
				pg_json_stream_init(&ps, window);
				rc = pg_json_stream_feed(&ps, docs[i], cut, false);
				if (rc == 1)
					rc = pg_json_stream_feed(&ps, docs[i], len, true);
				expect_same(&ps.js, rc, &whole, wrc);
			}
		}
	}
	pg_json_free(&whole);
	pg_json_stream_free(&ps);
}

/* Nothing new: no work and no change; an error stops the parse at once. */
static void test_feed_rules(void **state)
{
	struct pg_json_stream ps = {0};
	const char *doc = "{\"a\":\"text\"}";

	(void)state;
	pg_json_stream_init(&ps, 0);
	assert_int_equal(pg_json_stream_feed(&ps, doc, 0, false), 1);
	assert_int_equal(pg_json_stream_feed(&ps, doc, 7, false), 1);
	assert_int_equal(pg_json_stream_feed(&ps, doc, 7, false), 1);
	assert_int_equal(pg_json_stream_feed(&ps, doc, 12, false), 1); /* could be more ws */
	assert_int_equal(pg_json_stream_feed(&ps, doc, 12, true), 0);
	assert_int_equal(ps.js.ntok, 3);
	pg_json_stream_init(&ps, 0);
	assert_int_equal(pg_json_stream_feed(&ps, "[1,]", 4, false), -1);
	assert_string_equal(ps.js.err_msg, "expected a value");
	assert_int_equal(pg_json_stream_feed(&ps, "[1,]", 4, true), -1);
	pg_json_stream_free(&ps);
}

/* A number as long as the body, in 1 KiB pieces: each feed looks only at
 * the new bytes (ps.word: how far it has looked), not the whole number
 * again; a word that cannot be a literal fails at once. */
static void test_long_number(void **state)
{
	const size_t n = 1 << 20;
	char *doc = malloc(n + 2);
	struct pg_json_stream ps = {0};

	(void)state;
	assert_non_null(doc);
	doc[0] = '[';
	memset(doc + 1, '7', n);
	doc[n + 1] = ']';
	pg_json_stream_init(&ps, 0);
	for (size_t have = 1024; have <= n; have += 1024) {
		assert_int_equal(pg_json_stream_feed(&ps, doc, have, false), 1);
		assert_int_equal(ps.word, have);
		assert_int_equal(ps.pos, 1); /* the number, from its first digit */
	}
	assert_int_equal(pg_json_stream_feed(&ps, doc, n + 2, true), 0);
	assert_int_equal(ps.js.ntok, 2);
	assert_int_equal(ps.js.tok[1].end, n + 1);
	pg_json_stream_init(&ps, 0);
	assert_int_equal(pg_json_stream_feed(&ps, "[tx", 3, false), -1);
	assert_string_equal(ps.js.err_msg, "expected a value");
	pg_json_stream_free(&ps);
	free(doc);
}

/* A 1 MiB prompt in 16 KiB receives: one long string, tokens as whole. */
static void test_long_string(void **state)
{
	const size_t n = 1 << 20;
	char *doc = malloc(n + 128);
	struct pg_json_stream ps = {0};
	size_t len;

	(void)state;
	assert_non_null(doc);
	len = (size_t)sprintf(doc, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
	for (size_t i = 0; len < n; i++)
		doc[len++] = i % 97 == 96 ? '\\' : i % 97 == 95 ? 'n' : (char)('a' + i % 26);
	if (doc[len - 1] == '\\')
		doc[len++] = 'n';
	len += (size_t)sprintf(doc + len, "\"}],\"prompt_cache_key\":\"p\"}");
	feed_in_steps(&ps, doc, len, 16 * 1024, 4096);
	feed_in_steps(&ps, doc, len, 16 * 1024 + 1, 0);
	pg_json_stream_free(&ps);
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_split), cmocka_unit_test(test_two_pieces),
	    cmocka_unit_test(test_feed_rules),  cmocka_unit_test(test_long_string),
	    cmocka_unit_test(test_long_number),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
