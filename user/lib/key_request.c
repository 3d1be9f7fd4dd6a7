// SPDX-License-Identifier: MIT
/*
 * What a request is to key extraction (key.h): which API its method and
 * path name, and how many of its body bytes the key needs before the
 * request can be routed.
 */
#include <string.h>
#include "lib/key.h"
#include "lib/key_text.h"

enum pg_api pg_key_api(struct pg_str method, struct pg_str path)
{
	static const struct {
		const char *path;
		size_t len;
		enum pg_api api;
	} apis[] = {
	    {"/v1/chat/completions", 20, PG_API_CHAT}, {"/v1/completions", 15, PG_API_COMPLETIONS},
	    {"/v1/responses", 13, PG_API_RESPONSES},   {"/v1/messages", 12, PG_API_MESSAGES},
	    {"/v1/embeddings", 14, PG_API_EMBEDDINGS},
	};

	if (method.len != 4 || memcmp(method.p, "POST", 4))
		return PG_API_RAW;
	for (size_t i = 0; i < sizeof(apis) / sizeof(apis[0]); i++)
		if (path.len == apis[i].len && !memcmp(path.p, apis[i].path, path.len))
			return apis[i].api;
	return PG_API_RAW;
}

size_t pg_key_body_need(enum pg_api api, uint32_t prefix_length, bool blocks)
{
	if (api != PG_API_RAW)
		return PG_KEY_JSON_BODY_MAX;
	return blocks && prefix_length < PG_CA_MAX_BLOCKS * PG_CA_BLOCK
	           ? PG_CA_MAX_BLOCKS * PG_CA_BLOCK
	           : prefix_length;
}

uint64_t pg_key_hold(enum pg_api api, uint32_t prefix_length, bool blocks, bool by_model,
                     int64_t length)
{
	uint64_t need =
	    by_model ? PG_KEY_JSON_BODY_MAX : pg_key_body_need(api, prefix_length, blocks);

	if (length < 0)
		return need;
	if ((uint64_t)length > PG_KEY_JSON_BODY_MAX) {
		if (api != PG_API_RAW)
			need = prefix_length;
		if (by_model)
			need = PG_PREFIX_LENGTH_MAX;
	}
	return need < (uint64_t)length ? need : (uint64_t)length;
}

/* A non-negative integer member's value (cut to 2^32 - 1), else 0. */
static uint32_t uint_of(const struct pg_json *js, int64_t i)
{
	uint64_t v = 0;

	if (i < 0 || js->tok[i].type != PG_JSON_NUMBER || !(js->tok[i].flags & PG_JSON_F_INTEGER) ||
	    js->src[js->tok[i].start] == '-')
		return 0;
	for (uint32_t p = js->tok[i].start; p < js->tok[i].end && v < UINT32_MAX; p++)
		v = v * 10 + (uint64_t)(js->src[p] - '0');
	return v < UINT32_MAX ? (uint32_t)v : UINT32_MAX;
}

void pg_key_flow_fields(const struct pg_json *js, const int64_t max[3], int64_t user,
                        struct pg_key *out)
{
	for (int i = 0; i < 3 && !out->max_tokens; i++)
		out->max_tokens = uint_of(js, max[i]);
	if (user >= 0 && js->tok[user].type == PG_JSON_STRING &&
	    js->tok[user].end > js->tok[user].start) {
		out->user_off = js->tok[user].start;
		out->user_len = js->tok[user].end - js->tok[user].start;
	}
}
