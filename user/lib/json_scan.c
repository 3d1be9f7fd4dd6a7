// SPDX-License-Identifier: MIT
/*
 * The string scan's out-of-line part (see json_scan.h): the AVX2 scans and
 * the validation of non-ASCII text.
 */
#include "lib/json.h"
#include "lib/json_scan.h"
#ifdef PG_JSON_AVX2
#include <immintrin.h>
#endif

#ifdef PG_JSON_AVX2
bool pg_json_use_avx2;

__attribute__((constructor)) static void json_cpu_init(void)
{
	__builtin_cpu_init();
	pg_json_use_avx2 = __builtin_cpu_supports("avx2");
}

/* pg_json_sse2_plain(), 32 bytes wide. */
__attribute__((target("avx2"))) static inline __m256i avx2_plain(__m256i v)
{
	const __m256i two = _mm256_set1_epi8(2), lim = _mm256_set1_epi8(0x20);

	return _mm256_andnot_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\')),
	                           _mm256_cmpgt_epi8(_mm256_xor_si256(v, two), lim));
}

__attribute__((target("avx2"))) size_t pg_json_avx2_skip(const unsigned char *s, size_t p,
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
 * 32 bytes are left), or the block itself if ASCII precedes it; the caller
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

#endif

bool pg_json_avx2(int on)
{
#ifdef PG_JSON_AVX2
	if (on >= 0) {
		__builtin_cpu_init();
		pg_json_use_avx2 = on && __builtin_cpu_supports("avx2");
	}
	return pg_json_use_avx2;
#else
	(void)on;
	return false;
#endif
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
 * (json_scan.h) AVX2 takes long runs first; then a code point at a time,
 * one 4-byte load checking a sequence's form and range at once (utf8_seq()
 * for the last 3 bytes). Single plain ASCII bytes between words are taken
 * in stride; two in a row end the run (pg_json_plain_end() is faster on
 * ASCII).
 */
size_t pg_json_utf8_run(const unsigned char *s, size_t p, size_t len)
{
	uint32_t w, c;
	size_t n;

#ifdef PG_JSON_AVX2
	if (pg_json_use_avx2 && len - p >= 64)
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
