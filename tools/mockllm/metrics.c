// SPDX-License-Identifier: MIT
/*
 * GET /metrics: vLLM's names for what vLLM reports (running, waiting, cache
 * usage, prefix cache queries and hits, tokens), mockllm_* for the rest:
 * connections, requests by path.
 */
#include <stdio.h>

#include "mockllm.h"

void metrics(struct conn *c)
{
	static const char *const names[R_COUNT] = {
	    [R_HEALTH] = "/health",
	    [R_MODELS] = "/v1/models",
	    [R_METRICS] = "/metrics",
	    [R_CHAT] = "/v1/chat/completions",
	    [R_COMPLETIONS] = "/v1/completions",
	    [R_INVOCATIONS] = "/invocations",
	    [R_MATCH_CHAT] = "/mock/match/v1/chat/completions",
	    [R_MATCH_COMPLETIONS] = "/mock/match/v1/completions",
	    [R_SPEED] = "/mock/speed",
	    [R_OTHER] = "other",
	};
	const char *mn = g_srv.cfg.model;
	struct sim_stats st;
	struct pg_buf b = {0};

	sim_get_stats(g_srv.sim, &st);
	pg_buf_printf(
	    &b,
	    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
	    "# TYPE vllm:num_requests_running gauge\n"
	    "vllm:num_requests_running{model_name=\"%s\"} %u\n"
	    "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
	    "# TYPE vllm:num_requests_waiting gauge\n"
	    "vllm:num_requests_waiting{model_name=\"%s\"} %u\n"
	    "# HELP vllm:gpu_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
	    "# TYPE vllm:gpu_cache_usage_perc gauge\n"
	    "vllm:gpu_cache_usage_perc{model_name=\"%s\"} %.6f\n"
	    "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of "
	    "queried tokens.\n"
	    "# TYPE vllm:prefix_cache_queries_total counter\n"
	    "vllm:prefix_cache_queries_total{model_name=\"%s\"} %llu\n"
	    "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached "
	    "tokens.\n"
	    "# TYPE vllm:prefix_cache_hits_total counter\n"
	    "vllm:prefix_cache_hits_total{model_name=\"%s\"} %llu\n"
	    "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.\n"
	    "# TYPE vllm:prompt_tokens_total counter\n"
	    "vllm:prompt_tokens_total{model_name=\"%s\"} %llu\n"
	    "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
	    "# TYPE vllm:generation_tokens_total counter\n"
	    "vllm:generation_tokens_total{model_name=\"%s\"} %llu\n"
	    "# HELP mockllm_connections_accepted_total Connections accepted.\n"
	    "# TYPE mockllm_connections_accepted_total counter\n"
	    "mockllm_connections_accepted_total %llu\n"
	    "# HELP mockllm_connections_open Connections open.\n"
	    "# TYPE mockllm_connections_open gauge\n"
	    "mockllm_connections_open %llu\n"
	    "# HELP mockllm_requests_total Requests received, by path.\n"
	    "# TYPE mockllm_requests_total counter\n",
	    mn, st.running, mn, st.waiting, mn, st.kv_usage, mn,
	    (unsigned long long)st.prefix_queries, mn, (unsigned long long)st.prefix_hits, mn,
	    (unsigned long long)st.prompt_tokens, mn, (unsigned long long)st.generation_tokens,
	    (unsigned long long)g_srv.conns_accepted, (unsigned long long)g_srv.conns_open);
	for (int i = 0; i < R_COUNT; i++)
		pg_buf_printf(&b, "mockllm_requests_total{path=\"%s\"} %llu\n", names[i],
		              (unsigned long long)g_srv.requests[i]);
	/* as vLLM reports its cache: what a router sizes its view of it by */
	pg_buf_printf(&b,
	              "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
	              "# TYPE vllm:cache_config_info gauge\n"
	              "vllm:cache_config_info{block_size=\"%d\",enable_prefix_caching=\"True\","
	              "num_gpu_blocks=\"%llu\"} 1.0\n",
	              KV_BLOCK_TOKENS,
	              (unsigned long long)kv_capacity_blocks(g_srv.cfg.sim.kv_capacity_tokens));
	mock_buf_ok(&b);
	out_simple(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
	pg_buf_free(&b);
}
