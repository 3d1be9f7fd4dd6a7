// SPDX-License-Identifier: MIT
/* Prefill/decode disaggregation's bodies (pd.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "lib/jsonedit.h"
#include "lib/pd.h"

static const char *const names[] = {
    [PG_PD_NONE] = "none",
    [PG_PD_VLLM] = "vllm",
    [PG_PD_SGLANG] = "sglang",
};

const char *pg_pd_name(enum pg_pd pd)
{
	return (unsigned)pd < sizeof(names) / sizeof(names[0]) ? names[pd] : "?";
}

int pg_pd_parse(const char *s, size_t n, enum pg_pd *out)
{
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strlen(names[i]) == n && !memcmp(s, names[i], n)) {
			*out = (enum pg_pd)i;
			return 0;
		}
	return -1;
}

bool pg_pd_decode_alone(uint32_t prompt_tokens, uint32_t decode_matched, uint32_t min_tokens)
{
	const uint32_t held = decode_matched < prompt_tokens ? decode_matched : prompt_tokens;

	return prompt_tokens - held < min_tokens;
}

#define SET(n, v)                                                                                  \
	{                                                                                          \
		n, sizeof(n) - 1, v, sizeof(v) - 1                                                 \
	}
#define DEL(n)                                                                                     \
	{                                                                                          \
		n, sizeof(n) - 1, NULL, 0                                                          \
	}

int pg_pd_vllm_prefill_body(const struct pg_json *js, struct pg_buf *out)
{
	static const char params[] =
	    "{\"do_remote_decode\":true,\"do_remote_prefill\":false,\"remote_engine_id\":null,"
	    "\"remote_block_ids\":null,\"remote_host\":null,\"remote_port\":null}";
	struct pg_jedit e[5] = {
	    SET("max_tokens", "1"),
	    SET("stream", "false"),
	    DEL("stream_options"),
	    SET("kv_transfer_params", params),
	};
	size_t n = 4;

	/* max_completion_tokens only where the client used it */
	if (js->ntok && pg_json_find(js, 0, "max_completion_tokens", 21) >= 0)
		e[n++] = (struct pg_jedit)SET("max_completion_tokens", "1");
	return pg_json_edit(js, e, n, out);
}

int pg_pd_vllm_params(const struct pg_json *ans, const char **p, size_t *n, const char **why)
{
	int64_t kv, v;

	if (!ans->ntok || ans->tok[0].type != PG_JSON_OBJECT) {
		*why = "the prefill's answer is not a JSON object";
		return -1;
	}
	kv = pg_json_find(ans, 0, "kv_transfer_params", 18);
	if (kv < 0 || ans->tok[kv].type == PG_JSON_NULL) {
		*why = "the prefill's answer has no kv_transfer_params (is it a vLLM prefill "
		       "instance with a KV connector?)";
		return -1;
	}
	if (ans->tok[kv].type != PG_JSON_OBJECT) {
		*why = "the prefill's kv_transfer_params is not an object";
		return -1;
	}
	v = pg_json_find(ans, (uint32_t)kv, "do_remote_prefill", 17);
	if (v < 0 || ans->tok[v].type != PG_JSON_TRUE) {
		*why = "the prefill's kv_transfer_params lacks do_remote_prefill: true";
		return -1;
	}
	v = pg_json_find(ans, (uint32_t)kv, "remote_engine_id", 16);
	if (v < 0 || ans->tok[v].type == PG_JSON_NULL) {
		*why = "the prefill's kv_transfer_params names no remote_engine_id";
		return -1;
	}
	*p = ans->src + ans->tok[kv].start;
	*n = ans->tok[kv].end - ans->tok[kv].start;
	return 0;
}

int pg_pd_vllm_decode_body(const struct pg_json *js, const char *params, size_t plen,
                           struct pg_buf *out)
{
	const struct pg_jedit e = {"kv_transfer_params", 18, params, plen};

	return pg_json_edit(js, &e, 1, out);
}

/* An array that batches requests: of strings, or of arrays (token ids). */
static size_t batch_of(const struct pg_json *js, int64_t a, bool strings)
{
	uint8_t first;

	if (a < 0 || js->tok[a].type != PG_JSON_ARRAY || !js->tok[a].size)
		return 0;
	first = js->tok[pg_json_first((uint32_t)a)].type;
	return (strings && first == PG_JSON_STRING) || first == PG_JSON_ARRAY ? js->tok[a].size : 0;
}

size_t pg_pd_sglang_batch(const struct pg_json *js)
{
	size_t n;

	if (!js->ntok || js->tok[0].type != PG_JSON_OBJECT)
		return 0;
	if ((n = batch_of(js, pg_json_find(js, 0, "prompt", 6), true)))
		return n;
	if ((n = batch_of(js, pg_json_find(js, 0, "text", 4), true)))
		return n;
	return batch_of(js, pg_json_find(js, 0, "input_ids", 9), false);
}

int pg_pd_sglang_body(const struct pg_json *js, const char *host, uint16_t port, uint64_t room,
                      struct pg_buf *out)
{
	struct pg_buf h = {0}, p = {0}, r = {0};
	size_t batch = pg_pd_sglang_batch(js);
	int rc;

	room &= INT64_MAX;
	for (size_t i = 0; i < (batch ? batch : 1); i++) {
		const char *sep = i ? "," : batch ? "[" : "";

		pg_buf_puts(&h, sep);
		pg_buf_json_str(&h, host, strlen(host));
		pg_buf_printf(&p, "%s%u", sep, port);
		pg_buf_printf(&r, "%s%" PRIu64, sep, (room + i) & INT64_MAX);
	}
	if (batch) {
		pg_buf_puts(&h, "]");
		pg_buf_puts(&p, "]");
		pg_buf_puts(&r, "]");
	}
	if (h.oom || p.oom || r.oom) {
		rc = -1;
	} else {
		const struct pg_jedit e[3] = {
		    {"bootstrap_host", 14, h.p, h.len},
		    {"bootstrap_port", 14, p.p, p.len},
		    {"bootstrap_room", 14, r.p, r.len},
		};

		rc = pg_json_edit(js, e, 3, out);
	}
	pg_buf_free(&h);
	pg_buf_free(&p);
	pg_buf_free(&r);
	return rc;
}
