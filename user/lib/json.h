/* SPDX-License-Identifier: MIT */
/*
 * Strict JSON (RFC 8259) parser, pure: no I/O. It validates the whole input
 * and turns it into a flat array of tokens in document order (pre-order), so
 * a container's children follow it and tok[i].next skips its whole subtree.
 *
 * Strictness: exactly one value with optional whitespace (space, tab, LF,
 * CR) around it; no comments, trailing commas, NaN, leading zeros, BOM or
 * control characters inside strings; the raw input must be valid UTF-8
 * (RFC 3629: no overlong forms, no encoded surrogates, nothing above
 * U+10FFFF); nesting deeper than PG_JSON_MAX_DEPTH is an error.
 *
 * \u escapes naming a lone surrogate (a high one not followed by a \u low
 * one, or a low one alone) are accepted by the grammar, as RFC 8259 allows,
 * and decode to U+FFFD. Duplicate member names are accepted; pg_json_find()
 * returns the last one, as JavaScript and Python do.
 *
 * The parser never reads outside src[0..len) and needs no terminating NUL.
 * pg_json_parse_window() checks exactly as strictly but tokenizes long
 * arrays only in part, for a reader that needs only their start.
 */
#ifndef PG_JSON_H
#define PG_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PG_JSON_MAX_DEPTH 256 /* containers nested deeper: parse error */

enum pg_json_type {
	PG_JSON_NONE = 0,
	PG_JSON_OBJECT,
	PG_JSON_ARRAY,
	PG_JSON_STRING,
	PG_JSON_NUMBER,
	PG_JSON_TRUE,
	PG_JSON_FALSE,
	PG_JSON_NULL,
};

/* pg_json_tok.flags */
#define PG_JSON_F_ESCAPED  0x1 /* string: contains at least one backslash escape */
#define PG_JSON_F_NONASCII 0x2 /* string: raw bytes include non-ASCII UTF-8 */
#define PG_JSON_F_INTEGER  0x4 /* number: no fraction and no exponent */
#define PG_JSON_F_PARTIAL  0x8 /* array: elements past the window not tokenized */

struct pg_json_tok {
	uint32_t start; /* string: first byte after the opening quote; else first byte */
	uint32_t end;   /* string: the closing quote; else one past the last byte */
	uint32_t next;  /* index of the token after this one's subtree */
	uint32_t size;  /* array: elements; object: members; else 0 */
	uint8_t type;   /* enum pg_json_type */
	uint8_t flags;  /* PG_JSON_F_* */
};

/*
 * A parse result. Object members are stored as a STRING token (the name)
 * followed by the value's subtree. Zero-initialise before the first parse;
 * the token array is kept across parses (it grows as needed, never beyond
 * one token per input byte) and released by pg_json_free().
 */
struct pg_json {
	const char *src;
	size_t len;
	struct pg_json_tok *tok;
	uint32_t ntok, cap;
	size_t window;       /* pg_json_parse_window()'s; 0: none */
	size_t err_pos;      /* on error: byte offset where it was found */
	const char *err_msg; /* on error: static text, e.g. "expected ':'" */
};

/*
 * Parse src[0..len). Returns 0 and the root is token 0; or -1 with err_pos
 * and err_msg set (ntok is then 0), including when memory runs out or len
 * is 4 GiB or more. The tokens point into src: keep it while using them.
 */
int pg_json_parse(struct pg_json *js, const char *src, size_t len);
void pg_json_free(struct pg_json *js);

/*
 * pg_json_parse() for a reader that needs only the start of long arrays
 * (key.c: its text stops at a code point limit). The whole input is
 * checked exactly as strictly, and the result is the same, except that an
 * array whose elements run on past window bytes from its '[' keeps only
 * the elements that start within them: its size counts those, its flags
 * have PG_JSON_F_PARTIAL, and the rest makes no tokens (so costs only the
 * scan of its bytes). The first element is always kept; objects are always
 * whole. window 0: pg_json_parse().
 */
int pg_json_parse_window(struct pg_json *js, const char *src, size_t len, size_t window);

/*
 * Parsing as the input arrives: a body received in pieces is parsed piece
 * by piece, so what is left once its last byte is in is that piece, not
 * the whole (proxy/body.c: a 1 MiB prompt). The result (tokens, verdict,
 * error position and message) is exactly pg_json_parse_window()'s over the
 * whole input (but for input of 4 GiB or more: the stream may find an
 * earlier error first); only the input's end is new each time. The fields
 * past js are json.c's own: where the parse stopped.
 */
struct pg_json_stream {
	struct pg_json js; /* the tokens so far; once rc <= 0, the result */
	int rc;            /* 1: more input wanted; 0: parsed; -1: error (js.err_*) */
	uint8_t at;        /* where to go on */
	uint8_t str_flags; /* a string stopped in: its flags so far */
	bool str_name;     /* it is a member name */
	unsigned depth, skim;
	size_t pos, word;
	struct pg_json_tok scratch;
	uint32_t stack[PG_JSON_MAX_DEPTH];
	bool is_obj[PG_JSON_MAX_DEPTH];
};

/* Start a parse with pg_json_parse_window()'s window (0: none). The token
 * array of ps->js is kept from a previous use. */
void pg_json_stream_init(struct pg_json_stream *ps, size_t window);

/*
 * Go on with src[0..len): all of the input so far, its first bytes the
 * ones fed before (src may have moved: tokens are offsets). final: there
 * is no more. Returns ps->rc: 1 while more is wanted (never when final),
 * then 0 or -1 as pg_json_parse_window() would. Feeding after that, less
 * than before, or (not final) no more than before changes nothing.
 */
int pg_json_stream_feed(struct pg_json_stream *ps, const char *src, size_t len, bool final);

/* Release the tokens (pg_json_free()). */
void pg_json_stream_free(struct pg_json_stream *ps);

/* Bytes js's token array holds (for a caller keeping it for reuse). */
static inline size_t pg_json_tok_bytes(const struct pg_json *js)
{
	return (size_t)js->cap * sizeof(*js->tok);
}

/* Iteration. Array elements: for (k = pg_json_first(i), n = 0; n < size;
 * n++, k = tok[k].next). Object members: the name at k, the value at k + 1,
 * the next name at tok[k + 1].next. */
static inline uint32_t pg_json_first(uint32_t i)
{
	return i + 1;
}

static inline uint32_t pg_json_member_next(const struct pg_json *js, uint32_t name)
{
	return js->tok[name + 1].next;
}

/* Value of member `name` (unescaped comparison) of object token obj: its
 * token index, or -1 if obj is not an object or has no such member. */
int64_t pg_json_find(const struct pg_json *js, uint32_t obj, const char *name, size_t nlen);

/* A member name to look for: s[0..len), unescaped. */
struct pg_json_name {
	const char *s;
	size_t len;
};

/* pg_json_find() for n distinct names in one pass over obj's
 * members: val[i] is the value of the last member named names[i], or -1.
 * Returns false (every val[i] -1) if obj is not an object. */
bool pg_json_find_n(const struct pg_json *js, uint32_t obj, const struct pg_json_name *names,
                    size_t n, int64_t *val);

/* Unescaped content of string token i equals s[0..n). */
bool pg_json_str_eq(const struct pg_json *js, uint32_t i, const char *s, size_t n);

/* Compare the unescaped contents of string tokens a and b (code point order,
 * which is also UTF-8 byte order): <0, 0, >0. */
int pg_json_str_cmp(const struct pg_json *js, uint32_t a, uint32_t b);

/*
 * Decode one code point of a string token. *pos: a byte offset inside the
 * token, start at tok.start; decoding is done when *pos reaches tok.end.
 * Returns the code point and advances *pos. A surrogate pair of escapes
 * decodes to one code point; a lone surrogate decodes to U+FFFD.
 */
uint32_t pg_json_str_next(const struct pg_json *js, size_t *pos);

/* Unescape string token i to UTF-8 into buf (up to cap bytes, no NUL
 * added). Returns the full unescaped length, which may exceed cap. */
size_t pg_json_str_copy(const struct pg_json *js, uint32_t i, char *buf, size_t cap);

/* Number token i as int64: 0, -EINVAL if it is not a number written as an
 * integer (fraction or exponent), -ERANGE if it does not fit. */
int pg_json_get_i64(const struct pg_json *js, uint32_t i, int64_t *out);

/* The string scan uses AVX2 where the CPU has it (x86-64), else SSE2 or
 * SWAR; all give the same results. For tests and benchmarks: on 0 turns
 * AVX2 off, 1 on if the CPU has it, -1 leaves it. Returns whether it is in
 * use. Not thread-safe against parses under way. */
bool pg_json_avx2(int on);

/* "object", "array", "string", "number", "boolean", "null". */
const char *pg_json_type_name(enum pg_json_type type);

/* Encode code point cp (<= 0x10FFFF, not a surrogate) as UTF-8 into
 * out[0..4); returns the byte count. */
size_t pg_utf8_encode(uint32_t cp, char *out);

#endif /* PG_JSON_H */
