// SPDX-License-Identifier: MIT
/*
 * Prefix-key tests: the routing contract (doc/routing.md "How it routes"), checked through the
 * key text (what is hashed) and through key equality between bodies that
 * must, or must not, route together.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "lib/key.h"

#define US  "\x1f"
#define RS  "\x1e"
#define GS  "\x1d"
#define ESC "\x1b"

static const struct pg_str nohdr = {"", 0};

struct res {
	struct pg_key k;
	char text[8192];
	size_t len;
};

static struct res key_of(enum pg_api api, const char *body, size_t blen, bool complete,
                         uint32_t plen, const char *hdr)
{
	struct res r;
	struct pg_str h = hdr ? (struct pg_str){hdr, strlen(hdr)} : nohdr;

	memset(&r, 0xa5, sizeof(r));
	assert_int_equal(pg_key_compute(api, h, body, blen, complete, plen, &r.k, r.text,
	                                sizeof(r.text), &r.len),
	                 0);
	/* the hash is always that of the key bytes */
	if (r.len <= sizeof(r.text))
		assert_true(r.k.hash == XXH3_64bits(r.text, r.len));
	return r;
}

static struct res chat(const char *body, uint32_t plen)
{
	return key_of(PG_API_CHAT, body, strlen(body), true, plen, NULL);
}

static struct res compl(const char *body, uint32_t plen)
{
	return key_of(PG_API_COMPLETIONS, body, strlen(body), true, plen, NULL);
}

static void expect_text(struct res r, enum pg_key_source src, const char *text, size_t len,
                        uint32_t length)
{
	assert_int_equal(r.k.source, src);
	assert_false(r.k.fallback);
	assert_int_equal(r.len, len);
	assert_memory_equal(r.text, text, len);
	assert_int_equal(r.k.length, length);
}

static void test_api(void **state)
{
	static const struct {
		const char *method, *path;
		enum pg_api api;
	} cases[] = {
	    {"POST", "/v1/chat/completions", PG_API_CHAT},
	    {"POST", "/v1/completions", PG_API_COMPLETIONS},
	    {"GET", "/v1/chat/completions", PG_API_RAW},
	    {"post", "/v1/completions", PG_API_RAW},
	    {"POST", "/v1/chat/completions/", PG_API_RAW},
	    {"POST", "/v1/chat/completion", PG_API_RAW},
	    {"POST", "/V1/completions", PG_API_RAW},
	    {"POST", "/invocations", PG_API_RAW},
	    {"PUT", "/v1/completions", PG_API_RAW},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_str m = {cases[i].method, strlen(cases[i].method)};
		struct pg_str p = {cases[i].path, strlen(cases[i].path)};

		if (pg_key_api(m, p) != cases[i].api)
			fail_msg("%s %s", cases[i].method, cases[i].path);
	}
	assert_int_equal(pg_key_body_need(PG_API_RAW, 4096, false), 4096);
	assert_int_equal(pg_key_body_need(PG_API_CHAT, 4096, false), PG_KEY_JSON_BODY_MAX);
	/* held before routing: the key's need, never more than the body */
	assert_int_equal(pg_key_hold(PG_API_CHAT, 4096, false, false, 100), 100);
	assert_int_equal(pg_key_hold(PG_API_CHAT, 4096, false, false, -1), PG_KEY_JSON_BODY_MAX);
	assert_int_equal(pg_key_hold(PG_API_CHAT, 4096, false, false, 0), 0);
	assert_int_equal(pg_key_hold(PG_API_RAW, 4096, false, false, 100000), 4096);
	assert_int_equal(pg_key_hold(PG_API_RAW, 4096, false, true, 100000), 100000);
	/* cache_aware's blocks run past the key over a raw body, to their limit */
	assert_int_equal(pg_key_body_need(PG_API_RAW, 4096, true), PG_CA_MAX_BLOCKS * PG_CA_BLOCK);
	assert_int_equal(pg_key_body_need(PG_API_CHAT, 4096, true), PG_KEY_JSON_BODY_MAX);
	assert_int_equal(pg_key_hold(PG_API_RAW, 4096, true, false, 100000), 100000);
	assert_int_equal(pg_key_hold(PG_API_RAW, 4096, true, false, 1 << 20),
	                 PG_CA_MAX_BLOCKS * PG_CA_BLOCK);
	/* too big for its JSON: the raw prefix, or the model's first bytes */
	assert_int_equal(pg_key_hold(PG_API_CHAT, 4096, false, false, PG_KEY_JSON_BODY_MAX + 1),
	                 4096);
	assert_int_equal(pg_key_hold(PG_API_CHAT, 4096, false, true, PG_KEY_JSON_BODY_MAX + 1),
	                 PG_PREFIX_LENGTH_MAX);
}

static void test_chat_text(void **state)
{
	static const char body[] =
	    "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":"
	    "\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]}";
	static const char want[] = "system" US "Be brief." RS "user" US "Hi" RS;

	(void)state;
	expect_text(chat(body, 4096), PG_KEY_SRC_MESSAGES, want, strlen(want), strlen(want));
}

/* Each group: bodies that must give the same key (the first is the base). */
static const char *const same_chat[][6] = {
    {
        "{\"model\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}]}",
        " { \"messages\" : [ { \"content\" : \"hello\" , \"role\" : \"user\" } ] ,\n"
        "\t\"model\" : \"a\" }\r\n",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hello\"}],\"model\":\"other\","
        "\"temperature\":0.7,\"stream\":true,\"max_tokens\":100,\"n\":3,\"top_p\":1,"
        "\"seed\":42,\"user\":\"u1\",\"stop\":[\"x\"]}",
        "{\"messages\":[{\"role\":\"user\",\"name\":\"bob\",\"content\":\"hello\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hello\"}]}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":"
        "{\"url\":\"x\"}},{\"text\":\"hello\",\"type\":\"text\"}]}]}",
    },
    {
        /* escapes vs literal characters */
        "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\xc3\xa9\\n\\\"q\\\" \\\\ /\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"caf\\u00e9\\u000a\\u0022q\\\" "
        "\\u005c \\/\"}]}",
        "{\"messages\":[{\"role\":\"\\u0075ser\",\"content\":\"caf\\u00E9\\n\\\"q\\\" \\\\ /\"}]}",
    },
    {
        /* tools: whitespace and member order inside tools do not matter */
        "{\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
        "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}}}}}],"
        "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"tools\": [ {\"function\": "
        "{\"parameters\": {\"properties\": {\"x\": {\"type\": \"integer\"}}, \"type\": "
        "\"object\"}, \"name\": \"f\"}, \"type\": \"function\"} ] , \"tool_choice\":\"auto\"}",
        "{\"tools\":[{\"function\":{\"n\\u0061me\":\"\\u0066\",\"parameters\":"
        "{\"properties\":{\"x\":{\"type\":\"integer\"}},\"type\":\"object\"}},"
        "\"type\":\"function\"}],\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
    },
    {
        /* surrogate pair escape vs the literal 4-byte character */
        "{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud83d\\ude00!\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"\xf0\x9f\x98\x80!\"}]}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"\\uD83D\\uDE00\\u0021\"}]}",
    },
    {
        /* null / missing content and role are empty; null tools is no tools */
        "{\"messages\":[{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[]}]}",
        "{\"messages\":[{\"role\":\"assistant\"}],\"tools\":null}",
        "{\"messages\":[{\"role\":\"assistant\",\"content\":[]}]}",
        "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\"}]}",
    },
};

/* Pairwise different keys: separators are unambiguous, text matters. */
static const char *const distinct_chat[] = {
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"b\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"\",\"content\":\"b\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
    "{\"type\":\"text\",\"text\":\"b\"}]}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u001db\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u001e\"},{\"role\":\"b\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u001eb\\u001f\"}]}",
    "{\"messages\":[{\"role\":\"user\\u001fa\",\"content\":\"b\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u001b\\u001eb\"}]}",
    "{\"messages\":[{\"role\":\"useR\",\"content\":\"ab\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab \"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"},{\"role\":\"user\",\"content\":\"\"}]}",
    "{\"messages\":[]}",
    "{\"messages\":[],\"tools\":[]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}],\"tools\":[]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}],\"tools\":[{\"a\":1}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}],\"tools\":[{\"a\":1.0}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}],\"tools\":[{\"a\":\"1\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}],\"tools\":[{\"a\":1},{\"b\":1}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}],\"tools\":[{\"b\":1},{\"a\":1}]}",
};

static void test_chat_equivalence(void **state)
{
	(void)state;
	for (size_t g = 0; g < sizeof(same_chat) / sizeof(same_chat[0]); g++) {
		struct res base = chat(same_chat[g][0], 4096);

		assert_int_equal(base.k.source, PG_KEY_SRC_MESSAGES);
		for (size_t i = 1; i < 6 && same_chat[g][i]; i++) {
			struct res r = chat(same_chat[g][i], 4096);

			if (r.k.source != PG_KEY_SRC_MESSAGES || r.k.hash != base.k.hash)
				fail_msg("group %zu body %zu: key differs from body 0", g, i);
		}
	}
	for (size_t i = 0; i < sizeof(distinct_chat) / sizeof(distinct_chat[0]); i++) {
		struct res a = chat(distinct_chat[i], 4096);

		assert_int_equal(a.k.source, PG_KEY_SRC_MESSAGES);
		for (size_t j = 0; j < i; j++)
			if (chat(distinct_chat[j], 4096).k.hash == a.k.hash)
				fail_msg("bodies %zu and %zu have the same key", j, i);
	}
}

static void test_separator_escapes(void **state)
{
	static const char body[] =
	    "{\"messages\":[{\"role\":\"u\\u001b\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"x\\u001fy\"},{\"type\":\"text\",\"text\":\"\\u001e\\u001d\"}]}]}";
	static const char want[] = "u" ESC ESC US "x" ESC US "y" GS ESC RS ESC GS RS;

	(void)state;
	expect_text(chat(body, 4096), PG_KEY_SRC_MESSAGES, want, strlen(want), strlen(want));
}

static void test_tools_first(void **state)
{
	static const char body[] =
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],\"tools\":[{\"z\":[1, 2.50,"
	    "true,false,null],\"a\":{\"y\":\"\\u00e9\\n\\u0001\\/\\\"\",\"b\":-0}}]}";
	static const char want[] = "[{\"a\":{\"b\":-0,\"y\":\"\xc3\xa9\\n\\u0001/\\\"\"},"
	                           "\"z\":[1,2.50,true,false,null]}]" RS "user" US "q" RS;
	struct res r = chat(body, 4096);

	(void)state;
	/* 'é' is 2 bytes but one code point */
	expect_text(r, PG_KEY_SRC_MESSAGES, want, strlen(want), (uint32_t)strlen(want) - 1);
}

/* A tool list of more tokens than the canonical form's small scratch (256):
 * member order inside it still does not matter, and its text is that of
 * the same tools written one by one. */
static void test_many_tools(void **state)
{
	char a[16384], b[16384], one[256];
	size_t la = 0, lb = 0;
	struct res ra, rb;

	(void)state;
	la += (size_t)sprintf(a + la, "{\"tools\":[");
	lb += (size_t)sprintf(b + lb, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"}],"
	                              "\"tools\":[");
	for (int i = 0; i < 100; i++) { /* 5 tokens each */
		la += (size_t)sprintf(a + la, "%s{\"name\":\"t%d\",\"x\":%d}", i ? "," : "", i, i);
		lb += (size_t)sprintf(b + lb, "%s{\"x\":%d,\"name\":\"t%d\"}", i ? "," : "", i, i);
	}
	la += (size_t)sprintf(a + la, "],\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
	lb += (size_t)sprintf(b + lb, "]}");
	ra = chat(a, 4096);
	rb = chat(b, 4096);
	assert_false(ra.k.fallback);
	assert_true(ra.k.hash == rb.k.hash && ra.len == rb.len);
	/* the canonical text of the first tool opens the key */
	snprintf(one, sizeof(one), "[{\"name\":\"t0\",\"x\":0},");
	assert_memory_equal(ra.text, one, strlen(one));
}

/* Cut exactly at prefix_length code points, never inside a sequence. */
static void test_utf8_cut(void **state)
{
	/* a, é (2 bytes), € (3 bytes), 😀 (4 bytes, written as a pair escape), b */
	static const char body[] = "{\"prompt\":\"a\xc3\xa9\xe2\x82\xac\\ud83d\\ude00b\"}";
	static const char body_lit[] = "{\"prompt\":\"a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
	                               "b\"}";
	static const char text[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
	                           "b";
	static const size_t bytes_at[] = {0, 1, 3, 6, 10, 11};

	(void)state;
	for (uint32_t n = 1; n <= 7; n++) {
		size_t want = bytes_at[n < 5 ? n : 5];

		expect_text(compl(body, n), PG_KEY_SRC_PROMPT, text, want, n < 5 ? n : 5);
		expect_text(compl(body_lit, n), PG_KEY_SRC_PROMPT, text, want, n < 5 ? n : 5);
	}
}

/* Cut in a long body at the real minimum prefix length, in each content
 * form (unescaped ASCII, unescaped multi-byte, escaped). */
static void test_long_cut(void **state)
{
	static const struct {
		const char *unit; /* as written in JSON */
		const char *bytes;
		size_t cps;
	} forms[] = {
	    {"x", "x", 1},
	    {"\xc3\xa9", "\xc3\xa9", 1},
	    {"\xe2\x82\xac", "\xe2\x82\xac", 1},
	    {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80", 1},
	    {"\\ud83d\\ude00", "\xf0\x9f\x98\x80", 1},
	    {"\\n", "\n", 1},
	};
	char *body = malloc(64 * 1024), *text = malloc(64 * 1024);
	const uint32_t plen = 1024;

	(void)state;
	for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
		size_t n = (size_t)sprintf(body,
		                           "{\"messages\":[{\"role\":\"user\",\"content\":\""),
		       t = 0;
		struct res r;

		t += (size_t)sprintf(text, "user" US);
		for (uint32_t i = 0; i < 3000; i++) {
			n += (size_t)sprintf(body + n, "%s", forms[f].unit);
			if (5 + i < plen)
				t += (size_t)sprintf(text + t, "%s", forms[f].bytes);
		}
		sprintf(body + n, "tail\"}]}");
		r = key_of(PG_API_CHAT, body, strlen(body), true, plen, NULL);
		assert_int_equal(r.k.length, plen);
		assert_int_equal(r.len, t);
		assert_memory_equal(r.text, text, t);
		/* text past the cut does not matter */
		body[n] = 'T';
		assert_true(key_of(PG_API_CHAT, body, strlen(body), true, plen, NULL).k.hash ==
		            r.k.hash);
	}
	free(body);
	free(text);
}

static void test_short_and_empty(void **state)
{
	struct res r;

	(void)state;
	r = chat("{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 4096);
	expect_text(r, PG_KEY_SRC_MESSAGES, "user" US "hi" RS, 8, 8);
	r = key_of(PG_API_RAW, "", 0, true, 4096, NULL);
	assert_int_equal(r.k.source, PG_KEY_SRC_RAW);
	assert_int_equal(r.k.length, 0);
	assert_int_equal(r.len, 0);
	assert_true(r.k.hash == XXH3_64bits("", 0));
	r = key_of(PG_API_RAW, NULL, 0, true, 4096, NULL);
	assert_true(r.k.hash == XXH3_64bits("", 0));
	r = key_of(PG_API_RAW, "abc", 3, true, 4096, NULL);
	expect_text(r, PG_KEY_SRC_RAW, "abc", 3, 3);
}

static void test_completions(void **state)
{
	static const struct {
		const char *body, *text;
		size_t len; /* 0: strlen(text) */
	} cases[] = {
	    {"{\"prompt\":\"abc\",\"max_tokens\":5}", "abc", 0},
	    {"{\"prompt\":[\"abc\"]}", "abc", 0},
	    {"{\"prompt\":[\"a\",\"b\\u001e\"]}", "a" RS "b" ESC RS, 0},
	    {"{\"prompt\":[1,22,-3]}", "1" US "22" US "-3" US, 0},
	    {"{\"prompt\":[[1,2],[3]]}", "1" US "2" US RS "3" US, 0},
	    {"{\"prompt\":[[1,2]]}", "1" US "2" US, 0},
	    {"{\"prompt\":[]}", "", 0},
	    {"{\"prompt\":\"\"}", "", 0},
	    {"{\"prompt\":[9223372036854775807]}", "9223372036854775807" US, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct res r = compl(cases[i].body, 4096);
		size_t len = strlen(cases[i].text);

		if (r.k.source != PG_KEY_SRC_PROMPT || r.k.fallback || r.len != len ||
		    memcmp(r.text, cases[i].text, len))
			fail_msg("case %zu: %s", i, cases[i].body);
	}
	/* a string and its token ids never collide */
	assert_true(compl("{\"prompt\":\"1\"}", 4096).k.hash !=
	            compl("{\"prompt\":[1]}", 4096).k.hash);
	assert_true(compl("{\"prompt\":[\"a\",\"b\"]}", 4096).k.hash !=
	            compl("{\"prompt\":\"ab\"}", 4096).k.hash);
}

static void expect_fallback(enum pg_api api, const char *body, size_t len, bool complete,
                            uint32_t plen)
{
	struct res r = key_of(api, body, len, complete, plen, NULL);
	size_t n = len < plen ? len : plen;

	if (r.k.source != PG_KEY_SRC_RAW || !r.k.fallback || r.len != n || r.k.length != n ||
	    r.k.hash != XXH3_64bits(body, n))
		fail_msg("expected raw fallback for %.*s", (int)len, body);
}

static void test_fallback(void **state)
{
	static const char *const chat_bad[] = {
	    "",
	    "{",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]",
	    "[]",
	    "\"x\"",
	    "null",
	    "{}",
	    "{\"messages\":{}}",
	    "{\"messages\":\"hi\"}",
	    "{\"messages\":[1]}",
	    "{\"messages\":[{\"role\":1,\"content\":\"a\"}]}",
	    "{\"messages\":[{\"role\":\"user\",\"content\":7}]}",
	    "{\"messages\":[{\"role\":\"user\",\"content\":[\"a\"]}]}",
	    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}]}]}",
	    "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
	    "{\"prompt\":\"a\"}", /* a completions body on the chat path */
	};
	static const char *const compl_bad[] = {
	    "{\"prompt\":\"a\"",  "{\"messages\":[]}",        "{\"prompt\":null}",
	    "{\"prompt\":1}",     "{\"prompt\":[\"a\",1]}",   "{\"prompt\":[1,\"a\"]}",
	    "{\"prompt\":[1.5]}", "{\"prompt\":[[1],\"a\"]}", "{\"prompt\":[[\"a\"]]}",
	    "{\"prompt\":[{}]}",  "{\"prompt\":[true]}",      "{\"prompt\":[99999999999999999999]}",
	};
	static const char ok[] = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";

	(void)state;
	for (size_t i = 0; i < sizeof(chat_bad) / sizeof(chat_bad[0]); i++)
		expect_fallback(PG_API_CHAT, chat_bad[i], strlen(chat_bad[i]), true, 4096);
	for (size_t i = 0; i < sizeof(compl_bad) / sizeof(compl_bad[0]); i++)
		expect_fallback(PG_API_COMPLETIONS, compl_bad[i], strlen(compl_bad[i]), true, 4096);
	/* a valid body that is not complete, and a cut shorter than the body */
	expect_fallback(PG_API_CHAT, ok, strlen(ok), false, 4096);
	expect_fallback(PG_API_CHAT, ok, strlen(ok), false, 10);
	expect_fallback(PG_API_CHAT, "{broken json that is long", 25, true, 10);
}

/* "stream": true is reported (it picks the data path) but never keys. */
static void test_stream_flag(void **state)
{
	const char *m = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
	char a[256], b[256], c[256];
	struct res ra, rb, rc;

	(void)state;
	snprintf(a, sizeof(a), "{%s,\"stream\":true}", m);
	snprintf(b, sizeof(b), "{%s,\"stream\":false}", m);
	snprintf(c, sizeof(c), "{\"stream\":\"true\",%s}", m);
	ra = chat(a, 4096);
	rb = chat(b, 4096);
	rc = chat(c, 4096);
	assert_true(ra.k.stream);
	assert_false(rb.k.stream);
	assert_false(rc.k.stream); /* a string is not true */
	assert_true(ra.k.hash == rb.k.hash && rb.k.hash == rc.k.hash);
	assert_false(key_of(PG_API_RAW, a, strlen(a), true, 4096, NULL).k.stream);
}

static void test_explicit(void **state)
{
	static const char body[] = "{\"prompt_cache_key\":\"sess\\u00e9-1\",\"messages\":"
	                           "[{\"role\":\"user\",\"content\":\"hi\"}]}";
	struct res r;

	(void)state;
	/* header wins everywhere, whole and uncut */
	r = key_of(PG_API_CHAT, body, strlen(body), true, 4, "session-42");
	expect_text(r, PG_KEY_SRC_HEADER, "session-42", 10, 10);
	r = key_of(PG_API_RAW, "xyz", 3, true, 4096, "session-42");
	expect_text(r, PG_KEY_SRC_HEADER, "session-42", 10, 10);
	r = key_of(PG_API_CHAT, "not json", 8, false, 4096, "session-42");
	expect_text(r, PG_KEY_SRC_HEADER, "session-42", 10, 10);
	/* prompt_cache_key, unescaped, not cut, whatever the messages */
	r = chat(body, 3);
	expect_text(r, PG_KEY_SRC_CACHE_FIELD, "sess\xc3\xa9-1", 8, 8);
	r = compl("{\"prompt\":\"other\",\"prompt_cache_key\":\"sess\xc3\xa9-1\"}", 4096);
	expect_text(r, PG_KEY_SRC_CACHE_FIELD, "sess\xc3\xa9-1", 8, 8);
	r = compl("{\"prompt_cache_key\":\"k\"}", 4096); /* no prompt needed */
	expect_text(r, PG_KEY_SRC_CACHE_FIELD, "k", 1, 1);
	/* ignored: empty, not a string, nested, or on a raw path */
	r = chat("{\"prompt_cache_key\":\"\",\"messages\":[]}", 4096);
	assert_int_equal(r.k.source, PG_KEY_SRC_MESSAGES);
	r = chat("{\"prompt_cache_key\":5,\"messages\":[]}", 4096);
	assert_int_equal(r.k.source, PG_KEY_SRC_MESSAGES);
	r = chat("{\"x\":{\"prompt_cache_key\":\"k\"},\"messages\":[]}", 4096);
	assert_int_equal(r.k.source, PG_KEY_SRC_MESSAGES);
	r = key_of(PG_API_RAW, body, strlen(body), true, 4096, NULL);
	assert_int_equal(r.k.source, PG_KEY_SRC_RAW);
	assert_false(r.k.fallback);
	/* the same explicit key routes together across APIs and bodies */
	assert_true(key_of(PG_API_RAW, "a", 1, true, 4096, "sess\xc3\xa9-1").k.hash ==
	            chat(body, 4096).k.hash);
}

static void test_raw(void **state)
{
	char a[8192], b[8192];
	struct res ra, rb;

	(void)state;
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (char)(i * 7 + 3);
	memcpy(b, a, sizeof(b));
	b[5000] ^= 1; /* past the prefix: same key */
	ra = key_of(PG_API_RAW, a, sizeof(a), true, 4096, NULL);
	rb = key_of(PG_API_RAW, b, sizeof(b), true, 4096, NULL);
	assert_int_equal(ra.k.length, 4096);
	assert_int_equal(ra.len, 4096);
	assert_false(ra.k.fallback);
	assert_true(ra.k.hash == rb.k.hash);
	assert_true(ra.k.hash == XXH3_64bits(a, 4096));
	b[4095] ^= 1; /* last byte inside the prefix: different key */
	rb = key_of(PG_API_RAW, b, sizeof(b), true, 4096, NULL);
	assert_true(ra.k.hash != rb.k.hash);
	/* incomplete bodies are fine for raw keys */
	rb = key_of(PG_API_RAW, a, 4096, false, 4096, NULL);
	assert_true(ra.k.hash == rb.k.hash);
	/* a text buffer smaller than the key gets a prefix, text_len the total */
	{
		struct pg_key k;
		char small[4];
		size_t tl = 0;

		assert_int_equal(pg_key_compute(PG_API_RAW, nohdr, a, sizeof(a), true, 4096, &k,
		                                small, sizeof(small), &tl),
		                 0);
		assert_int_equal(tl, 4096);
		assert_memory_equal(small, a, sizeof(small));
		assert_int_equal(
		    pg_key_compute(PG_API_RAW, nohdr, a, sizeof(a), true, 4096, &k, NULL, 0, NULL),
		    0);
		assert_true(k.hash == ra.k.hash);
	}
}

/* Every truncation and many single-byte corruptions of a rich body: no
 * crash (ASan build), the hash always matches the reported text, and a
 * fallback is always the raw key. */
static void test_mutations(void **state)
{
	static const char doc[] =
	    "{\"tools\":[{\"b\":[1,{\"z\":null,\"\\u0061\":\"\\ud83d\\ude00\"}],\"a\":true}],"
	    "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
	    "\"h\\u00e9llo \\u001e \xe2\x82\xac\"}]},{\"role\":\"assistant\",\"content\":\"x\"}],"
	    "\"prompt\":[[1,2],[3]],\"prompt_cache_key\":7}";
	static const unsigned char bytes[] = {0,   '"', '\\', '{',  '}',  '[',  ']',  ',', ':',
	                                      'u', '0', 0x80, 0xc3, 0xed, 0xf4, 0xff, ' ', 0x1e};
	size_t len = strlen(doc);
	char *buf = malloc(len);

	(void)state;
	for (size_t cut = 0; cut <= len; cut++) {
		memcpy(buf, doc, cut);
		key_of(PG_API_CHAT, buf, cut, true, 12, NULL);
		key_of(PG_API_COMPLETIONS, buf, cut, true, 4096, NULL);
	}
	for (size_t i = 0; i < len; i++) {
		for (size_t b = 0; b < sizeof(bytes); b++) {
			memcpy(buf, doc, len);
			buf[i] = (char)bytes[b];
			key_of(PG_API_CHAT, buf, len, true, 1 + (uint32_t)(i % 40), NULL);
			key_of(PG_API_COMPLETIONS, buf, len, true, 4096, NULL);
		}
	}
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_api),
	    cmocka_unit_test(test_chat_text),
	    cmocka_unit_test(test_chat_equivalence),
	    cmocka_unit_test(test_separator_escapes),
	    cmocka_unit_test(test_tools_first),
	    cmocka_unit_test(test_many_tools),
	    cmocka_unit_test(test_utf8_cut),
	    cmocka_unit_test(test_long_cut),
	    cmocka_unit_test(test_short_and_empty),
	    cmocka_unit_test(test_completions),
	    cmocka_unit_test(test_fallback),
	    cmocka_unit_test(test_explicit),
	    cmocka_unit_test(test_stream_flag),
	    cmocka_unit_test(test_raw),
	    cmocka_unit_test(test_mutations),
	};

	return cmocka_run_group_tests_name("key", tests, NULL, NULL);
}
