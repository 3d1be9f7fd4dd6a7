// SPDX-License-Identifier: MIT
/*
 * Keys of the newer APIs (lib/key.h): OpenAI Responses, Anthropic Messages
 * and embeddings. Each is checked through its key text, and through key
 * equality between bodies that must route together (field order,
 * whitespace, sampling fields) or apart.
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
#include "lib/names.h"

#define US "\x1f"
#define RS "\x1e"
#define GS "\x1d"

struct res {
	struct pg_key k;
	char text[4096];
	size_t len;
};

static struct res key_hdr(enum pg_api api, const char *body, uint32_t plen, const char *hdr)
{
	struct res r;
	struct pg_str h = {hdr ? hdr : "", hdr ? strlen(hdr) : 0};

	memset(&r, 0xa5, sizeof(r));
	assert_int_equal(pg_key_compute(api, h, body, strlen(body), true, plen, &r.k, r.text,
	                                sizeof(r.text), &r.len),
	                 0);
	if (r.len <= sizeof(r.text))
		assert_true(r.k.hash == XXH3_64bits(r.text, r.len));
	return r;
}

static struct res key(enum pg_api api, const char *body)
{
	return key_hdr(api, body, 4096, NULL);
}

static void expect(enum pg_api api, const char *body, enum pg_key_source src, const char *text)
{
	struct res r = key(api, body);

	if (r.k.source != src || r.k.fallback || r.len != strlen(text) ||
	    memcmp(r.text, text, r.len))
		fail_msg("%s: source %s, text \"%.*s\"", body, pg_key_source_name(r.k.source),
		         (int)r.len, r.text);
}

static void test_paths(void **state)
{
	static const struct {
		const char *path;
		enum pg_api api;
	} cases[] = {
	    {"/v1/responses", PG_API_RESPONSES},   {"/v1/messages", PG_API_MESSAGES},
	    {"/v1/embeddings", PG_API_EMBEDDINGS}, {"/v1/responses/x", PG_API_RAW},
	    {"/v1/message", PG_API_RAW},           {"/v1/embedding", PG_API_RAW},
	};
	struct pg_str post = {"POST", 4}, get = {"GET", 3};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pg_str p = {cases[i].path, strlen(cases[i].path)};

		assert_int_equal(pg_key_api(post, p), cases[i].api);
		assert_int_equal(pg_key_api(get, p), PG_API_RAW);
	}
	assert_int_equal(pg_key_body_need(PG_API_RESPONSES, 4096, false), PG_KEY_JSON_BODY_MAX);
}

static void test_responses_text(void **state)
{
	(void)state;
	expect(PG_API_RESPONSES, "{\"model\":\"m\",\"input\":\"Hi\"}", PG_KEY_SRC_INPUT,
	       "user" US "Hi" RS);
	expect(PG_API_RESPONSES, "{\"instructions\":\"Be brief.\",\"input\":\"Hi\"}",
	       PG_KEY_SRC_INPUT, "system" US "Be brief." RS "user" US "Hi" RS);
	expect(PG_API_RESPONSES,
	       "{\"input\":[{\"type\":\"message\",\"role\":\"user\",\"content\":["
	       "{\"type\":\"input_text\",\"text\":\"a\"},{\"type\":\"input_image\",\"image_url\":"
	       "\"x\"},{\"type\":\"input_text\",\"text\":\"b\"}]},{\"role\":\"assistant\","
	       "\"content\":[{\"type\":\"output_text\",\"text\":\"c\"}]},"
	       "{\"type\":\"function_call_output\",\"call_id\":\"1\",\"output\":\"42\"}]}",
	       PG_KEY_SRC_INPUT,
	       "user" US "a" GS "b" RS "assistant" US "c" RS
	       "{\"call_id\":\"1\",\"output\":\"42\",\"type\":\"function_call_output\"}" RS);
	expect(PG_API_RESPONSES, "{\"tools\":[{\"type\":\"web_search\"}],\"input\":\"q\"}",
	       PG_KEY_SRC_INPUT, "[{\"type\":\"web_search\"}]" RS "user" US "q" RS);
}

static void test_messages_text(void **state)
{
	(void)state;
	expect(PG_API_MESSAGES,
	       "{\"model\":\"claude\",\"max_tokens\":1024,\"system\":\"Be brief.\","
	       "\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}",
	       PG_KEY_SRC_MESSAGES, "system" US "Be brief." RS "user" US "Hi" RS);
	expect(PG_API_MESSAGES,
	       "{\"system\":[{\"type\":\"text\",\"text\":\"A\",\"cache_control\":{\"type\":"
	       "\"ephemeral\"}},{\"type\":\"text\",\"text\":\"B\"}],\"messages\":[{\"role\":"
	       "\"user\",\"content\":[{\"type\":\"image\",\"source\":{}},{\"type\":\"text\","
	       "\"text\":\"Hi\"}]}],\"tools\":[{\"name\":\"f\"}]}",
	       PG_KEY_SRC_MESSAGES,
	       "[{\"name\":\"f\"}]" RS "system" US "A" GS "B" RS "user" US "Hi" RS);
	expect(PG_API_MESSAGES, "{\"messages\":[]}", PG_KEY_SRC_MESSAGES, "");
}

static void test_embeddings_text(void **state)
{
	(void)state;
	expect(PG_API_EMBEDDINGS, "{\"model\":\"e\",\"input\":\"doc\"}", PG_KEY_SRC_INPUT, "doc");
	expect(PG_API_EMBEDDINGS, "{\"input\":[\"a\",\"b\"]}", PG_KEY_SRC_INPUT, "a" RS "b");
	expect(PG_API_EMBEDDINGS, "{\"input\":[1,22]}", PG_KEY_SRC_INPUT, "1" US "22" US);
	expect(PG_API_EMBEDDINGS, "{\"input\":[[1],[2]]}", PG_KEY_SRC_INPUT, "1" US RS "2" US);
}

/* Each group: bodies of one API that must give the same key. */
static const struct {
	enum pg_api api;
	const char *body[5];
} same[] = {
    {PG_API_RESPONSES,
     {
         "{\"model\":\"m\",\"instructions\":\"S\",\"input\":\"hello\"}",
         " {\n \"input\" : \"hello\" ,\"instructions\":\"S\", \"model\":\"x\",\"stream\":true,"
         "\"max_output_tokens\":9,\"temperature\":0.2,\"store\":false}",
         "{\"instructions\":\"S\",\"input\":[{\"role\":\"user\",\"content\":\"hello\"}]}",
         "{\"instructions\":\"S\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
         "\"content\":[{\"type\":\"input_text\",\"text\":\"hello\"}]}]}",
         "{\"input\":[{\"content\":[{\"text\":\"hel\\u006co\",\"type\":\"input_text\"}],"
         "\"role\":\"user\"}],\"instructions\":\"S\",\"top_p\":1}",
     }},
    {PG_API_MESSAGES,
     {
         "{\"model\":\"c\",\"max_tokens\":10,\"system\":\"S\",\"messages\":[{\"role\":\"user\","
         "\"content\":\"hi\"}]}",
         "{\"messages\":[{\"content\":\"hi\",\"role\":\"user\"}],\"system\":\"S\",\"stream\":true,"
         "\"max_tokens\":4096,\"temperature\":1,\"top_k\":5}",
         "{\"system\":[{\"type\":\"text\",\"text\":\"S\"}],\"messages\":[{\"role\":\"user\","
         "\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}]}",
         "\t{ \"system\" : [ { \"text\" : \"S\" , \"type\" : \"text\" , \"cache_control\" : "
         "{ \"type\" : \"ephemeral\" } } ] , \"messages\" : [ { \"role\" : \"user\" , "
         "\"content\" : \"hi\" } ] }",
     }},
    {PG_API_EMBEDDINGS,
     {
         "{\"model\":\"e\",\"input\":\"doc\"}",
         "{\"input\":[\"doc\"],\"encoding_format\":\"float\",\"dimensions\":256,\"user\":\"u\"}",
         " { \"input\" : \"d\\u006fc\" } ",
     }},
};

/* Pairwise different keys within each API. */
static const struct {
	enum pg_api api;
	const char *body[6];
} distinct[] = {
    {PG_API_RESPONSES,
     {
         "{\"input\":\"ab\"}",
         "{\"instructions\":\"a\",\"input\":\"b\"}",
         "{\"input\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}]"
         "}",
         "{\"input\":[{\"role\":\"assistant\",\"content\":\"ab\"}]}",
         "{\"input\":[{\"type\":\"function_call\",\"name\":\"ab\"}]}",
         "{\"input\":[]}",
     }},
    {PG_API_MESSAGES,
     {
         "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}]}",
         "{\"system\":\"a\",\"messages\":[{\"role\":\"user\",\"content\":\"b\"}]}",
         "{\"system\":\"ab\",\"messages\":[]}",
         "{\"tools\":[],\"messages\":[{\"role\":\"user\",\"content\":\"ab\"}]}",
         "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
         "{\"type\":\"text\",\"text\":\"b\"}]}]}",
     }},
    {PG_API_EMBEDDINGS,
     {
         "{\"input\":\"ab\"}",
         "{\"input\":[\"a\",\"b\"]}",
         "{\"input\":[97,98]}",
         "{\"input\":\"ab \"}",
     }},
};

static void test_invariance(void **state)
{
	(void)state;
	for (size_t g = 0; g < sizeof(same) / sizeof(same[0]); g++) {
		struct res base = key(same[g].api, same[g].body[0]);

		assert_true(pg_key_source_text(base.k.source));
		assert_false(base.k.fallback);
		for (size_t i = 1; i < 5 && same[g].body[i]; i++) {
			struct res r = key(same[g].api, same[g].body[i]);

			if (r.k.source != base.k.source || r.k.hash != base.k.hash)
				fail_msg("group %zu body %zu: key differs from body 0", g, i);
		}
	}
	for (size_t g = 0; g < sizeof(distinct) / sizeof(distinct[0]); g++)
		for (size_t i = 0; i < 6 && distinct[g].body[i]; i++) {
			struct res a = key(distinct[g].api, distinct[g].body[i]);

			assert_false(a.k.fallback);
			for (size_t j = 0; j < i; j++)
				if (key(distinct[g].api, distinct[g].body[j]).k.hash == a.k.hash)
					fail_msg("group %zu: bodies %zu and %zu collide", g, j, i);
		}
}

/* The same conversation through chat and Anthropic Messages keys alike. */
static void test_across_apis(void **state)
{
	struct res c = key(PG_API_CHAT, "{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},"
	                                "{\"role\":\"user\",\"content\":\"hi\"}]}");
	struct res m =
	    key(PG_API_MESSAGES, "{\"system\":\"S\",\"messages\":[{\"role\":\"user\",\"content\":"
	                         "\"hi\"}]}");
	struct res r = key(PG_API_RESPONSES, "{\"instructions\":\"S\",\"input\":\"hi\"}");

	(void)state;
	assert_true(c.k.hash == m.k.hash && m.k.hash == r.k.hash);
}

static void test_explicit(void **state)
{
	struct res r;

	(void)state;
	/* previous_response_id: the chain's affinity, whatever the input */
	r = key(PG_API_RESPONSES, "{\"previous_response_id\":\"resp_1\",\"input\":\"next\"}");
	assert_int_equal(r.k.source, PG_KEY_SRC_PREVIOUS_RESPONSE);
	assert_true(pg_key_source_explicit(r.k.source));
	assert_int_equal(r.len, 6);
	assert_memory_equal(r.text, "resp_1", 6);
	assert_true(r.k.hash == key(PG_API_RESPONSES,
	                            "{\"input\":[{\"role\":\"user\",\"content\":\"other\"}],"
	                            "\"previous_response_id\":\"resp_1\",\"stream\":true}")
	                            .k.hash);
	/* prompt_cache_key wins over it; the header over both */
	r = key(
	    PG_API_RESPONSES,
	    "{\"previous_response_id\":\"resp_1\",\"prompt_cache_key\":\"conv\",\"input\":\"x\"}");
	assert_int_equal(r.k.source, PG_KEY_SRC_CACHE_FIELD);
	assert_memory_equal(r.text, "conv", 4);
	r = key_hdr(PG_API_RESPONSES, "{\"prompt_cache_key\":\"conv\",\"input\":\"x\"}", 4096, "h");
	assert_int_equal(r.k.source, PG_KEY_SRC_HEADER);
	/* empty or not a string: ignored */
	r = key(PG_API_RESPONSES, "{\"previous_response_id\":\"\",\"input\":\"x\"}");
	assert_int_equal(r.k.source, PG_KEY_SRC_INPUT);
	r = key(PG_API_RESPONSES, "{\"previous_response_id\":null,\"input\":\"x\"}");
	assert_int_equal(r.k.source, PG_KEY_SRC_INPUT);
	/* only Responses has previous_response_id; Anthropic's and the
	 * embeddings API have no prompt_cache_key */
	r = key(PG_API_CHAT, "{\"previous_response_id\":\"r\",\"messages\":[]}");
	assert_int_equal(r.k.source, PG_KEY_SRC_MESSAGES);
	r = key(PG_API_MESSAGES, "{\"prompt_cache_key\":\"k\",\"messages\":[]}");
	assert_int_equal(r.k.source, PG_KEY_SRC_MESSAGES);
	r = key(PG_API_EMBEDDINGS, "{\"prompt_cache_key\":\"k\",\"input\":\"x\"}");
	assert_int_equal(r.k.source, PG_KEY_SRC_INPUT);
}

static void test_stream_and_cut(void **state)
{
	struct res r;

	(void)state;
	r = key(PG_API_RESPONSES, "{\"input\":\"x\",\"stream\":true}");
	assert_true(r.k.stream);
	r = key(PG_API_MESSAGES, "{\"stream\":true,\"messages\":[]}");
	assert_true(r.k.stream);
	/* cut at PrefixLength code points */
	r = key_hdr(PG_API_RESPONSES, "{\"input\":\"abcdef\"}", 7, NULL);
	assert_int_equal(r.k.length, 7);
	assert_memory_equal(r.text, "user" US "ab", 7);
	r = key_hdr(PG_API_EMBEDDINGS, "{\"input\":\"\\u00e9\\u00e9\\u00e9\"}", 2, NULL);
	assert_int_equal(r.k.length, 2);
	assert_int_equal(r.len, 4);
}

static void test_fallback(void **state)
{
	static const struct {
		enum pg_api api;
		const char *body;
	} bad[] = {
	    {PG_API_RESPONSES, "{\"input\":5}"},
	    {PG_API_RESPONSES, "{\"model\":\"m\"}"},
	    {PG_API_RESPONSES, "{\"instructions\":5,\"input\":\"x\"}"},
	    {PG_API_RESPONSES, "{\"input\":[5]}"},
	    {PG_API_RESPONSES, "{\"input\":[{\"role\":7,\"content\":\"x\"}]}"},
	    {PG_API_MESSAGES, "{\"system\":\"s\"}"},
	    {PG_API_MESSAGES, "{\"system\":5,\"messages\":[]}"},
	    {PG_API_MESSAGES, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
	                      "\"text\":1}]}]}"},
	    {PG_API_EMBEDDINGS, "{\"input\":{}}"},
	    {PG_API_EMBEDDINGS, "{\"input\":[\"a\",1]}"},
	    {PG_API_EMBEDDINGS, "not json"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct res r = key(bad[i].api, bad[i].body);

		if (r.k.source != PG_KEY_SRC_RAW || !r.k.fallback)
			fail_msg("%s: not a raw fallback", bad[i].body);
	}
}

/* cache_aware: the anchor runs to the first user message, as for chat. */
static void test_anchor(void **state)
{
	static const char a[] = "{\"instructions\":\"S\",\"input\":\"one\"}",
	                  b[] = "{\"instructions\":\"S\",\"input\":[{\"role\":\"user\",\"content\":"
	                        "\"one\"},{\"role\":\"assistant\",\"content\":\"r\"},{\"role\":"
	                        "\"user\",\"content\":\"two\"}]}";
	struct pg_str nohdr = {"", 0};
	struct pg_key_blocks ka, kb;
	struct pg_key k;

	(void)state;
	pg_key_compute_blocks(PG_API_RESPONSES, nohdr, a, strlen(a), true, 4096, &k, &ka);
	pg_key_compute_blocks(PG_API_RESPONSES, nohdr, b, strlen(b), true, 4096, &k, &kb);
	assert_true(ka.anchor == kb.anchor);
	assert_int_equal(ka.anchor_len, strlen("system" US "S" RS "user" US "one" RS));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_paths),         cmocka_unit_test(test_responses_text),
	    cmocka_unit_test(test_messages_text), cmocka_unit_test(test_embeddings_text),
	    cmocka_unit_test(test_invariance),    cmocka_unit_test(test_across_apis),
	    cmocka_unit_test(test_explicit),      cmocka_unit_test(test_stream_and_cut),
	    cmocka_unit_test(test_fallback),      cmocka_unit_test(test_anchor),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
