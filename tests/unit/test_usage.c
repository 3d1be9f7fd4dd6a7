// SPDX-License-Identifier: MIT
/*
 * lib/usage.h: what an engine's answer reports, from bodies written after
 * each engine's own serializers (vLLM, SGLang's OpenAI API and /generate,
 * llama.cpp's server, mockllm), non-streamed and streamed. Every body gives
 * the same answer whole, a byte at a time, and cut in two at every offset.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lib/usage.h"

#define NONE (UINT32_MAX - 1) /* a figure not reported */

struct want {
	uint32_t prompt, cached, completion;
	uint32_t have; /* the flags besides the figures' */
	uint8_t src;
	uint32_t events;
};

struct body {
	const char *name;
	enum pg_usage_mode mode;
	const char *text;
	struct want want;
};

#define VLLM_CHUNK                                                                                 \
	"data: "                                                                                   \
	"{\"id\":\"chatcmpl-b1\",\"object\":\"chat.completion.chunk\",\"created\":1735000000,"     \
	"\"model\":\"meta-llama/Llama-3.1-8B-Instruct\","

static const struct body bodies[] = {
    {"vllm chat, prompt tokens details",
     PG_USAGE_JSON,
     "{\"id\":\"chatcmpl-9f2c\",\"object\":\"chat.completion\",\"created\":1735000000,\"model\":"
     "\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
     "\"assistant\",\"reasoning_content\":null,\"content\":\"Hello! \\\"usage\\\": {} is "
     "text.\",\"tool_calls\":[]},\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":"
     "null}],\"service_tier\":null,\"system_fingerprint\":null,\"usage\":{\"prompt_tokens\":"
     "1843,\"total_tokens\":1850,\"completion_tokens\":7,\"prompt_tokens_details\":{"
     "\"cached_tokens\":1792}},\"prompt_logprobs\":null,\"kv_transfer_params\":null}",
     {1843, 1792, 7, PG_USAGE_OBJECT | PG_USAGE_DONE, PG_USAGE_SRC_USAGE, 0}},
    {"vllm chat, nothing cached (details null)",
     PG_USAGE_JSON,
     "{\"id\":\"chatcmpl-a\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"m\","
     "\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},"
     "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"total_tokens\":14,"
     "\"completion_tokens\":2,\"prompt_tokens_details\":null}}",
     {12, NONE, 2, PG_USAGE_OBJECT | PG_USAGE_DONE, 0, 0}},
    {"vllm completions",
     PG_USAGE_AUTO,
     "\n{\"id\":\"cmpl-7\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
     "\"choices\":"
     "[{\"index\":0,\"text\":\" world, again\",\"logprobs\":null,\"finish_reason\":\"length\","
     "\"stop_reason\":null,\"prompt_logprobs\":null}],\"usage\":{\"prompt_tokens\":5,"
     "\"total_tokens\":21,\"completion_tokens\":16,\"prompt_tokens_details\":{\"cached_tokens\":"
     "0}}}\n",
     {5, 0, 16, PG_USAGE_OBJECT | PG_USAGE_DONE, PG_USAGE_SRC_USAGE, 1}},
    {"vllm chat stream, include_usage",
     PG_USAGE_SSE,
     VLLM_CHUNK "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                "\"logprobs\":null,\"finish_reason\":null}]}\n\n" VLLM_CHUNK
                "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"logprobs\":null,"
                "\"finish_reason\":null}]}\n\n" VLLM_CHUNK
                "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"logprobs\":null,"
                "\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n" VLLM_CHUNK
                "\"choices\":[],\"usage\":{\"prompt_tokens\":2048,\"total_tokens\":2050,"
                "\"completion_tokens\":2,\"prompt_tokens_details\":{\"cached_tokens\":2032}}}\n\n"
                "data: [DONE]\n\n",
     {2048, 2032, 2, PG_USAGE_OBJECT | PG_USAGE_DONE, PG_USAGE_SRC_USAGE, 2}},
    {"vllm stream without usage: content events counted",
     PG_USAGE_AUTO,
     VLLM_CHUNK "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                "\"finish_reason\":null}]}\n\n" VLLM_CHUNK
                "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":"
                "null}]}\n\n" VLLM_CHUNK
                "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\\n\"},\"finish_reason\":"
                "null}]}\n\n" VLLM_CHUNK
                "\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"},"
                "\"finish_reason\":null}]}\n\n" VLLM_CHUNK
                "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                "data: [DONE]\n\n",
     {NONE, NONE, 3, PG_USAGE_DONE | PG_USAGE_COUNTED, 0, 3}},
    {"vllm completions stream, continuous usage: the last wins",
     PG_USAGE_SSE,
     "data: {\"id\":\"cmpl-2\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
     "\"choices\":[{\"index\":0,\"text\":\"x\",\"logprobs\":null,\"finish_reason\":null}],"
     "\"usage\":{\"prompt_tokens\":40,\"total_tokens\":41,\"completion_tokens\":1}}\n\n"
     "data: {\"id\":\"cmpl-2\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
     "\"choices\":[{\"index\":0,\"text\":\"y\",\"logprobs\":null,\"finish_reason\":\"length\"}],"
     "\"usage\":{\"prompt_tokens\":40,\"total_tokens\":42,\"completion_tokens\":2}}\n\n"
     "data: [DONE]\n\n",
     {40, NONE, 2, PG_USAGE_OBJECT | PG_USAGE_DONE, 0, 2}},
    {"sglang chat, --enable-cache-report",
     PG_USAGE_JSON,
     "{\"id\":\"5d3e1f\",\"object\":\"chat.completion\",\"created\":1735000000,\"model\":"
     "\"qwen/qwen2.5-0.5b-instruct\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
     "\"assistant\",\"content\":\"Hi there\",\"reasoning_content\":null,\"tool_calls\":null},"
     "\"logprobs\":null,\"finish_reason\":\"stop\",\"matched_stop\":151645}],\"usage\":{"
     "\"prompt_tokens\":30,\"total_tokens\":33,\"completion_tokens\":3,"
     "\"prompt_tokens_details\":{\"cached_tokens\":16},\"reasoning_tokens\":0},\"metadata\":{"
     "\"weight_version\":\"default\",\"usage\":{\"prompt_tokens\":99}}}",
     {30, 16, 3, PG_USAGE_OBJECT | PG_USAGE_DONE, PG_USAGE_SRC_USAGE, 0}},
    {"sglang chat, cached_tokens_details in sglext",
     PG_USAGE_JSON,
     "{\"id\":\"5d3e20\",\"object\":\"chat.completion\",\"created\":1,\"model\":\"q\",\"choices\":"
     "[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"ok\"},\"finish_reason\":"
     "\"stop\"}],\"usage\":{\"prompt_tokens\":300,\"total_tokens\":301,\"completion_tokens\":1,"
     "\"prompt_tokens_details\":null,\"reasoning_tokens\":0},\"sglext\":{"
     "\"cached_tokens_details\":{\"device\":192,\"host\":64,\"storage\":16,\"storage_backend\":"
     "\"file\"}}}",
     {300, 272, 1, PG_USAGE_OBJECT | PG_USAGE_DONE, PG_USAGE_SRC_DETAILS, 0}},
    {"sglang /generate",
     PG_USAGE_AUTO,
     "{\"text\":\" Paris.\",\"output_ids\":[12366,13],\"meta_info\":{\"id\":\"9a8b\","
     "\"finish_reason\":{\"type\":\"length\",\"length\":8},\"prompt_tokens\":9,"
     "\"weight_version\":\"default\",\"reasoning_tokens\":0,\"completion_tokens\":8,"
     "\"cached_tokens\":8,\"cached_tokens_details\":{\"device\":5,\"host\":3},"
     "\"e2e_latency\":0.1203}}",
     {9, 8, 8, PG_USAGE_DONE, PG_USAGE_SRC_META, 0}},
    {"sglang /generate stream",
     PG_USAGE_SSE,
     "data: {\"text\":\" Par\",\"meta_info\":{\"id\":\"9a8c\",\"finish_reason\":null,"
     "\"prompt_tokens\":9,\"completion_tokens\":1,\"cached_tokens\":0}}\n\n"
     "data: {\"text\":\" Paris.\",\"meta_info\":{\"id\":\"9a8c\",\"finish_reason\":{\"type\":"
     "\"stop\",\"matched\":2},\"prompt_tokens\":9,\"completion_tokens\":2,\"cached_tokens\":0}}"
     "\n\ndata: [DONE]\n\n",
     {9, 0, 2, PG_USAGE_DONE, PG_USAGE_SRC_META, 0}},
    {"llama.cpp chat",
     PG_USAGE_JSON,
     "{\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"message\":{\"role\":\"assistant\","
     "\"content\":\"Sure.\"}}],\"created\":1758777191,\"model\":\"gpt-3.5-turbo\","
     "\"system_fingerprint\":\"b6510-703f9e32\",\"object\":\"chat.completion\",\"usage\":{"
     "\"completion_tokens\":326,\"prompt_tokens\":1614,\"total_tokens\":1940,"
     "\"prompt_tokens_details\":{\"cached_tokens\":1600}},\"id\":\"chatcmpl-L2v2\","
     "\"timings\":{\"cache_n\":1600,\"prompt_n\":14,\"prompt_ms\":20.325,"
     "\"prompt_per_token_ms\":20.325,\"prompt_per_second\":49.2,\"predicted_n\":326,"
     "\"predicted_ms\":3084.0,\"predicted_per_token_ms\":9.46,\"predicted_per_second\":105.7}}",
     {1614, 1600, 326, PG_USAGE_OBJECT | PG_USAGE_DONE | PG_USAGE_TIMINGS, PG_USAGE_SRC_USAGE, 0}},
    {"llama.cpp, older: timings only",
     PG_USAGE_JSON,
     "{\"choices\":[{\"finish_reason\":\"length\",\"index\":0,\"message\":{\"role\":\"assistant\","
     "\"content\":\"x\"}}],\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":4,"
     "\"prompt_tokens\":2100,\"total_tokens\":2104},\"id\":\"chatcmpl-q\","
     "\"timings\":{\"cache_n\":0,\"prompt_n\":2100,\"prompt_ms\":20.325,"
     "\"prompt_per_token_ms\":20.325,\"prompt_per_second\":49.2,\"predicted_n\":4,"
     "\"predicted_ms\":3084.0,\"predicted_per_token_ms\":9.46,\"predicted_per_second\":105.7}}",
     {2100, 0, 4, PG_USAGE_OBJECT | PG_USAGE_DONE | PG_USAGE_TIMINGS, PG_USAGE_SRC_TIMINGS, 0}},
    {"llama.cpp stream, timings on every event",
     PG_USAGE_SSE,
     "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"role\":\"assistant\","
     "\"content\":null}}],\"created\":1,\"id\":\"chatcmpl-s\",\"model\":\"m\",\"object\":"
     "\"chat.completion.chunk\"}\n\n"
     "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"Ok\"}}],"
     "\"created\":1,\"id\":\"chatcmpl-s\",\"object\":\"chat.completion.chunk\","
     "\"timings\":{\"cache_n\":1536,\"prompt_n\":512,\"prompt_ms\":20.325,"
     "\"prompt_per_token_ms\":20.325,\"prompt_per_second\":49.2,\"predicted_n\":1,"
     "\"predicted_ms\":3084.0,\"predicted_per_token_ms\":9.46,\"predicted_per_second\":105.7}}\n\n"
     "data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],"
     "\"created\":1,\"id\":\"chatcmpl-s\",\"object\":\"chat.completion.chunk\","
     "\"timings\":{\"cache_n\":1536,\"prompt_n\":512,\"prompt_ms\":20.325,"
     "\"prompt_per_token_ms\":20.325,\"prompt_per_second\":49.2,\"predicted_n\":2,"
     "\"predicted_ms\":3084.0,\"predicted_per_token_ms\":9.46,\"predicted_per_second\":105.7}}\n\n"
     "data: [DONE]\n\n",
     {2048, 1536, 2, PG_USAGE_DONE | PG_USAGE_TIMINGS, PG_USAGE_SRC_TIMINGS, 1}},
    {"mockllm chat stream, include_usage",
     PG_USAGE_SSE,
     "data: {\"id\":\"chatcmpl-m-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":"
     "\"mockllm\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
     "\"logprobs\":null,\"finish_reason\":null}]}\n\n"
     "data: {\"id\":\"chatcmpl-m-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":"
     "\"mockllm\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lor \"},\"logprobs\":null,"
     "\"finish_reason\":\"length\"}]}\n\n"
     "data: {\"id\":\"chatcmpl-m-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":"
     "\"mockllm\",\"choices\":[],\"usage\":{\"prompt_tokens\":100,\"total_tokens\":101,"
     "\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":96}}}\n\n"
     "data: [DONE]\n\n",
     {100, 96, 1, PG_USAGE_OBJECT | PG_USAGE_DONE, PG_USAGE_SRC_USAGE, 1}},
    {"sse, CRLF, comments, other fields, data lines joined, no space",
     PG_USAGE_SSE,
     ": keep-alive\r\nevent: message\r\nid: 1\r\ndata:{\"choices\":[{\"delta\":\r\ndata: "
     "{\"content\":\"a\"}}],\r\ndata: \"usage\":{\"prompt_tokens\":7,\r\ndata: "
     "\"completion_tokens\":1}}\r\n\r\nretry: 10\rdata:[DONE]\r",
     {7, NONE, 1, PG_USAGE_OBJECT | PG_USAGE_DONE, 0, 1}},
    {"sse, events with no blank line between",
     PG_USAGE_SSE,
     "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\ndata: {\"choices\":[{\"delta\":{"
     "\"content\":\"b\"}}]}\ndata: {\"usage\":{\"prompt_tokens\":3}}\ndata: [DONE]",
     {3, NONE, 2, PG_USAGE_OBJECT | PG_USAGE_DONE | PG_USAGE_COUNTED, 0, 2}},
    {"sse, a broken event skipped, the next read",
     PG_USAGE_SSE,
     "data: {\"usage\":{\"prompt_tokens\":5,]}\n\ndata: {\"choices\":[{\"text\":\"z\"}],"
     "\"usage\":{\"prompt_tokens\":6,\"completion_tokens\":1}}\n\ndata: [DONX]\n\n",
     {6, NONE, 1, PG_USAGE_OBJECT | PG_USAGE_BROKEN, 0, 1}},
    {"not numbers, deeper usage, escaped names",
     PG_USAGE_JSON,
     "{\"usage\":{\"prompt_tokens\":-3,\"completion_tokens\":1.0,\"prompt_tokens_details\":{"
     "\"cached_tokens\":\"9\"}},\"choices\":[{\"message\":{\"usage\":{\"prompt_tokens\":1}}}],"
     "\"timings\":{\"cache\\u005fn\":4,\"prompt_n\":1e2,\"predicted_n\":99999999999}}",
     {NONE, NONE, UINT32_MAX, PG_USAGE_OBJECT | PG_USAGE_DONE | PG_USAGE_TIMINGS, 0, 0}},
    {"a value cut short",
     PG_USAGE_JSON,
     "{\"usage\":{\"prompt_tokens\":41,\"completion_tokens\":2",
     {41, NONE, NONE, PG_USAGE_OBJECT, 0, 0}},
    {"trailing bytes after the value",
     PG_USAGE_JSON,
     "{\"usage\":{\"prompt_tokens\":8}} x",
     {8, NONE, NONE, PG_USAGE_OBJECT | PG_USAGE_BROKEN, 0, 0}},
};

static void check(const struct body *b, const struct pg_usage *u)
{
	const struct want *w = &b->want;
	uint32_t have = w->have;

	if (w->prompt != NONE)
		have |= PG_USAGE_PROMPT;
	if (w->cached != NONE)
		have |= PG_USAGE_CACHED;
	if (w->completion != NONE && !(have & PG_USAGE_COUNTED))
		have |= PG_USAGE_COMPLETION;
	if (u->have != have)
		fail_msg("%s: have %#x, want %#x", b->name, u->have, have);
	assert_int_equal(u->prompt_tokens, w->prompt == NONE ? 0 : w->prompt);
	assert_int_equal(u->cached_tokens, w->cached == NONE ? 0 : w->cached);
	assert_int_equal(u->completion_tokens, w->completion == NONE ? 0 : w->completion);
	assert_int_equal(u->cached_src, w->src);
	assert_int_equal(u->events, w->events);
}

static void parse_split(const struct body *b, size_t cut, struct pg_usage *u)
{
	struct pg_usage_parse p;
	size_t n = strlen(b->text);

	pg_usage_init(&p, b->mode);
	pg_usage_feed(&p, b->text, cut);
	pg_usage_feed(&p, b->text + cut, n - cut);
	pg_usage_get(&p, u);
}

static void test_bodies(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		const struct body *b = &bodies[i];
		size_t n = strlen(b->text);
		struct pg_usage_parse p;
		struct pg_usage u;

		parse_split(b, n, &u);
		check(b, &u);
		for (size_t cut = 0; cut <= n; cut++) {
			parse_split(b, cut, &u);
			check(b, &u);
		}
		pg_usage_init(&p, b->mode);
		for (size_t k = 0; k < n; k++)
			pg_usage_feed(&p, b->text + k, 1);
		pg_usage_get(&p, &u);
		check(b, &u);
	}
}

/* Each piece in its own buffer of exactly its bytes: ASan sees any read
 * past a piece. */
static void test_pieces_own_buffers(void **state)
{
	const struct body *b = &bodies[3];
	size_t n = strlen(b->text);
	struct pg_usage_parse p;
	struct pg_usage u;

	(void)state;
	pg_usage_init(&p, b->mode);
	for (size_t k = 0; k < n;) {
		size_t len = 1 + k % 37;
		char *piece;

		if (len > n - k)
			len = n - k;
		piece = test_malloc(len);
		memcpy(piece, b->text + k, len);
		pg_usage_feed(&p, piece, len);
		test_free(piece);
		k += len;
	}
	pg_usage_get(&p, &u);
	check(b, &u);
}

static void test_cached_absent(void **state)
{
	struct pg_usage_parse p;
	struct pg_usage u;
	uint32_t c = 7;

	(void)state;
	/* vLLM and SGLang leave the details out when nothing was cached */
	pg_usage_init(&p, PG_USAGE_JSON);
	pg_usage_feed(&p, bodies[1].text, strlen(bodies[1].text));
	pg_usage_get(&p, &u);
	assert_false(pg_usage_cached(&u, false, &c));
	assert_true(pg_usage_cached(&u, true, &c));
	assert_int_equal(c, 0);
	/* reported: taken whatever is known of the instance */
	pg_usage_init(&p, PG_USAGE_JSON);
	pg_usage_feed(&p, bodies[0].text, strlen(bodies[0].text));
	pg_usage_get(&p, &u);
	assert_true(pg_usage_cached(&u, false, &c));
	assert_int_equal(c, 1792);
	/* a stream without usage says nothing of its cache */
	pg_usage_init(&p, PG_USAGE_SSE);
	pg_usage_feed(&p, bodies[4].text, strlen(bodies[4].text));
	pg_usage_get(&p, &u);
	assert_false(pg_usage_cached(&u, true, &c));
}

static void test_deep_and_long(void **state)
{
	static char buf[8192];
	struct pg_usage_parse p;
	struct pg_usage u;
	size_t n = 0;

	(void)state;
	/* nesting past the tracked levels, a long member name, a long string */
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "{\"x\":");
	for (int i = 0; i < 200; i++)
		buf[n++] = '[';
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "{\"usage\":{\"prompt_tokens\":5}}");
	for (int i = 0; i < 200; i++)
		buf[n++] = ']';
	n += (size_t)snprintf(buf + n, sizeof(buf) - n,
	                      ",\"prompt_tokens_and_a_much_longer_name\":1,"
	                      "\"choices\":[{\"text\":\"");
	for (int i = 0; i < 3000; i++)
		buf[n++] = (char)('a' + i % 26);
	n += (size_t)snprintf(buf + n, sizeof(buf) - n,
	                      "\"}],\"usage\":{\"completion_tokens\":4294967296}}");
	pg_usage_init(&p, PG_USAGE_AUTO);
	pg_usage_feed(&p, buf, n);
	pg_usage_get(&p, &u);
	assert_int_equal(u.have, PG_USAGE_COMPLETION | PG_USAGE_OBJECT | PG_USAGE_DONE);
	assert_int_equal(u.completion_tokens, UINT32_MAX);
	assert_int_equal(u.events, 1);
	/* deeper than json.h allows: broken */
	pg_usage_init(&p, PG_USAGE_JSON);
	for (int i = 0; i <= PG_JSON_MAX_DEPTH; i++)
		pg_usage_feed(&p, "[", 1);
	pg_usage_get(&p, &u);
	assert_int_equal(u.have, PG_USAGE_BROKEN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bodies),
	    cmocka_unit_test(test_pieces_own_buffers),
	    cmocka_unit_test(test_cached_absent),
	    cmocka_unit_test(test_deep_and_long),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
