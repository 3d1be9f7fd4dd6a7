// SPDX-License-Identifier: MIT
/*
 * Prefill/decode disaggregation in the proxy (user/proxy/pd.c) without
 * sockets, on the fixture of test_proxy.c (fake_io.h): the default pool's
 * two backends (9001, 9002) are the prefill instances, 9003 its decode set
 * (pool default-decode). Each test ends with every in-flight slot of both
 * sets given back exactly once.
 */
#include "fake_io.h"
#include "proxy/pd.h"

#define PREFILL_ANSWER(params)                                                                     \
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "                    \
	"%zu\r\n\r\n{\"id\":\"c\",\"choices\":[{\"text\":\"a\"}]" params "}"
#define KV                                                                                         \
	",\"kv_transfer_params\":{\"do_remote_prefill\":true,\"do_remote_decode\":false,"          \
	"\"remote_engine_id\":\"e9\",\"remote_block_ids\":[4,5],\"remote_host\":\"10.0.0.9\","     \
	"\"remote_port\":7}"
static const char stream_ok[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 29\r\n\r\ndata: {\"x\":1}\n\ndata: [DONE]\n\n";

static int setup_vllm(void **state)
{
	static char *extra[] = {"--pool", "default:pd=vllm", "--pool",
	                        "default:decode=127.0.0.1:9003"};

	memset(setup_extra, 0, sizeof(setup_extra));
	memcpy(setup_extra, extra, sizeof(extra));
	return setup(state);
}

static int setup_sglang(void **state)
{
	static char *extra[] = {"--pool", "default:pd=sglang",
	                        "--pool", "default:decode=127.0.0.1:9003",
	                        "--pool", "default:bootstrap-port=8998"};

	memset(setup_extra, 0, sizeof(setup_extra));
	memcpy(setup_extra, extra, sizeof(extra));
	return setup(state);
}

/* A chat request of n words (a word is ~1.25 tokens: 400 words are past
 * pd-min-tokens), extra fields (",\"k\":v") after its messages. */
static void send_chat(int c, unsigned n, const char *extra)
{
	static char body[16384], req[17000];
	size_t k = (size_t)snprintf(
	    body, sizeof(body), "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"");

	for (unsigned i = 0; i < n; i++)
		k += (size_t)snprintf(body + k, sizeof(body) - k, "%sword", i ? " " : "");
	k += (size_t)snprintf(body + k, sizeof(body) - k, "\"}]%s}", extra);
	snprintf(req, sizeof(req),
	         "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Request-Id: rq-1\r\n"
	         "Content-Length: %zu\r\n\r\n%s",
	         k, body);
	say(c, req);
}

/* The prefill's answer of fmt (a head whose Content-Length is "%zu"). */
static void answer_prefill(int u, const char *fmt)
{
	char buf[1024];

	snprintf(buf, sizeof(buf), fmt, strlen(strstr(fmt, "\r\n\r\n") + 4));
	say(u, buf);
}

static uint16_t port(int fd)
{
	return F(fd)->port;
}

static void test_vllm_pair(void **state)
{
	int c = accept_client(), p = next_up_fd, d;
	const char *out;

	(void)state;
	send_chat(c, 400, ",\"max_tokens\":50,\"stream\":true,\"stream_options\":{\"x\":1}");
	/* the prefill leg first, alone */
	assert_int_equal(next_up_fd, p + 1);
	assert_true(port(p) == 9001 || port(p) == 9002);
	connected(p, 0);
	out = took(p);
	assert_non_null(strstr(out, "X-Request-Id: rq-1\r\n"));
	assert_non_null(strstr(out, "\"max_tokens\":1"));
	assert_non_null(strstr(out, "\"stream\":false"));
	assert_null(strstr(out, "stream_options"));
	assert_non_null(strstr(out, "\"kv_transfer_params\":{\"do_remote_decode\":true"));
	assert_int_equal(client_of(c)->state, PG_C_WAIT);
	answer_prefill(p, PREFILL_ANSWER(KV));
	/* then the decode leg, with the prefill's parameters, the rest as sent */
	d = p + 1;
	assert_int_equal(next_up_fd, d + 1);
	assert_int_equal(port(d), 9003);
	connected(d, 0);
	out = took(d);
	assert_non_null(strstr(out, "X-Request-Id: rq-1\r\n"));
	assert_non_null(
	    strstr(out, "\"max_tokens\":50,\"stream\":true,\"stream_options\":{\"x\":1}"));
	assert_non_null(strstr(out, "\"kv_transfer_params\":{\"do_remote_prefill\":true"));
	assert_non_null(strstr(out, "\"remote_engine_id\":\"e9\""));
	say(d, stream_ok);
	assert_non_null(strstr(took(c), "data: [DONE]"));
	assert_false(F(c)->closed);
	assert_quiet();
	/* the prefill's connection was kept for the next prefill */
	assert_false(F(p)->closed);
}

static void test_short_prompt_decode_alone(void **state)
{
	int c = accept_client(), d = next_up_fd;

	(void)state;
	send_chat(c, 20, ",\"stream\":true");
	assert_int_equal(port(d), 9003);
	connected(d, 0);
	assert_null(strstr(took(d), "kv_transfer_params"));
	say(d, stream_ok);
	assert_non_null(strstr(took(c), "[DONE]"));
	assert_quiet();
}

static void test_prefill_without_params_is_502(void **state)
{
	int c = accept_client(), p = next_up_fd;
	const char *out;

	(void)state;
	send_chat(c, 400, "");
	connected(p, 0);
	took(p);
	answer_prefill(p, PREFILL_ANSWER(""));
	out = took(c);
	assert_non_null(strstr(out, "HTTP/1.1 502 "));
	assert_non_null(strstr(out, "kv_transfer_params"));
	assert_int_equal(next_up_fd, p + 1); /* no decode leg */
	assert_quiet();
}

static void test_prefills_down_then_decode_alone(void **state)
{
	int c = accept_client(), p1 = next_up_fd, p2, d;

	(void)state;
	send_chat(c, 400, "");
	connected(p1, -ECONNREFUSED);
	p2 = p1 + 1; /* the other prefill instance */
	assert_int_not_equal(port(p2), port(p1));
	assert_int_not_equal(port(p2), 9003);
	connected(p2, -ECONNREFUSED);
	d = p2 + 1; /* then the decode instance, alone */
	assert_int_equal(port(d), 9003);
	connected(d, 0);
	assert_null(strstr(took(d), "kv_transfer_params"));
	say(d, stream_ok);
	assert_non_null(strstr(took(c), "[DONE]"));
	assert_quiet();
}

static void test_decode_down_fresh_pair(void **state)
{
	int c = accept_client(), p = next_up_fd, d;
	const char *out;

	(void)state;
	send_chat(c, 400, "");
	connected(p, 0);
	took(p);
	answer_prefill(p, PREFILL_ANSWER(KV));
	d = next_up_fd - 1;
	connected(d, -ECONNREFUSED);
	/* the only decode instance failed: nothing left to pair with */
	out = took(c);
	assert_non_null(strstr(out, "HTTP/1.1 502 "));
	assert_quiet();
}

static void test_client_gone_during_prefill(void **state)
{
	int c = accept_client(), p = next_up_fd;

	(void)state;
	send_chat(c, 400, "");
	connected(p, 0);
	hangup(c, 0);
	assert_true(F(p)->closed); /* its prefill goes with it */
	assert_int_equal(next_up_fd, p + 1);
	assert_quiet();
}

static void test_sglang_both_at_once(void **state)
{
	int c = accept_client(), p = next_up_fd, d = p + 1;
	const char *outp, *outd;
	static char bp[8192];

	(void)state;
	send_chat(c, 400, ",\"stream\":true");
	assert_int_equal(next_up_fd, p + 2); /* both legs at once */
	assert_int_equal(port(d), 9003);
	connected(p, 0);
	connected(d, 0);
	outp = took(p);
	strcpy(bp, strstr(outp, "\r\n\r\n"));
	outd = took(d);
	assert_string_equal(bp, strstr(outd, "\r\n\r\n")); /* the same body */
	assert_non_null(strstr(bp, "\"bootstrap_host\":\"127.0.0.1\",\"bootstrap_port\":8998,"
	                           "\"bootstrap_room\":"));
	/* the prefill's answer dropped, the decode's streamed */
	say(p, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
	assert_int_equal(F(c)->out_len, 0);
	say(d, stream_ok);
	assert_non_null(strstr(took(c), "[DONE]"));
	assert_quiet();
}

/* The fixture with the block index on (as main.c sets it: both legs'
 * instances are recorded, the decode set routed cache_aware) and
 * X-Prefixgate-Route. */
static int setup_indexed(bool sglang)
{
	static char *extra[] = {
	    "--route-header",  "--pool", "default:decode=127.0.0.1:9003", "--pool",
	    "default:pd=vllm", "--pool", "default:bootstrap-port=8998"};

	extra[4] = sglang ? "default:pd=sglang" : "default:pd=vllm";
	memset(setup_extra, 0, sizeof(setup_extra));
	memcpy(setup_extra, extra, sizeof(extra) - (sglang ? 0 : 2 * sizeof(extra[0])));
	if (setup(NULL))
		return -1;
	gw.maps.state->ca_capacity_blocks = pg_ca_capacity_blocks(cfg.cache_capacity);
	return 0;
}

static int setup_vllm_indexed(void **state)
{
	(void)state;
	return setup_indexed(false);
}

static int setup_sglang_indexed(void **state)
{
	(void)state;
	return setup_indexed(true);
}

static uint16_t id_of_port(uint16_t p)
{
	for (uint16_t id = 1; id < PG_MAX_BACKENDS; id++)
		if (gw.maps.backends[id].port == p)
			return id;
	fail_msg("no backend on port %u", p);
	return 0;
}

/* Both prefill instances refuse a fresh long prompt: the second prefill
 * instance is tried (not the decode instance alone, as if the prompt the
 * decode instance was only just sent were cached there), then the decode
 * instance alone, with the whole prompt as its work, and the route header
 * says so: a retry, nothing matched. (sglang: each pair's decode leg,
 * sent at once, goes with its prefill.) */
static void prefills_down_then_alone(bool sglang)
{
	int c = accept_client(), p1 = next_up_fd, p2, d;
	const uint16_t dec = id_of_port(9003);
	const char *out;

	send_chat(c, 400, ",\"stream\":true");
	assert_int_not_equal(port(p1), 9003);
	connected(p1, -ECONNREFUSED);
	p2 = next_up_fd - (sglang ? 2 : 1);
	assert_int_not_equal(port(p2), 9003);
	assert_int_not_equal(port(p2), port(p1));
	connected(p2, -ECONNREFUSED);
	d = next_up_fd - 1;
	assert_int_equal(port(d), 9003);
	assert_int_equal(client_of(c)->x.pd->route, PG_PDR_ALONE);
	assert_int_equal(gw.maps.backends[dec].prefill_tokens, client_of(c)->x.key.tokens);
	connected(d, 0);
	assert_null(strstr(took(d), "bootstrap_room"));
	say(d, stream_ok);
	out = took(c);
	assert_non_null(strstr(out, "; reason=retry; matched=0; "));
	assert_quiet();
}

static void test_vllm_prefills_down_not_cached(void **state)
{
	(void)state;
	prefills_down_then_alone(false);
}

static void test_sglang_prefills_down_not_cached(void **state)
{
	(void)state;
	prefills_down_then_alone(true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_vllm_pair, setup_vllm, teardown),
	    cmocka_unit_test_setup_teardown(test_short_prompt_decode_alone, setup_vllm, teardown),
	    cmocka_unit_test_setup_teardown(test_prefill_without_params_is_502, setup_vllm,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_prefills_down_then_decode_alone, setup_vllm,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_decode_down_fresh_pair, setup_vllm, teardown),
	    cmocka_unit_test_setup_teardown(test_client_gone_during_prefill, setup_vllm, teardown),
	    cmocka_unit_test_setup_teardown(test_sglang_both_at_once, setup_sglang, teardown),
	    cmocka_unit_test_setup_teardown(test_vllm_prefills_down_not_cached, setup_vllm_indexed,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_sglang_prefills_down_not_cached,
	                                    setup_sglang_indexed, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
