// SPDX-License-Identifier: MIT
/*
 * Prefix-key extraction (see key.h for the contract and the key text's
 * grammar). The body is parsed whole (it must be valid JSON for the key to
 * be its text), then the text is produced code point by code point into a
 * buffer until prefix_length code points, and hashed with XXH3-64.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
/* libxxhash's run-time choice of SSE2, AVX2 or AVX-512 for XXH3 (the same
 * hashes; half the instructions per block with AVX2). */
#include <xxh_x86dispatch.h>
#endif
#include "lib/json.h"
#include "lib/key.h"

struct emit {
	char *buf;
	size_t len, cap;
	uint32_t ncp, limit; /* code points written, and the most allowed */
	bool oom;
	bool nonascii; /* a code point above U+007F was written */
	/* The first message whose role is "user": where it starts, and its end
	 * (past its RS) once written (cache_aware's anchor, key.h). */
	bool user_seen, user_done;
	size_t user_start, user_end;
};

static bool emit_full(const struct emit *e)
{
	return e->ncp >= e->limit || e->oom;
}

static bool emit_reserve(struct emit *e, size_t n)
{
	size_t ncap;
	char *b;

	if (e->len + n <= e->cap)
		return true;
	ncap = e->cap ? e->cap : 256;
	while (ncap < e->len + n)
		ncap *= 2;
	b = realloc(e->buf, ncap);
	if (!b) {
		e->oom = true;
		return false;
	}
	e->buf = b;
	e->cap = ncap;
	return true;
}

static void emit_cp(struct emit *e, uint32_t cp)
{
	if (emit_full(e) || !emit_reserve(e, 4))
		return;
	e->nonascii |= cp > 0x7f;
	e->len += pg_utf8_encode(cp, e->buf + e->len);
	e->ncp++;
}

static void emit_ascii(struct emit *e, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		emit_cp(e, (unsigned char)s[i]);
}

/* A code point of role/content/prompt text: the separators and the escape
 * itself are prefixed with PG_KEY_ESC, so they cannot be confused with real
 * separators. */
static void emit_text_cp(struct emit *e, uint32_t cp)
{
	if (cp == PG_KEY_ESC || cp == PG_KEY_US || cp == PG_KEY_RS || cp == PG_KEY_GS)
		emit_cp(e, PG_KEY_ESC);
	emit_cp(e, cp);
}

/* Raw string bytes s[0..n) that hold no backslash: valid UTF-8 without
 * control characters (JSON guarantees it), so nothing to escape; copied in
 * one go up to the code point limit. ascii: no byte above 0x7f. */
static void emit_run(struct emit *e, const unsigned char *s, size_t n, bool ascii)
{
	uint32_t room = e->limit - e->ncp, cps = 0;
	size_t cut;

	if (emit_full(e))
		return;
	if (ascii) {
		cut = n < room ? n : room;
		cps = (uint32_t)cut;
	} else {
		for (cut = 0; cut < n; cut++) {
			if ((s[cut] & 0xc0) == 0x80)
				continue;
			if (cps == room)
				break;
			cps++;
		}
	}
	if (!cut || !emit_reserve(e, cut))
		return;
	e->nonascii |= !ascii;
	memcpy(e->buf + e->len, s, cut);
	e->len += cut;
	e->ncp += cps;
}

/* The unescaped text of string token i: runs between backslashes are
 * copied whole, escapes decoded one by one. */
static void emit_text(struct emit *e, const struct pg_json *js, uint32_t i)
{
	const struct pg_json_tok *t = &js->tok[i];
	const unsigned char *s = (const unsigned char *)js->src;
	bool ascii = !(t->flags & PG_JSON_F_NONASCII);
	size_t pos = t->start;
	const unsigned char *bs;

	if (!(t->flags & PG_JSON_F_ESCAPED)) {
		emit_run(e, s + pos, t->end - pos, ascii);
		return;
	}
	while (pos < t->end && !emit_full(e)) {
		bs = memchr(s + pos, '\\', t->end - pos);
		if (!bs) {
			emit_run(e, s + pos, t->end - pos, ascii);
			return;
		}
		emit_run(e, s + pos, (size_t)(bs - s) - pos, ascii);
		pos = (size_t)(bs - s);
		if (!emit_full(e))
			emit_text_cp(e, pg_json_str_next(js, &pos));
	}
}

/* A string in canonical JSON form: quotes, only '"', '\\' and control
 * characters escaped (short forms where JSON has them). */
static void emit_json_string(struct emit *e, const struct pg_json *js, uint32_t i)
{
	static const char hex[] = "0123456789abcdef";
	size_t pos = js->tok[i].start;
	uint32_t cp;

	emit_cp(e, '"');
	while (pos < js->tok[i].end && !emit_full(e)) {
		cp = pg_json_str_next(js, &pos);
		switch (cp) {
		case '"':
		case '\\':
			emit_cp(e, '\\');
			emit_cp(e, cp);
			break;
		case '\b':
			emit_ascii(e, "\\b", 2);
			break;
		case '\f':
			emit_ascii(e, "\\f", 2);
			break;
		case '\n':
			emit_ascii(e, "\\n", 2);
			break;
		case '\r':
			emit_ascii(e, "\\r", 2);
			break;
		case '\t':
			emit_ascii(e, "\\t", 2);
			break;
		default:
			if (cp >= 0x20) {
				emit_cp(e, cp);
				break;
			}
			emit_ascii(e, "\\u00", 4);
			emit_cp(e, hex[cp >> 4]);
			emit_cp(e, hex[cp & 15]);
		}
	}
	emit_cp(e, '"');
}

static int cmp_names(const void *a, const void *b, void *arg)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int r = pg_json_str_cmp(arg, x, y);

	return r ? r : (x > y) - (x < y);
}

/*
 * Canonical serialization of the value at token i: no whitespace, object
 * members sorted by unescaped name (ties in document order), strings as
 * emit_json_string(), numbers and literals as written. scratch has room for
 * one index per token; each object uses the part above *sp while its
 * members are written (objects' member sets are disjoint, so it suffices).
 */
static void emit_canonical(struct emit *e, const struct pg_json *js, uint32_t i, uint32_t *scratch,
                           uint32_t sp)
{
	const struct pg_json_tok *t = &js->tok[i];
	uint32_t k = pg_json_first(i), n;

	if (emit_full(e))
		return;
	switch (t->type) {
	case PG_JSON_OBJECT:
		for (n = 0; n < t->size; n++, k = pg_json_member_next(js, k))
			scratch[sp + n] = k;
		qsort_r(scratch + sp, t->size, sizeof(*scratch), cmp_names, (void *)js);
		emit_cp(e, '{');
		for (n = 0; n < t->size && !emit_full(e); n++) {
			if (n)
				emit_cp(e, ',');
			emit_json_string(e, js, scratch[sp + n]);
			emit_cp(e, ':');
			emit_canonical(e, js, scratch[sp + n] + 1, scratch, sp + t->size);
		}
		emit_cp(e, '}');
		break;
	case PG_JSON_ARRAY:
		emit_cp(e, '[');
		for (n = 0; n < t->size && !emit_full(e); n++, k = js->tok[k].next) {
			if (n)
				emit_cp(e, ',');
			emit_canonical(e, js, k, scratch, sp);
		}
		emit_cp(e, ']');
		break;
	case PG_JSON_STRING:
		emit_json_string(e, js, i);
		break;
	default:
		emit_ascii(e, js->src + t->start, t->end - t->start);
	}
}

static bool is_type(const struct pg_json *js, int64_t i, enum pg_json_type type)
{
	return i >= 0 && js->tok[i].type == type;
}

static bool absent(const struct pg_json *js, int64_t i)
{
	return i < 0 || js->tok[i].type == PG_JSON_NULL;
}

/* Content: a string, or parts whose "text" (type "text") are joined by GS. */
static int emit_content(struct emit *e, const struct pg_json *js, int64_t c)
{
	static const struct pg_json_name part_names[] = {{"type", 4}, {"text", 4}};
	uint32_t k = pg_json_first((uint32_t)c), n, ntext = 0;
	int64_t type, text, f[2];

	if (absent(js, c))
		return 0;
	if (is_type(js, c, PG_JSON_STRING)) {
		emit_text(e, js, (uint32_t)c);
		return 0;
	}
	if (!is_type(js, c, PG_JSON_ARRAY))
		return -1;
	for (n = 0; n < js->tok[c].size; n++, k = js->tok[k].next) {
		if (!pg_json_find_n(js, k, part_names, 2, f))
			return -1;
		type = f[0];
		text = f[1];
		if (!is_type(js, type, PG_JSON_STRING) ||
		    !pg_json_str_eq(js, (uint32_t)type, "text", 4))
			continue;
		if (!is_type(js, text, PG_JSON_STRING))
			return -1;
		if (ntext++)
			emit_cp(e, PG_KEY_GS);
		emit_text(e, js, (uint32_t)text);
	}
	return 0;
}

static int chat_text(struct emit *e, const struct pg_json *js, int64_t tools, int64_t msgs)
{
	static const struct pg_json_name msg_names[] = {{"role", 4}, {"content", 7}};
	int64_t f[2], role;
	uint32_t k, n, *scratch;

	if (!is_type(js, msgs, PG_JSON_ARRAY))
		return -1;
	if (!absent(js, tools)) {
		scratch = malloc(sizeof(*scratch) * js->ntok);
		if (!scratch)
			return -1;
		emit_canonical(e, js, (uint32_t)tools, scratch, 0);
		free(scratch);
		emit_cp(e, PG_KEY_RS);
	}
	k = pg_json_first((uint32_t)msgs);
	for (n = 0; n < js->tok[msgs].size; n++, k = js->tok[k].next) {
		if (!pg_json_find_n(js, k, msg_names, 2, f))
			return -1;
		role = f[0];
		if (is_type(js, role, PG_JSON_STRING)) {
			if (!e->user_seen && pg_json_str_eq(js, (uint32_t)role, "user", 4)) {
				e->user_seen = true;
				e->user_start = e->len;
			}
			emit_text(e, js, (uint32_t)role);
		} else if (!absent(js, role)) {
			return -1;
		}
		emit_cp(e, PG_KEY_US);
		if (emit_content(e, js, f[1]))
			return -1;
		emit_cp(e, PG_KEY_RS);
		if (e->user_seen && !e->user_done) {
			e->user_done = true;
			e->user_end = e->len;
		}
	}
	return 0;
}

/* Token ids of array token a, each as decimal followed by US. */
static int emit_token_ids(struct emit *e, const struct pg_json *js, uint32_t a)
{
	uint32_t k = pg_json_first(a);
	char dec[24];
	int64_t v;

	for (uint32_t n = 0; n < js->tok[a].size; n++, k = js->tok[k].next) {
		uint64_t u;
		size_t len = 0;

		if (js->tok[k].type != PG_JSON_NUMBER || pg_json_get_i64(js, k, &v))
			return -1;
		if (emit_full(e))
			continue; /* still validate the rest */
		u = v < 0 ? -(uint64_t)v : (uint64_t)v;
		do
			dec[sizeof(dec) - ++len] = (char)('0' + u % 10);
		while (u /= 10);
		if (v < 0)
			dec[sizeof(dec) - ++len] = '-';
		emit_ascii(e, dec + sizeof(dec) - len, len);
		emit_cp(e, PG_KEY_US);
	}
	return 0;
}

static int completion_text(struct emit *e, const struct pg_json *js, int64_t p)
{
	uint32_t k, n, size;
	uint8_t first;

	if (is_type(js, p, PG_JSON_STRING)) {
		emit_text(e, js, (uint32_t)p);
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
		if (js->tok[k].type != first)
			return -1;
		if (n)
			emit_cp(e, PG_KEY_RS);
		if (first == PG_JSON_STRING)
			emit_text(e, js, k);
		else if (first != PG_JSON_ARRAY || emit_token_ids(e, js, k))
			return -1;
	}
	return 0;
}

enum pg_api pg_key_api(struct pg_str method, struct pg_str path)
{
	static const char chat[] = "/v1/chat/completions", compl [] = "/v1/completions";

	if (method.len != 4 || memcmp(method.p, "POST", 4))
		return PG_API_RAW;
	if (path.len == sizeof(chat) - 1 && !memcmp(path.p, chat, path.len))
		return PG_API_CHAT;
	if (path.len == sizeof(compl ) - 1 && !memcmp(path.p, compl, path.len))
		return PG_API_COMPLETIONS;
	return PG_API_RAW;
}

size_t pg_key_body_need(enum pg_api api, uint32_t prefix_length)
{
	return api == PG_API_RAW ? prefix_length : PG_KEY_JSON_BODY_MAX;
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

/* Byte offset in buf[0..len) after ncp code points from offset from
 * (ascii: buf holds no multi-byte sequence, so bytes are code points). */
static size_t cp_offset(const char *buf, size_t len, size_t from, uint32_t ncp, bool ascii)
{
	size_t i = from;

	if (ascii)
		return len - from < ncp ? len : from + ncp;

	for (; i < len; i++) {
		if (((unsigned char)buf[i] & 0xc0) == 0x80)
			continue;
		if (!ncp)
			break;
		ncp--;
	}
	return i;
}

/* The chain hashes of whole blocks of t[0..n), never 0 (an empty slot).
 * (XXH3 seeded with the previous hash; hashing the prefix with XXH3's
 * streaming state and a digest per block took 40% more instructions,
 * callgrind over tools/routebench.) */
static uint32_t block_chain(const char *t, size_t n, uint64_t *chain)
{
	uint64_t h = 0;
	uint32_t k = 0;

	for (; k < PG_CA_MAX_BLOCKS && (size_t)(k + 1) * PG_CA_BLOCK <= n; k++) {
		h = XXH3_64bits_withSeed(t + (size_t)k * PG_CA_BLOCK, PG_CA_BLOCK, h);
		chain[k] = h ? h : 1;
	}
	return k;
}

/* cache_aware's view of a key text t[0..n): prefix_end ends the
 * PREFIX_AWARE key; the anchor runs to anchor_end. */
static void blocks_out(struct pg_key_blocks *kb, const char *t, size_t n, size_t anchor_end)
{
	kb->anchor = XXH3_64bits(t, anchor_end);
	kb->anchor_len = (uint32_t)anchor_end;
	kb->n = block_chain(t, n, kb->chain);
}

/* Keys from the parsed body: 0 done, -1 the body cannot be used. kb: also
 * cache_aware's blocks and anchor (then the text runs past prefix_length). */
static int json_key(enum pg_api api, const struct pg_json *js, uint32_t prefix_length,
                    struct pg_key *out, char *text, size_t text_cap, size_t *text_len,
                    struct pg_key_blocks *kb)
{
	enum { CK, ST, TOOLS, MSGS, PROMPT };
	static const struct pg_json_name top_names[] = {
	    [CK] = {"prompt_cache_key", 16}, [ST] = {"stream", 6}, [TOOLS] = {"tools", 5},
	    [MSGS] = {"messages", 8},        [PROMPT] = {"prompt", 6}};
	struct emit e = {.limit = kb ? PG_CA_MAX_BLOCKS * PG_CA_BLOCK : prefix_length};
	int64_t f[5], ck, st;
	int rc;

	if (!pg_json_find_n(js, 0, top_names, 5, f))
		return -1;
	ck = f[CK];
	st = f[ST];
	/* Not part of the key: tells the data path the response will stream. */
	out->stream = is_type(js, st, PG_JSON_TRUE);
	if (is_type(js, ck, PG_JSON_STRING) && js->tok[ck].end > js->tok[ck].start) {
		size_t n = js->tok[ck].end - js->tok[ck].start; /* unescaped is no longer */
		char *buf = malloc(n);

		if (!buf)
			return -1;
		n = pg_json_str_copy(js, (uint32_t)ck, buf, n);
		key_out(out, PG_KEY_SRC_CACHE_FIELD, buf, n,
		        n > UINT32_MAX ? UINT32_MAX : (uint32_t)n, text, text_cap, text_len);
		if (kb)
			*kb = (struct pg_key_blocks){.anchor = out->hash, .anchor_len = 0, .n = 0};
		free(buf);
		return 0;
	}
	/* The whole text is wanted: one allocation of about the body's size
	 * (the text is rarely longer) instead of doubling up to it. */
	if (kb)
		emit_reserve(&e, js->len + 64);
	rc = api == PG_API_CHAT ? chat_text(&e, js, f[TOOLS], f[MSGS])
	                        : completion_text(&e, js, f[PROMPT]);
	if (!rc && !e.oom) {
		const char *t = e.buf ? e.buf : "";
		size_t cut = kb ? cp_offset(t, e.len, 0, prefix_length, !e.nonascii) : e.len;

		key_out(out, PG_KEY_SRC_MESSAGES, t, cut,
		        e.ncp < prefix_length ? e.ncp : prefix_length, text, text_cap, text_len);
		if (kb) {
			/* What precedes the first user message, then up to
			 * PrefixLength code points of it (key.h). */
			size_t anchor = cut;

			if (e.user_seen) {
				anchor = cp_offset(t, e.len, e.user_start, prefix_length,
				                   !e.nonascii);
				if (e.user_done && e.user_end < anchor)
					anchor = e.user_end;
			}
			blocks_out(kb, t, e.len, anchor);
		}
	}
	free(e.buf);
	return rc || e.oom ? -1 : 0;
}

static int key_compute(enum pg_api api, struct pg_str header_key, const char *body,
                       size_t body_len, bool complete, uint32_t prefix_length, struct pg_key *out,
                       char *text, size_t text_cap, size_t *text_len, struct pg_key_blocks *kb)
{
	struct pg_json js = {0};
	size_t n;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (header_key.len) {
		key_out(out, PG_KEY_SRC_HEADER, header_key.p, header_key.len,
		        header_key.len > UINT32_MAX ? UINT32_MAX : (uint32_t)header_key.len, text,
		        text_cap, text_len);
		if (kb)
			*kb = (struct pg_key_blocks){.anchor = out->hash, .anchor_len = 0, .n = 0};
		return 0;
	}
	if (api != PG_API_RAW) {
		if (complete && !pg_json_parse(&js, body ? body : "", body_len))
			rc = json_key(api, &js, prefix_length, out, text, text_cap, text_len, kb);
		pg_json_free(&js);
		if (!rc)
			return 0;
		out->fallback = true;
	}
	n = body_len < prefix_length ? body_len : prefix_length;
	key_out(out, PG_KEY_SRC_RAW, body ? body : "", n, (uint32_t)n, text, text_cap, text_len);
	if (kb)
		blocks_out(kb, body ? body : "", n, n);
	return 0;
}

int pg_key_compute(enum pg_api api, struct pg_str header_key, const char *body, size_t body_len,
                   bool complete, uint32_t prefix_length, struct pg_key *out, char *text,
                   size_t text_cap, size_t *text_len)
{
	key_compute(api, header_key, body, body_len, complete, prefix_length, out, text, text_cap,
	            text_len, NULL);
	out->anchor = out->hash;
	return 0;
}

int pg_key_compute_blocks(enum pg_api api, struct pg_str header_key, const char *body,
                          size_t body_len, bool complete, uint32_t prefix_length,
                          struct pg_key *out, struct pg_key_blocks *kb)
{
	key_compute(api, header_key, body, body_len, complete, prefix_length, out, NULL, 0, NULL,
	            kb);
	out->anchor = kb->anchor;
	return 0;
}
