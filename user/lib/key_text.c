// SPDX-License-Identifier: MIT
/*
 * The key text being built (see key_text.h; the grammar is key.h's).
 */
#include <stdlib.h>
#include <string.h>
#include "lib/key.h"
#include "lib/key_text.h"

bool pg_text_reserve(struct pg_text *e, size_t n)
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

void pg_text_cp(struct pg_text *e, uint32_t cp)
{
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

/* A code point of role/content/prompt text: the separators and the escape
 * itself are prefixed with PG_KEY_ESC, so they cannot be confused with real
 * separators. */
static void emit_text_cp(struct pg_text *e, uint32_t cp)
{
	if (cp == PG_KEY_ESC || cp == PG_KEY_US || cp == PG_KEY_RS || cp == PG_KEY_GS)
		pg_text_cp(e, PG_KEY_ESC);
	pg_text_cp(e, cp);
}

/* Raw string bytes s[0..n) that hold no backslash: valid UTF-8 without
 * control characters (JSON guarantees it), so nothing to escape; copied in
 * one go up to the code point limit. ascii: no byte above 0x7f. */
static void emit_run(struct pg_text *e, const unsigned char *s, size_t n, bool ascii)
{
	uint32_t room = e->limit - e->ncp, cps = 0;
	size_t cut;

	if (pg_text_full(e))
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
	if (!cut || !pg_text_reserve(e, cut))
		return;
	e->nonascii |= !ascii;
	memcpy(e->buf + e->len, s, cut);
	e->len += cut;
	e->ncp += cps;
}

/* The unescaped text of string token i: runs between backslashes are
 * copied whole, escapes decoded one by one. */
void pg_text_string(struct pg_text *e, const struct pg_json *js, uint32_t i)
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
	while (pos < t->end && !pg_text_full(e)) {
		bs = memchr(s + pos, '\\', t->end - pos);
		if (!bs) {
			emit_run(e, s + pos, t->end - pos, ascii);
			return;
		}
		emit_run(e, s + pos, (size_t)(bs - s) - pos, ascii);
		pos = (size_t)(bs - s);
		if (!pg_text_full(e))
			emit_text_cp(e, pg_json_str_next(js, &pos));
	}
}

/* A string in canonical JSON form: quotes, only '"', '\\' and control
 * characters escaped (short forms where JSON has them). */
static void emit_json_string(struct pg_text *e, const struct pg_json *js, uint32_t i)
{
	static const char hex[] = "0123456789abcdef";
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
 * one index per token; each object uses the part above *sp while its
 * members are written (objects' member sets are disjoint, so it suffices).
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
