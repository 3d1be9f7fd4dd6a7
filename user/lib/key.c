// SPDX-License-Identifier: MIT
/*
 * Prefix-key extraction (see key.h for the contract and the key text's
 * grammar). The body is parsed whole (it must be valid JSON for the key to
 * be its text), then walked in the grammar's order, the text produced into
 * a buffer (key_text.c) until prefix_length code points, and hashed with
 * XXH3-64.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
/* libxxhash's run-time choice of SSE2, AVX2 or AVX-512 for XXH3 (the same
 * hashes; half the instructions per block with AVX2). */
#include <xxh_x86dispatch.h>
#endif
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/json_find.h"
#include "lib/key.h"
#include "lib/key_text.h"
#include "lib/spare.h"

static bool is_type(const struct pg_json *js, int64_t i, enum pg_json_type type)
{
	return i >= 0 && js->tok[i].type == type;
}

static bool absent(const struct pg_json *js, int64_t i)
{
	return i < 0 || js->tok[i].type == PG_JSON_NULL;
}

/*
 * The walk's results: 0 done; WALK_STOP done too, the rest not looked at;
 * -1 something malformed where the walk stopped (walk_failed() says whether
 * the body can still be used); WALK_WHOLE the walk needs array elements the
 * windowed parse left out (json.h), so the body is parsed again with a
 * larger window.
 */
#define WALK_STOP  1
#define WALK_WHOLE (-2)

/* The walk stopped at something malformed: the body cannot be used, unless
 * the PREFIX_AWARE key text was complete already (its end: mark 0 when
 * cache_aware's text runs on past it, else the text's own limit): then past
 * it only the JSON grammar matters (doc/routing.md "How it routes"), and the walk
 * ended there, as it would have for PREFIX_AWARE alone. Nothing is written
 * once a walk fails, so this is asked once, of the text it left. */
static int walk_failed(const struct pg_text *e)
{
	uint32_t cut = e->mark_max ? e->mark[0] : e->limit;

	return cut && e->ncp >= cut ? WALK_STOP : -1;
}

/* The most code points of key text: PrefixLength, or cache_aware's blocks. */
static uint32_t text_limit(bool blocks, uint32_t prefix_length)
{
	return blocks ? PG_CA_MAX_BLOCKS * PG_CA_BLOCK : prefix_length;
}

/* The walk of an array can stop: the text is full and, when cache_aware's
 * anchor is wanted, the first user message is written or not in it. */
static bool walk_done(const struct pg_text *e, bool anchor)
{
	return pg_text_full(e) && (!anchor || e->user_done);
}

/* The walk used every kept element of array a without being done. */
static int walk_end(const struct pg_text *e, const struct pg_json *js, int64_t a, bool anchor)
{
	return walk_done(e, anchor) || !(js->tok[a].flags & PG_JSON_F_PARTIAL) ? 0 : WALK_WHOLE;
}

/* Content part types whose "text" is key text, per API. */
struct part_types {
	const struct pg_json_name *names;
	size_t n;
};
static const struct pg_json_name text_part[] = {{"text", 4}};
static const struct pg_json_name responses_parts[] = {{"input_text", 10}, {"output_text", 11}};
static const struct part_types chat_parts = {text_part, 1};
static const struct part_types resp_parts = {responses_parts, 2};

static bool part_type_ok(const struct pg_json *js, int64_t type, const struct part_types *pt)
{
	if (!is_type(js, type, PG_JSON_STRING))
		return false;
	for (size_t i = 0; i < pt->n; i++)
		if (pg_json_str_eq(js, (uint32_t)type, pt->names[i].s, pt->names[i].len))
			return true;
	return false;
}

/* Content: a string, or parts whose "text" (of the types pt names) are
 * joined by GS. */
static inline __attribute__((always_inline)) int
emit_content(struct pg_text *e, const struct pg_json *js, int64_t c, const struct part_types *pt)
{
	static const struct pg_json_name part_names[] = {{"type", 4}, {"text", 4}};
	uint32_t k = pg_json_first((uint32_t)c), n, ntext = 0;
	int64_t text, f[2];

	if (absent(js, c))
		return 0;
	if (is_type(js, c, PG_JSON_STRING)) {
		pg_text_string(e, js, (uint32_t)c);
		return 0;
	}
	if (!is_type(js, c, PG_JSON_ARRAY))
		return -1;
	for (n = 0; n < js->tok[c].size; n++, k = js->tok[k].next) {
		if (pg_text_full(e))
			return 0;
		if (!pg_json_find_fixed(js, k, part_names, 2, f))
			return -1;
		text = f[1];
		if (!part_type_ok(js, f[0], pt))
			continue;
		if (!is_type(js, text, PG_JSON_STRING))
			return -1;
		if (ntext++)
			pg_text_cp(e, PG_KEY_GS);
		pg_text_string(e, js, (uint32_t)text);
	}
	return walk_end(e, js, c, false);
}

/* CANON(v) RS, for tools and the Responses items that are not messages. */
static int emit_canonical(struct pg_text *e, const struct pg_json *js, int64_t v)
{
	/* pg_text_canonical's scratch: an index per member name of v's subtree
	 * at most, so its token count; most tool lists and items fit here */
	uint32_t small[256], *scratch = small, n = js->tok[v].next - (uint32_t)v;

	if (pg_text_full(e))
		return 0;
	/* an array of v cut by the window would end the text too soon; none
	 * can be when v spans no more than the window (an array is cut past
	 * window bytes from its '[', json.h) */
	if (js->window && js->tok[v].end - js->tok[v].start > js->window)
		for (uint32_t i = (uint32_t)v; i < js->tok[v].next; i++)
			if (js->tok[i].flags & PG_JSON_F_PARTIAL)
				return WALK_WHOLE;
	if (n > sizeof(small) / sizeof(small[0]) && !(scratch = malloc(sizeof(*scratch) * n))) {
		e->oom = true;
		return -1;
	}
	pg_text_canonical(e, js, (uint32_t)v, scratch, 0);
	if (scratch != small)
		free(scratch);
	pg_text_cp(e, PG_KEY_RS);
	return 0;
}

/* The first message whose role is "user" starts here (cache_aware's anchor
 * runs prefix_length code points into it, key.h). */
static void user_starts(struct pg_text *e, bool anchor, uint32_t prefix_length)
{
	if (e->user_seen)
		return;
	e->user_seen = true;
	e->user_start = e->len;
	if (anchor)
		pg_text_mark(e, 1, prefix_length);
}

/* One message: TEXT(role) US content RS. role: a string token, or -1 with
 * lit naming the role ("system" for a system prompt given apart). */
static inline __attribute__((always_inline)) int
emit_message(struct pg_text *e, const struct pg_json *js, int64_t role, const char *lit,
             int64_t content, const struct part_types *pt, bool anchor, uint32_t prefix_length)
{
	int rc;

	if (lit) {
		pg_text_ascii(e, lit, strlen(lit));
	} else if (is_type(js, role, PG_JSON_STRING)) {
		if (!e->user_seen && pg_json_str_eq(js, (uint32_t)role, "user", 4))
			user_starts(e, anchor, prefix_length);
		pg_text_string(e, js, (uint32_t)role);
	} else if (!absent(js, role)) {
		return -1;
	}
	pg_text_cp(e, PG_KEY_US);
	rc = emit_content(e, js, content, pt);
	if (rc)
		return rc;
	pg_text_cp(e, PG_KEY_RS);
	if (e->user_seen && !e->user_done) {
		e->user_done = true;
		e->user_end = e->len;
	}
	return 0;
}

/* Chat and Anthropic Messages: [CANON(tools) RS] ["system" US system RS]
 * messages. anchor: cache_aware's anchor is wanted, running prefix_length
 * code points into the first user message (key.h). */
static int chat_text(struct pg_text *e, const struct pg_json *js, int64_t tools, int64_t system,
                     int64_t msgs, bool anchor, uint32_t prefix_length)
{
	static const struct pg_json_name msg_names[] = {{"role", 4}, {"content", 7}};
	int64_t f[2];
	uint32_t k, n;
	int rc = 0;

	if (!is_type(js, msgs, PG_JSON_ARRAY))
		return -1;
	if (!absent(js, tools) && (rc = emit_canonical(e, js, tools)))
		return rc;
	if (!absent(js, system) &&
	    (rc = emit_message(e, js, -1, "system", system, &chat_parts, anchor, prefix_length)))
		return rc;
	k = pg_json_first((uint32_t)msgs);
	for (n = 0; n < js->tok[msgs].size; n++, k = js->tok[k].next) {
		if (walk_done(e, anchor))
			return 0;
		if (!pg_json_find_fixed(js, k, msg_names, 2, f))
			return -1;
		rc = emit_message(e, js, f[0], NULL, f[1], &chat_parts, anchor, prefix_length);
		if (rc)
			return rc;
	}
	return walk_end(e, js, msgs, anchor);
}

/* Responses: [CANON(tools) RS] ["system" US instructions RS] input, where a
 * string input is one user message, and of an array of items a message
 * ({"type":"message"} or no type, with a role) is a chat message with
 * input_text / output_text parts, any other item CANON(item) RS. */
static int responses_text(struct pg_text *e, const struct pg_json *js, int64_t tools, int64_t instr,
                          int64_t input, bool anchor, uint32_t prefix_length)
{
	static const struct pg_json_name item_names[] = {{"type", 4}, {"role", 4}, {"content", 7}};
	int64_t f[3];
	uint32_t k, n;
	int rc;

	if (!absent(js, tools) && (rc = emit_canonical(e, js, tools)))
		return rc;
	if (!absent(js, instr)) {
		if (!is_type(js, instr, PG_JSON_STRING))
			return -1;
		rc = emit_message(e, js, -1, "system", instr, &resp_parts, anchor, prefix_length);
		if (rc)
			return rc;
	}
	if (is_type(js, input, PG_JSON_STRING)) {
		user_starts(e, anchor, prefix_length);
		return emit_message(e, js, -1, "user", input, &resp_parts, anchor, prefix_length);
	}
	if (!is_type(js, input, PG_JSON_ARRAY))
		return -1;
	k = pg_json_first((uint32_t)input);
	for (n = 0; n < js->tok[input].size; n++, k = js->tok[k].next) {
		if (walk_done(e, anchor))
			return 0;
		if (!pg_json_find_fixed(js, k, item_names, 3, f))
			return -1;
		if ((absent(js, f[0]) || (is_type(js, f[0], PG_JSON_STRING) &&
		                          pg_json_str_eq(js, (uint32_t)f[0], "message", 7))) &&
		    f[1] >= 0)
			rc = emit_message(e, js, f[1], NULL, f[2], &resp_parts, anchor,
			                  prefix_length);
		else
			rc = emit_canonical(e, js, k);
		if (rc)
			return rc;
	}
	return walk_end(e, js, input, anchor);
}

/* Token ids of array token a, each as decimal followed by US. */
static int emit_token_ids(struct pg_text *e, const struct pg_json *js, uint32_t a)
{
	uint32_t k = pg_json_first(a);
	char dec[PG_DIGITS_MAX], *d;
	int64_t v;

	for (uint32_t n = 0; n < js->tok[a].size; n++, k = js->tok[k].next) {
		if (pg_text_full(e))
			return 0;
		if (js->tok[k].type != PG_JSON_NUMBER || pg_json_get_i64(js, k, &v))
			return -1;
		d = pg_digits(dec + sizeof(dec), v < 0 ? -(uint64_t)v : (uint64_t)v, 10);
		if (v < 0)
			*--d = '-';
		pg_text_ascii(e, d, (size_t)(dec + sizeof(dec) - d));
		pg_text_cp(e, PG_KEY_US);
	}
	return walk_end(e, js, a, false);
}

static int completion_text(struct pg_text *e, const struct pg_json *js, int64_t p)
{
	uint32_t k, n, size;
	uint8_t first;
	int rc;

	if (is_type(js, p, PG_JSON_STRING)) {
		pg_text_string(e, js, (uint32_t)p);
		return 0;
	}
	if (!is_type(js, p, PG_JSON_ARRAY))
		return -1;
	size = js->tok[p].size;
	if (!size)
		return 0;
	first = js->tok[p + 1].type;
	if (first == PG_JSON_NUMBER)
		return emit_token_ids(e, js, (uint32_t)p);
	k = pg_json_first((uint32_t)p);
	for (n = 0; n < size; n++, k = js->tok[k].next) {
		if (pg_text_full(e))
			return 0;
		if (js->tok[k].type != first)
			return -1;
		if (n)
			pg_text_cp(e, PG_KEY_RS);
		if (first == PG_JSON_STRING)
			pg_text_string(e, js, k);
		else if (first != PG_JSON_ARRAY)
			return -1;
		else if ((rc = emit_token_ids(e, js, k)))
			return rc;
	}
	return walk_end(e, js, p, false);
}

static void key_out(struct pg_key *out, enum pg_key_source src, const char *p, size_t len,
                    uint32_t length, char *text, size_t text_cap, size_t *text_len)
{
	out->hash = XXH3_64bits(p, len);
	out->length = length;
	out->source = (uint8_t)src;
	if (text && text_cap)
		memcpy(text, p, len < text_cap ? len : text_cap);
	if (text_len)
		*text_len = len;
}

/* An explicit key from the body: the whole unescaped string token i. */
static int explicit_out(struct pg_key *out, enum pg_key_source src, const struct pg_json *js,
                        int64_t i, char *text, size_t text_cap, size_t *text_len,
                        struct pg_key_blocks *kb)
{
	size_t n = js->tok[i].end - js->tok[i].start; /* unescaped is no longer */
	char *buf = malloc(n);

	if (!buf)
		return -1;
	n = pg_json_str_copy(js, (uint32_t)i, buf, n);
	key_out(out, src, buf, n, n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, text, text_cap,
	        text_len);
	if (kb)
		*kb = (struct pg_key_blocks){.anchor = out->hash, .whole = out->hash};
	free(buf);
	return 0;
}

static bool nonempty_string(const struct pg_json *js, int64_t i)
{
	return is_type(js, i, PG_JSON_STRING) && js->tok[i].end > js->tok[i].start;
}

/* Where each API's key text comes from (names.c labels them). */
static const uint8_t api_source[] = {
    [PG_API_CHAT] = PG_KEY_SRC_MESSAGES,    [PG_API_COMPLETIONS] = PG_KEY_SRC_PROMPT,
    [PG_API_RESPONSES] = PG_KEY_SRC_INPUT,  [PG_API_MESSAGES] = PG_KEY_SRC_MESSAGES,
    [PG_API_EMBEDDINGS] = PG_KEY_SRC_INPUT,
};

/* Keys from the parsed body: 0 done, -1 the body cannot be used,
 * WALK_WHOLE the walk needs elements the windowed parse left out. kb: also
 * cache_aware's blocks and anchor (then the text runs past prefix_length). */
static int json_key(enum pg_api api, const struct pg_json *js, uint32_t prefix_length,
                    struct pg_key *out, char *text, size_t text_cap, size_t *text_len,
                    struct pg_key_blocks *kb, struct pg_key_scratch *ks)
{
	/* clang-format off */
	enum { CK, ST, TOOLS, MSGS, PROMPT, SYSTEM, INSTR, INPUT, PREV,
	       MAXT, MAXC, MAXO, USER, NFIELD }; /* MAXT..MAXO: in that order */
	/* clang-format on */
	static const struct pg_json_name top_names[] = {[CK] = {"prompt_cache_key", 16},
	                                                [ST] = {"stream", 6},
	                                                [TOOLS] = {"tools", 5},
	                                                [MSGS] = {"messages", 8},
	                                                [PROMPT] = {"prompt", 6},
	                                                [SYSTEM] = {"system", 6},
	                                                [INSTR] = {"instructions", 12},
	                                                [INPUT] = {"input", 5},
	                                                [PREV] = {"previous_response_id", 20},
	                                                [MAXT] = {"max_tokens", 10},
	                                                [MAXC] = {"max_completion_tokens", 21},
	                                                [MAXO] = {"max_output_tokens", 17},
	                                                [USER] = {"user", 4}};
	struct pg_text e = {
	    .buf = ks->text, .cap = ks->text_cap, .limit = text_limit(kb != NULL, prefix_length)};
	int64_t f[NFIELD];
	int rc;

	if (!pg_json_find_fixed(js, 0, top_names, NFIELD, f))
		return -1;
	/* Not part of the key: tells the data path the response will stream;
	 * flow control's cost and tenant (flow.h). */
	out->stream = is_type(js, f[ST], PG_JSON_TRUE);
	pg_key_flow_fields(js, &f[MAXT], f[USER], out);
	/* prompt_cache_key where the API has it (Anthropic's and the embeddings
	 * API have none); then a Responses chain's previous_response_id. */
	if (api != PG_API_MESSAGES && api != PG_API_EMBEDDINGS && nonempty_string(js, f[CK]))
		return explicit_out(out, PG_KEY_SRC_CACHE_FIELD, js, f[CK], text, text_cap,
		                    text_len, kb);
	if (api == PG_API_RESPONSES && nonempty_string(js, f[PREV]))
		return explicit_out(out, PG_KEY_SRC_PREVIOUS_RESPONSE, js, f[PREV], text, text_cap,
		                    text_len, kb);
	/* The whole text is wanted: one allocation of about the body's size
	 * (the text is rarely longer, and never more than 4 bytes a code
	 * point) instead of doubling up to it. */
	if (kb) {
		pg_text_reserve(
		    &e, (js->len < 4 * (size_t)e.limit ? js->len : 4 * (size_t)e.limit) + 64);
		pg_text_mark(&e, 0, prefix_length); /* where the PREFIX_AWARE key ends */
	}
	switch (api) {
	case PG_API_CHAT:
		rc = chat_text(&e, js, f[TOOLS], -1, f[MSGS], kb, prefix_length);
		break;
	case PG_API_MESSAGES:
		rc = chat_text(&e, js, f[TOOLS], f[SYSTEM], f[MSGS], kb, prefix_length);
		break;
	case PG_API_RESPONSES:
		rc = responses_text(&e, js, f[TOOLS], f[INSTR], f[INPUT], kb, prefix_length);
		break;
	default:
		rc = completion_text(&e, js, f[api == PG_API_EMBEDDINGS ? INPUT : PROMPT]);
	}
	if (rc == -1)
		rc = walk_failed(&e);
	if (rc == WALK_STOP)
		rc = 0;
	if (!rc && !e.oom) {
		const char *t = e.buf ? e.buf : "";
		size_t cut = kb ? pg_text_mark_offset(&e, 0) : e.len;

		key_out(out, (enum pg_key_source)api_source[api], t, cut,
		        e.ncp < prefix_length ? e.ncp : prefix_length, text, text_cap, text_len);
		if (kb) {
			/* What precedes the first user message, then up to
			 * PrefixLength code points of it (key.h). */
			size_t anchor = cut;

			if (e.user_seen) {
				anchor = pg_text_mark_offset(&e, 1);
				if (e.user_done && e.user_end < anchor)
					anchor = e.user_end;
			}
			pg_key_blocks_of(kb, t, e.len, anchor);
		}
	}
	ks->text = e.buf; /* kept for the next key (scratch_trim) */
	ks->text_cap = e.cap;
	return rc == WALK_WHOLE ? rc : rc || e.oom ? -1 : 0;
}

size_t pg_key_window(bool blocks, uint32_t prefix_length)
{
	return 4 * (size_t)text_limit(blocks, prefix_length) + 1024;
}

/* The key of a whole JSON body: 0, or -1 when the body cannot be used.
 * The text stops at its limit: long arrays are tokenized only as far as it
 * is likely to reach (4 bytes a code point: text in any script, with its
 * JSON around it), and the body parsed again with a window 8 times larger
 * when that was not enough (arrays that hold more than text: images, tool
 * calls), so the key is always that of the whole parse (json.h). A parse
 * made as the body arrived (pre), with the same window over the same
 * bytes, is that first parse. */
static int json_body_key(enum pg_api api, const char *body, size_t body_len,
                         const struct pg_json_stream *pre, uint32_t prefix_length,
                         struct pg_key *out, char *text, size_t text_cap, size_t *text_len,
                         struct pg_key_blocks *kb, struct pg_key_scratch *ks)
{
	size_t window = pg_key_window(kb != NULL, prefix_length);
	struct pg_json *js = &ks->js;
	const struct pg_json *p;
	int rc = -1;

	if (pre && pre->rc <= 0 && pre->js.window == window && pre->js.src == body &&
	    pre->js.len == body_len) {
		out->ahead = true;
		p = pre->rc ? NULL : &pre->js;
	} else {
		p = pg_json_parse_window(js, body, body_len, window) ? NULL : js;
	}
	while (p && (rc = json_key(api, p, prefix_length, out, text, text_cap, text_len, kb, ks)) ==
	                WALK_WHOLE) {
		rc = -1;
		if (!window)
			break;
		window = window >= body_len / 8 ? 0 : window * 8;
		p = pg_json_parse_window(js, body, body_len, window) ? NULL : js;
	}
	return rc;
}

/* Free what the scratch holds past keep bytes a buffer: after a key,
 * what a rare huge body grew past PG_SPARE_KEEP; a scratch of one key
 * only, or at the end, all (0). */
static void scratch_trim(struct pg_key_scratch *ks, size_t keep)
{
	if (ks->text_cap > keep) {
		free(ks->text);
		ks->text = NULL;
		ks->text_cap = 0;
	}
	if (pg_json_tok_bytes(&ks->js) > keep)
		pg_json_free(&ks->js);
}

/* The prompt's size in tokens, estimated: its text where the key has all
 * of it, else the body's bytes (raw bodies, explicit keys, texts past the
 * blocks' limit). */
static uint32_t prompt_tokens(const struct pg_key *k, size_t body_len, uint32_t prefix_length,
                              const struct pg_key_blocks *kb)
{
	uint64_t bytes = body_len, t;

	if (kb && pg_key_source_text(k->source) && kb->text_len < text_limit(true, prefix_length))
		bytes = kb->text_len;
	t = bytes / PG_CA_CHARS_PER_TOKEN;
	return t < 1 ? 1 : t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

/* The key of one request, and with kb cache_aware's blocks and anchor
 * (key.h); out->anchor is the blocks' anchor, or the key's hash without. */
static void key_compute(enum pg_api api, struct pg_str header_key, const char *body,
                        size_t body_len, bool complete, const struct pg_json_stream *pre,
                        uint32_t prefix_length, struct pg_key *out, char *text, size_t text_cap,
                        size_t *text_len, struct pg_key_blocks *kb, struct pg_key_scratch *ks)
{
	struct pg_key_scratch own = {0}; /* no caller's: freed at the end */

	if (!ks)
		ks = &own;
	memset(out, 0, sizeof(*out));
	if (!body)
		body = "";
	if (header_key.len) {
		key_out(out, PG_KEY_SRC_HEADER, header_key.p, header_key.len,
		        header_key.len > UINT32_MAX ? UINT32_MAX : (uint32_t)header_key.len, text,
		        text_cap, text_len);
		if (kb)
			*kb = (struct pg_key_blocks){.anchor = out->hash, .whole = out->hash};
	} else if (api == PG_API_RAW || !complete ||
	           json_body_key(api, body, body_len, pre, prefix_length, out, text, text_cap,
	                         text_len, kb, ks)) {
		/* its raw bytes: no JSON to key on, not all of it, or unusable;
		 * cache_aware's blocks run past the key, as they do over a text */
		size_t n = body_len < prefix_length ? body_len : prefix_length,
		       nb = body_len < text_limit(true, prefix_length)
		                ? body_len
		                : text_limit(true, prefix_length);

		out->fallback = api != PG_API_RAW;
		key_out(out, PG_KEY_SRC_RAW, body, n, (uint32_t)n, text, text_cap, text_len);
		if (kb)
			pg_key_blocks_of(kb, body, nb, n);
	}
	out->anchor = kb ? kb->anchor : out->hash;
	out->tokens = prompt_tokens(out, body_len, prefix_length, kb);
	scratch_trim(ks, ks == &own ? 0 : PG_SPARE_KEEP);
}

int pg_key_compute(enum pg_api api, struct pg_str header_key, const char *body, size_t body_len,
                   bool complete, uint32_t prefix_length, struct pg_key *out, char *text,
                   size_t text_cap, size_t *text_len)
{
	key_compute(api, header_key, body, body_len, complete, NULL, prefix_length, out, text,
	            text_cap, text_len, NULL, NULL);
	return 0;
}

int pg_key_compute_ahead(enum pg_api api, struct pg_str header_key, const char *body,
                         size_t body_len, bool complete, const struct pg_json_stream *pre,
                         uint32_t prefix_length, struct pg_key *out, struct pg_key_blocks *kb,
                         struct pg_key_scratch *ks)
{
	key_compute(api, header_key, body, body_len, complete, pre, prefix_length, out, NULL, 0,
	            NULL, kb, ks);
	return 0;
}

void pg_key_scratch_free(struct pg_key_scratch *ks)
{
	scratch_trim(ks, 0);
}
