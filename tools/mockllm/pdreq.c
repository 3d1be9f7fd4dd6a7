// SPDX-License-Identifier: MIT
/* Which leg of a prefill/decode pair a request is; see pdreq.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "pdreq.h"

static int fail(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(char *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, PD_ERR_MAX, fmt, ap);
	va_end(ap);
	return -1;
}

static int64_t member(const struct pg_json *js, uint32_t obj, const char *name)
{
	return pg_json_find(js, obj, name, strlen(name));
}

static bool present(const struct pg_json *js, int64_t i)
{
	return i >= 0 && js->tok[i].type != PG_JSON_NULL;
}

static bool is_type(const struct pg_json *js, int64_t i, enum pg_json_type t)
{
	return i >= 0 && js->tok[i].type == t;
}

/* Integer token i in [min, max]. */
static bool int_in(const struct pg_json *js, int64_t i, int64_t min, int64_t max, int64_t *v)
{
	return is_type(js, i, PG_JSON_NUMBER) && pg_json_get_i64(js, (uint32_t)i, v) == 0 &&
	       *v >= min && *v <= max;
}

/* String token i copied to buf (cap bytes with the NUL): 1 to cap - 1
 * bytes of [A-Za-z0-9._:-] (an engine id or a numeric address). */
static bool plain_str(const struct pg_json *js, int64_t i, char *buf, size_t cap)
{
	size_t n;

	if (!is_type(js, i, PG_JSON_STRING))
		return false;
	n = pg_json_str_copy(js, (uint32_t)i, buf, cap);
	if (n == 0 || n >= cap)
		return false;
	buf[n] = '\0';
	for (size_t k = 0; k < n; k++)
		if (!((buf[k] >= 'a' && buf[k] <= 'z') || (buf[k] >= 'A' && buf[k] <= 'Z') ||
		      (buf[k] >= '0' && buf[k] <= '9') || strchr("._:-", buf[k])))
			return false;
	return true;
}

/* A boolean member of kv: absent or null is false. */
static int flag(const struct pg_json *js, uint32_t kv, const char *name, bool *v, char *err)
{
	int64_t i = member(js, kv, name);

	*v = is_type(js, i, PG_JSON_TRUE);
	if (present(js, i) && !*v && !is_type(js, i, PG_JSON_FALSE))
		return fail(err, "kv_transfer_params.%s must be true or false", name);
	return 0;
}

/* The raw text of token i, at most 24 bytes, for a message. */
static const char *raw(const struct pg_json *js, int64_t i, char buf[32])
{
	size_t n = js->tok[i].end - js->tok[i].start;

	snprintf(buf, 32, "%.*s%s", (int)(n > 24 ? 24 : n), js->src + js->tok[i].start,
	         n > 24 ? "..." : "");
	return buf;
}

/* The prefill leg of vLLM's flow: what the router must have set. */
static int vllm_prefill(const struct pg_json *js, enum pd_role role, char *err)
{
	static const char *const lens[] = {"max_tokens", "max_completion_tokens"};
	bool any = false;
	char tmp[32];

	if (role == PD_ROLE_DECODE)
		return fail(err, "kv_transfer_params.do_remote_decode: this is a decode instance "
		                 "(--role decode); the prefill leg goes to a prefill instance");
	if (is_type(js, member(js, 0, "stream"), PG_JSON_TRUE))
		return fail(err,
		            "kv_transfer_params.do_remote_decode: the prefill leg needs "
		            "\"stream\": false (its JSON answer carries the transfer parameters)");
	if (present(js, member(js, 0, "stream_options")))
		return fail(err, "Stream options can only be defined when `stream=True`.");
	for (int k = 0; k < 2; k++) {
		int64_t i = member(js, 0, lens[k]), v;

		if (!present(js, i))
			continue;
		any = true;
		if (!int_in(js, i, 1, 1, &v))
			return fail(err,
			            "kv_transfer_params.do_remote_decode: the prefill leg needs "
			            "\"%s\": 1, not %s",
			            lens[k], raw(js, i, tmp));
	}
	if (!any)
		return fail(err,
		            "kv_transfer_params.do_remote_decode: the prefill leg needs "
		            "\"max_tokens\": 1 (without it vLLM generates to the context's end)");
	return 0;
}

/* The decode leg of vLLM's flow: the transfer it names. */
static int vllm_decode(const struct pg_json *js, uint32_t kv, enum pd_role role, struct pd_req *out,
                       char *err)
{
	int64_t ids = member(js, kv, "remote_block_ids"), tp = member(js, kv, "tp_size"), v;
	uint32_t e;

	if (role == PD_ROLE_PREFILL)
		return fail(err, "kv_transfer_params.do_remote_prefill: this is a prefill instance "
		                 "(--role prefill); the decode leg goes to a decode instance");
	if (!plain_str(js, member(js, kv, "remote_engine_id"), out->engine, sizeof(out->engine)))
		return fail(err, "kv_transfer_params.remote_engine_id must be the prefill's engine "
		                 "id (a string, as its answer gave it)");
	if (!plain_str(js, member(js, kv, "remote_host"), out->host, sizeof(out->host)))
		return fail(err, "kv_transfer_params.remote_host must be the prefill's numeric "
		                 "address (a string, as its answer gave it)");
	if (!int_in(js, member(js, kv, "remote_port"), 1, 65535, &v))
		return fail(err, "kv_transfer_params.remote_port must be the prefill's side port "
		                 "(an integer from 1 to 65535)");
	out->port = (uint16_t)v;
	if (present(js, tp) && !int_in(js, tp, 1, 1 << 20, &v))
		return fail(err, "kv_transfer_params.tp_size must be a positive integer");
	if (!is_type(js, ids, PG_JSON_ARRAY))
		return fail(err, "kv_transfer_params.remote_block_ids must be a list of block ids");
	out->nblocks = js->tok[ids].size;
	if (out->nblocks) {
		out->block_ids = malloc(out->nblocks * sizeof(*out->block_ids));
		if (!out->block_ids)
			return fail(err,
			            "out of memory reading kv_transfer_params.remote_block_ids");
	}
	e = pg_json_first((uint32_t)ids);
	for (size_t k = 0; k < out->nblocks; k++, e = js->tok[e].next) {
		if (!int_in(js, e, 0, (int64_t)PD_MAX_BLOCK_ID, &v))
			return fail(err,
			            "kv_transfer_params.remote_block_ids[%zu] is not a block id "
			            "(an integer from 0 to 2^53)",
			            k);
		out->block_ids[k] = (uint64_t)v;
	}
	return 0;
}

static int vllm_leg(const struct pg_json *js, int64_t kv, enum pd_role role, struct pd_req *out,
                    char *err)
{
	bool rd, rp;

	if (!is_type(js, kv, PG_JSON_OBJECT))
		return fail(err, "kv_transfer_params must be an object");
	if (flag(js, (uint32_t)kv, "do_remote_decode", &rd, err) ||
	    flag(js, (uint32_t)kv, "do_remote_prefill", &rp, err))
		return -1;
	if (rd && rp)
		return fail(err, "kv_transfer_params: do_remote_decode and do_remote_prefill are "
		                 "both true; a leg is one or the other");
	if (rd) {
		out->leg = PD_LEG_VLLM_PREFILL;
		return vllm_prefill(js, role, err);
	}
	if (rp) {
		out->leg = PD_LEG_VLLM_DECODE;
		return vllm_decode(js, (uint32_t)kv, role, out, err);
	}
	return 0; /* neither: a plain request, as vLLM serves it */
}

/* Prompts in the request: a completions "prompt" that is a list of strings
 * or of token-id lists is a batch of that many; anything else is one. */
static size_t prompts(const struct pg_json *js, bool chat)
{
	int64_t p = member(js, 0, "prompt");
	uint32_t first;

	if (chat || !is_type(js, p, PG_JSON_ARRAY) || js->tok[p].size == 0)
		return 1;
	first = pg_json_first((uint32_t)p);
	if (js->tok[first].type == PG_JSON_STRING || js->tok[first].type == PG_JSON_ARRAY)
		return js->tok[p].size;
	return 1;
}

/* Element k of field i (a scalar when !arr). */
static int64_t elem(const struct pg_json *js, int64_t i, bool arr, size_t k)
{
	uint32_t e;

	if (!arr)
		return i;
	e = pg_json_first((uint32_t)i);
	while (k--)
		e = js->tok[e].next;
	return e;
}

static int sglang_leg(const struct pg_json *js, bool chat, enum pd_role role, uint16_t own_port,
                      const int64_t f[3], struct pd_req *out, char *err)
{
	static const char *const names[3] = {"bootstrap_host", "bootstrap_port", "bootstrap_room"};
	size_t batch = prompts(js, chat), n = 1;
	int arrays = 0;

	for (int k = 0; k < 3; k++) {
		if (!present(js, f[k]))
			return fail(
			    err,
			    "%s missing: SGLang's legs carry bootstrap_host, bootstrap_port "
			    "and bootstrap_room",
			    names[k]);
		arrays += is_type(js, f[k], PG_JSON_ARRAY);
	}
	if (arrays != 0 && arrays != 3)
		return fail(err, "bootstrap_host, bootstrap_port and bootstrap_room: arrays all "
		                 "three (a batch) or none");
	if (arrays) {
		n = js->tok[f[2]].size;
		if (js->tok[f[0]].size != n || js->tok[f[1]].size != n || n != batch)
			return fail(err,
			            "bootstrap_host, bootstrap_port, bootstrap_room: %u, %u and %u "
			            "elements for a batch of %zu prompts",
			            js->tok[f[0]].size, js->tok[f[1]].size, js->tok[f[2]].size,
			            batch);
		if (n > PD_MAX_ROOMS)
			return fail(err, "bootstrap_room: %zu rooms, mockllm takes at most %d", n,
			            PD_MAX_ROOMS);
	} else if (batch != 1) {
		return fail(err, "bootstrap_room: a batch of %zu prompts needs arrays of %zu rooms",
		            batch, batch);
	}
	for (size_t k = 0; k < n; k++) {
		char host[PD_HOST_MAX];
		int64_t port, room;

		if (!plain_str(js, elem(js, f[0], arrays, k), host, sizeof(host)))
			return fail(err, "bootstrap_host must be the prefill's numeric address");
		if (!int_in(js, elem(js, f[1], arrays, k), 1, 65535, &port))
			return fail(err, "bootstrap_port must be an integer from 1 to 65535");
		if (!int_in(js, elem(js, f[2], arrays, k), 0, INT64_MAX, &room))
			return fail(err, "bootstrap_room must be an integer from 0 to 2^63-1");
		if (k == 0) {
			memcpy(out->host, host, sizeof(host));
			out->port = (uint16_t)port;
		} else if (strcmp(host, out->host) || port != out->port) {
			return fail(err, "bootstrap_host, bootstrap_port: a batch's rooms name one "
			                 "prefill");
		}
		for (size_t j = 0; j < k; j++)
			if (out->room[j] == (uint64_t)room)
				return fail(err, "bootstrap_room %lld appears twice",
				            (long long)room);
		out->room[k] = (uint64_t)room;
	}
	out->nrooms = n;
	if (role == PD_ROLE_PREFILL && out->port != own_port)
		return fail(err, "bootstrap_port %u is not this prefill's (%u)", out->port,
		            own_port);
	out->leg = role == PD_ROLE_PREFILL ? PD_LEG_SGLANG_PREFILL : PD_LEG_SGLANG_DECODE;
	return 0;
}

int pd_req_parse(const char *body, size_t len, bool chat, enum pd_role role, enum pd_proto proto,
                 uint16_t bootstrap_port, struct pd_req *out, char err[PD_ERR_MAX])
{
	struct pg_json js = {0};
	int64_t kv, f[3];
	bool has_kv, has_boot;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	err[0] = '\0';
	if (role == PD_ROLE_MIXED)
		return 0;
	if (pg_json_parse(&js, body, len) || js.tok[0].type != PG_JSON_OBJECT)
		goto out;
	kv = member(&js, 0, "kv_transfer_params");
	f[0] = member(&js, 0, "bootstrap_host");
	f[1] = member(&js, 0, "bootstrap_port");
	f[2] = member(&js, 0, "bootstrap_room");
	has_kv = present(&js, kv);
	has_boot = present(&js, f[0]) || present(&js, f[1]) || present(&js, f[2]);
	if (has_kv && has_boot)
		rc = fail(err, "kv_transfer_params (vLLM) and bootstrap_* (SGLang) in one request");
	else if (proto == PD_PROTO_VLLM && has_boot)
		rc = fail(err, "bootstrap_*: this instance speaks --pd-protocol vllm "
		               "(kv_transfer_params), not SGLang's bootstrap fields");
	else if (proto == PD_PROTO_SGLANG && has_kv)
		rc = fail(err, "kv_transfer_params: this instance speaks --pd-protocol sglang "
		               "(bootstrap_host, bootstrap_port, bootstrap_room), not vLLM's");
	else if (has_kv)
		rc = vllm_leg(&js, kv, role, out, err);
	else if (has_boot)
		rc = sglang_leg(&js, chat, role, bootstrap_port, f, out, err);
out:
	pg_json_free(&js);
	if (rc) {
		pd_req_free(out);
		out->leg = PD_LEG_PLAIN;
	}
	return rc;
}

void pd_req_free(struct pd_req *r)
{
	free(r->block_ids);
	r->block_ids = NULL;
	r->nblocks = 0;
}

void pd_kv_params_json(struct pg_buf *b, const char *engine, uint64_t first_id, size_t n,
                       const char *host, uint16_t port)
{
	pg_buf_puts(b, ",\"kv_transfer_params\":{\"do_remote_prefill\":true,"
	               "\"do_remote_decode\":false,\"remote_block_ids\":[");
	for (size_t k = 0; k < n; k++)
		pg_buf_printf(b, k ? ",%llu" : "%llu", (unsigned long long)(first_id + k));
	pg_buf_printf(b,
	              "],\"remote_engine_id\":\"%s\",\"remote_host\":\"%s\",\"remote_port\":%u,"
	              "\"tp_size\":1}",
	              engine, host, port);
}
