// SPDX-License-Identifier: MIT
/*
 * mockllm's prefill/decode legs (pdreq.c): which leg a body is on each role
 * and protocol, the fields each leg must carry (a wrong or missing one is a
 * 400 naming it), the fields read, and the prefill's answer's
 * kv_transfer_params read back as a decode leg.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/mockllm/pdreq.h"

#define M  "\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define P1 "\"max_tokens\":1,\"stream\":false"
#define KP "\"kv_transfer_params\":"
#define RD                                                                                         \
	"{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null,"        \
	"\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}"
#define RP                                                                                         \
	"{\"do_remote_prefill\":true,\"do_remote_decode\":false,\"remote_engine_id\":\"e-1\","     \
	"\"remote_block_ids\":[5,6,7],\"remote_host\":\"127.0.0.1\",\"remote_port\":5600,"         \
	"\"tp_size\":1}"
#define BS "\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":8998,\"bootstrap_room\":"

enum { MIX = PD_ROLE_MIXED, PRE = PD_ROLE_PREFILL, DEC = PD_ROLE_DECODE };
enum { VL = PD_PROTO_VLLM, SG = PD_PROTO_SGLANG };

static const struct {
	int role, proto;
	bool chat;
	const char *body;
	enum pd_leg leg;
	const char *err; /* a part of the 400's message; NULL: accepted */
} cases[] = {
    /* a mixed instance ignores every field, even malformed ones */
    {MIX, VL, true, "{" M "," KP RD ",\"stream\":true}", PD_LEG_PLAIN, NULL},
    {MIX, SG, true, "{" M "," KP "7," BS "\"x\"}", PD_LEG_PLAIN, NULL},
    /* no field of either protocol: plain, on every role */
    {PRE, VL, true, "{" M "}", PD_LEG_PLAIN, NULL},
    {DEC, SG, true, "{" M "}", PD_LEG_PLAIN, NULL},
    {PRE, VL, true, "{" M "," KP "null}", PD_LEG_PLAIN, NULL},
    {DEC, VL, true, "{" M "," KP "{\"do_remote_prefill\":false}}", PD_LEG_PLAIN, NULL},
    /* not JSON: the endpoint's own 400 follows */
    {PRE, VL, true, "{\"model\":", PD_LEG_PLAIN, NULL},
    /* vLLM prefill leg */
    {PRE, VL, true, "{" M "," P1 "," KP RD "}", PD_LEG_VLLM_PREFILL, NULL},
    {PRE, VL, false, "{\"prompt\":\"x\",\"max_completion_tokens\":1," KP RD "}",
     PD_LEG_VLLM_PREFILL, NULL},
    {DEC, VL, true, "{" M "," P1 "," KP RD "}", 0, "this is a decode instance"},
    {PRE, VL, true, "{" M ",\"max_tokens\":1,\"stream\":true," KP RD "}", 0, "\"stream\": false"},
    {PRE, VL, true, "{" M "," P1 ",\"stream_options\":{\"include_usage\":true}," KP RD "}", 0,
     "Stream options can only be defined when `stream=True`."},
    {PRE, VL, true, "{" M ",\"stream\":false," KP RD "}", 0, "needs \"max_tokens\": 1"},
    {PRE, VL, true, "{" M ",\"max_tokens\":16," KP RD "}", 0, "\"max_tokens\": 1, not 16"},
    {PRE, VL, true, "{" M "," P1 ",\"max_completion_tokens\":100," KP RD "}", 0,
     "\"max_completion_tokens\": 1, not 100"},
    {PRE, VL, true, "{" M "," P1 "," KP "[]}", 0, "kv_transfer_params must be an object"},
    {PRE, VL, true, "{" M "," P1 "," KP "{\"do_remote_decode\":1}}", 0,
     "do_remote_decode must be true or false"},
    {PRE, VL, true, "{" M "," P1 "," KP "{\"do_remote_decode\":true,\"do_remote_prefill\":true}}",
     0, "both true"},
    /* vLLM decode leg */
    {DEC, VL, true, "{" M ",\"stream\":true," KP RP "}", PD_LEG_VLLM_DECODE, NULL},
    {PRE, VL, true, "{" M "," KP RP "}", 0, "this is a prefill instance"},
    {DEC, VL, true,
     "{" M "," KP "{\"do_remote_prefill\":true,\"remote_block_ids\":[1],"
     "\"remote_host\":\"127.0.0.1\",\"remote_port\":5600}}",
     0, "remote_engine_id"},
    {DEC, VL, true,
     "{" M "," KP "{\"do_remote_prefill\":true,\"remote_engine_id\":\"e\",\"remote_block_ids\":"
     "[1,\"2\"],\"remote_host\":\"127.0.0.1\",\"remote_port\":5600}}",
     0, "remote_block_ids[1] is not a block id"},
    {DEC, VL, true,
     "{" M "," KP "{\"do_remote_prefill\":true,\"remote_engine_id\":\"e\",\"remote_block_ids\":"
     "null,\"remote_host\":\"127.0.0.1\",\"remote_port\":5600}}",
     0, "remote_block_ids must be a list"},
    {DEC, VL, true,
     "{" M "," KP "{\"do_remote_prefill\":true,\"remote_engine_id\":\"e\",\"remote_block_ids\":"
     "[],\"remote_host\":\"127.0.0.1\",\"remote_port\":70000}}",
     0, "remote_port"},
    {DEC, VL, true,
     "{" M "," KP "{\"do_remote_prefill\":true,\"remote_engine_id\":\"e\",\"remote_block_ids\":"
     "[],\"remote_host\":\"a b\",\"remote_port\":1}}",
     0, "remote_host"},
    {DEC, VL, true,
     "{" M "," KP "{\"do_remote_prefill\":true,\"remote_engine_id\":\"e\",\"remote_block_ids\":"
     "[],\"remote_host\":\"::1\",\"remote_port\":1,\"tp_size\":0}}",
     0, "tp_size"},
    /* the other protocol's fields on a role instance */
    {DEC, VL, true, "{" M "," BS "1}", 0, "speaks --pd-protocol vllm"},
    {PRE, SG, true, "{" M "," KP RD "}", 0, "speaks --pd-protocol sglang"},
    {DEC, SG, true, "{" M "," KP RP "," BS "1}", 0, "in one request"},
    /* SGLang legs */
    {PRE, SG, true, "{" M "," BS "1}", PD_LEG_SGLANG_PREFILL, NULL},
    {DEC, SG, true, "{" M ",\"stream\":true," BS "9223372036854775807}", PD_LEG_SGLANG_DECODE,
     NULL},
    {PRE, SG, true,
     "{" M ",\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":9000,\"bootstrap_room\":1}", 0,
     "bootstrap_port 9000 is not this prefill's (8998)"},
    {DEC, SG, true, "{" M ",\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_room\":1}", 0,
     "bootstrap_port missing"},
    {DEC, SG, true, "{" M "," BS "-1}", 0, "bootstrap_room must be an integer"},
    {DEC, SG, true, "{" M "," BS "1.5}", 0, "bootstrap_room must be an integer"},
    {DEC, SG, true, "{" M "," BS "9223372036854775808}", 0, "bootstrap_room must be"},
    {DEC, SG, true, "{" M ",\"bootstrap_host\":7,\"bootstrap_port\":1,\"bootstrap_room\":1}", 0,
     "bootstrap_host must be"},
    /* batches: arrays, one element per prompt */
    {DEC, SG, false,
     "{\"prompt\":[\"a\",\"b\"],\"bootstrap_host\":[\"::1\",\"::1\"],\"bootstrap_port\":[8998,"
     "8998],\"bootstrap_room\":[3,4]}",
     PD_LEG_SGLANG_DECODE, NULL},
    {DEC, SG, false, "{\"prompt\":[\"a\",\"b\"]," BS "3}", 0,
     "a batch of 2 prompts needs arrays of 2 rooms"},
    {DEC, SG, false,
     "{\"prompt\":[\"a\",\"b\"],\"bootstrap_host\":[\"::1\",\"::1\"],\"bootstrap_port\":[8998,"
     "8998],\"bootstrap_room\":[3]}",
     0, "2, 2 and 1 elements for a batch of 2 prompts"},
    {DEC, SG, false,
     "{\"prompt\":[\"a\",\"b\"],\"bootstrap_host\":[\"::1\",\"::1\"],\"bootstrap_port\":8998,"
     "\"bootstrap_room\":[3,4]}",
     0, "arrays all three"},
    {DEC, SG, false,
     "{\"prompt\":[\"a\",\"b\"],\"bootstrap_host\":[\"::1\",\"::1\"],\"bootstrap_port\":[8998,"
     "8998],\"bootstrap_room\":[3,3]}",
     0, "bootstrap_room 3 appears twice"},
    {DEC, SG, false,
     "{\"prompt\":[\"a\",\"b\"],\"bootstrap_host\":[\"::1\",\"::2\"],\"bootstrap_port\":[8998,"
     "8998],\"bootstrap_room\":[3,4]}",
     0, "name one prefill"},
    /* token ids are one prompt; a list of id lists is a batch */
    {DEC, SG, false, "{\"prompt\":[1,2,3]," BS "3}", PD_LEG_SGLANG_DECODE, NULL},
    {DEC, SG, false, "{\"prompt\":[[1],[2]]," BS "3}", 0, "a batch of 2"},
};

static void test_legs(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pd_req r;
		char err[PD_ERR_MAX];
		int rc = pd_req_parse(cases[i].body, strlen(cases[i].body), cases[i].chat,
		                      (enum pd_role)cases[i].role, (enum pd_proto)cases[i].proto,
		                      8998, &r, err);

		if (cases[i].err) {
			if (rc != -1 || !strstr(err, cases[i].err))
				fail_msg("case %zu: want an error with \"%s\", got rc %d \"%s\"", i,
				         cases[i].err, rc, err);
			assert_int_equal(r.leg, PD_LEG_PLAIN);
			assert_null(r.block_ids);
		} else {
			if (rc != 0)
				fail_msg("case %zu: refused: %s", i, err);
			assert_int_equal(r.leg, cases[i].leg);
		}
		pd_req_free(&r);
	}
}

static void test_fields(void **state)
{
	static const char dec[] = "{" M "," KP RP "}";
	static const char batch[] = "{\"prompt\":[\"a\",\"b\"],\"bootstrap_host\":[\"::1\",\"::1\"]"
	                            ",\"bootstrap_port\":[8998,"
	                            "8998],\"bootstrap_room\":[3,4611686018427387904]}";
	struct pd_req r;
	char err[PD_ERR_MAX];

	(void)state;
	assert_int_equal(
	    pd_req_parse(dec, strlen(dec), true, PD_ROLE_DECODE, PD_PROTO_VLLM, 0, &r, err), 0);
	assert_string_equal(r.engine, "e-1");
	assert_string_equal(r.host, "127.0.0.1");
	assert_int_equal(r.port, 5600);
	assert_int_equal(r.nblocks, 3);
	assert_int_equal(r.block_ids[0], 5);
	assert_int_equal(r.block_ids[2], 7);
	pd_req_free(&r);

	assert_int_equal(pd_req_parse(batch, strlen(batch), false, PD_ROLE_PREFILL, PD_PROTO_SGLANG,
	                              8998, &r, err),
	                 0);
	assert_int_equal(r.leg, PD_LEG_SGLANG_PREFILL);
	assert_string_equal(r.host, "::1");
	assert_int_equal(r.port, 8998);
	assert_int_equal(r.nrooms, 2);
	assert_int_equal(r.room[0], 3);
	assert_int_equal(r.room[1], 1ull << 62);
	pd_req_free(&r);
}

/* The prefill's answer's parameters, copied into the request as a router
 * does, make a decode leg naming the same transfer. */
static void test_params_round_trip(void **state)
{
	struct pg_buf b = {0};
	struct pd_req r;
	char err[PD_ERR_MAX];
	size_t n = 500;

	(void)state;
	pg_buf_puts(&b, "{" M);
	pd_kv_params_json(&b, "8001-0123abcd", 40001, n, "127.0.0.1", 43210);
	pg_buf_puts(&b, "}");
	assert_false(b.oom);
	assert_non_null(strstr(b.p,
	                       ",\"kv_transfer_params\":{\"do_remote_prefill\":true,"
	                       "\"do_remote_decode\":false,\"remote_block_ids\":[40001,40002,"));
	assert_non_null(strstr(b.p,
	                       ",40500],\"remote_engine_id\":\"8001-0123abcd\",\"remote_host\":"
	                       "\"127.0.0.1\",\"remote_port\":43210,\"tp_size\":1}}"));
	assert_int_equal(pd_req_parse(b.p, b.len, true, PD_ROLE_DECODE, PD_PROTO_VLLM, 0, &r, err),
	                 0);
	assert_int_equal(r.leg, PD_LEG_VLLM_DECODE);
	assert_int_equal(r.nblocks, n);
	for (size_t k = 0; k < n; k++)
		assert_int_equal(r.block_ids[k], 40001 + k);
	assert_string_equal(r.engine, "8001-0123abcd");
	assert_int_equal(r.port, 43210);
	pd_req_free(&r);
	pg_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_legs),
	    cmocka_unit_test(test_fields),
	    cmocka_unit_test(test_params_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
