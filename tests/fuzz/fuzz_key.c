// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over user/lib/key.c (and the json.c under it).
 *
 * Input: two control bytes, then the body.
 *   byte 0: bits 0-1 API (0 raw, 1 chat, 2 completions, 3: byte 1 mod 4
 *           picks raw, responses, messages or embeddings), bit 2 body
 *           incomplete, bit 3 the body starts with an X-Prefixgate-Key value
 *           ended by '\n', bits 4-7 the high bits of prefix_length
 *   byte 1: low bits of prefix_length (1..4096)
 *
 * Invariants: the hash is XXH3-64 of the key text; a raw key is the first
 * prefix_length body bytes, a header key the header value; a message key
 * (any text source) is valid UTF-8 of `length` <= prefix_length code points; a longer
 * prefix_length gives the same source (or, past a complete shorter key
 * text, a fallback) and a key text the shorter one is a prefix of (equal when the shorter was not
 * cut, else cut after exactly prefix_length code points, at a code point boundary); an incomplete
 * OpenAI body falls back to raw. For a usable OpenAI body, the same JSON re-serialized with other
 * whitespace and, in objects without duplicate names, members in reverse order gives the same key.
 */
#include <stdbool.h>
#include <string.h>
#include <xxhash.h>
#include "fuzz.h"
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/key.h"

struct keyrun {
	struct pg_key k;
	char *text;
	size_t len;
};

/* cache_aware's view: the same key, blocks chained over a key text that
 * the PREFIX_AWARE one is a prefix of, an anchor of at least that much. */
static void check_blocks(enum pg_api api, struct pg_str hk, const char *body, size_t blen,
                         bool complete, uint32_t prefix, const struct keyrun *r)
{
	static struct pg_key_blocks kb;
	struct pg_key k;
	uint64_t h = 0;

	FUZZ_CHECK(pg_key_compute_blocks(api, hk, blen ? body : NULL, blen, complete, prefix, &k,
	                                 &kb) == 0);
	FUZZ_CHECK(k.hash == r->k.hash && k.length == r->k.length && k.source == r->k.source);
	FUZZ_CHECK(k.fallback == r->k.fallback && k.anchor == kb.anchor);
	FUZZ_CHECK(kb.n <= PG_CA_MAX_BLOCKS);
	if (pg_key_source_explicit(k.source)) {
		FUZZ_CHECK(kb.n == 0 && kb.anchor == k.hash);
		return;
	}
	FUZZ_CHECK(kb.anchor_len >= r->len || pg_key_source_text(k.source));
	/* The blocks that lie inside the PREFIX_AWARE key text are its bytes. */
	for (uint32_t i = 0; i < kb.n && (size_t)(i + 1) * PG_CA_BLOCK <= r->len; i++) {
		h = pg_key_chain_next(h, r->text + (size_t)i * PG_CA_BLOCK);
		FUZZ_CHECK(kb.chain[i] == (h ? h : 1));
	}
}

static void compute(enum pg_api api, struct pg_str hk, const char *body, size_t blen, bool complete,
                    uint32_t prefix, struct keyrun *r)
{
	size_t cap = 4 * (size_t)prefix + blen + hk.len + 16;

	r->text = malloc(cap);
	FUZZ_CHECK(r->text);
	r->len = (size_t)-1;
	FUZZ_CHECK(pg_key_compute(api, hk, blen ? body : NULL, blen, complete, prefix, &r->k,
	                          r->text, cap, &r->len) == 0);
	FUZZ_CHECK(r->len <= cap);
	FUZZ_CHECK(r->k.hash == XXH3_64bits(r->text, r->len));
	FUZZ_CHECK(r->k.source < PG_KEY_SRC_COUNT);
	check_blocks(api, hk, body, blen, complete, prefix, r);
}

/* Code points of valid UTF-8 s[0..n), or (size_t)-1 if it is not valid. */
static size_t utf8_count(const unsigned char *s, size_t n)
{
	size_t cps = 0;

	for (size_t i = 0; i < n; cps++) {
		unsigned c = s[i], k = c < 0x80 ? 0 : c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
		uint32_t cp = k == 0 ? c : k == 1 ? c & 0x1f : k == 2 ? c & 0x0f : c & 0x07;

		if ((c >= 0x80 && c < 0xc2) || c > 0xf4 || n - i <= k)
			return (size_t)-1;
		for (unsigned j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return (size_t)-1;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return (size_t)-1;
		i += k + 1;
	}
	return cps;
}

static void check_one(enum pg_api api, struct pg_str hk, const char *body, size_t blen,
                      bool complete, uint32_t prefix, const struct keyrun *r)
{
	const struct pg_key *k = &r->k;

	switch (k->source) {
	case PG_KEY_SRC_HEADER:
		FUZZ_CHECK(hk.len && r->len == hk.len && !memcmp(r->text, hk.p, hk.len));
		FUZZ_CHECK(k->length == hk.len && !k->fallback);
		break;
	case PG_KEY_SRC_RAW: {
		size_t n = blen < prefix ? blen : prefix;

		FUZZ_CHECK(!hk.len);
		FUZZ_CHECK(r->len == n && k->length == n && !memcmp(r->text, body, n));
		FUZZ_CHECK(k->fallback == (api != PG_API_RAW));
		break;
	}
	case PG_KEY_SRC_MESSAGES:
	case PG_KEY_SRC_PROMPT:
	case PG_KEY_SRC_INPUT:
		FUZZ_CHECK(!hk.len && api != PG_API_RAW && complete && !k->fallback);
		FUZZ_CHECK(k->source == (api == PG_API_CHAT || api == PG_API_MESSAGES
		                             ? PG_KEY_SRC_MESSAGES
		                         : api == PG_API_COMPLETIONS ? PG_KEY_SRC_PROMPT
		                                                     : PG_KEY_SRC_INPUT));
		FUZZ_CHECK(k->length <= prefix);
		FUZZ_CHECK(utf8_count((const unsigned char *)r->text, r->len) == k->length);
		break;
	case PG_KEY_SRC_CACHE_FIELD:
	case PG_KEY_SRC_PREVIOUS_RESPONSE:
		FUZZ_CHECK(!hk.len && api != PG_API_RAW && complete && !k->fallback);
		FUZZ_CHECK(r->len > 0 && k->length == r->len);
		FUZZ_CHECK(k->source == PG_KEY_SRC_CACHE_FIELD
		               ? api != PG_API_MESSAGES && api != PG_API_EMBEDDINGS
		               : api == PG_API_RESPONSES);
		break;
	}
	if (api != PG_API_RAW && !complete)
		FUZZ_CHECK(k->source == PG_KEY_SRC_RAW || k->source == PG_KEY_SRC_HEADER);
}

/* ---- re-serialization ------------------------------------------------------ */

struct ser {
	struct pg_buf out;
	struct fuzz_rng *rng;
};

static void put(struct ser *s, const char *p, size_t n)
{
	pg_buf_append(&s->out, p, n);
	FUZZ_CHECK(!s->out.oom);
}

static void ws(struct ser *s)
{
	static const char *const w[] = {"", "", " ", "\n", "\t", "\r\n  "};
	const char *x = w[fuzz_rng_next(s->rng) % 6];

	put(s, x, strlen(x));
}

static bool has_dup_names(const struct pg_json *js, uint32_t obj)
{
	uint32_t names[32], n = 0, k = obj + 1;

	if (js->tok[obj].size > 32)
		return true;
	for (uint32_t m = 0; m < js->tok[obj].size; m++, k = pg_json_member_next(js, k))
		names[n++] = k;
	for (uint32_t a = 0; a < n; a++)
		for (uint32_t b = a + 1; b < n; b++)
			if (!pg_json_str_cmp(js, names[a], names[b]))
				return true;
	return false;
}

/* Emit the value at token i (strings and numbers as written). */
static void emit(struct ser *s, const struct pg_json *js, uint32_t i)
{
	const struct pg_json_tok *t = &js->tok[i];
	uint32_t k = i + 1, members[32];

	ws(s);
	switch (t->type) {
	case PG_JSON_STRING:
		put(s, js->src + t->start - 1, t->end - t->start + 2);
		break;
	case PG_JSON_ARRAY:
		put(s, "[", 1);
		for (uint32_t m = 0; m < t->size; m++, k = js->tok[k].next) {
			if (m)
				put(s, ",", 1);
			emit(s, js, k);
		}
		ws(s);
		put(s, "]", 1);
		break;
	case PG_JSON_OBJECT:
		put(s, "{", 1);
		if (has_dup_names(js, i)) {
			for (uint32_t m = 0; m < t->size; m++, k = pg_json_member_next(js, k)) {
				if (m)
					put(s, ",", 1);
				emit(s, js, k);
				ws(s);
				put(s, ":", 1);
				emit(s, js, k + 1);
			}
		} else {
			for (uint32_t m = 0; m < t->size; m++, k = pg_json_member_next(js, k))
				members[m] = k;
			for (uint32_t m = t->size; m-- > 0;) {
				emit(s, js, members[m]);
				ws(s);
				put(s, ":", 1);
				emit(s, js, members[m] + 1);
				if (m)
					put(s, ",", 1);
			}
		}
		ws(s);
		put(s, "}", 1);
		break;
	default:
		put(s, js->src + t->start, t->end - t->start);
	}
	ws(s);
}

static void check_reserialized(enum pg_api api, const char *body, size_t blen, uint32_t prefix,
                               const struct keyrun *r, struct fuzz_rng *rng)
{
	struct pg_json js = {0};
	struct ser s = {.rng = rng};
	struct keyrun r2;

	FUZZ_CHECK(pg_json_parse(&js, body, blen) == 0);
	emit(&s, &js, 0);
	pg_json_free(&js);
	compute(api, (struct pg_str){"", 0}, s.out.p, s.out.len, true, prefix, &r2);
	FUZZ_CHECK(r2.k.source == r->k.source && r2.k.fallback == r->k.fallback);
	FUZZ_CHECK(r2.k.length == r->k.length && r2.k.hash == r->k.hash);
	free(r2.text);
	pg_buf_free(&s.out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pg_str hk = {"", 0};
	const char *body;
	size_t blen;
	enum pg_api api;
	uint32_t prefix, prefix2;
	bool complete;
	struct keyrun a, b;
	struct fuzz_rng rng;

	if (size < 2)
		return 0;
	{
		static const enum pg_api more[] = {PG_API_RAW, PG_API_RESPONSES, PG_API_MESSAGES,
		                                   PG_API_EMBEDDINGS};

		api = (data[0] & 3) == 3 ? more[data[1] & 3] : (enum pg_api)(data[0] & 3);
	}
	complete = !(data[0] & 4);
	prefix = 1 + ((uint32_t)(data[0] >> 4) << 8 | data[1]);
	prefix2 = 2 * prefix + 7;
	body = (const char *)data + 2;
	blen = size - 2;
	if (data[0] & 8) {
		const char *nl = memchr(body, '\n', blen);
		size_t hl = nl ? (size_t)(nl - body) : blen;

		hk = (struct pg_str){body, hl};
		body += hl + (nl != NULL);
		blen -= hl + (nl != NULL);
	}
	FUZZ_CHECK(pg_key_body_need(api, prefix, false) ==
	           (api == PG_API_RAW ? prefix : PG_KEY_JSON_BODY_MAX));
	FUZZ_CHECK(pg_key_body_need(api, prefix, true) >= pg_key_body_need(api, prefix, false));

	compute(api, hk, body, blen, complete, prefix, &a);
	check_one(api, hk, body, blen, complete, prefix, &a);
	compute(api, hk, body, blen, complete, prefix2, &b);
	check_one(api, hk, body, blen, complete, prefix2, &b);

	/* a longer prefix_length extends the same key; or falls back where the
	 * shorter key text was complete: a message, part or token id of the
	 * wrong shape lies between the two cuts (the shorter key never looks
	 * past its own, doc/routing.md "How it routes") */
	if (b.k.fallback && !a.k.fallback) {
		FUZZ_CHECK(pg_key_source_text(a.k.source) && a.k.length == prefix);
	} else {
		FUZZ_CHECK(a.k.source == b.k.source && a.k.fallback == b.k.fallback);
		FUZZ_CHECK(a.len <= b.len && !memcmp(a.text, b.text, a.len));
		FUZZ_CHECK(a.k.length <= b.k.length);
		if (a.k.length < prefix)
			FUZZ_CHECK(a.len == b.len && a.k.hash == b.k.hash &&
			           a.k.length == b.k.length);
	}
	/* and the shorter is the longer cut at its length, by code points */
	if (pg_key_source_text(a.k.source) && a.k.source == b.k.source) {
		FUZZ_CHECK(a.k.length == (b.k.length < prefix ? b.k.length : prefix));
		FUZZ_CHECK(utf8_count((const unsigned char *)b.text, a.len) == a.k.length);
		FUZZ_CHECK(a.len == b.len || ((unsigned char)b.text[a.len] & 0xc0) != 0x80);
	}

	if (api != PG_API_RAW && complete && !hk.len && a.k.source != PG_KEY_SRC_RAW) {
		fuzz_rng_seed(&rng, data, size);
		check_reserialized(api, body, blen, prefix, &a, &rng);
	}
	free(a.text);
	free(b.text);
	return 0;
}
