// SPDX-License-Identifier: MIT
/*
 * Strict JSON parser (see json.h). One pass over the input with an explicit
 * stack of open containers (no recursion, so no stack overflow on hostile
 * nesting). Strings, which are most of an LLM request body, are scanned
 * many bytes at a time until a byte needs attention (quote, backslash,
 * control character or non-ASCII): json_scan.h. Reading the tokens is in
 * json_access.c.
 */
#include <stdlib.h>
#include <string.h>
#include "pg_frame.h"
#include "lib/json.h"
#include "lib/json_scan.h"

static int fail(struct pg_json *js, size_t pos, const char *msg)
{
	js->ntok = 0;
	js->err_pos = pos;
	js->err_msg = msg;
	return -1;
}

/* fail() for functions that return an offset: SIZE_MAX. */
static size_t fail_off(struct pg_json *js, size_t pos, const char *msg)
{
	fail(js, pos, msg);
	return SIZE_MAX;
}

/* Grow the token array; it never needs more than one token per byte. A
 * windowed parse tokenizes little more than its window: the first size is
 * of that, not of the input. */
static int tok_grow(struct pg_json *js)
{
	/* LLM request bodies are mostly long strings: a token per 128 bytes
	 * of input is a first size that seldom needs to grow. */
	size_t in = js->window && js->window < js->len ? js->window : js->len;
	size_t ncap = js->cap ? (size_t)js->cap * 2 : 64 + in / 128;
	struct pg_json_tok *t;

	if (ncap > js->len + 1)
		ncap = js->len + 1;
	if (ncap <= js->cap)
		return -1;
	t = realloc(js->tok, ncap * sizeof(*t));
	if (!t)
		return -1;
	js->tok = t;
	js->cap = (uint32_t)ncap;
	return 0;
}

/* Room for one more token, initialised as a leaf starting at pos. */
static inline struct pg_json_tok *tok_alloc(struct pg_json *js, size_t pos)
{
	struct pg_json_tok *t;

	if (js->ntok == js->cap && tok_grow(js))
		return NULL;
	t = &js->tok[js->ntok];
	*t = (struct pg_json_tok){.start = (uint32_t)pos, .next = js->ntok + 1};
	js->ntok++;
	return t;
}

static inline size_t skip_ws(const unsigned char *s, size_t len, size_t pos)
{
	/* compact JSON has no whitespace between tokens: one test for it */
	if (__builtin_expect(pos < len && s[pos] > ' ', 1))
		return pos;
	while (pos < len && s[pos] <= ' ' &&
	       (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t'))
		pos++;
	return pos;
}

/* string_rest()'s answer when the input ends inside the string and more
 * of it may come: *stop is where to go on. */
#define STR_MORE (SIZE_MAX - 1)

/*
 * The rest of a string from p, where pg_json_plain_end() stopped on a byte that is
 * not the closing quote: escapes, non-ASCII text and errors. Returns the
 * offset of the closing quote, SIZE_MAX after fail(), or STR_MORE (more: the
 * input may go on) where an escape, a UTF-8 sequence or the string itself
 * runs past its end.
 */
static size_t string_rest(struct pg_json *js, size_t p, uint8_t *flags, bool more, size_t *stop)
{
	const unsigned char *s = (const unsigned char *)js->src;
	size_t len = js->len, n;

	for (;; p = pg_json_plain_end(s, p, len)) {
		if (p >= len)
			goto end;
		switch (s[p]) {
		case '"':
			return p;
		case '\\':
			*flags |= PG_JSON_F_ESCAPED;
			if (p + 1 >= len)
				goto end;
			switch (s[p + 1]) {
			case '"':
			case '\\':
			case '/':
			case 'b':
			case 'f':
			case 'n':
			case 'r':
			case 't':
				p += 2;
				break;
			case 'u':
				if (p + 6 > len && more)
					goto wait;
				if (p + 6 > len || pg_frame_hex(s[p + 2]) < 0 ||
				    pg_frame_hex(s[p + 3]) < 0 || pg_frame_hex(s[p + 4]) < 0 ||
				    pg_frame_hex(s[p + 5]) < 0)
					return fail_off(js, p,
					                "bad \\u escape: needs 4 hex digits");
				p += 6;
				break;
			default:
				return fail_off(js, p, "bad escape in string");
			}
			break;
		default:
			if (s[p] < 0x20)
				return fail_off(js, p, "control character in string");
			n = pg_json_utf8_run(s, p, len);
			*flags |= PG_JSON_F_NONASCII;
			if (n < len && s[n] >= 0x80) {
				/* a sequence cut by the end may be whole with more */
				if (more && len - n < 4) {
					p = n;
					goto wait;
				}
				return fail_off(js, n, "invalid UTF-8");
			}
			p = n;
		}
	}
end:
	if (!more)
		return fail_off(js, p, "unterminated string");
wait:
	*stop = p;
	return STR_MORE;
}

/* Scan the string whose opening quote is at open, from p (open + 1, or
 * where a scan waiting for more input stopped, with its flags) into token
 * t; on success *pos is one past the closing quote. 1: more input wanted,
 * *pos is where to go on and *flags the flags so far. Inline: most
 * strings are a plain run and their quote. */
static inline __attribute__((always_inline)) int scan_string(struct pg_json *js, size_t open,
                                                             size_t p, uint8_t *flags, bool more,
                                                             size_t *pos, struct pg_json_tok *t)
{
	const unsigned char *s = (const unsigned char *)js->src;

	p = pg_json_plain_end(s, p, js->len);
	if (p >= js->len || s[p] != '"') {
		size_t stop; /* not pos itself: the parse loop keeps it in a register */

		p = string_rest(js, p, flags, more, &stop);
		if (p == SIZE_MAX)
			return -1;
		if (p == STR_MORE) {
			*pos = stop;
			return 1;
		}
	}
	t->type = PG_JSON_STRING;
	t->start = (uint32_t)(open + 1);
	t->end = (uint32_t)p;
	t->flags = *flags;
	*pos = p + 1;
	return 0;
}

static int scan_number(struct pg_json *js, size_t *pos, struct pg_json_tok *t)
{
	const unsigned char *s = (const unsigned char *)js->src;
	size_t len = js->len, p = *pos;
	uint8_t flags = PG_JSON_F_INTEGER;

	if (s[p] == '-')
		p++;
	if (p < len && s[p] == '0') {
		p++;
	} else if (p < len && s[p] >= '1' && s[p] <= '9') {
		while (p < len && s[p] >= '0' && s[p] <= '9')
			p++;
	} else {
		return fail(js, p, "bad number");
	}
	if (p < len && s[p] == '.') {
		flags = 0;
		if (++p >= len || s[p] < '0' || s[p] > '9')
			return fail(js, p, "bad number: digit expected after '.'");
		while (p < len && s[p] >= '0' && s[p] <= '9')
			p++;
	}
	if (p < len && (s[p] == 'e' || s[p] == 'E')) {
		flags = 0;
		if (++p < len && (s[p] == '+' || s[p] == '-'))
			p++;
		if (p >= len || s[p] < '0' || s[p] > '9')
			return fail(js, p, "bad number: digit expected in exponent");
		while (p < len && s[p] >= '0' && s[p] <= '9')
			p++;
	}
	t->type = PG_JSON_NUMBER;
	t->flags = flags;
	t->end = (uint32_t)p;
	*pos = p;
	return 0;
}

/* The literals JSON has. */
static const struct {
	const char *word;
	size_t len;
	uint8_t type;
} lit[] = {{"true", 4, PG_JSON_TRUE}, {"false", 5, PG_JSON_FALSE}, {"null", 4, PG_JSON_NULL}};

static int scan_literal(struct pg_json *js, size_t *pos, struct pg_json_tok *t)
{
	for (size_t i = 0; i < sizeof(lit) / sizeof(lit[0]); i++) {
		if (js->len - *pos >= lit[i].len &&
		    !memcmp(js->src + *pos, lit[i].word, lit[i].len)) {
			t->type = lit[i].type;
			*pos += lit[i].len;
			t->end = (uint32_t)*pos;
			return 0;
		}
	}
	return fail(js, *pos, "expected a value");
}

/* scan_string() of the string whose opening quote is at *pos; a parse that
 * may stop in it remembers it in st (name: a member name). */
static inline __attribute__((always_inline)) int string_open(struct pg_json *js,
                                                             struct pg_json_stream *st, size_t *pos,
                                                             uint8_t *flags, bool more, bool name,
                                                             struct pg_json_tok *t)
{
	*flags = 0;
	if (more)
		st->str_name = name;
	return scan_string(js, *pos, *pos + 1, flags, more, pos, t);
}

/* Where a parse waiting for more input goes on (pg_json_stream.at). */
enum {
	AT_VALUE,  /* a value is next */
	AT_OPEN,   /* just inside '{' or '[': a close, a member or a value */
	AT_AFTER,  /* after a value: ',', a close, or (at depth 0) the end */
	AT_MEMBER, /* a member name is next */
	AT_COLON,  /* after a member name */
	AT_STRING, /* inside a string, from pos */
};

/* Where the number under scan ends: the first byte from at that cannot be
 * part of one, or len if none is yet. at: its first byte, or where an
 * earlier look over it stopped (a parse that waits for a long number looks
 * at each byte once). */
static size_t word_end(const unsigned char *s, size_t at, size_t len)
{
	while (at < len && ((s[at] >= '0' && s[at] <= '9') || s[at] == '-' || s[at] == '+' ||
	                    s[at] == '.' || s[at] == 'e' || s[at] == 'E'))
		at++;
	return at;
}

/* s[0..n) is the start of true, false or null, cut by the end of the
 * input: else the literal is whole or cannot be one, and more bytes would
 * not change the verdict (scan_literal() reads only its own). */
static bool literal_cut(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < sizeof(lit) / sizeof(lit[0]); i++)
		if (n < lit[i].len && !memcmp(s, lit[i].word, n))
			return true;
	return false;
}

/*
 * The parse loop, from where st says (a whole parse: a fresh st, more
 * false). While skim is nonzero the array open at stack depth skim
 * (1-based) is past its window: what follows in it is checked as strictly,
 * but makes no tokens (t points at a scratch one), until that array closes.
 * more: src[0..len) is not all of the input. Where it runs out, the parse
 * stops at the last point it can go on from (st->at, st->pos) and returns
 * 1. A string stops in its middle, a number goes on only once its end is
 * in (st->word: how far its end was looked for, so a cut number's bytes
 * are not searched again on the next feed; once found, the number is read
 * as in the whole parse), a literal once it is whole or cannot be one:
 * besides numbers, no byte is scanned twice but the few of a UTF-8
 * sequence or an escape. Inlined
 * into each caller: the whole parse's copy has more false and folds the
 * stops away.
 */
static inline __attribute__((always_inline)) int
parse(struct pg_json *js, const char *src, size_t len, struct pg_json_stream *st, bool more)
{
	const unsigned char *s = (const unsigned char *)src;
	uint32_t top;
	bool obj;
	struct pg_json_tok *t;
	unsigned depth = st->depth, skim = st->skim;
	size_t pos = st->pos;
	uint8_t flags;
	int rc;

	js->src = src;
	js->len = len;
	if (len >= UINT32_MAX)
		return fail(js, 0, "input is 4 GiB or more");
	switch (st->at) {
	case AT_OPEN:
		obj = st->is_obj[depth - 1];
		goto open;
	case AT_AFTER:
		goto after_value;
	case AT_MEMBER:
		goto member;
	case AT_COLON:
		goto colon;
	case AT_STRING:
		t = skim ? &st->scratch : &js->tok[js->ntok - 1];
		flags = st->str_flags;
		/* its token starts at its opening quote until it is whole
		 * (tok_alloc(); the scratch token's is never read) */
		rc = scan_string(js, t->start, pos, &flags, more, &pos, t);
		if (rc)
			goto string_stop;
		if (st->str_name)
			goto colon;
		goto after_value;
	default:
		break;
	}

value:
	pos = skip_ws(s, len, pos);
	if (pos >= len) {
		if (more)
			goto stop_value;
		return fail(js, pos, "expected a value");
	}
	if (more && s[pos] != '{' && s[pos] != '[' && s[pos] != '"') {
		if (s[pos] >= 'a' && s[pos] <= 'z'
		        ? literal_cut(s + pos, len - pos)
		        : (st->word = word_end(s, st->word > pos ? st->word : pos, len)) == len)
			goto stop_value;
	}
	if (skim) {
		t = &st->scratch;
	} else if (!(t = tok_alloc(js, pos))) {
		return fail(js, pos, "out of memory");
	}
	switch (s[pos]) {
	case '{':
	case '[':
		if (depth == PG_JSON_MAX_DEPTH)
			return fail(js, pos, "nested deeper than 256");
		obj = s[pos] == '{';
		t->type = obj ? PG_JSON_OBJECT : PG_JSON_ARRAY;
		st->is_obj[depth] = obj;
		st->stack[depth++] = js->ntok - 1;
		pos++;
	open:
		pos = skip_ws(s, len, pos);
		if (pos >= len && more) {
			st->at = AT_OPEN;
			goto stop;
		}
		if (pos < len && s[pos] == (obj ? '}' : ']'))
			goto close;
		if (!skim)
			js->tok[st->stack[depth - 1]].size = 1;
		if (obj)
			goto member;
		goto value;
	case '"':
		rc = string_open(js, st, &pos, &flags, more, false, t);
		if (rc)
			goto string_stop;
		break;
	case '-':
	case '0' ... '9':
		if (scan_number(js, &pos, t))
			return -1;
		break;
	default:
		if (scan_literal(js, &pos, t))
			return -1;
	}

after_value:
	pos = skip_ws(s, len, pos);
	if (pos >= len && more) {
		st->at = AT_AFTER;
		goto stop;
	}
	if (!depth) {
		if (pos != len)
			return fail(js, pos, "unexpected data after the value");
		return 0;
	}
	top = st->stack[depth - 1];
	obj = st->is_obj[depth - 1];
	if (pos >= len)
		return fail(js, pos, obj ? "unterminated object" : "unterminated array");
	if (s[pos] == ',') {
		pos++;
		if (!skim) {
			/* an array's elements are tokenized while they start within
			 * the window from its '[' (objects always whole: a member
			 * lookup needs them all) */
			if (!obj && js->window && pos - js->tok[top].start > js->window) {
				js->tok[top].flags |= PG_JSON_F_PARTIAL;
				skim = depth;
			} else {
				js->tok[top].size++;
			}
		}
		if (obj)
			goto member;
		goto value;
	}
	if (s[pos] != (obj ? '}' : ']'))
		return fail(js, pos, obj ? "expected ',' or '}'" : "expected ',' or ']'");
close:
	top = st->stack[--depth];
	pos++;
	if (skim) {
		if (depth + 1 != skim)
			goto after_value;
		skim = 0;
	}
	js->tok[top].end = (uint32_t)pos;
	js->tok[top].next = js->ntok;
	goto after_value;

member:
	pos = skip_ws(s, len, pos);
	if (pos >= len && more) {
		st->at = AT_MEMBER;
		goto stop;
	}
	if (pos >= len || s[pos] != '"')
		return fail(js, pos, "expected a member name string");
	if (skim) {
		t = &st->scratch;
	} else if (!(t = tok_alloc(js, pos))) {
		return fail(js, pos, "out of memory");
	}
	rc = string_open(js, st, &pos, &flags, more, true, t);
	if (rc)
		goto string_stop;
colon:
	pos = skip_ws(s, len, pos);
	if (pos >= len && more) {
		st->at = AT_COLON;
		goto stop;
	}
	if (pos >= len || s[pos] != ':')
		return fail(js, pos, "expected ':'");
	pos++;
	goto value;

string_stop:
	if (rc < 0)
		return -1;
	/* the token stays allocated (the last one, or the scratch one) */
	st->str_flags = flags;
	st->at = AT_STRING;
	goto stop;
stop_value:
	st->at = AT_VALUE;
stop:
	st->depth = depth;
	st->skim = skim;
	st->pos = pos;
	return 1;
}

/* A parse from the start: no tokens, no error, nothing stopped. */
static void reset(struct pg_json_stream *st, struct pg_json *js, size_t window)
{
	js->window = window;
	js->ntok = 0;
	js->err_pos = 0;
	js->err_msg = NULL;
	st->at = AT_VALUE;
	st->depth = st->skim = 0;
	st->pos = st->word = 0;
	st->str_flags = 0;
	st->str_name = false;
}

int pg_json_parse_window(struct pg_json *js, const char *src, size_t len, size_t window)
{
	struct pg_json_stream st;

	reset(&st, js, window);
	return parse(js, src, len, &st, false);
}

int pg_json_parse(struct pg_json *js, const char *src, size_t len)
{
	return pg_json_parse_window(js, src, len, 0);
}

void pg_json_free(struct pg_json *js)
{
	free(js->tok);
	js->tok = NULL;
	js->ntok = js->cap = 0;
}

void pg_json_stream_init(struct pg_json_stream *ps, size_t window)
{
	reset(ps, &ps->js, window);
	ps->js.src = NULL;
	ps->js.len = 0;
	ps->rc = 1;
}

int pg_json_stream_feed(struct pg_json_stream *ps, const char *src, size_t len, bool final)
{
	if (ps->rc != 1 || len < ps->js.len || (len == ps->js.len && !final))
		return ps->rc;
	ps->rc = parse(&ps->js, src, len, ps, !final);
	return ps->rc;
}

void pg_json_stream_free(struct pg_json_stream *ps)
{
	pg_json_free(&ps->js);
}
