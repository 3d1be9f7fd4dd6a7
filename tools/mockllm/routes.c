// SPDX-License-Identifier: MIT
/*
 * What each request gets: test knobs first (X-Mock-Delay-Ms, X-Mock-Fail,
 * X-Mock-Response-Bytes, X-Mock-Chunks), then the endpoint: health, models,
 * metrics, OpenAI completions (simulated, see sim.c), SageMaker-style
 * /invocations, the /mock/ endpoints (mockapi.c), 404 for anything else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mockllm.h"

#define NS_PER_MS               1000000ull
#define RESET_MID_DEFAULT_BYTES (1u << 20)

static const char *model_of(const struct mreq *m)
{
	return m->pr.model[0] ? m->pr.model : g_srv.cfg.model;
}

static const char *finish_reason(const struct mreq *m)
{
	/* max_tokens given: the model was cut off; default: it "stopped" */
	return m->pr.max_tokens_set ? "length" : "stop";
}

static void usage_json(struct pg_buf *b, const struct mreq *m)
{
	pg_buf_printf(b,
	              "\"usage\":{\"prompt_tokens\":%u,\"total_tokens\":%u,"
	              "\"completion_tokens\":%u,\"prompt_tokens_details\":{\"cached_tokens\":%u}}",
	              m->prompt_tokens, m->prompt_tokens + m->out_tokens, m->out_tokens,
	              m->cached_tokens);
}

/* llama.cpp's server (--slots): ,"timings":{...} of the whole answer. */
static void timings_json(struct pg_buf *b, const struct mreq *m)
{
	if (!g_srv.cfg.sim.slots)
		return;
	pg_buf_printf(b, ",\"timings\":{\"cache_n\":%u,\"prompt_n\":%u,\"predicted_n\":%u}",
	              m->cached_tokens, m->prompt_tokens - m->cached_tokens, m->out_tokens);
}

/* Start of a chunk object: {"id":..,"object":..,"created":..,"model":.., */
static void chunk_prefix(struct pg_buf *b, const struct mreq *m)
{
	pg_buf_printf(
	    b, "data: {\"id\":\"%s-%s-%llu\",\"object\":\"%s\",\"created\":%llu,\"model\":\"%s\",",
	    m->chat ? "chatcmpl" : "cmpl", g_srv.cfg.id, (unsigned long long)m->seq,
	    m->chat ? "chat.completion.chunk" : "text_completion", (unsigned long long)m->created,
	    model_of(m));
}

/* One SSE event, one HTTP chunk. text NULL: the chat role event. */
static void sse_event(struct conn *c, const char *text, bool last)
{
	struct mreq *m = &c->req;
	struct pg_buf b = {0};
	char fin[16];

	if (last)
		snprintf(fin, sizeof(fin), "\"%s\"", finish_reason(m));
	else
		strcpy(fin, "null");
	chunk_prefix(&b, m);
	if (m->chat && !text)
		pg_buf_puts(&b, "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
		                "\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]");
	else if (m->chat)
		pg_buf_printf(&b,
		              "\"choices\":[{\"index\":0,\"delta\":{%s%s%s},\"logprobs\":null,"
		              "\"finish_reason\":%s}]",
		              text[0] ? "\"content\":\"" : "", text, text[0] ? "\"" : "", fin);
	else
		pg_buf_printf(&b,
		              "\"choices\":[{\"index\":0,\"text\":\"%s\",\"logprobs\":null,"
		              "\"finish_reason\":%s,\"stop_reason\":null}]",
		              text, fin);
	if (last) /* as llama.cpp: the whole answer's timings on its last event */
		timings_json(&b, m);
	pg_buf_puts(&b, "}\n\n");
	mock_buf_ok(&b);
	out_chunk(c, b.p, b.len);
	pg_buf_free(&b);
}

/* After the last content event: the usage chunk if asked, [DONE], end. */
static void sse_finish(struct conn *c)
{
	struct mreq *m = &c->req;

	pd_prefill_done(c);
	if (m->pr.include_usage) {
		struct pg_buf b = {0};

		chunk_prefix(&b, m);
		pg_buf_puts(&b, "\"choices\":[],");
		usage_json(&b, m);
		pg_buf_puts(&b, "}\n\n");
		mock_buf_ok(&b);
		out_chunk(c, b.p, b.len);
		pg_buf_free(&b);
	}
	out_chunk(c, "data: [DONE]\n\n", 14);
	out_chunk_end(c);
	conn_response_done(c);
}

static void sse_head(struct conn *c)
{
	out_head(c, 200, "text/event-stream", -1, "Cache-Control: no-cache\r\n");
}

/* The whole non-streaming completion. */
static void full_response(struct conn *c)
{
	struct mreq *m = &c->req;
	struct pg_buf b = {0};

	pd_prefill_done(c);
	pg_buf_printf(&b,
	              "{\"id\":\"%s-%s-%llu\",\"object\":\"%s\",\"created\":%llu,\"model\":\"%s\","
	              "\"choices\":[{\"index\":0,",
	              m->chat ? "chatcmpl" : "cmpl", g_srv.cfg.id, (unsigned long long)m->seq,
	              m->chat ? "chat.completion" : "text_completion",
	              (unsigned long long)m->created, model_of(m));
	pg_buf_puts(&b,
	            m->chat ? "\"message\":{\"role\":\"assistant\",\"content\":\"" : "\"text\":\"");
	for (uint32_t i = 0; i < m->out_tokens; i++)
		pg_buf_puts(&b, prompt_output_token(i));
	pg_buf_printf(&b, "\"%s,\"logprobs\":null,\"finish_reason\":\"%s\",\"stop_reason\":null}],",
	              m->chat ? ",\"tool_calls\":[]}" : "", finish_reason(m));
	usage_json(&b, m);
	timings_json(&b, m);
	if (m->pd.leg == PD_LEG_VLLM_PREFILL)
		pd_params_json(c, &b); /* as vLLM: kv_transfer_params after usage */
	pg_buf_puts(&b, "}\n");
	mock_buf_ok(&b);
	out_simple(c, 200, "application/json", b.p, b.len);
	pg_buf_free(&b);
}

void route_sim_token(void *ctx, struct sim_req *r, bool last)
{
	struct conn *c = container_of(r, struct conn, req.sim);
	struct mreq *m = &c->req;

	(void)ctx;
	m->out_tokens = r->tokens_out;
	m->cached_tokens = r->cached_tokens;
	if (!m->pr.stream) {
		if (last)
			full_response(c);
		return;
	}
	if (r->tokens_out == 1 && m->chat)
		sse_event(c, NULL, false);
	sse_event(c, prompt_output_token(r->tokens_out - 1), last);
	if (last)
		sse_finish(c);
}

/* X-Mock-Chunks: the next of exactly m->chunks content events. */
static void knob_stream_next(struct conn *c)
{
	struct mreq *m = &c->req;
	bool last;

	if (m->chunks == 0) {
		if (m->chat)
			sse_event(c, "", true);
		sse_finish(c);
		return;
	}
	last = m->sent_tokens + 1 >= (uint64_t)m->chunks;
	sse_event(c, prompt_output_token(m->sent_tokens), last);
	m->sent_tokens++;
	if (last) {
		sse_finish(c);
		return;
	}
	conn_set_timer(c, CT_CHUNK,
	               (uint64_t)(m->chunk_interval_ms > 0 ? m->chunk_interval_ms : 0) * NS_PER_MS);
}

/* m->hashes, and how many of them are the prompt's and the prompt + output's
 * (--no-cache-output, or with_output false: none of the output). */
static int request_hashes(struct mreq *m, bool with_output)
{
	uint64_t cap = kv_capacity_blocks(g_srv.cfg.sim.kv_capacity_tokens);

	return prompt_request_hashes(m->pr.text, m->pr.len, m->pr.max_tokens,
	                             g_srv.cfg.cache_output && with_output ? cap : 0, &m->hashes,
	                             &m->sim.nhashes, &m->sim.nhashes_done);
}

int route_parse_prompt(struct conn *c, bool with_output)
{
	struct mreq *m = &c->req;
	const char *err;

	mock_buf_ok(&m->body);
	if (prompt_parse(m->body.p ? m->body.p : "", m->body.len, m->chat, &m->pr, &err)) {
		out_error(c, 400, err);
		return -1;
	}
	pg_buf_free(&m->body);
	if (request_hashes(m, with_output) == -1) {
		out_error(c, 500, "out of memory");
		return -1;
	}
	m->prompt_tokens = (uint32_t)kv_prompt_tokens(m->pr.len);
	return 0;
}

static void completion(struct conn *c)
{
	struct mreq *m = &c->req;
	struct sim_req *r = &m->sim;

	m->chat = m->route == R_CHAT;
	if (pd_parse(c))
		return;
	/* an SGLang prefill leg generates one token: no output blocks */
	if (route_parse_prompt(c, m->pd.leg != PD_LEG_SGLANG_PREFILL))
		return;
	m->seq = ++g_srv.seq;
	m->created = (uint64_t)time(NULL);
	r->hashes = m->hashes;
	r->prompt_tokens = m->prompt_tokens;
	r->text = m->pr.text;
	r->len = m->pr.len;
	r->keep_output = g_srv.cfg.cache_output;
	if (pd_begin(c))
		return; /* answered, or route_go() once its KV is there */
	route_go(c);
}

void route_go(struct conn *c)
{
	struct mreq *m = &c->req;
	struct sim_req *r = &m->sim;

	r->max_tokens = m->pr.max_tokens;
	if (m->pr.stream && m->chunks >= 0) {
		/* test knob: exactly N events, N ms apart, no timing model */
		m->out_tokens = (uint32_t)m->chunks;
		sim_bypass(g_srv.sim, r, m->out_tokens);
		m->cached_tokens = r->cached_tokens;
		sse_head(c);
		if (m->chat)
			sse_event(c, NULL, false);
		knob_stream_next(c);
		return;
	}
	if (m->pr.stream)
		sse_head(c); /* as vLLM: the head at once, events as tokens come */
	sim_submit(g_srv.sim, r, g_srv.now);
}

static void respond(struct conn *c)
{
	struct mreq *m = &c->req;
	char body[512];
	int n;

	switch (m->fail) {
	case FAIL_RESET:
		conn_close(c, true);
		return;
	case FAIL_CLOSE:
		conn_close(c, false);
		return;
	case FAIL_RESET_MID:
	case FAIL_CLOSE_MID: {
		uint64_t total =
		    m->resp_bytes > 0 ? (uint64_t)m->resp_bytes : RESET_MID_DEFAULT_BYTES;

		out_head(c, 200, "application/octet-stream", m->resp_chunked ? -1 : (int64_t)total,
		         NULL);
		out_bulk_start(c, total, m->resp_chunked, total / 2);
		return;
	}
	case FAIL_NONE:
		break;
	}
	if (m->resp_bytes >= 0) {
		out_head(c, 200, "application/octet-stream", m->resp_chunked ? -1 : m->resp_bytes,
		         NULL);
		if (m->is_head)
			conn_response_done(c);
		else
			out_bulk_start(c, (uint64_t)m->resp_bytes, m->resp_chunked,
			               (uint64_t)m->resp_bytes);
		return;
	}
	switch (m->route) {
	case R_HEALTH:
		out_simple(c, 200, "text/plain", "ok", 2);
		return;
	case R_MODELS:
		n = snprintf(body, sizeof(body),
		             "{\"object\":\"list\",\"data\":[{\"id\":\"%s\",\"object\":\"model\","
		             "\"created\":0,\"owned_by\":\"mockllm\",\"root\":\"%s\","
		             "\"parent\":null,\"max_model_len\":131072}]}\n",
		             g_srv.cfg.model, g_srv.cfg.model);
		out_simple(c, 200, "application/json", body, (size_t)n);
		return;
	case R_METRICS:
		metrics(c);
		return;
	case R_CHAT:
	case R_COMPLETIONS:
		if (!m->is_post)
			out_error(c, 405, "use POST");
		else
			completion(c);
		return;
	case R_INVOCATIONS:
		n = snprintf(body, sizeof(body),
		             "{\"backend\":\"%s\",\"body_length\":%llu,\"crc32\":\"%08x\"}\n",
		             g_srv.cfg.id, (unsigned long long)m->body_len, m->crc);
		out_simple(c, 200, "application/json", body, (size_t)n);
		return;
	case R_MATCH_CHAT:
	case R_MATCH_COMPLETIONS:
		mock_match(c);
		return;
	case R_SPEED:
		mock_speed(c);
		return;
	case R_OTHER:
	case R_COUNT:
		break;
	}
	out_error(c, 404, "not found");
}

void route_request(struct conn *c)
{
	struct mreq *m = &c->req;

	if (m->delay_ms > 0 && !m->delayed) {
		m->delayed = true;
		conn_set_timer(c, CT_DELAY, (uint64_t)m->delay_ms * NS_PER_MS);
		return;
	}
	respond(c);
}

void route_timer(struct conn *c, enum ctimer kind)
{
	if (kind == CT_DELAY)
		respond(c);
	else if (kind == CT_CHUNK)
		knob_stream_next(c);
	else
		pd_timer(c, kind);
}

bool route_busy(const struct conn *c)
{
	return c->req.sim.state != SIM_IDLE || c->req.pd_wait;
}

void route_release(struct conn *c)
{
	struct mreq *m = &c->req;

	if (c->tkind == CT_DELAY || c->tkind == CT_CHUNK) {
		heap_remove(&g_srv.timers, &c->timer);
		c->tkind = CT_NONE;
	}
	if (m->sim.state != SIM_IDLE)
		sim_cancel(g_srv.sim, &m->sim, g_srv.now);
	pd_release(c);
	prompt_free(&m->pr);
	free(m->hashes);
	m->hashes = NULL;
	pg_buf_free(&m->body);
}
