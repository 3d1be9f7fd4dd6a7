// SPDX-License-Identifier: MIT
/*
 * Strict JSON parser (see json.h). One pass over the input with an explicit
 * stack of open containers (no recursion, so no stack overflow on hostile
 * nesting). Strings, which are most of an LLM request body, are scanned
 * 32 bytes at a time (SSE2, baseline on x86-64; 8 with SWAR elsewhere; long
 * strings 64 at a time with AVX2 where the CPU has it) until a byte needs
 * attention (quote, backslash, control character or non-ASCII).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PG_JSON_AVX2 1 /* an AVX2 scan, chosen at run time */
#endif
#include "lib/hexval.h"
#include "lib/json.h"

#define ONES  0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

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

/* Grow the token array; it never needs more than one token per byte. */
static int tok_grow(struct pg_json *js)
{
	/* LLM request bodies are mostly long strings: a token per 128 bytes
	 * of input is a first size that seldom needs to grow. */
	size_t ncap = js->cap ? (size_t)js->cap * 2 : 64 + js->len / 128;
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
	while (pos < len && s[pos] <= ' ' &&
	       (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t'))
		pos++;
	return pos;
}

/* Nonzero if any byte of w is '"', '\\', below 0x20 or above 0x7f. Exact as
 * to "any", and the lowest set bit is exact (borrows only propagate above a
 * byte that matched). */
static inline uint64_t swar_special(uint64_t w)
{
	uint64_t q = w ^ (ONES * '"'), b = w ^ (ONES * '\\');

	return (((q - ONES) & ~q) | ((b - ONES) & ~b) | ((w - ONES * 0x20) & ~w) | w) & HIGHS;
}

#ifdef __SSE2__
/* 0xff in each byte of v that is plain string text: none of '"', '\\',
 * below 0x20 or above 0x7f. v ^ 2 maps '"' to 0x20 and the control
 * characters onto themselves, and no other byte below 0x21; bytes above 0x7f
 * are negative: so one signed comparison rules out three of the four. (The
 * mask is of plain bytes, not special ones, as "greater than" is the
 * comparison SSE2 has.) */
static inline __m128i sse2_plain(__m128i v)
{
	const __m128i two = _mm_set1_epi8(2), lim = _mm_set1_epi8(0x20);

	return _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')),
	                        _mm_cmpgt_epi8(_mm_xor_si128(v, two), lim));
}

static inline __m128i load16(const unsigned char *s)
{
	return _mm_loadu_si128((const __m128i *)(const void *)s);
}
#endif

#ifdef PG_JSON_AVX2
static bool use_avx2;

__attribute__((constructor)) static void json_cpu_init(void)
{
	__builtin_cpu_init();
	use_avx2 = __builtin_cpu_supports("avx2");
}

/* sse2_plain(), 32 bytes wide. */
__attribute__((target("avx2"))) static inline __m256i avx2_plain(__m256i v)
{
	const __m256i two = _mm256_set1_epi8(2), lim = _mm256_set1_epi8(0x20);

	return _mm256_andnot_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\')),
	                           _mm256_cmpgt_epi8(_mm256_xor_si256(v, two), lim));
}

/* Long strings: skip plain bytes from p 64 at a step. Returns the first
 * byte that is not plain, or an offset with fewer than 64 bytes left before
 * len (the caller scans on from there; an offset with 64 or more left is
 * always an answer). Reads nothing at or past len. */
__attribute__((target("avx2"))) static size_t avx2_skip(const unsigned char *s, size_t p,
                                                        size_t len)
{
	for (; p + 64 <= len; p += 64) {
		__m256i lo = avx2_plain(_mm256_loadu_si256((const __m256i *)(const void *)(s + p)));
		__m256i hi =
		    avx2_plain(_mm256_loadu_si256((const __m256i *)(const void *)(s + p + 32)));
		uint64_t m;

		if ((unsigned)_mm256_movemask_epi8(_mm256_and_si256(lo, hi)) == 0xffffffffu)
			continue;
		m = (uint64_t)(unsigned)_mm256_movemask_epi8(lo) |
		    (uint64_t)(unsigned)_mm256_movemask_epi8(hi) << 32;
		return p + (size_t)__builtin_ctzll(~m);
	}
	return p;
}
#endif

/*
 * UTF-8 validation 32 bytes a step (Keiser and Lemire, "Validating UTF-8 in
 * less than one instruction per byte", 2021): each byte and the one before
 * it index three 16-entry tables whose AND names the error that pair makes;
 * the 3rd and 4th bytes of a sequence, which look like an error (two
 * continuation bytes in a row), are told apart by the lead two or three
 * bytes back. Error bits:
 */
#define U8_TOO_SHORT  0x01 /* lead, then no continuation */
#define U8_TOO_LONG   0x02 /* ASCII, then a continuation */
#define U8_OVERLONG_3 0x04 /* E0 80-9F */
#define U8_TOO_LARGE  0x08 /* F4 90-BF; F5-FF 90-BF */
#define U8_SURROGATE  0x10 /* ED A0-BF */
#define U8_OVERLONG_2 0x20 /* C0-C1, then a continuation */
#define U8_TOO_LARGE2 0x40 /* F5-FF 80-8F; and F0 80-8F (overlong) */
#define U8_TWO_CONTS  0x80 /* continuation, then continuation */
#define U8_CARRY      (U8_TOO_SHORT | U8_TOO_LONG | U8_TWO_CONTS)

#define DUP16(...) __VA_ARGS__, __VA_ARGS__

/* By the high nibble of the byte before. */
static const uint8_t u8_prev_high[32] = {
    DUP16(U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG, U8_TOO_LONG,
          U8_TOO_LONG, U8_TWO_CONTS, U8_TWO_CONTS, U8_TWO_CONTS, U8_TWO_CONTS,
          U8_TOO_SHORT | U8_OVERLONG_2, U8_TOO_SHORT, U8_TOO_SHORT | U8_OVERLONG_3 | U8_SURROGATE,
          U8_TOO_SHORT | U8_TOO_LARGE | U8_TOO_LARGE2)};
/* By the low nibble of the byte before. */
static const uint8_t u8_prev_low[32] = {DUP16(
    U8_CARRY | U8_OVERLONG_2 | U8_OVERLONG_3 | U8_TOO_LARGE2, U8_CARRY | U8_OVERLONG_2, U8_CARRY,
    U8_CARRY, U8_CARRY | U8_TOO_LARGE, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2 | U8_SURROGATE,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2, U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE2)};
/* By the high nibble of the byte itself. */
static const uint8_t u8_cur_high[32] = {
    DUP16(U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT,
          U8_TOO_SHORT, U8_TOO_SHORT,
          U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_OVERLONG_3 | U8_TOO_LARGE2,
          U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_OVERLONG_3 | U8_TOO_LARGE,
          U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE,
          U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE, U8_TOO_SHORT,
          U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT)};

__attribute__((target("avx2"))) static inline __m256i load32(const void *p)
{
	return _mm256_loadu_si256((const __m256i *)p);
}

/*
 * Long runs of non-ASCII text from p (at the first byte of a code point,
 * after complete ones): skip 32-byte blocks that are valid UTF-8 and hold
 * no quote, backslash or control character. Returns the first byte of the
 * last code point before the first other block (or before where fewer than
 * 32 bytes are left), or the block itself if ASCII precedes it; utf8_run()
 * goes on from there exactly, errors included.
 */
__attribute__((target("avx2"))) static size_t avx2_utf8_skip(const unsigned char *s, size_t p,
                                                             size_t len)
{
	const __m256i ph = load32(u8_prev_high), pl = load32(u8_prev_low), ch = load32(u8_cur_high),
	              nib = _mm256_set1_epi8(0x0f);
	__m256i prev = _mm256_setzero_si256(), v, c, p1, p2, p3, x, err;
	size_t start = p, q;

	for (; p + 32 <= len; p += 32, prev = v) {
		v = load32(s + p);
		/* '"' ^ 2 and the control characters are the bytes <= 0x20 */
		x = _mm256_xor_si256(v, _mm256_set1_epi8(2));
		err = _mm256_or_si256(
		    _mm256_cmpeq_epi8(_mm256_min_epu8(x, _mm256_set1_epi8(0x20)), x),
		    _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\')));
		/* the bytes 1, 2 and 3 places before each */
		c = _mm256_permute2x128_si256(prev, v, 0x21);
		p1 = _mm256_alignr_epi8(v, c, 15);
		p2 = _mm256_alignr_epi8(v, c, 14);
		p3 = _mm256_alignr_epi8(v, c, 13);
		x = _mm256_and_si256(
		    _mm256_and_si256(
		        _mm256_shuffle_epi8(ph, _mm256_and_si256(_mm256_srli_epi16(p1, 4), nib)),
		        _mm256_shuffle_epi8(pl, _mm256_and_si256(p1, nib))),
		    _mm256_shuffle_epi8(ch, _mm256_and_si256(_mm256_srli_epi16(v, 4), nib)));
		/* two continuations in a row are right 2 bytes after E0-FF and 3
		 * after F0-FF, and only there */
		c = _mm256_and_si256(_mm256_or_si256(_mm256_subs_epu8(p2, _mm256_set1_epi8(0x60)),
		                                     _mm256_subs_epu8(p3, _mm256_set1_epi8(0x70))),
		                     _mm256_set1_epi8((char)0x80));
		err = _mm256_or_si256(err, _mm256_xor_si256(x, c));
		if (!_mm256_testz_si256(err, err))
			break;
	}
	/* back to the lead of the last code point before p: its sequence (or
	 * its error) may run on into the block not taken */
	for (q = p; q > start && (s[q - 1] & 0xc0) == 0x80; q--)
		;
	return q > start && s[q - 1] >= 0xc0 ? q - 1 : q;
}

bool pg_json_avx2(int on)
{
#ifdef PG_JSON_AVX2
	if (on >= 0) {
		__builtin_cpu_init();
		use_avx2 = on && __builtin_cpu_supports("avx2");
	}
	return use_avx2;
#else
	(void)on;
	return false;
#endif
}

/*
 * Offset of the first byte of s[p..len) that swar_special() names, or len.
 * Reads nothing at or past len. Most strings of a request are short (member
 * names, roles: the first 16-byte step settles them) or long runs of text
 * with nothing to look at (AVX2 where the CPU has it, else SSE2 32 bytes a
 * step with their masks folded into one test). Inlined into the parse loop:
 * a call per member name would cost about as much as scanning it.
 */
static inline __attribute__((always_inline)) size_t plain_end(const unsigned char *s, size_t p,
                                                              size_t len)
{
	uint64_t w, m;

#ifdef __SSE2__
	if (p + 16 <= len) {
		unsigned m16 = (unsigned)_mm_movemask_epi8(sse2_plain(load16(s + p)));

		if (m16 != 0xffff)
			return p + (size_t)__builtin_ctz(~m16);
		p += 16;
#ifdef PG_JSON_AVX2
		if (use_avx2 && p + 64 <= len) {
			p = avx2_skip(s, p, len);
			if (p + 64 <= len)
				return p;
		}
#endif
		for (; p + 32 <= len; p += 32) {
			__m128i lo = sse2_plain(load16(s + p)), hi = sse2_plain(load16(s + p + 16));

			if (_mm_movemask_epi8(_mm_and_si128(lo, hi)) != 0xffff)
				return p + (size_t)__builtin_ctz(
				               ~((unsigned)_mm_movemask_epi8(lo) |
				                 (unsigned)_mm_movemask_epi8(hi) << 16));
		}
		if (p + 16 <= len) {
			m16 = (unsigned)_mm_movemask_epi8(sse2_plain(load16(s + p)));
			if (m16 != 0xffff)
				return p + (size_t)__builtin_ctz(~m16);
			p += 16;
		}
	}
#endif
	for (; p + 8 <= len; p += 8) {
		memcpy(&w, s + p, 8);
		m = swar_special(w);
		if (m) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return p + (size_t)__builtin_ctzll(m) / 8;
#else
			break; /* borrows run toward lower addresses: the byte loop */
#endif
		}
	}
	while (p < len && s[p] >= 0x20 && s[p] < 0x80 && s[p] != '"' && s[p] != '\\')
		p++;
	return p;
}

/* Length of the valid UTF-8 sequence (2-4 bytes) at s, or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t avail)
{
	unsigned c = s[0], lo = 0x80, hi = 0xbf;

	if (c < 0xc2)
		return 0;
	if (c < 0xe0)
		return avail >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c < 0xf0) {
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		else if (c == 0xed)
			hi = 0x9f; /* UTF-16 surrogates */
		if (avail < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80)
			return 0;
		return 3;
	}
	if (c < 0xf5) {
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		else if (c == 0xf4)
			hi = 0x8f; /* above U+10FFFF */
		if (avail < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xc0) != 0x80 ||
		    (s[3] & 0xc0) != 0x80)
			return 0;
		return 4;
	}
	return 0;
}

/* Bytes s[0..4) as a little-endian word: s[0] in the low byte. */
static inline uint32_t load_le32(const unsigned char *s)
{
	uint32_t w;

	memcpy(&w, s, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	w = __builtin_bswap32(w);
#endif
	return w;
}

/*
 * A run of text with non-ASCII in it (e.g. CJK) from p, where s[p] is at
 * least 0x80: validated a code point at a time, one 4-byte load checking a
 * sequence's form and range at once (utf8_seq() for the last 3 bytes).
 * Single plain ASCII bytes between words are taken in stride; two in a row
 * end the run (plain_end() is faster on ASCII). Returns where the run ends:
 * at len, at an ASCII byte, or at the first byte of an invalid sequence
 * (then s[return] >= 0x80).
 */
static size_t utf8_run(const unsigned char *s, size_t p, size_t len)
{
	uint32_t w, c;
	size_t n;

#ifdef PG_JSON_AVX2
	if (use_avx2 && len - p >= 64)
		p = avx2_utf8_skip(s, p, len);
#endif
	while (len - p >= 4) {
		w = load_le32(s + p);
		c = w & 0xff;
		if ((w & 0xc0c0f0) == 0x8080e0) {
			/* 3 bytes; E0 80-9F is overlong, ED A0-BF a surrogate */
			if ((w & 0xe0ff) == 0x80e0 || (w & 0xe0ff) == 0xa0ed)
				return p;
			p += 3;
		} else if (c < 0x80) {
			if (!(w & 0x8000) || c < 0x20 || c == '"' || c == '\\')
				return p;
			p++;
		} else if ((w & 0xc0e0) == 0x80c0) {
			if (!(c & 0x1e)) /* C0, C1: overlong */
				return p;
			p += 2;
		} else if ((w & 0xc0c0c0f8) == 0x808080f0) {
			/* 4 bytes; F0 80-8F is overlong, F4 90-BF and F5-F7 above U+10FFFF */
			if (c > 0xf4 || (w & 0xf0ff) == 0x80f0 ||
			    (c == 0xf4 && (w & 0xf000) != 0x8000))
				return p;
			p += 4;
		} else {
			return p;
		}
	}
	while (p < len && s[p] >= 0x80) {
		n = utf8_seq(s + p, len - p);
		if (!n)
			return p;
		p += n;
	}
	return p;
}

/*
 * The rest of a string from p, where plain_end() stopped on a byte that is
 * not the closing quote: escapes, non-ASCII text and errors. Returns the
 * offset of the closing quote, or SIZE_MAX after fail().
 */
static size_t string_rest(struct pg_json *js, size_t p, uint8_t *flags)
{
	const unsigned char *s = (const unsigned char *)js->src;
	size_t len = js->len, n;

	for (;; p = plain_end(s, p, len)) {
		if (p >= len)
			return fail_off(js, p, "unterminated string");
		switch (s[p]) {
		case '"':
			return p;
		case '\\':
			*flags |= PG_JSON_F_ESCAPED;
			if (p + 1 >= len)
				return fail_off(js, p, "unterminated string");
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
				if (p + 6 > len || hexval(s[p + 2]) < 0 || hexval(s[p + 3]) < 0 ||
				    hexval(s[p + 4]) < 0 || hexval(s[p + 5]) < 0)
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
			n = utf8_run(s, p, len);
			if (n < len && s[n] >= 0x80)
				return fail_off(js, n, "invalid UTF-8");
			p = n;
			*flags |= PG_JSON_F_NONASCII;
		}
	}
}

/* Scan the string whose opening quote is at *pos into token t; on success
 * *pos is one past the closing quote. Inline: most strings are a plain run
 * and their quote. */
static inline __attribute__((always_inline)) int scan_string(struct pg_json *js, size_t *pos,
                                                             struct pg_json_tok *t)
{
	const unsigned char *s = (const unsigned char *)js->src;
	size_t p = plain_end(s, *pos + 1, js->len);
	uint8_t flags = 0;

	if (p >= js->len || s[p] != '"') {
		p = string_rest(js, p, &flags);
		if (p == SIZE_MAX)
			return -1;
	}
	t->type = PG_JSON_STRING;
	t->start = (uint32_t)(*pos + 1);
	t->end = (uint32_t)p;
	t->flags = flags;
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

static int scan_literal(struct pg_json *js, size_t *pos, struct pg_json_tok *t)
{
	static const struct {
		const char *word;
		size_t len;
		uint8_t type;
	} lit[] = {
	    {"true", 4, PG_JSON_TRUE}, {"false", 5, PG_JSON_FALSE}, {"null", 4, PG_JSON_NULL}};

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

int pg_json_parse(struct pg_json *js, const char *src, size_t len)
{
	const unsigned char *s = (const unsigned char *)src;
	uint32_t stack[PG_JSON_MAX_DEPTH], top;
	struct pg_json_tok *t;
	unsigned depth = 0;
	size_t pos = 0;
	bool obj;

	js->src = src;
	js->len = len;
	js->ntok = 0;
	js->err_pos = 0;
	js->err_msg = NULL;
	if (len >= UINT32_MAX)
		return fail(js, 0, "input is 4 GiB or more");

value:
	pos = skip_ws(s, len, pos);
	if (pos >= len)
		return fail(js, pos, "expected a value");
	t = tok_alloc(js, pos);
	if (!t)
		return fail(js, pos, "out of memory");
	switch (s[pos]) {
	case '{':
	case '[':
		if (depth == PG_JSON_MAX_DEPTH)
			return fail(js, pos, "nested deeper than 256");
		obj = s[pos] == '{';
		t->type = obj ? PG_JSON_OBJECT : PG_JSON_ARRAY;
		stack[depth++] = js->ntok - 1;
		pos = skip_ws(s, len, pos + 1);
		if (pos < len && s[pos] == (obj ? '}' : ']'))
			goto close;
		t->size = 1;
		if (obj)
			goto member;
		goto value;
	case '"':
		if (scan_string(js, &pos, t))
			return -1;
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
	if (!depth) {
		if (pos != len)
			return fail(js, pos, "unexpected data after the value");
		return 0;
	}
	top = stack[depth - 1];
	obj = js->tok[top].type == PG_JSON_OBJECT;
	if (pos >= len)
		return fail(js, pos, obj ? "unterminated object" : "unterminated array");
	if (s[pos] == ',') {
		pos++;
		js->tok[top].size++;
		if (obj)
			goto member;
		goto value;
	}
	if (s[pos] != (obj ? '}' : ']'))
		return fail(js, pos, obj ? "expected ',' or '}'" : "expected ',' or ']'");
close:
	top = stack[--depth];
	js->tok[top].end = (uint32_t)(pos + 1);
	js->tok[top].next = js->ntok;
	pos++;
	goto after_value;

member:
	pos = skip_ws(s, len, pos);
	if (pos >= len || s[pos] != '"')
		return fail(js, pos, "expected a member name string");
	t = tok_alloc(js, pos);
	if (!t)
		return fail(js, pos, "out of memory");
	if (scan_string(js, &pos, t))
		return -1;
	pos = skip_ws(s, len, pos);
	if (pos >= len || s[pos] != ':')
		return fail(js, pos, "expected ':'");
	pos++;
	goto value;
}

void pg_json_free(struct pg_json *js)
{
	free(js->tok);
	js->tok = NULL;
	js->ntok = js->cap = 0;
}

static uint32_t hex4(const unsigned char *s)
{
	return (uint32_t)(hexval(s[0]) << 12 | hexval(s[1]) << 8 | hexval(s[2]) << 4 |
	                  hexval(s[3]));
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

/* a[0..n) == b[0..n), without a call for the short names JSON objects
 * mostly have (4 to 8 bytes: two overlapping 4-byte compares). */
static inline bool bytes_eq(const char *a, const char *b, size_t n)
{
	uint32_t a0, b0, a1, b1;

	if (n < 4 || n > 8)
		return !memcmp(a, b, n);
	memcpy(&a0, a, 4);
	memcpy(&b0, b, 4);
	memcpy(&a1, a + n - 4, 4);
	memcpy(&b1, b + n - 4, 4);
	return a0 == b0 && a1 == b1;
}

/* Name token k equals name[0..nlen), unescaped; without a call for the
 * common name that has no escape. */
static inline bool name_eq(const struct pg_json *js, uint32_t k, const char *name, size_t nlen)
{
	const struct pg_json_tok *t = &js->tok[k];

	if (!(t->flags & PG_JSON_F_ESCAPED))
		return t->end - t->start == nlen && bytes_eq(js->src + t->start, name, nlen);
	return pg_json_str_eq(js, k, name, nlen);
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
	uint32_t k = pg_json_first(obj), found = 0; /* bit i: names[i] seen */
	bool is_obj = obj < js->ntok && js->tok[obj].type == PG_JSON_OBJECT;

	for (uint32_t m = 0; is_obj && m < js->tok[obj].size; m++, k = pg_json_member_next(js, k))
		for (size_t i = 0; i < n; i++)
			if (name_eq(js, k, names[i].s, names[i].len)) {
				val[i] = k + 1;
				found |= 1u << i;
				break; /* names are distinct */
			}
	for (size_t i = 0; i < n; i++)
		if (!(found >> i & 1))
			val[i] = -1;
	return is_obj;
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
