// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over user/lib/json.c: parse the input, then walk every token
 * and decode every string every way json.h offers. Invariants: an accepted
 * input is valid UTF-8 (checked here independently); token spans nest and
 * stay inside the input; each container's size matches a walk of its
 * children by .next; names are strings; string decoding one code point at
 * a time, pg_json_str_copy (whole and truncated) and pg_json_str_eq agree;
 * decoded code points are scalar values; the escaped / non-ASCII flags match
 * the raw bytes; pg_json_str_cmp is code point (= UTF-8 byte) order;
 * pg_json_find returns the last member of a name, and pg_json_find_n the
 * same for several at once; integers agree with
 * strtoll. The parser accepts exactly what a plain recursive validator,
 * written here a byte at a time, accepts (the parser's fast string scan
 * must not change the verdict), and where the CPU has AVX2 the parse without
 * it gives the same tokens and errors; pg_json_parse_window() gives the same
 * verdict, error and tokens less the array elements it cuts, and
 * pg_json_stream, fed the input in pieces, gives exactly the windowed
 * parse's result. The parse struct is reused across inputs,
 * as callers do.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz.h"
#include "lib/json.h"

static struct pg_json js;

/* Strict UTF-8 (RFC 3629), written apart from the parser's. */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i], k;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07;
		else
			return false;
		if (n - i <= k)
			return false;
		for (unsigned j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

/* Decoded string i into a malloc'ed buffer, code point by code point. */
static char *decode(uint32_t i, size_t *n)
{
	const struct pg_json_tok *t = &js.tok[i];
	char *out = malloc(4 * (size_t)(t->end - t->start) + 1);
	size_t pos = t->start, last;
	uint32_t cp;

	FUZZ_CHECK(out);
	*n = 0;
	while (pos < t->end) {
		last = pos;
		cp = pg_json_str_next(&js, &pos);
		FUZZ_CHECK(pos > last && pos <= t->end);
		FUZZ_CHECK(cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff));
		*n += pg_utf8_encode(cp, out + *n);
	}
	FUZZ_CHECK(pos == t->end);
	return out;
}

static void check_string(uint32_t i)
{
	const struct pg_json_tok *t = &js.tok[i];
	const char *raw = js.src + t->start;
	size_t rl = t->end - t->start, n, full, half;
	char *dec = decode(i, &n), *cp = malloc(n + 1);
	bool bs = memchr(raw, '\\', rl) != NULL, hi = false;

	FUZZ_CHECK(cp);
	FUZZ_CHECK(t->start > 0 && js.src[t->start - 1] == '"' && js.src[t->end] == '"');
	for (size_t k = 0; k < rl; k++)
		hi |= (unsigned char)raw[k] >= 0x80;
	FUZZ_CHECK(!!(t->flags & PG_JSON_F_ESCAPED) == bs);
	FUZZ_CHECK(!!(t->flags & PG_JSON_F_NONASCII) == hi);
	FUZZ_CHECK(utf8_valid((const unsigned char *)dec, n));
	if (!bs)
		FUZZ_CHECK(n == rl && !memcmp(dec, raw, rl));
	else
		FUZZ_CHECK(n <= rl);

	full = pg_json_str_copy(&js, i, cp, n);
	FUZZ_CHECK(full == n && !memcmp(cp, dec, n));
	half = n / 2;
	memset(cp, 0, n + 1);
	FUZZ_CHECK(pg_json_str_copy(&js, i, cp, half) == n);
	FUZZ_CHECK(!memcmp(cp, dec, half) && (half == n || cp[half] == 0));

	FUZZ_CHECK(pg_json_str_eq(&js, i, dec, n));
	if (n)
		FUZZ_CHECK(!pg_json_str_eq(&js, i, dec, n - 1));
	FUZZ_CHECK(pg_json_str_cmp(&js, i, i) == 0);
	free(cp);
	free(dec);
}

static int sign(int v)
{
	return (v > 0) - (v < 0);
}

/* Code point order of two strings, by their decoded UTF-8 bytes. */
static void check_cmp(uint32_t a, uint32_t b)
{
	size_t na, nb;
	char *da = decode(a, &na), *db = decode(b, &nb);
	int m = memcmp(da, db, na < nb ? na : nb);
	int want = m ? sign(m) : sign((int)(na > nb) - (int)(na < nb));

	FUZZ_CHECK(sign(pg_json_str_cmp(&js, a, b)) == want);
	FUZZ_CHECK(sign(pg_json_str_cmp(&js, b, a)) == -want);
	free(da);
	free(db);
}

static void check_number(uint32_t i)
{
	const struct pg_json_tok *t = &js.tok[i];
	size_t rl = t->end - t->start;
	char text[64];
	int64_t v = 0;
	long long want;
	int rc = pg_json_get_i64(&js, i, &v);
	bool integer = !memchr(js.src + t->start, '.', rl) && !memchr(js.src + t->start, 'e', rl) &&
	               !memchr(js.src + t->start, 'E', rl);

	FUZZ_CHECK(!!(t->flags & PG_JSON_F_INTEGER) == integer);
	if (!integer) {
		FUZZ_CHECK(rc == -EINVAL);
		return;
	}
	FUZZ_CHECK(rc == 0 || rc == -ERANGE);
	if (rl >= sizeof(text)) {
		FUZZ_CHECK(rc == -ERANGE);
		return;
	}
	memcpy(text, js.src + t->start, rl);
	text[rl] = 0;
	errno = 0;
	want = strtoll(text, NULL, 10);
	FUZZ_CHECK((errno == ERANGE) == (rc == -ERANGE));
	if (!rc)
		FUZZ_CHECK(v == want);
}

static void check_object(uint32_t i)
{
	const struct pg_json_tok *t = &js.tok[i];
	uint32_t k = i + 1, names[64];
	size_t n = 0;

	for (uint32_t m = 0; m < t->size; m++) {
		FUZZ_CHECK(k + 1 < js.ntok && js.tok[k].type == PG_JSON_STRING);
		FUZZ_CHECK(js.tok[k].next == k + 1);
		if (n < 64)
			names[n++] = k;
		k = pg_json_member_next(&js, k);
	}
	FUZZ_CHECK(k == t->next);
	if (t->size > 64)
		return;
	/* pg_json_find: the last member with an equal name */
	for (size_t a = 0; a < n; a++) {
		size_t len;
		char *name = decode(names[a], &len);
		int64_t want = -1;

		for (size_t b = 0; b < n; b++)
			if (pg_json_str_eq(&js, names[b], name, len)) {
				FUZZ_CHECK(pg_json_str_cmp(&js, names[a], names[b]) == 0);
				want = names[b] + 1;
			}
		FUZZ_CHECK(pg_json_find(&js, i, name, len) == want);
		if (len != 4 || memcmp(name, "role", 4)) {
			struct pg_json_name two[2] = {{name, len}, {"role", 4}};
			int64_t v[2];

			FUZZ_CHECK(pg_json_find_n(&js, i, two, 2, v));
			FUZZ_CHECK(v[0] == want && v[1] == pg_json_find(&js, i, "role", 4));
		}
		if (a + 1 < n)
			check_cmp(names[a], names[a + 1]);
		free(name);
	}
}

static void check_tokens(size_t len)
{
	FUZZ_CHECK(js.ntok >= 1 && js.ntok <= len && js.tok[0].next == js.ntok);
	for (uint32_t i = 0; i < js.ntok; i++) {
		const struct pg_json_tok *t = &js.tok[i];

		FUZZ_CHECK(t->start <= t->end && t->end <= len);
		FUZZ_CHECK(t->next > i && t->next <= js.ntok);
		FUZZ_CHECK(pg_json_type_name(t->type) != NULL);
		/* a subtree lies inside its root's span */
		for (uint32_t c = i + 1; c < t->next; c = js.tok[c].next)
			FUZZ_CHECK(js.tok[c].start >= t->start && js.tok[c].end <= t->end);
		switch (t->type) {
		case PG_JSON_ARRAY: {
			uint32_t k = i + 1;

			for (uint32_t m = 0; m < t->size; m++) {
				FUZZ_CHECK(k < js.ntok);
				k = js.tok[k].next;
			}
			FUZZ_CHECK(k == t->next);
			FUZZ_CHECK(pg_json_find(&js, i, "a", 1) == -1);
			{
				struct pg_json_name a = {"a", 1};
				int64_t v = 0;

				FUZZ_CHECK(!pg_json_find_n(&js, i, &a, 1, &v) && v == -1);
			}
			break;
		}
		case PG_JSON_OBJECT:
			check_object(i);
			break;
		case PG_JSON_STRING:
			FUZZ_CHECK(t->size == 0 && t->next == i + 1);
			check_string(i);
			break;
		case PG_JSON_NUMBER:
			FUZZ_CHECK(t->size == 0 && t->next == i + 1);
			check_number(i);
			break;
		case PG_JSON_TRUE:
		case PG_JSON_FALSE:
		case PG_JSON_NULL:
			FUZZ_CHECK(t->size == 0 && t->next == i + 1);
			FUZZ_CHECK(t->end - t->start == (t->type == PG_JSON_FALSE ? 5u : 4u));
			break;
		default:
			FUZZ_CHECK(!"token type");
		}
	}
}

/* ---- reference validator: RFC 8259 grammar, a byte at a time ----------- */

struct ref {
	const unsigned char *s;
	size_t n, p;
};

static void ref_ws(struct ref *r)
{
	while (r->p < r->n && (r->s[r->p] == ' ' || r->s[r->p] == '\t' || r->s[r->p] == '\n' ||
	                       r->s[r->p] == '\r'))
		r->p++;
}

static bool ref_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool ref_string(struct ref *r)
{
	size_t start;

	if (r->p >= r->n || r->s[r->p] != '"')
		return false;
	start = ++r->p;
	for (;;) {
		unsigned char c;

		if (r->p >= r->n)
			return false;
		c = r->s[r->p];
		if (c == '"')
			break;
		if (c < 0x20)
			return false;
		if (c != '\\') {
			r->p++;
			continue;
		}
		if (++r->p >= r->n)
			return false;
		c = r->s[r->p++];
		if (c == 'u') {
			for (int k = 0; k < 4; k++, r->p++)
				if (r->p >= r->n || !ref_hex(r->s[r->p]))
					return false;
		} else if (!strchr("\"\\/bfnrt", c) || !c) {
			return false;
		}
	}
	/* the raw bytes must be UTF-8 on their own (utf8_valid: no context) */
	return utf8_valid(r->s + start, r->p++ - start);
}

static bool ref_digits(struct ref *r)
{
	size_t p = r->p;

	while (r->p < r->n && r->s[r->p] >= '0' && r->s[r->p] <= '9')
		r->p++;
	return r->p > p;
}

static bool ref_value(struct ref *r, unsigned depth)
{
	unsigned char c;

	ref_ws(r);
	if (r->p >= r->n)
		return false;
	c = r->s[r->p];
	if (c == '{' || c == '[') {
		unsigned char close = c == '{' ? '}' : ']';

		if (depth == PG_JSON_MAX_DEPTH)
			return false;
		r->p++;
		ref_ws(r);
		if (r->p < r->n && r->s[r->p] == close) {
			r->p++;
			return true;
		}
		for (;;) {
			if (c == '{') {
				ref_ws(r);
				if (!ref_string(r))
					return false;
				ref_ws(r);
				if (r->p >= r->n || r->s[r->p++] != ':')
					return false;
			}
			if (!ref_value(r, depth + 1))
				return false;
			ref_ws(r);
			if (r->p >= r->n)
				return false;
			if (r->s[r->p] == close) {
				r->p++;
				return true;
			}
			if (r->s[r->p++] != ',')
				return false;
		}
	}
	if (c == '"')
		return ref_string(r);
	if (c == '-' || (c >= '0' && c <= '9')) {
		if (c == '-')
			r->p++;
		if (r->p < r->n && r->s[r->p] == '0')
			r->p++;
		else if (r->p >= r->n || r->s[r->p] < '1' || r->s[r->p] > '9' || !ref_digits(r))
			return false;
		if (r->p < r->n && r->s[r->p] == '.' && (r->p++, !ref_digits(r)))
			return false;
		if (r->p < r->n && (r->s[r->p] == 'e' || r->s[r->p] == 'E')) {
			r->p++;
			if (r->p < r->n && (r->s[r->p] == '+' || r->s[r->p] == '-'))
				r->p++;
			if (!ref_digits(r))
				return false;
		}
		return true;
	}
	for (const char *const *w = (const char *const[]){"true", "false", "null", NULL}; *w; w++) {
		size_t l = strlen(*w);

		if (r->n - r->p >= l && !memcmp(r->s + r->p, *w, l)) {
			r->p += l;
			return true;
		}
	}
	return false;
}

static bool ref_valid(const unsigned char *s, size_t n)
{
	struct ref r = {s, n, 0};

	if (!ref_value(&r, 0))
		return false;
	ref_ws(&r);
	return r.p == n;
}

/* Two parses gave the same verdict, error and tokens. */
static void same_parse(const struct pg_json *a, int arc, const struct pg_json *b, int brc)
{
	FUZZ_CHECK(arc == brc && a->err_pos == b->err_pos && a->err_msg == b->err_msg);
	FUZZ_CHECK(a->ntok == b->ntok);
	for (uint32_t i = 0; !arc && i < a->ntok; i++) {
		const struct pg_json_tok *x = &a->tok[i], *y = &b->tok[i];

		FUZZ_CHECK(x->start == y->start && x->end == y->end && x->next == y->next &&
		           x->size == y->size && x->type == y->type && x->flags == y->flags);
	}
}

/* Where the CPU has AVX2: the parse without it is the same, token for
 * token, error for error. */
static void check_narrow(const char *src, size_t size, int rc)
{
	static struct pg_json narrow;
	int nrc;

	pg_json_avx2(0);
	nrc = pg_json_parse(&narrow, src, size);
	pg_json_avx2(1);
	same_parse(&narrow, nrc, &js, rc);
}

/* The windowed parse's token at w is the full parse's at f, but for the
 * elements its PARTIAL arrays leave out. Returns the full parse's index
 * after f's subtree; *wn gets the windowed one's after w's. */
static uint32_t match_window(const struct pg_json *wp, uint32_t w, uint32_t f, uint32_t *wn)
{
	const struct pg_json_tok *a = &wp->tok[w], *b = &js.tok[f];
	uint32_t wk = w + 1, fk = f + 1, n;

	FUZZ_CHECK(w < wp->ntok && a->start == b->start && a->end == b->end && a->type == b->type &&
	           (a->flags & ~PG_JSON_F_PARTIAL) == b->flags);
	if (a->flags & PG_JSON_F_PARTIAL)
		FUZZ_CHECK(a->type == PG_JSON_ARRAY && a->size >= 1 && a->size < b->size);
	else
		FUZZ_CHECK(a->size == b->size);
	n = a->type == PG_JSON_OBJECT ? 2 * a->size : a->type == PG_JSON_ARRAY ? a->size : 0;
	for (uint32_t i = 0; i < n; i++)
		fk = match_window(wp, wk, fk, &wk);
	FUZZ_CHECK(a->next == wk);
	*wn = wk;
	return b->next;
}

/* pg_json_stream over pieces of 1..16 bytes, or 64..255 (past the AVX2
 * scans' steps), their sizes from the input's own bytes, each piece given
 * in a buffer of exactly the bytes so far (ASan sees a read past them):
 * exactly the parse p's verdict, error and tokens (p: whole, or windowed
 * with its window). */
static void check_stream(const char *src, size_t size, const struct pg_json *p, int prc)
{
	static struct pg_json_stream ps;
	size_t have = 0;
	char *copy = NULL;
	int rc = 1;

	pg_json_stream_init(&ps, p->window);
	for (size_t i = 0; rc == 1; i++) {
		unsigned char b = size ? (unsigned char)src[i % size] : 0;

		have += b & 0x80 ? 64 + b % 192 : 1 + b % 16;
		if (have > size)
			have = size;
		free(copy);
		copy = malloc(have ? have : 1);
		FUZZ_CHECK(copy != NULL);
		memcpy(copy, src, have);
		rc = pg_json_stream_feed(&ps, copy, have, have == size);
	}
	same_parse(&ps.js, rc, p, prc);
	free(copy);
}

/* pg_json_parse_window, with a window small enough to cut arrays: the
 * same verdict and error, and the same tokens less the elements cut. */
static void check_window(const char *src, size_t size)
{
	static struct pg_json wp;
	size_t window = 1 + size % 61;
	uint32_t wn;
	int rc = pg_json_parse_window(&wp, src, size, window);

	FUZZ_CHECK((rc == 0) == (js.ntok > 0));
	FUZZ_CHECK(wp.err_pos == js.err_pos && wp.err_msg == js.err_msg);
	check_stream(src, size, &wp, rc);
	check_stream(src, size, &js, rc);
	if (rc)
		return;
	FUZZ_CHECK(match_window(&wp, 0, 0, &wn) == js.ntok && wn == wp.ntok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *src = (const char *)data;
	int rc = pg_json_parse(&js, src, size);

	FUZZ_CHECK((rc == 0) == ref_valid(data, size));
	if (pg_json_avx2(-1))
		check_narrow(src, size, rc);
	check_window(src, size);
	if (rc) {
		FUZZ_CHECK(js.ntok == 0 && js.err_pos <= size && js.err_msg != NULL);
		return 0;
	}
	FUZZ_CHECK(utf8_valid(data, size));
	check_tokens(size);
	return 0;
}
