// SPDX-License-Identifier: MIT
/*
 * Reading the tokens of a parse (see json.h): string decoding and
 * comparison, member lookup, integers.
 */
#include <errno.h>
#include <string.h>
#include "pg_frame.h"
#include "lib/json.h"
#include "lib/json_find.h"

static uint32_t hex4(const unsigned char *s)
{
	return (uint32_t)(pg_frame_hex(s[0]) << 12 | pg_frame_hex(s[1]) << 8 |
	                  pg_frame_hex(s[2]) << 4 | pg_frame_hex(s[3]));
}

/*
 * Bounds: the token was validated, so a backslash always starts a complete
 * escape before the closing quote, and a multi-byte lead byte always has its
 * continuation bytes; the look-ahead for a low surrogate reads at most the
 * closing quote (which is not a backslash).
 */
uint32_t pg_json_str_next(const struct pg_json *js, size_t *pos)
{
	const unsigned char *s = (const unsigned char *)js->src + *pos;
	uint32_t c = s[0], lo;

	if (c == '\\') {
		*pos += 2;
		switch (s[1]) {
		case 'b':
			return '\b';
		case 'f':
			return '\f';
		case 'n':
			return '\n';
		case 'r':
			return '\r';
		case 't':
			return '\t';
		case 'u':
			break;
		default: /* '"', '\\', '/' */
			return s[1];
		}
		*pos += 4;
		c = hex4(s + 2);
		if (c < 0xd800 || c > 0xdfff)
			return c;
		if (c >= 0xdc00 || s[6] != '\\' || s[7] != 'u')
			return 0xfffd;
		lo = hex4(s + 8);
		if (lo < 0xdc00 || lo > 0xdfff)
			return 0xfffd; /* the next escape is decoded on its own */
		*pos += 6;
		return 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (c < 0x80) {
		*pos += 1;
		return c;
	}
	if (c < 0xe0) {
		*pos += 2;
		return (c & 0x1f) << 6 | (s[1] & 0x3f);
	}
	if (c < 0xf0) {
		*pos += 3;
		return (c & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
	}
	*pos += 4;
	return (c & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 | (uint32_t)(s[2] & 0x3f) << 6 |
	       (s[3] & 0x3f);
}

size_t pg_utf8_encode(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

size_t pg_json_str_copy(const struct pg_json *js, uint32_t i, char *buf, size_t cap)
{
	const struct pg_json_tok *t = &js->tok[i];
	size_t pos = t->start, n = 0, k;
	char u[4];

	if (!(t->flags & PG_JSON_F_ESCAPED)) {
		n = t->end - t->start;
		memcpy(buf, js->src + t->start, n < cap ? n : cap);
		return n;
	}
	while (pos < t->end) {
		k = pg_utf8_encode(pg_json_str_next(js, &pos), u);
		for (size_t j = 0; j < k; j++, n++)
			if (n < cap)
				buf[n] = u[j];
	}
	return n;
}

bool pg_json_str_eq(const struct pg_json *js, uint32_t i, const char *s, size_t n)
{
	const struct pg_json_tok *t = &js->tok[i];
	size_t pos = t->start, off = 0, k;
	char u[4];

	if (t->type != PG_JSON_STRING)
		return false;
	if (!(t->flags & PG_JSON_F_ESCAPED))
		return t->end - t->start == n && !memcmp(js->src + t->start, s, n);
	while (pos < t->end) {
		k = pg_utf8_encode(pg_json_str_next(js, &pos), u);
		if (off + k > n || memcmp(s + off, u, k))
			return false;
		off += k;
	}
	return off == n;
}

int pg_json_str_cmp(const struct pg_json *js, uint32_t a, uint32_t b)
{
	const struct pg_json_tok *ta = &js->tok[a], *tb = &js->tok[b];
	size_t pa = ta->start, pb = tb->start;
	uint32_t ca, cb;

	if (!((ta->flags | tb->flags) & PG_JSON_F_ESCAPED)) {
		size_t la = ta->end - ta->start, lb = tb->end - tb->start;
		int r = memcmp(js->src + pa, js->src + pb, la < lb ? la : lb);

		return r ? r : (la > lb) - (la < lb);
	}
	while (pa < ta->end && pb < tb->end) {
		ca = pg_json_str_next(js, &pa);
		cb = pg_json_str_next(js, &pb);
		if (ca != cb)
			return ca < cb ? -1 : 1;
	}
	return (pa < ta->end) - (pb < tb->end);
}

int64_t pg_json_find(const struct pg_json *js, uint32_t obj, const char *name, size_t nlen)
{
	struct pg_json_name n = {name, nlen};
	int64_t found;

	pg_json_find_n(js, obj, &n, 1, &found);
	return found;
}

bool pg_json_find_n(const struct pg_json *js, uint32_t obj, const struct pg_json_name *names,
                    size_t n, int64_t *val)
{
	return pg_json_find_fixed(js, obj, names, n, val);
}

int pg_json_get_i64(const struct pg_json *js, uint32_t i, int64_t *out)
{
	const struct pg_json_tok *t = &js->tok[i];
	const char *s = js->src + t->start, *e = js->src + t->end;
	bool neg = *s == '-';
	int64_t v = 0; /* accumulated negatively: INT64_MIN fits */

	if (t->type != PG_JSON_NUMBER || !(t->flags & PG_JSON_F_INTEGER))
		return -EINVAL;
	for (s += neg; s < e; s++) {
		int d = *s - '0';

		if (v < (INT64_MIN + d) / 10)
			return -ERANGE;
		v = v * 10 - d;
	}
	if (!neg) {
		if (v == INT64_MIN)
			return -ERANGE;
		v = -v;
	}
	*out = v;
	return 0;
}

const char *pg_json_type_name(enum pg_json_type type)
{
	switch (type) {
	case PG_JSON_OBJECT:
		return "object";
	case PG_JSON_ARRAY:
		return "array";
	case PG_JSON_STRING:
		return "string";
	case PG_JSON_NUMBER:
		return "number";
	case PG_JSON_TRUE:
	case PG_JSON_FALSE:
		return "boolean";
	case PG_JSON_NULL:
		return "null";
	default:
		return "nothing";
	}
}
