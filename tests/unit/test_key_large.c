// SPDX-License-Identifier: MIT
/*
 * Keys of large bodies (doc/routing.md "How it routes"): the parse tokenizes long
 * arrays only as far as the key text can reach (json.h), so these check
 * that the key is still that of the whole body, that what lies past the
 * key is still checked as JSON, and that it is no longer checked for the
 * API's shape.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/buf.h"
#include "lib/json.h"
#include "lib/key.h"

static const struct pg_str nohdr = {"", 0};

/* Append s; the body stays NUL-terminated (pg_buf_printf), for strstr. */
static void put(struct pg_buf *b, const char *s)
{
	pg_buf_printf(b, "%s", s);
	assert_false(b->oom);
}

/* Chat messages of about n bytes in all, each saying its index: bodies of
 * any length share their first messages. extra: members added to each. */
static void messages(struct pg_buf *b, size_t n, const char *extra)
{
	size_t end = b->len + n;

	for (unsigned i = 0; b->len < end; i++)
		pg_buf_printf(b,
		              "%s{\"role\":\"%s\",%s\"content\":\"say \\\"%u\\\" \\u00e9 日本\"}",
		              i ? "," : "", i % 2 ? "assistant" : "user", extra, i);
	assert_false(b->oom);
}

static struct pg_key key(const struct pg_buf *b, uint32_t plen)
{
	struct pg_key k;

	assert_int_equal(
	    pg_key_compute(PG_API_CHAT, nohdr, b->p, b->len, true, plen, &k, NULL, 0, NULL), 0);
	return k;
}

/* A chat body: head, messages of about n bytes, tail. */
static struct pg_buf chat(const char *head, size_t n, const char *extra, const char *tail)
{
	struct pg_buf b = {0};

	put(&b, "{\"model\":\"m\",");
	put(&b, head);
	put(&b, "\"messages\":[");
	messages(&b, n, extra);
	put(&b, "]");
	put(&b, tail);
	put(&b, "}");
	return b;
}

/* 1 MiB of messages gives the key 4 KiB of them give, and so does
 * cache_aware's view as far as its text reaches. */
static void test_same_key(void **state)
{
	struct pg_buf small = chat("", 64 << 10, "", ""), big = chat("", 1 << 20, "", "");
	struct pg_key a = key(&small, 4096), b = key(&big, 4096), c;
	struct pg_key_blocks kb;

	(void)state;
	assert_false(a.fallback);
	assert_int_equal(a.source, PG_KEY_SRC_MESSAGES);
	assert_int_equal(a.length, 4096);
	assert_true(a.hash == b.hash && a.length == b.length && !b.fallback);
	assert_int_equal(
	    pg_key_compute_blocks(PG_API_CHAT, nohdr, big.p, big.len, true, 4096, &c, &kb), 0);
	assert_true(c.hash == b.hash && !c.fallback);
	assert_int_equal(kb.n, PG_CA_MAX_BLOCKS); /* 256 KiB of text: all of it */
	pg_buf_free(&small);
	pg_buf_free(&big);
}

/* The first messages carry 200 KiB that is not text: the parse's first
 * window does not reach the text the key needs, and the body is parsed
 * again; the key is that of the same text without the rest. */
static void test_not_text_first(void **state)
{
	struct pg_buf heavy = {0};
	char *pad = malloc(200 << 10);

	(void)state;
	assert_non_null(pad);
	memset(pad, 'x', (200 << 10) - 1);
	pad[(200 << 10) - 1] = 0;
	put(&heavy, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"tool_calls\":[\"");
	put(&heavy, pad);
	put(&heavy, "\"],\"content\":\"say \\\"0\\\" \\u00e9 日本\"},");
	messages(&heavy, 64 << 10, "");
	put(&heavy, "]}");
	/* the same messages with the padding left out */
	{
		struct pg_buf same = {0};
		struct pg_key a, b;

		put(&same, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"tool_calls\":[],"
		           "\"content\":\"say \\\"0\\\" \\u00e9 日本\"},");
		messages(&same, 64 << 10, "");
		put(&same, "]}");
		a = key(&same, 4096);
		b = key(&heavy, 4096);
		assert_false(a.fallback || b.fallback);
		assert_true(a.hash == b.hash && a.length == 4096 && b.length == 4096);
		pg_buf_free(&same);
	}
	free(pad);
	pg_buf_free(&heavy);
}

/* prompt_cache_key after 1 MiB of text is still found. */
static void test_cache_key_late(void **state)
{
	struct pg_buf b = chat("", 1 << 20, "", ",\"prompt_cache_key\":\"tenant-7\"");
	struct pg_buf s = chat("", 1024, "", ",\"prompt_cache_key\":\"tenant-7\"");
	struct pg_key k = key(&b, 4096), ks = key(&s, 4096);

	(void)state;
	assert_int_equal(k.source, PG_KEY_SRC_CACHE_FIELD);
	assert_int_equal(k.length, 8);
	assert_true(k.hash == ks.hash);
	pg_buf_free(&b);
	pg_buf_free(&s);
}

/* Past the key the JSON grammar is still checked: each of these, 1 MiB in,
 * sends the body to the raw-bytes key. */
static void test_late_grammar(void **state)
{
	static const char *const tails[] = {
	    ",\"x\":[1,2,]", ",\"x\":\"\xff\"", ",\"x\":\"\\q\"", ",\"x\":01", ",\"x\":\"\x01\"",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		struct pg_buf b = chat("", 1 << 20, "", tails[i]);

		assert_true(key(&b, 4096).fallback);
		pg_buf_free(&b);
	}
	/* and inside the messages array, past its window */
	{
		struct pg_buf b = chat("", 1 << 20, "\"x\":\"ok\",", "");

		assert_false(key(&b, 4096).fallback);
		b.p[b.len - 40] = (char)0xff; /* in the last message's text */
		assert_true(key(&b, 4096).fallback);
		pg_buf_free(&b);
	}
}

/* A message of the wrong shape past the key text is not looked at; within
 * it, it still makes the body unusable. */
static void test_late_shape(void **state)
{
	struct pg_buf ok = chat("", 64 << 10, "", ""), bad = chat("", 64 << 10, "", "");
	char *last = strstr(bad.p + bad.len - 300, "\"content\":\"");
	struct pg_key a, b;

	(void)state;
	assert_non_null(last);
	memcpy(last, "\"content\":1,\"x\":\"", 17); /* content a number */
	a = key(&ok, 4096);
	b = key(&bad, 4096);
	assert_false(b.fallback);
	assert_true(a.hash == b.hash);
	/* a PrefixLength that reaches it: the raw-bytes key */
	assert_true(key(&bad, 65536).fallback);
	pg_buf_free(&ok);
	pg_buf_free(&bad);
}

/* An escape at the cut (a surrogate pair: one code point of 12 bytes), in a
 * body whose other messages run on for 1 MiB: the same key text as alone. */
static void test_escape_at_cut(void **state)
{
	struct pg_buf one = {0}, big = {0};
	char *a = malloc(4096), t1[16384], t2[16384];
	size_t l1, l2;
	struct pg_key k1, k2;

	(void)state;
	assert_non_null(a);
	memset(a, 'a', 4090);
	a[4090] = 0;
	for (int i = 0; i < 2; i++) {
		struct pg_buf *b = i ? &big : &one;

		put(b, "{\"messages\":[{\"role\":\"user\",\"content\":\"");
		put(b, a);
		put(b, "\\ud83d\\ude00\\u001e tail\"}");
		if (i) {
			put(b, ",");
			messages(b, 1 << 20, "");
		}
		put(b, "]}");
	}
	/* "user" US, then 4090 a's: the pair is code point 4096 */
	assert_int_equal(pg_key_compute(PG_API_CHAT, nohdr, one.p, one.len, true, 4096, &k1, t1,
	                                sizeof(t1), &l1),
	                 0);
	assert_int_equal(pg_key_compute(PG_API_CHAT, nohdr, big.p, big.len, true, 4096, &k2, t2,
	                                sizeof(t2), &l2),
	                 0);
	assert_false(k1.fallback || k2.fallback);
	assert_int_equal(k1.length, 4096);
	assert_true(l1 == l2 && k1.hash == k2.hash && !memcmp(t1, t2, l1));
	assert_memory_equal(t1 + l1 - 4, "\xf0\x9f\x98\x80", 4);
	/* one more code point: ESC (for the escaped RS) is the last */
	assert_int_equal(pg_key_compute(PG_API_CHAT, nohdr, big.p, big.len, true, 4097, &k2, t2,
	                                sizeof(t2), &l2),
	                 0);
	assert_true(l2 == l1 + 1 && t2[l1] == 0x1b);
	free(a);
	pg_buf_free(&one);
	pg_buf_free(&big);
}

/* The body parsed as it arrived (json.h pg_json_stream, in 16 KiB pieces)
 * over len bytes of b, with window. */
static void parse_ahead(struct pg_json_stream *ps, const struct pg_buf *b, size_t len,
                        size_t window)
{
	pg_json_stream_init(ps, window);
	for (size_t h = 16384; h < len; h += 16384)
		assert_int_equal(pg_json_stream_feed(ps, b->p, h, false), 1);
	pg_json_stream_feed(ps, b->p, len, true);
}

/* pg_key_compute_ahead uses a parse made ahead only when it is whole and of
 * this body with the key's own window (key.ahead says so), and the key is
 * the one a parse at routing gives, whether it is used or not. */
static void test_parsed_ahead(void **state)
{
	struct pg_buf big = chat("", 1 << 20, "", ""), bad = chat("", 1 << 20, "", ",\"x\":01");
	const size_t pa = pg_key_window(false, 4096), ca = pg_key_window(true, 4096);
	struct pg_json_stream ps = {0};
	struct pg_key whole = key(&big, 4096), k;
	struct pg_key_blocks kb, kbw;

	(void)state;
	assert_true(ca > pa);
	parse_ahead(&ps, &big, big.len, pa);
	assert_int_equal(ps.rc, 0);
	pg_key_compute_ahead(PG_API_CHAT, nohdr, big.p, big.len, true, &ps, 4096, &k, NULL, NULL);
	assert_true(k.ahead && k.hash == whole.hash && k.source == whole.source && !k.fallback);
	/* another window (cache_aware's): parsed again */
	pg_key_compute_ahead(PG_API_CHAT, nohdr, big.p, big.len, true, &ps, 4096, &k, &kb, NULL);
	assert_true(!k.ahead && k.hash == whole.hash);
	parse_ahead(&ps, &big, big.len, ca);
	pg_key_compute_ahead(PG_API_CHAT, nohdr, big.p, big.len, true, &ps, 4096, &k, &kbw, NULL);
	assert_true(k.ahead && k.hash == whole.hash);
	assert_true(kbw.n == kb.n && kbw.anchor == kb.anchor &&
	            !memcmp(kbw.chain, kb.chain, kb.n * sizeof(kb.chain[0])));
	/* not whole yet, or of other bytes: parsed at routing */
	parse_ahead(&ps, &big, big.len - 1, pa);
	pg_key_compute_ahead(PG_API_CHAT, nohdr, big.p, big.len, true, &ps, 4096, &k, NULL, NULL);
	assert_true(!k.ahead && k.hash == whole.hash);
	pg_json_stream_init(&ps, pa);
	assert_int_equal(pg_json_stream_feed(&ps, big.p, big.len, false), 1);
	pg_key_compute_ahead(PG_API_CHAT, nohdr, big.p, big.len, true, &ps, 4096, &k, NULL, NULL);
	assert_true(!k.ahead && k.hash == whole.hash);
	/* an error found ahead: the raw-bytes key, as at routing */
	parse_ahead(&ps, &bad, bad.len, pa);
	assert_int_equal(ps.rc, -1);
	pg_key_compute_ahead(PG_API_CHAT, nohdr, bad.p, bad.len, true, &ps, 4096, &k, NULL, NULL);
	assert_true(k.ahead && k.fallback && k.source == PG_KEY_SRC_RAW);
	assert_true(k.hash == key(&bad, 4096).hash);
	pg_json_stream_free(&ps);
	pg_buf_free(&big);
	pg_buf_free(&bad);
}

static void same_key(const struct pg_key *a, const struct pg_key_blocks *ka, const struct pg_key *b,
                     const struct pg_key_blocks *kb)
{
	assert_true(a->hash == b->hash && a->anchor == b->anchor && a->source == b->source &&
	            a->length == b->length && a->fallback == b->fallback);
	if (ka)
		assert_true(ka->n == kb->n && ka->anchor == kb->anchor &&
		            !memcmp(ka->chain, kb->chain, ka->n * sizeof(ka->chain[0])));
}

/* A scratch kept from key to key (a worker's, key.h) gives the keys made
 * without one; once grown it is reused as it is, nothing allocated; and
 * tokens grown past PG_SPARE_KEEP are not kept. */
static void test_scratch(void **state)
{
	struct pg_buf big = chat("", 32 << 10, "", ""), bad = chat("", 32 << 10, "", ",\"x\":01");
	struct pg_buf wide = chat("", 1 << 10, "", ",\"x\":{\"a\":0");
	const struct pg_buf *bodies[] = {&big, &bad, &wide};
	struct pg_key_scratch ks = {0};
	struct pg_key k0, k1;
	struct pg_key_blocks kb0, kb1;
	struct pg_json_tok *tok;
	char *text;
	size_t text_cap;
	uint32_t tok_cap;

	(void)state;
	wide.len--; /* the closing brace: members until the tokens pass the bound */
	for (unsigned i = 0; wide.len < (1u << 20); i++)
		pg_buf_printf(&wide, ",\"m%u\":0", i);
	put(&wide, "}}");
	for (int ca = 0; ca < 2; ca++)
		for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
			const struct pg_buf *b = bodies[i];

			pg_key_compute_ahead(PG_API_CHAT, nohdr, b->p, b->len, true, NULL, 4096,
			                     &k0, ca ? &kb0 : NULL, NULL);
			pg_key_compute_ahead(PG_API_CHAT, nohdr, b->p, b->len, true, NULL, 4096,
			                     &k1, ca ? &kb1 : NULL, &ks);
			same_key(&k0, ca ? &kb0 : NULL, &k1, ca ? &kb1 : NULL);
			assert_int_equal(k0.fallback, b == &bad);
			/* the wide body's tokens are past the bound: not kept */
			assert_int_equal(ks.js.tok == NULL, b == &wide);
		}
	pg_key_compute_ahead(PG_API_CHAT, nohdr, big.p, big.len, true, NULL, 4096, &k1, &kb1, &ks);
	text = ks.text;
	text_cap = ks.text_cap;
	tok = ks.js.tok;
	tok_cap = ks.js.cap;
	assert_non_null(text);
	assert_non_null(tok);
	pg_key_compute_ahead(PG_API_CHAT, nohdr, big.p, big.len, true, NULL, 4096, &k0, &kb0, &ks);
	same_key(&k0, &kb0, &k1, &kb1);
	assert_true(ks.text == text && ks.text_cap == text_cap && ks.js.tok == tok &&
	            ks.js.cap == tok_cap);
	pg_key_scratch_free(&ks);
	assert_true(!ks.text && !ks.text_cap && !ks.js.tok && !ks.js.cap);
	pg_buf_free(&big);
	pg_buf_free(&bad);
	pg_buf_free(&wide);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_key),       cmocka_unit_test(test_not_text_first),
	    cmocka_unit_test(test_cache_key_late), cmocka_unit_test(test_late_grammar),
	    cmocka_unit_test(test_late_shape),     cmocka_unit_test(test_escape_at_cut),
	    cmocka_unit_test(test_parsed_ahead),   cmocka_unit_test(test_scratch),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
