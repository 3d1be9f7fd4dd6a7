// SPDX-License-Identifier: MIT
/*
 * Reading a backend's /metrics response: the four vLLM series, summed over
 * label sets, from a response fed whole, byte by byte and in odd pieces;
 * responses that must be refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "router/view.h"
#include "members/health.h"
#include "router/index.h"
#include "lib/scrape.h"

static const char vllm[] =
    "HTTP/1.1 200 OK\r\n"
    "content-type: text/plain; version=0.0.4; charset=utf-8\r\n"
    "\r\n"
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
    "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2.0\n"
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\","
    "num_gpu_blocks=\"40960\",num_cpu_blocks=\"None\"} 1.0\n"
    "vllm:cache_config_info{block_size=\"x\",num_gpu_blocks=\"9\"} 1.0\n"
    "vllm:cache_config_info 1.0\n"
    "vllm:num_requests_waiting{model_name=\"a \\\"}quoted\\\" {name\"} 7.0\n"
    "vllm:num_requests_waiting_by_reason{reason=\"x\"} 99\n"
    "vllm:prefix_cache_queries_created{model_name=\"m\"} 1.7e9\n"
    "vllm:prefix_cache_queries_total{model_name=\"m\"} 1.5e+06\n"
    "vllm:prefix_cache_hits_total{model_name=\"m\"} 1234567.0 1700000000000\n"
    "vllm:time_to_first_token_seconds_bucket{le=\"0.001\",model_name=\"m\"} 0.0\n"
    "vllm:prefix_cache_hits_total_x 5\n"
    "vllm:prefix_cache_hits_total{model_name=\"n\"} NaN\n"
    "vllm:prefix_cache_hits_total{model_name=\"o\"} 1";

static void check_vllm(const struct pg_scrape *s)
{
	assert_int_equal(s->seen, 0x1f);
	/* 16 x 40,960 tokens; a block_size that is no number, and no labels:
	 * ignored */
	assert_true(s->value[PG_SCRAPE_KV_TOKENS] == 655360);
	assert_true(s->value[PG_SCRAPE_RUNNING] == 5);
	assert_true(s->value[PG_SCRAPE_WAITING] == 7);
	assert_true(s->value[PG_SCRAPE_QUERIES] == 1500000);
	assert_true(s->value[PG_SCRAPE_HITS] == 1234568); /* + the unterminated last line */
}

static void test_pieces(void **state)
{
	static const size_t sizes[] = {sizeof(vllm) - 1, 1, 2, 7, 64, 1000};
	struct pg_scrape s;

	(void)state;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		pg_scrape_init(&s);
		for (size_t off = 0; off < sizeof(vllm) - 1; off += sizes[k]) {
			size_t n =
			    sizeof(vllm) - 1 - off < sizes[k] ? sizeof(vllm) - 1 - off : sizes[k];

			assert_int_equal(pg_scrape_feed(&s, vllm + off, n), 0);
		}
		assert_int_equal(pg_scrape_finish(&s), 0);
		check_vllm(&s);
	}
}

static void test_refused(void **state)
{
	static const struct {
		const char *text;
		int feed_rc, finish_rc;
	} cases[] = {
	    {"HTTP/1.1 404 Not Found\r\n\r\nvllm:num_requests_waiting 3\n", -1, -1},
	    {"SSH-2.0-OpenSSH\r\n", -1, -1},
	    {"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n", 0, -1}, /* no body yet */
	    {"HTTP/1.0 200 OK\r\n\r\n# nothing here\n", 0, 0},          /* fine, no series */
	};
	struct pg_scrape s;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pg_scrape_init(&s);
		if (pg_scrape_feed(&s, cases[i].text, strlen(cases[i].text)) != cases[i].feed_rc)
			fail_msg("case %zu: feed", i);
		if (pg_scrape_finish(&s) != cases[i].finish_rc)
			fail_msg("case %zu: finish", i);
		assert_int_equal(s.seen, 0);
	}
}

static void test_long_lines(void **state)
{
	char big[3 * PG_SCRAPE_LINE_MAX];
	const char *head = "HTTP/1.1 200 OK\r\n\r\n", *tail = "\nvllm:num_requests_waiting 2\n";
	struct pg_scrape s;

	(void)state;
	/* an over-long body line is skipped, the next one still read */
	memset(big, 'x', sizeof(big));
	memcpy(big, "vllm:num_requests_waiting{a=\"", 29);
	pg_scrape_init(&s);
	assert_int_equal(pg_scrape_feed(&s, head, strlen(head)), 0);
	assert_int_equal(pg_scrape_feed(&s, big, sizeof(big)), 0);
	assert_int_equal(pg_scrape_feed(&s, tail, strlen(tail)), 0);
	assert_int_equal(pg_scrape_finish(&s), 0);
	assert_int_equal(s.seen, 1u << PG_SCRAPE_WAITING);
	assert_true(s.value[PG_SCRAPE_WAITING] == 2);
	/* an over-long header is refused */
	pg_scrape_init(&s);
	assert_int_equal(pg_scrape_feed(&s, "HTTP/1.1 200 OK\r\nX: ", 21), 0);
	assert_int_equal(pg_scrape_feed(&s, big, sizeof(big)), 0);
	assert_int_equal(pg_scrape_feed(&s, "\r\n", 2), -1);
}

static void test_lines(void **state)
{
	static const struct {
		const char *line;
		unsigned seen;
		double v;
	} cases[] = {
	    {"vllm:num_requests_waiting 4", 1u << PG_SCRAPE_WAITING, 4},
	    {"vllm:num_requests_waiting\t4", 1u << PG_SCRAPE_WAITING, 4},
	    {"vllm:num_requests_waiting{} 4", 1u << PG_SCRAPE_WAITING, 4},
	    {"vllm:num_requests_waiting{a=\"}\"} 4", 1u << PG_SCRAPE_WAITING, 4},
	    {"vllm:num_requests_waiting{a=\"x\"", 0, 0}, /* no closing brace */
	    {"vllm:num_requests_waiting -1", 0, 0},      /* negative */
	    {"vllm:num_requests_waiting +Inf", 0, 0},
	    {"vllm:num_requests_waiting 4x", 0, 0},
	    {"vllm:num_requests_waiting ", 0, 0},
	    {"vllm:num_requests_waitingx 4", 0, 0},
	};
	struct pg_scrape s;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		pg_scrape_init(&s);
		pg_scrape_line(&s, cases[i].line, strlen(cases[i].line));
		if (s.seen != cases[i].seen || s.value[PG_SCRAPE_WAITING] != cases[i].v)
			fail_msg("case %zu (%s): seen %x value %f", i, cases[i].line, s.seen,
			         s.value[PG_SCRAPE_WAITING]);
	}
}

/* SGLang's names of the queue: the same series. */
static void test_sglang(void **state)
{
	static const char sglang[] = "# TYPE sglang:num_queue_reqs gauge\n"
	                             "sglang:num_queue_reqs{model_name=\"m\"} 3.0\n"
	                             "sglang:num_running_reqs{model_name=\"m\"} 5.0\n";
	struct pg_scrape s;
	const char *p = sglang;

	(void)state;
	pg_scrape_init(&s);
	for (const char *nl; (nl = strchr(p, '\n')); p = nl + 1)
		pg_scrape_line(&s, p, (size_t)(nl - p));
	assert_true(s.seen & 1u << PG_SCRAPE_WAITING);
	assert_true(s.seen & 1u << PG_SCRAPE_RUNNING);
	assert_float_equal(s.value[PG_SCRAPE_WAITING], 3, 1e-9);
	assert_float_equal(s.value[PG_SCRAPE_RUNNING], 5, 1e-9);
}

/* A scrape lands in the backend table and feeds the load signal. */
static void test_store(void **state)
{
	struct pg_backend b = {.in_flight = 2};
	struct pg_scrape s;

	(void)state;
	pg_scrape_init(&s);
	assert_int_equal(pg_scrape_feed(&s, vllm, sizeof(vllm) - 1), 0);
	assert_int_equal(pg_scrape_finish(&s), 0);
	pg_health_store_scrape(&b, &s, 0, 1000, 5000);
	assert_int_equal(b.waiting, 7);
	assert_int_equal(b.running, 5);
	assert_int_equal(b.kv_query_tokens, 1500000);
	assert_int_equal(b.kv_hit_tokens, 1234568);
	/* its KV capacity, in the index's blocks of 4 characters a token */
	assert_int_equal(b.ca_capacity_blocks, pg_ca_capacity_blocks(655360));
	assert_int_equal(pg_backend_load(&b, PG_LOAD_INFLIGHT, 4999), 2);
	assert_int_equal(pg_backend_load(&b, PG_LOAD_BACKEND, 4999), 12);
	assert_int_equal(pg_backend_load(&b, PG_LOAD_BOTH, 4999), 9);
	/* expired: in_flight only */
	assert_int_equal(pg_backend_load(&b, PG_LOAD_BACKEND, 5000), 2);
	assert_int_equal(pg_backend_load(&b, PG_LOAD_BOTH, 5000), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pieces),     cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_long_lines), cmocka_unit_test(test_lines),
	    cmocka_unit_test(test_store),      cmocka_unit_test(test_sglang),
	};

	return cmocka_run_group_tests_name("scrape", tests, NULL, NULL);
}
