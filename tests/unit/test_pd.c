// SPDX-License-Identifier: MIT
/*
 * Prefill/decode disaggregation's pure parts (user/lib/pd.c): each
 * protocol's bodies, byte-exact where the protocol names nothing; what is
 * taken from a vLLM prefill's answer and what is refused; SGLang's batches;
 * the conditional rule; a leg's head with its new length (lib/forward.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/forward.h"
#include "lib/pd.h"

static struct pg_json js;
static struct pg_buf out;

static const char *edited(const char *body, int (*f)(const struct pg_json *, struct pg_buf *))
{
	assert_int_equal(pg_json_parse(&js, body, strlen(body)), 0);
	pg_buf_reset(&out);
	assert_int_equal(f(&js, &out), 0);
	pg_buf_append(&out, "", 1);
	return out.p;
}

static void test_vllm_prefill(void **state)
{
	(void)state;
	assert_string_equal(
	    edited(
	        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
	        "\"max_tokens\":300, \"stream\":true,\"stream_options\":{\"include_usage\":true}}",
	        pg_pd_vllm_prefill_body),
	    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
	    "\"max_tokens\":1, \"stream\":false,\"kv_transfer_params\":{\"do_remote_decode\":true,"
	    "\"do_remote_prefill\":false,\"remote_engine_id\":null,\"remote_block_ids\":null,"
	    "\"remote_host\":null,\"remote_port\":null}}");
	/* max_completion_tokens where given; max_tokens added where absent */
	assert_string_equal(
	    edited("{\"prompt\":\"p\",\"max_completion_tokens\":9}", pg_pd_vllm_prefill_body),
	    "{\"prompt\":\"p\",\"max_completion_tokens\":1,\"max_tokens\":1,\"stream\":false,"
	    "\"kv_transfer_params\":{\"do_remote_decode\":true,\"do_remote_prefill\":false,"
	    "\"remote_engine_id\":null,\"remote_block_ids\":null,\"remote_host\":null,"
	    "\"remote_port\":null}}");
}

static void test_vllm_params(void **state)
{
	static const struct {
		const char *ans;
		const char *params; /* NULL: refused */
	} cases[] = {
	    {"{\"id\":\"c\",\"choices\":[],\"kv_transfer_params\":{\"do_remote_prefill\":true,"
	     "\"do_remote_decode\":false,\"remote_engine_id\":\"e1\",\"remote_block_ids\":[1,2],"
	     "\"remote_host\":\"10.0.0.1\",\"remote_port\":5600}}",
	     "{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_engine_id\":\"e1\","
	     "\"remote_block_ids\":[1,2],\"remote_host\":\"10.0.0.1\",\"remote_port\":5600}"},
	    {"{\"id\":\"c\"}", NULL},
	    {"{\"kv_transfer_params\":null}", NULL},
	    {"{\"kv_transfer_params\":[1]}", NULL},
	    {"{\"kv_transfer_params\":{\"do_remote_prefill\":false,\"remote_engine_id\":\"e\"}}",
	     NULL},
	    {"{\"kv_transfer_params\":{\"do_remote_prefill\":true,\"remote_engine_id\":null}}",
	     NULL},
	    {"[]", NULL},
	};
	const char *p, *why;
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(pg_json_parse(&js, cases[i].ans, strlen(cases[i].ans)), 0);
		why = NULL;
		if (!cases[i].params) {
			assert_int_equal(pg_pd_vllm_params(&js, &p, &n, &why), -1);
			assert_non_null(why);
			continue;
		}
		assert_int_equal(pg_pd_vllm_params(&js, &p, &n, &why), 0);
		assert_int_equal(n, strlen(cases[i].params));
		assert_memory_equal(p, cases[i].params, n);
	}
	/* the decode leg: the original body with them */
	assert_int_equal(pg_json_parse(&js, "{\"a\":1,\"stream\":true}", 21), 0);
	pg_buf_reset(&out);
	assert_int_equal(pg_pd_vllm_decode_body(&js, "{\"x\":2}", 7, &out), 0);
	assert_int_equal(out.len, 50);
	assert_memory_equal(out.p, "{\"a\":1,\"stream\":true,\"kv_transfer_params\":{\"x\":2}}",
	                    50);
}

static void test_sglang(void **state)
{
	(void)state;
	assert_int_equal(pg_json_parse(&js, "{\"prompt\":\"p\",\"stream\":true}", 28), 0);
	assert_int_equal(pg_pd_sglang_batch(&js), 0);
	pg_buf_reset(&out);
	assert_int_equal(pg_pd_sglang_body(&js, "10.0.0.7", 8998, 42, &out), 0);
	pg_buf_append(&out, "", 1);
	assert_string_equal(out.p,
	                    "{\"prompt\":\"p\",\"stream\":true,\"bootstrap_host\":\"10.0.0.7\","
	                    "\"bootstrap_port\":8998,\"bootstrap_room\":42}");
	/* a batch: arrays, one room each */
	assert_int_equal(pg_json_parse(&js, "{\"prompt\":[\"a\",\"b\",\"c\"]}", 24), 0);
	assert_int_equal(pg_pd_sglang_batch(&js), 3);
	pg_buf_reset(&out);
	assert_int_equal(pg_pd_sglang_body(&js, "h", 1, 7, &out), 0);
	pg_buf_append(&out, "", 1);
	assert_string_equal(out.p,
	                    "{\"prompt\":[\"a\",\"b\",\"c\"],\"bootstrap_host\":[\"h\",\"h\","
	                    "\"h\"],\"bootstrap_port\":[1,1,1],\"bootstrap_room\":[7,8,9]}");
	/* token ids: one request; arrays of them: a batch */
	assert_int_equal(pg_json_parse(&js, "{\"prompt\":[1,2,3]}", 18), 0);
	assert_int_equal(pg_pd_sglang_batch(&js), 0);
	assert_int_equal(pg_json_parse(&js, "{\"input_ids\":[[1],[2]]}", 23), 0);
	assert_int_equal(pg_pd_sglang_batch(&js), 2);
	/* a room stays below 2^63 */
	assert_int_equal(pg_json_parse(&js, "{}", 2), 0);
	pg_buf_reset(&out);
	assert_int_equal(pg_pd_sglang_body(&js, "h", 1, UINT64_MAX, &out), 0);
	pg_buf_append(&out, "", 1);
	assert_non_null(strstr(out.p, "\"bootstrap_room\":9223372036854775807"));
}

static void test_names_and_rule(void **state)
{
	enum pg_pd pd;

	(void)state;
	assert_int_equal(pg_pd_parse("sglang", 6, &pd), 0);
	assert_int_equal(pd, PG_PD_SGLANG);
	assert_string_equal(pg_pd_name(PG_PD_VLLM), "vllm");
	assert_int_equal(pg_pd_parse("nixl", 4, &pd), -1);
	/* short prompts, and prompts the decode instance mostly holds */
	assert_true(pg_pd_decode_alone(100, 0, 256));
	assert_false(pg_pd_decode_alone(1000, 0, 256));
	assert_true(pg_pd_decode_alone(1000, 800, 256));
	assert_true(pg_pd_decode_alone(1000, 745, 256));
	assert_false(pg_pd_decode_alone(1000, 744, 256));
	/* a long prompt: what is left uncached, not its share, decides */
	assert_false(pg_pd_decode_alone(100000, 90000, 256));
	assert_true(pg_pd_decode_alone(100000, 99900, 256));
	assert_true(pg_pd_decode_alone(100, 500, 256)); /* (a match past the prompt) */
	assert_false(pg_pd_decode_alone(1, 0, 0));
}

static void test_head_length(void **state)
{
	static const char head[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
	                           "X-Request-Id: abc\r\nContent-Length: 12\r\n\r\n";
	static const char chunked[] = "POST /v HTTP/1.1\r\nHost: x\r\n"
	                              "Transfer-Encoding: chunked\r\n\r\n";
	char *buf = NULL;
	size_t len = 0, cap = 0;

	(void)state;
	pg_fwd_with_length(head, sizeof(head) - 1, 345, &buf, &len, &cap);
	assert_int_equal(len, sizeof(head) - 1 + 1);
	assert_memory_equal(buf,
	                    "POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc\r\n"
	                    "Content-Length: 345\r\n\r\n",
	                    len);
	len = 0;
	pg_fwd_with_length(chunked, sizeof(chunked) - 1, 0, &buf, &len, &cap);
	assert_memory_equal(buf, "POST /v HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", len);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vllm_prefill), cmocka_unit_test(test_vllm_params),
	    cmocka_unit_test(test_sglang),       cmocka_unit_test(test_names_and_rule),
	    cmocka_unit_test(test_head_length),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	pg_json_free(&js);
	pg_buf_free(&out);
	return rc;
}
