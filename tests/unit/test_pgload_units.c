// SPDX-License-Identifier: MIT
/* Unit tests for pgload's pure parts: sse.c, rng.c, timer.c, workload text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/pgload/rng.h"
#include "../../tools/pgload/sse.h"
#include "../../tools/pgload/timer.h"
#include "../../tools/pgload/workload.h"

static const char stream[] =
    "data: "
    "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}],\"usage\":"
    "null}\n\n"
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"
    ": comment\r\n\r\n"
    "data:{\"choices\":[{\"index\":0,\"delta\":{\"content\" : \"b\\\"c\"}}]}\r\n\r\n"
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8123,\"completion_tokens\":32,"
    "\"prompt_tokens_details\":{\"cached_tokens\":8000}}}\n\n"
    "data: [DONE]\n\n";

/* Every split of the stream into two feeds gives the same facts. */
static void test_sse_all_splits(void **state)
{
	size_t n = strlen(stream);

	(void)state;
	for (size_t cut = 0; cut <= n; cut++) {
		struct pg_scan s = {0};
		int ev = 0;

		pg_scan_reset(&s, true, 64);
		ev += pg_scan_feed(&s, stream, cut);
		ev += pg_scan_feed(&s, stream + cut, n - cut);
		ev += pg_scan_finish(&s);
		assert_int_equal(ev, 2);
		/* the reply: the deltas joined, raw (escapes kept) */
		assert_false(s.text_over);
		assert_int_equal(s.text.len, 5);
		assert_memory_equal(s.text.p, "ab\\\"c", 5);
		assert_int_equal(s.content_events, 2);
		assert_true(s.done);
		assert_int_equal(s.prompt_tokens, 8123);
		assert_int_equal(s.cached_tokens, 8000);
		assert_int_equal(s.completion_tokens, 32);
		pg_scan_free(&s);
	}
}

static void test_sse_byte_at_a_time(void **state)
{
	struct pg_scan s = {0};
	int ev = 0;

	(void)state;
	pg_scan_reset(&s, true, 0);
	for (size_t i = 0; stream[i]; i++)
		ev += pg_scan_feed(&s, stream + i, 1);
	assert_int_equal(ev, 2);
	assert_true(s.done);
	assert_int_equal(s.cached_tokens, 8000);
	assert_int_equal(s.text.len, 0); /* capture off */
	pg_scan_free(&s);
}

/* A reply longer than text_max, or a content value cut short, is not a
 * reply: text_over. A new body starts a new capture. */
static void test_sse_capture_limits(void **state)
{
	static const char cut[] = "data: {\"choices\":[{\"delta\":{\"content\":\"ab\\\"}}\n\n";
	struct pg_scan s = {0};

	(void)state;
	pg_scan_reset(&s, true, 4);
	pg_scan_feed(&s, stream, strlen(stream));
	pg_scan_finish(&s);
	assert_true(s.done);
	assert_true(s.text_over);
	pg_scan_reset(&s, true, 5);
	pg_scan_feed(&s, stream, strlen(stream));
	assert_false(s.text_over);
	assert_int_equal(s.text.len, 5);
	pg_scan_reset(&s, true, 64);
	assert_int_equal(s.text.len, 0);
	assert_int_equal(pg_scan_feed(&s, cut, strlen(cut)), 1);
	assert_true(s.text_over);
	pg_scan_free(&s);
}

/* /v1/completions streams carry their tokens in choices[].text: content
 * events as chat's deltas are, so TTFT is stamped at the first one. */
static void test_sse_completions(void **state)
{
	static const char cmpl[] =
	    "data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{\"index\":0,"
	    "\"text\":\"ab\",\"logprobs\":null,\"finish_reason\":null}]}\n\n"
	    "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":null}]}\n\n"
	    "data: {\"choices\":[{\"index\":0,\"text\":\"cd\",\"finish_reason\":\"length\"}]}\n\n"
	    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":900,\"completion_tokens\":2,"
	    "\"prompt_tokens_details\":{\"cached_tokens\":512}}}\n\n"
	    "data: [DONE]\n\n";
	struct pg_scan s = {0};
	size_t first = strstr(cmpl, "\n") - cmpl + 1; /* just past the first newline */

	(void)state;
	pg_scan_reset(&s, true, 64);
	assert_int_equal(pg_scan_feed(&s, cmpl, first - 1), 0);
	assert_int_equal(pg_scan_feed(&s, cmpl + first - 1, 1), 1);
	assert_int_equal(pg_scan_feed(&s, cmpl + first, strlen(cmpl) - first), 1);
	assert_int_equal(pg_scan_finish(&s), 0);
	assert_int_equal(s.content_events, 2); /* the empty text is none */
	assert_memory_equal(s.text.p, "abcd", 4);
	assert_true(s.done);
	assert_int_equal(s.prompt_tokens, 900);
	assert_int_equal(s.cached_tokens, 512);
	pg_scan_free(&s);
}

static void test_sse_truncated(void **state)
{
	struct pg_scan s = {0};

	(void)state;
	pg_scan_reset(&s, true, 0);
	pg_scan_feed(&s, stream, 120);
	pg_scan_finish(&s);
	assert_false(s.done);
	assert_int_equal(s.prompt_tokens, -1);
	pg_scan_free(&s);
}

static void test_json_body(void **state)
{
	static const char body[] = "{\"choices\":[{\"message\":{\"role\":\"assistant\",\"content\":"
	                           "\"x \\\"usage\\\": {\\\"prompt_tokens\\\":1}\"}}],"
	                           "\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":4,"
	                           "\"prompt_tokens_details\":{\"cached_tokens\":48}}}";
	struct pg_scan s = {0};

	(void)state;
	pg_scan_reset(&s, false, 256);
	assert_int_equal(pg_scan_feed(&s, body, 30), 0);
	assert_int_equal(pg_scan_feed(&s, body + 30, strlen(body) - 30), 0);
	assert_int_equal(pg_scan_finish(&s), 1);
	assert_false(s.text_over);
	assert_int_equal(s.text.len, strlen("x \\\"usage\\\": {\\\"prompt_tokens\\\":1}"));
	assert_memory_equal(s.text.p, "x \\\"usage\\\": {\\\"prompt_tokens\\\":1}", s.text.len);
	assert_int_equal(s.prompt_tokens, 50);
	assert_int_equal(s.cached_tokens, 48);
	assert_int_equal(s.completion_tokens, 4);
	pg_scan_free(&s);
}

static void test_json_number(void **state)
{
	static const struct {
		const char *in, *key;
		int32_t want;
	} cases[] = {
	    {"{\"prompt_tokens\":12}", "prompt_tokens", 12},
	    {"{\"prompt_tokens_details\":{},\"prompt_tokens\" :\n 7}", "prompt_tokens", 7},
	    {"{\"prompt_tokens\":-1}", "prompt_tokens", -1},
	    {"{\"prompt_tokens\":null}", "prompt_tokens", -1},
	    {"{\"x\":\"\\\"prompt_tokens\\\":5\"}", "prompt_tokens", -1},
	    {"{\"prompt_tokens\":99999999999}", "prompt_tokens", -1},
	    {"{\"prompt_tokens\"", "prompt_tokens", -1},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(pg_json_number(cases[i].in, strlen(cases[i].in), cases[i].key),
		                 cases[i].want);
}

static void test_head_header(void **state)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nx-backend-idx: no\r\n"
	                           "X-BACKEND-ID:\t b7 \r\nContent-Length: 0\r\n\r\n";
	const char *v;
	size_t n;

	(void)state;
	assert_true(pg_head_header(head, strlen(head), "X-Backend-Id", &v, &n));
	assert_int_equal(n, 2);
	assert_memory_equal(v, "b7", 2);
	assert_false(pg_head_header(head, strlen(head), "X-Missing", &v, &n));
}

static void test_text(void **state)
{
	static const size_t sizes[] = {1, 2, 3, 7, 64, 32000};
	char *a = malloc(32001), *b = malloc(32001);

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];

		memset(a, 0, 32001);
		pg_wl_text(a, n, 42);
		pg_wl_text(b, n, 42);
		assert_memory_equal(a, b, n);
		assert_int_equal(a[n], 0); /* exactly n bytes written */
		assert_true(a[0] != ' ' && a[n - 1] != ' ');
		for (size_t j = 0; j < n; j++)
			assert_true(a[j] == ' ' || (a[j] >= 'a' && a[j] <= 'z'));
	}
	pg_wl_text(b, 64, 43);
	pg_wl_text(a, 64, 42);
	assert_memory_not_equal(a, b, 64);
	free(a);
	free(b);
}

static void test_zipf(void **state)
{
	struct pg_zipf z;
	struct pg_rng r;
	unsigned count[4] = {0};

	(void)state;
	assert_int_equal(pg_zipf_init(&z, 4, 1.0), 0);
	pg_rng_seed(&r, 7);
	for (int i = 0; i < 100000; i++)
		count[pg_zipf_sample(&z, &r)]++;
	/* P = 12/25, 6/25, 4/25, 3/25 */
	assert_in_range(count[0], 47000, 49000);
	assert_in_range(count[1], 23000, 25000);
	assert_in_range(count[3], 11000, 13000);
	pg_zipf_free(&z);
}

static void test_heap(void **state)
{
	struct pg_heap h = {0};
	struct pg_rng r;
	struct pg_timer t;
	uint64_t last = 0;

	(void)state;
	pg_rng_seed(&r, 3);
	for (int i = 0; i < 5000; i++) {
		t = (struct pg_timer){.due_ns = pg_rng_next(&r) % 1000000};
		assert_int_equal(pg_heap_push(&h, &t), 0);
	}
	for (int i = 0; i < 5000; i++) {
		assert_int_equal(pg_heap_pop(&h, &t), 0);
		assert_true(t.due_ns >= last);
		last = t.due_ns;
	}
	assert_int_equal(pg_heap_pop(&h, &t), -1);
	pg_heap_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sse_all_splits),
	    cmocka_unit_test(test_sse_byte_at_a_time),
	    cmocka_unit_test(test_sse_truncated),
	    cmocka_unit_test(test_json_body),
	    cmocka_unit_test(test_json_number),
	    cmocka_unit_test(test_head_header),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_zipf),
	    cmocka_unit_test(test_heap),
	    cmocka_unit_test(test_sse_capture_limits),
	    cmocka_unit_test(test_sse_completions),
	};

	return cmocka_run_group_tests_name("pgload", tests, NULL, NULL);
}
