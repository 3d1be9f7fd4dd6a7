// SPDX-License-Identifier: MIT
/*
 * The key text being built (see key_text.h; the grammar is key.h's).
 */
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) && !defined(PG_NO_SIMD)
#include <emmintrin.h>
#endif
#include "lib/buf.h"
#include "lib/key.h"
#include "lib/key_text.h"

bool pg_text_reserve(struct pg_text *e, size_t n)
{
	if (e->len + n <= e->cap)
		return true;
	if (!pg_grow(&e->buf, &e->cap, e->len + n)) {
		e->oom = true; /* the key falls back; the request is still served */
		return false;
	}
	return true;
}

void pg_text_cp_any(struct pg_text *e, uint32_t cp)
{
	pg_text_checkpoint(e);
	if (pg_text_full(e) || !pg_text_reserve(e, 4))
		return;
	e->nonascii |= cp > 0x7f;
	e->len += pg_utf8_encode(cp, e->buf + e->len);
	e->ncp++;
}

void pg_text_ascii(struct pg_text *e, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pg_text_cp(e, (unsigned char)s[i]);
}

#define ONES  0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* How many of the bytes of w (as loaded from memory), from the first, come
 * before a backslash: 0 to 8. */
static inline size_t plain_prefix(uint64_t w)
{
	uint64_t x = w ^ (ONES * '\\'), bs = (x - ONES) & ~x & HIGHS;

	if (!bs)
		return 8;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return (size_t)__builtin_ctzll(bs) / 8; /* exact: borrows run upward */
#else
	return 0; /* the byte loop finds it */
#endif
}

/* Code points that start among the first n (< 8 or 8) bytes of w, as
 * loaded from memory. */
static inline uint32_t leads_in(uint64_t w, size_t n)
{
	uint64_t cont = w & ~(w << 1) & HIGHS;

	if (n < 8) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		cont &= (1ull << (8 * n)) - 1;
#else
		cont &= ~(~0ull >> (8 * n));
#endif
	}
	return (uint32_t)n - (uint32_t)(((cont >> 7) * ONES) >> 56);
}

/* The longest prefix of UTF-8 s[0..n) that holds at most room code points
 * without cutting one: its length in bytes; *cps gets its code points.
 * Counts 8 bytes a step, then byte by byte near the cut. */
static size_t utf8_prefix(const unsigned char *s, size_t n, uint32_t room, uint32_t *cps)
{
	uint32_t c = 0, k;
	size_t i = 0;
	uint64_t w;

	for (; i + 8 <= n; i += 8) {
		memcpy(&w, s + i, 8);
		k = leads_in(w, 8);
		if (k > room - c)
			break;
		c += k;
	}
	for (; i < n; i++) {
		if ((s[i] & 0xc0) == 0x80)
			continue;
		if (c == room)
			break;
		c++;
	}
	*cps = c;
	return i;
}

/* UTF-8 continuation bytes in s[0..n): 16 bytes a step with SSE2 (counts
 * kept per byte lane, summed before they can overflow), else 8. */
static size_t utf8_conts(const unsigned char *s, size_t n)
{
	size_t i = 0, c = 0;
	uint64_t w;

#if defined(__SSE2__) && !defined(PG_NO_SIMD)
	while (n - i >= 16) {
		__m128i acc = _mm_setzero_si128(), lim = _mm_set1_epi8(-64);
		size_t stop = n - i >= 16 * 255 ? i + 16 * 255 : n - (n - i) % 16;

		for (; i < stop; i += 16) /* continuation bytes are below -64 as int8 */
			acc = _mm_sub_epi8(
			    acc, _mm_cmplt_epi8(
			             _mm_loadu_si128((const __m128i *)(const void *)(s + i)), lim));
		acc = _mm_sad_epu8(acc, _mm_setzero_si128());
		c += (size_t)_mm_cvtsi128_si64(acc) +
		     (size_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc));
	}
#endif
	for (; n - i >= 8; i += 8) {
		memcpy(&w, s + i, 8);
		c += 8 - leads_in(w, 8);
	}
	for (; i < n; i++)
		c += (s[i] & 0xc0) == 0x80;
	return c;
}

/* Raw string bytes s[0..n) that hold no backslash: valid UTF-8 without
 * control characters (JSON guarantees it), so nothing to escape; copied in
 * one go up to the code point limit. ascii: no byte above 0x7f. */
static void emit_run(struct pg_text *e, const unsigned char *s, size_t n, bool ascii)
{
	uint32_t room = e->limit - e->ncp, cps;
	size_t cut;

	if (pg_text_full(e))
		return;
	pg_text_checkpoint(e);
	if (ascii) {
		cut = n < room ? n : room;
		cps = (uint32_t)cut;
	} else if (n <= room) { /* no cut: n bytes hold at most n code points */
		cut = n;
		cps = (uint32_t)(n - utf8_conts(s, n));
	} else {
		cut = utf8_prefix(s, n, room, &cps);
	}
	if (!cut || !pg_text_reserve(e, cut))
		return;
	e->nonascii |= !ascii;
	memcpy(e->buf + e->len, s, cut);
	e->len += cut;
	e->ncp += cps;
}

/* What the escape \\c stands for, c not 'u'. */
static inline uint32_t short_escape(unsigned char c)
{
	switch (c) {
	case 'n':
		return '\n';
	case 't':
		return '\t';
	case 'r':
		return '\r';
	case 'b':
		return '\b';
	case 'f':
		return '\f';
	default: /* '"', '\\', '/' */
		return c;
	}
}

/*
 * The unescaped text of string token i that has escapes, as emit_run()
 * and pg_text_cp() would write it code point by code point, in one loop
 * writing straight into the buffer: 8 bytes a step between escapes, the
 * short escapes decoded here. The text is never longer than the raw string
 * (an escape is at least as long as what it stands for, an escaped
 * separator included), nor than 4 bytes per code point left.
 */
static void emit_escaped(struct pg_text *e, const struct pg_json *js, uint32_t i)
{
	const struct pg_json_tok *t = &js->tok[i];
	const unsigned char *s = (const unsigned char *)js->src;
	size_t p = t->start, end = t->end, need = end - p;
	bool ascii = !(t->flags & PG_JSON_F_NONASCII), nonascii = !ascii;
	uint32_t ncp = e->ncp, lim = e->limit, cp, k;
	unsigned char *out;
	uint64_t w;
	size_t n;

	if (pg_text_full(e))
		return;
	pg_text_checkpoint(e);
	if (need > 4 * (size_t)(lim - ncp))
		need = 4 * (size_t)(lim - ncp);
	if (!pg_text_reserve(e, need + 8)) /* + 8: whole-word stores */
		return;
	out = (unsigned char *)e->buf + e->len;
	while (p < end) {
		if (s[p] == '\\') { /* an escape (complete: the token is valid) */
			if (ncp == lim)
				break;
			if (s[p + 1] == 'u') {
				cp = pg_json_str_next(js, &p);
				nonascii |= cp > 0x7f;
			} else {
				cp = short_escape(s[p + 1]);
				p += 2;
			}
			/* the separators and the escape itself are prefixed with
			 * PG_KEY_ESC, so they cannot be confused with real ones */
			if (cp == PG_KEY_ESC || cp == PG_KEY_US || cp == PG_KEY_RS ||
			    cp == PG_KEY_GS) {
				*out++ = PG_KEY_ESC;
				if (++ncp == lim)
					break;
			}
			if (cp < 0x80)
				*out++ = (unsigned char)cp;
			else
				out += pg_utf8_encode(cp, (char *)out);
			ncp++;
			continue;
		}
		if (end - p >= 8) {
			/* the bytes up to the next backslash, 8 at most, at once */
			memcpy(&w, s + p, 8);
			n = plain_prefix(w);
			k = ascii ? (uint32_t)n : leads_in(w, n);
			if (n && k <= lim - ncp) {
				memcpy(out, s + p, 8);
				out += n;
				p += n;
				ncp += k;
				continue;
			}
		}
		if ((s[p] & 0xc0) != 0x80) { /* else the rest of a code point */
			if (ncp == lim)
				break;
			ncp++;
		}
		*out++ = s[p++];
	}
	e->nonascii |= nonascii;
	e->len = (size_t)(out - (unsigned char *)e->buf);
	e->ncp = ncp;
}

/* TEXT(s) of key.h, by the form of the string. */
void pg_text_string_any(struct pg_text *e, const struct pg_json *js, uint32_t i)
{
	const struct pg_json_tok *t = &js->tok[i];

	if (t->flags & PG_JSON_F_ESCAPED)
		emit_escaped(e, js, i);
	else
		emit_run(e, (const unsigned char *)js->src + t->start, t->end - t->start,
		         !(t->flags & PG_JSON_F_NONASCII));
}

/* A string in canonical JSON form: quotes, only '"', '\\' and control
 * characters escaped (short forms where JSON has them). */
static void emit_json_string(struct pg_text *e, const struct pg_json *js, uint32_t i)
{
	static const char hex[] = PG_HEX_DIGITS;
	size_t pos = js->tok[i].start;
	uint32_t cp;

	pg_text_cp(e, '"');
	while (pos < js->tok[i].end && !pg_text_full(e)) {
		cp = pg_json_str_next(js, &pos);
		switch (cp) {
		case '"':
		case '\\':
			pg_text_cp(e, '\\');
			pg_text_cp(e, cp);
			break;
		case '\b':
			pg_text_ascii(e, "\\b", 2);
			break;
		case '\f':
			pg_text_ascii(e, "\\f", 2);
			break;
		case '\n':
			pg_text_ascii(e, "\\n", 2);
			break;
		case '\r':
			pg_text_ascii(e, "\\r", 2);
			break;
		case '\t':
			pg_text_ascii(e, "\\t", 2);
			break;
		default:
			if (cp >= 0x20) {
				pg_text_cp(e, cp);
				break;
			}
			pg_text_ascii(e, "\\u00", 4);
			pg_text_cp(e, hex[cp >> 4]);
			pg_text_cp(e, hex[cp & 15]);
		}
	}
	pg_text_cp(e, '"');
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
 * one index per token of i's subtree; each object uses the part above sp
 * while its members are written (the objects open at once hold disjoint
 * member names of the subtree, so it suffices).
 */
void pg_text_canonical(struct pg_text *e, const struct pg_json *js, uint32_t i, uint32_t *scratch,
                       uint32_t sp)
{
	const struct pg_json_tok *t = &js->tok[i];
	uint32_t k = pg_json_first(i), n;

	if (pg_text_full(e))
		return;
	switch (t->type) {
	case PG_JSON_OBJECT:
		for (n = 0; n < t->size; n++, k = pg_json_member_next(js, k))
			scratch[sp + n] = k;
		qsort_r(scratch + sp, t->size, sizeof(*scratch), cmp_names, (void *)js);
		pg_text_cp(e, '{');
		for (n = 0; n < t->size && !pg_text_full(e); n++) {
			if (n)
				pg_text_cp(e, ',');
			emit_json_string(e, js, scratch[sp + n]);
			pg_text_cp(e, ':');
			pg_text_canonical(e, js, scratch[sp + n] + 1, scratch, sp + t->size);
		}
		pg_text_cp(e, '}');
		break;
	case PG_JSON_ARRAY:
		pg_text_cp(e, '[');
		for (n = 0; n < t->size && !pg_text_full(e); n++, k = js->tok[k].next) {
			if (n)
				pg_text_cp(e, ',');
			pg_text_canonical(e, js, k, scratch, sp);
		}
		pg_text_cp(e, ']');
		break;
	case PG_JSON_STRING:
		emit_json_string(e, js, i);
		break;
	default:
		pg_text_ascii(e, js->src + t->start, t->end - t->start);
	}
}

/* Byte offset in buf[0..len) after ncp code points from offset from
 * (ascii: buf holds no multi-byte sequence, so bytes are code points). */
size_t pg_text_cp_offset(const char *buf, size_t len, size_t from, uint32_t ncp, bool ascii)
{
	uint32_t cps;

	if (ascii)
		return len - from < ncp ? len : from + ncp;
	return from + utf8_prefix((const unsigned char *)buf + from, len - from, ncp, &cps);
}

size_t pg_text_mark_offset(const struct pg_text *e, int i)
{
	return pg_text_cp_offset(e->buf ? e->buf : "", e->len, e->mark_len[i],
	                         e->mark[i] - e->mark_ncp[i], !e->nonascii);
}
