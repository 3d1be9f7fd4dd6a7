// SPDX-License-Identifier: MIT
/*
 * GET /metrics: vLLM's names for what vLLM reports (running, waiting, cache
 * usage, prefix cache queries and hits, tokens; with --role, its external
 * prefix cache and NIXL failures), mockllm_* for the rest: connections,
 * requests by path, and an instance's part in prefill/decode
 * disaggregation (mockllm_pd_info; pulls served and refused, transfers
 * pinned, rooms matched and timed out). A decode request waiting for its
 * KV counts as waiting, as vLLM counts one waiting for remote KV.
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
	    mn, st.running, mn, st.waiting + g_pd.waiting, mn, st.kv_usage, mn,
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
	pd_metrics(&b, mn, &st);
	mock_buf_ok(&b);
	out_simple(c, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
	pg_buf_free(&b);
}

/* "# HELP" and "# TYPE" lines of one family. */
static void family(struct pg_buf *b, const char *name, const char *type, const char *help)
{
	pg_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void pd_prefill_vllm(struct pg_buf *b)
{
	const struct xfer_table *t = &g_pd.xfer;

	family(b, "mockllm_kv_pulls_served_total", "counter",
	       "Pulls of pinned KV blocks a decode instance made and this prefill served.");
	pg_buf_printf(b, "mockllm_kv_pulls_served_total %llu\n", (unsigned long long)t->served);
	family(b, "mockllm_kv_pulls_refused_total", "counter",
	       "Pulls refused, by reason (engine, unknown, stale, pulled, mismatch, request_id).");
	for (int r = 1; r < XFER__COUNT; r++)
		pg_buf_printf(b, "mockllm_kv_pulls_refused_total{reason=\"%s\"} %llu\n",
		              xfer_reason((enum xfer_result)r), (unsigned long long)t->refused[r]);
	family(b, "mockllm_kv_transferred_blocks_total", "counter",
	       "Blocks sent to decode instances (those they did not hold already).");
	pg_buf_printf(b, "mockllm_kv_transferred_blocks_total %llu\n",
	              (unsigned long long)t->served_blocks);
	family(b, "mockllm_kv_transfers_pinned", "gauge",
	       "Prefill legs whose blocks wait for their decode's pull.");
	pg_buf_printf(b, "mockllm_kv_transfers_pinned %llu\n", (unsigned long long)t->pinned);
	family(b, "mockllm_kv_blocks_pinned", "gauge", "Blocks pinned for a pull.");
	pg_buf_printf(b, "mockllm_kv_blocks_pinned %llu\n", (unsigned long long)t->pinned_blocks);
	family(b, "mockllm_kv_transfers_expired_total", "counter",
	       "Pinned blocks released unpulled after --kv-transfer-ttl-ms.");
	pg_buf_printf(b, "mockllm_kv_transfers_expired_total %llu\n",
	              (unsigned long long)t->expired);
}

static void pd_prefill_sglang(struct pg_buf *b)
{
	const struct rooms *t = &g_pd.rooms;

	family(b, "mockllm_bootstrap_rooms_total", "counter",
	       "Bootstrap rooms: KV handed to the decode (matched), KV dropped after "
	       "--kv-transfer-ttl-ms with no decode (timed_out), a room refused (duplicate, done, "
	       "expired: refused).");
	pg_buf_printf(b,
	              "mockllm_bootstrap_rooms_total{result=\"matched\"} %llu\n"
	              "mockllm_bootstrap_rooms_total{result=\"timed_out\"} %llu\n"
	              "mockllm_bootstrap_rooms_total{result=\"refused\"} %llu\n",
	              (unsigned long long)t->matched, (unsigned long long)t->timed_out,
	              (unsigned long long)t->refused);
	family(b, "mockllm_bootstrap_rooms_pending", "gauge",
	       "Rooms a decode registered, waiting for their KV (waiting); KV waiting for its "
	       "decode (held).");
	pg_buf_printf(b,
	              "mockllm_bootstrap_rooms_pending{state=\"waiting\"} %llu\n"
	              "mockllm_bootstrap_rooms_pending{state=\"held\"} %llu\n",
	              (unsigned long long)t->waiting, (unsigned long long)t->held);
}

static void pd_decode(struct pg_buf *b, const char *mn, const struct sim_stats *st)
{
	static const char *const names[PDR__COUNT] = {"ok", "refused", "failed", "timed_out"};
	const char *fam = g_pd.cfg.proto == PD_PROTO_VLLM ? "mockllm_kv_pulls_total"
	                                                  : "mockllm_bootstrap_waits_total";

	family(b, fam, "counter",
	       g_pd.cfg.proto == PD_PROTO_VLLM
	           ? "Decode legs' pulls: the KV arrived (ok), the prefill refused (refused), the "
	             "side connection failed (failed), no answer in --kv-wait-timeout-ms "
	             "(timed_out)."
	           : "Decode legs' waits for their rooms' KV: it arrived (ok), the prefill refused "
	             "a room (refused), the connection failed (failed), none in "
	             "--kv-wait-timeout-ms (timed_out).");
	for (int r = 0; r < PDR__COUNT; r++)
		pg_buf_printf(b, "%s{result=\"%s\"} %llu\n", fam, names[r],
		              (unsigned long long)g_pd.results[r]);
	family(b, "mockllm_kv_received_tokens_total", "counter",
	       "Prompt tokens whose KV came from a prefill instance.");
	pg_buf_printf(b, "mockllm_kv_received_tokens_total %llu\n",
	              (unsigned long long)g_pd.kv_tokens);
	if (g_pd.cfg.proto == PD_PROTO_VLLM) {
		family(b, "vllm:nixl_num_failed_transfers_total", "counter",
		       "Number of failed NIXL KV Cache transfers.");
		pg_buf_printf(
		    b, "vllm:nixl_num_failed_transfers_total{model_name=\"%s\"} %llu\n", mn,
		    (unsigned long long)(g_pd.results[PDR_REFUSED] + g_pd.results[PDR_FAILED] +
		                         g_pd.results[PDR_TIMED_OUT]));
	}
	family(b, "vllm:external_prefix_cache_queries_total", "counter",
	       "External prefix cache queries from KV connector cross-instance cache sharing, in "
	       "terms of number of queried tokens.");
	pg_buf_printf(b, "vllm:external_prefix_cache_queries_total{model_name=\"%s\"} %llu\n", mn,
	              (unsigned long long)st->external_queries);
	family(b, "vllm:external_prefix_cache_hits_total", "counter",
	       "External prefix cache hits from KV connector cross-instance cache sharing, in "
	       "terms of number of cached tokens.");
	pg_buf_printf(b, "vllm:external_prefix_cache_hits_total{model_name=\"%s\"} %llu\n", mn,
	              (unsigned long long)st->external_hits);
}

void pd_metrics(struct pg_buf *b, const char *mn, const struct sim_stats *st)
{
	static const char *const roles[] = {"mixed", "prefill", "decode"};
	enum pd_role role = g_pd.cfg.role;

	family(b, "mockllm_pd_info", "gauge",
	       "The instance's part in prefill/decode disaggregation: --role, --pd-protocol, its "
	       "engine id and side port (a prefill's --kv-port or --bootstrap-port; 0: none).");
	pg_buf_printf(b,
	              "mockllm_pd_info{role=\"%s\",protocol=\"%s\",engine_id=\"%s\","
	              "side_port=\"%u\",interference=\"%s\",max_num_batched_tokens=\"%u\"} 1\n",
	              roles[role],
	              role == PD_ROLE_MIXED             ? ""
	              : g_pd.cfg.proto == PD_PROTO_VLLM ? "vllm"
	                                                : "sglang",
	              g_pd.engine, g_pd.port, g_srv.cfg.sim.max_num_batched_tokens ? "on" : "off",
	              g_srv.cfg.sim.max_num_batched_tokens);
	xfer_sweep(&g_pd.xfer, g_srv.now);
	rooms_sweep(&g_pd.rooms, g_srv.now);
	if (role == PD_ROLE_PREFILL && g_pd.cfg.proto == PD_PROTO_VLLM)
		pd_prefill_vllm(b);
	else if (role == PD_ROLE_PREFILL)
		pd_prefill_sglang(b);
	else if (role == PD_ROLE_DECODE)
		pd_decode(b, mn, st);
}
