// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "kvcache.h"
#include "lib/json.h"
#include "prompt.h"

/* Append the unescaped string token i. */
static void text_add_str(struct pg_buf *t, const struct pg_json *js, uint32_t i)
{
	/* unescaping never makes a string longer than its raw form */
	size_t raw = js->tok[i].end - js->tok[i].start;
	char *d = pg_buf_reserve(t, raw);

	if (d)
		t->len += pg_json_str_copy(js, i, d, raw);
}

static int64_t member(const struct pg_json *js, uint32_t obj, const char *name)
{
	return pg_json_find(js, obj, name, strlen(name));
}

static bool is_type(const struct pg_json *js, int64_t i, enum pg_json_type type)
{
	return i >= 0 && js->tok[i].type == type;
}

/* A token id as 4 little-endian bytes: one id, one simulated token. */
static int add_token_id(struct pg_buf *t, const struct pg_json *js, uint32_t i)
{
	int64_t v;
	unsigned char b[4];

	if (js->tok[i].type != PG_JSON_NUMBER || pg_json_get_i64(js, i, &v) || v < 0 ||
	    v > UINT32_MAX)
		return -1;
	for (int k = 0; k < 4; k++)
		b[k] = (unsigned char)(v >> (8 * k));
	pg_buf_append(t, b, 4);
	return 0;
}

static int render_completion(struct pg_buf *t, const struct pg_json *js, int64_t prompt,
                             const char **err)
{
	uint32_t k, n;

	*err = "\"prompt\" must be a string, a list of strings or a list of token ids";
	if (is_type(js, prompt, PG_JSON_STRING)) {
		text_add_str(t, js, (uint32_t)prompt);
		return 0;
	}
	if (!is_type(js, prompt, PG_JSON_ARRAY))
		return -1;
	for (k = pg_json_first((uint32_t)prompt), n = 0; n < js->tok[prompt].size;
	     n++, k = js->tok[k].next) {
		if (js->tok[k].type == PG_JSON_STRING) {
			text_add_str(t, js, k);
		} else if (js->tok[k].type == PG_JSON_ARRAY) {
			uint32_t e = pg_json_first(k);

			for (uint32_t m = 0; m < js->tok[k].size; m++, e = js->tok[e].next)
				if (add_token_id(t, js, e))
					return -1;
		} else if (add_token_id(t, js, k)) {
			return -1;
		}
	}
	return 0;
}

static int render_content(struct pg_buf *t, const struct pg_json *js, int64_t content)
{
	uint32_t k, n;
	bool first = true;

	if (content < 0 || js->tok[content].type == PG_JSON_NULL)
		return 0;
	if (js->tok[content].type == PG_JSON_STRING) {
		text_add_str(t, js, (uint32_t)content);
		return 0;
	}
	if (js->tok[content].type != PG_JSON_ARRAY)
		return -1;
	for (k = pg_json_first((uint32_t)content), n = 0; n < js->tok[content].size;
	     n++, k = js->tok[k].next) {
		int64_t txt = member(js, k, "text");

		if (!is_type(js, txt, PG_JSON_STRING))
			continue; /* image_url and other parts carry no text */
		if (!first)
			pg_buf_append(t, "\n", 1);
		text_add_str(t, js, (uint32_t)txt);
		first = false;
	}
	return 0;
}

static int render_chat(struct pg_buf *t, const struct pg_json *js, const char **err)
{
	int64_t tools = member(js, 0, "tools");
	int64_t msgs = member(js, 0, "messages");
	uint32_t k, n;

	if (tools >= 0 && js->tok[tools].type != PG_JSON_NULL) {
		const struct pg_json_tok *tk = &js->tok[tools];

		pg_buf_append(t, js->src + tk->start, tk->end - tk->start);
		pg_buf_append(t, "\n", 1);
	}
	*err = "\"messages\" must be a non-empty list of objects";
	if (!is_type(js, msgs, PG_JSON_ARRAY) || js->tok[msgs].size == 0)
		return -1;
	for (k = pg_json_first((uint32_t)msgs), n = 0; n < js->tok[msgs].size;
	     n++, k = js->tok[k].next) {
		int64_t role = member(js, k, "role");

		*err = "each message needs a string \"role\"";
		if (!is_type(js, role, PG_JSON_STRING))
			return -1;
		pg_buf_append(t, "<|", 2);
		text_add_str(t, js, (uint32_t)role);
		pg_buf_append(t, "|>\n", 3);
		*err = "message \"content\" must be a string, a list of parts or null";
		if (render_content(t, js, member(js, k, "content")))
			return -1;
		pg_buf_append(t, "\n", 1);
	}
	pg_buf_puts(t, "<|assistant|>\n");
	return 0;
}

static int parse_fields(const struct pg_json *js, struct prompt_req *out, const char **err)
{
	int64_t v, mt;

	v = member(js, 0, "model");
	if (is_type(js, v, PG_JSON_STRING) &&
	    js->tok[v].end - js->tok[v].start < sizeof(out->model)) {
		size_t n = pg_json_str_copy(js, (uint32_t)v, out->model, sizeof(out->model) - 1);

		out->model[n] = '\0';
		/* echoed into JSON responses unescaped: keep it to plain bytes */
		for (size_t i = 0; i < n; i++)
			if (out->model[i] == '"' || out->model[i] == '\\' ||
			    (unsigned char)out->model[i] < 0x20)
				out->model[0] = '\0';
	}
	out->max_tokens = PROMPT_DEFAULT_MAX_TOKENS;
	v = member(js, 0, "max_tokens");
	if (v < 0 || js->tok[v].type == PG_JSON_NULL)
		v = member(js, 0, "max_completion_tokens");
	if (v >= 0 && js->tok[v].type != PG_JSON_NULL) {
		*err = "\"max_tokens\" must be an integer from 1 to 1000000";
		if (js->tok[v].type != PG_JSON_NUMBER || pg_json_get_i64(js, (uint32_t)v, &mt) ||
		    mt < 1 || mt > PROMPT_MAX_MAX_TOKENS)
			return -1;
		out->max_tokens = (uint32_t)mt;
		out->max_tokens_set = true;
	}
	v = member(js, 0, "stream");
	out->stream = is_type(js, v, PG_JSON_TRUE);
	v = member(js, 0, "stream_options");
	if (is_type(js, v, PG_JSON_OBJECT))
		out->include_usage =
		    is_type(js, member(js, (uint32_t)v, "include_usage"), PG_JSON_TRUE);
	return 0;
}

int prompt_parse(const char *body, size_t len, bool chat, struct prompt_req *out, const char **err)
{
	struct pg_json js = {0};
	struct pg_buf t = {0};
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (pg_json_parse(&js, body, len)) {
		*err = "request body is not valid JSON";
		goto out;
	}
	if (js.tok[0].type != PG_JSON_OBJECT) {
		*err = "request body must be a JSON object";
		goto out;
	}
	if (parse_fields(&js, out, err))
		goto out;
	if (chat)
		rc = render_chat(&t, &js, err);
	else
		rc = render_completion(&t, &js, member(&js, 0, "prompt"), err);
	if (rc == 0 && t.oom) {
		*err = "out of memory rendering the prompt";
		rc = -1;
	}
out:
	pg_json_free(&js);
	if (rc) {
		free(t.p);
		memset(out, 0, sizeof(*out));
		return -1;
	}
	out->text = t.p;
	out->len = t.len;
	return 0;
}

const char *prompt_output_token(uint32_t i)
{
	static const char *const vocab[] = {
	    " The", " old", " fox", " ran", " far", " and", " saw", " the",
	    " big", " red", " sun", " set", " low", " but", " all", " is.",
	};

	return vocab[i % (sizeof(vocab) / sizeof(vocab[0]))];
}

int prompt_request_hashes(const char *text, size_t len, uint32_t max_tokens, uint64_t max_blocks,
                          uint64_t **out, size_t *nprompt, size_t *ndone)
{
	size_t n = kv_block_hashes(text, len, NULL, 0), nd = n, done;
	/* every output token is KV_TOKEN_BYTES of text */
	uint64_t t = kv_prompt_tokens(len + (size_t)max_tokens * KV_TOKEN_BYTES);
	uint64_t all = t ? (t - 1) / KV_BLOCK_TOKENS : 0;
	struct kv_hasher h;
	uint64_t *hs;

	if (all > max_blocks)
		all = max_blocks;
	if (all > n)
		nd = (size_t)all;
	hs = malloc((nd ? nd : 1) * sizeof(*hs));
	if (!hs)
		return -1;
	kv_block_hashes(text, len, hs, n);
	*out = hs;
	*nprompt = n;
	*ndone = n;
	if (nd == n)
		return 0;
	/* continue the chain from the prompt's last full block */
	kv_hasher_init(&h, n ? hs[n - 1] : 0);
	done = n + kv_hasher_feed(&h, text + n * KV_BLOCK_BYTES, len - n * KV_BLOCK_BYTES, hs + n,
	                          nd - n);
	for (uint32_t i = 0; i < max_tokens && done < nd; i++) {
		const char *tok = prompt_output_token(i);

		done += kv_hasher_feed(&h, tok, strlen(tok), hs + done, nd - done);
	}
	*ndone = done;
	return 0;
}

void prompt_free(struct prompt_req *p)
{
	free(p->text);
	p->text = NULL;
	p->len = 0;
}
