/* SPDX-License-Identifier: MIT */
/*
 * The string scan of the JSON parser (json.c), internal: which bytes of a
 * string need a look (quote, backslash, control characters, non-ASCII), and
 * the validation of non-ASCII text. The common case, a plain run, is inline
 * here (json.c calls it per string); the rest is in json_scan.c. SSE2 is
 * baseline on x86-64, SWAR elsewhere; AVX2 is used where the CPU has it,
 * chosen at start-up (pg_json_avx2() in json.h).
 */
#ifndef PG_JSON_SCAN_H
#define PG_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* -DPG_NO_SIMD builds the SWAR scan alone: the path of CPUs without SSE2,
 * to test it here. */
#if defined(__SSE2__) && !defined(PG_NO_SIMD)
#include <emmintrin.h>
#define PG_JSON_SSE2 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(PG_NO_SIMD)
#define PG_JSON_AVX2 1 /* an AVX2 scan, chosen at run time */
#endif

#define PG_JSON_ONES  0x0101010101010101ull
#define PG_JSON_HIGHS 0x8080808080808080ull

#ifdef PG_JSON_AVX2
extern bool pg_json_use_avx2; /* the CPU has AVX2 (and tests have not turned it off) */

/* Long strings: skip plain bytes from p 64 at a step. Returns the first
 * byte that is not plain, or an offset with fewer than 64 bytes left before
 * len (the caller scans on from there; an offset with 64 or more left is
 * always an answer). Reads nothing at or past len. */
size_t pg_json_avx2_skip(const unsigned char *s, size_t p, size_t len);
#endif

/*
 * A run of text with non-ASCII in it (e.g. CJK) from p, where s[p] is at
 * least 0x80, validated as UTF-8 (RFC 3629). Returns where the run ends: at
 * len, at an ASCII byte (the caller goes on), or at the first byte of an
 * invalid sequence (then s[return] >= 0x80).
 */
size_t pg_json_utf8_run(const unsigned char *s, size_t p, size_t len);

/* Nonzero if any byte of w is '"', '\\', below 0x20 or above 0x7f. Exact as
 * to "any", and the lowest set bit is exact (borrows only propagate above a
 * byte that matched). */
static inline uint64_t pg_json_swar_special(uint64_t w)
{
	uint64_t q = w ^ (PG_JSON_ONES * '"'), b = w ^ (PG_JSON_ONES * '\\');

	return (((q - PG_JSON_ONES) & ~q) | ((b - PG_JSON_ONES) & ~b) |
	        ((w - PG_JSON_ONES * 0x20) & ~w) | w) &
	       PG_JSON_HIGHS;
}

#ifdef PG_JSON_SSE2
/* 0xff in each byte of v that is plain string text: none of '"', '\\',
 * below 0x20 or above 0x7f. v ^ 2 maps '"' to 0x20 and the control
 * characters onto themselves, and no other byte below 0x21; bytes above 0x7f
 * are negative: so one signed comparison rules out three of the four. (The
 * mask is of plain bytes, not special ones, as "greater than" is the
 * comparison SSE2 has.) */
static inline __m128i pg_json_sse2_plain(__m128i v)
{
	const __m128i two = _mm_set1_epi8(2), lim = _mm_set1_epi8(0x20);

	return _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\')),
	                        _mm_cmpgt_epi8(_mm_xor_si128(v, two), lim));
}

static inline __m128i pg_json_load16(const unsigned char *s)
{
	return _mm_loadu_si128((const __m128i *)(const void *)s);
}
#endif

/*
 * Offset of the first byte of s[p..len) that pg_json_pg_json_swar_special() names, or len.
 * Reads nothing at or past len. Most strings of a request are short (member
 * names, roles: the first 16-byte step settles them) or long runs of text
 * with nothing to look at (AVX2 where the CPU has it, else SSE2 32 bytes a
 * step with their masks folded into one test). Inlined into the parse loop:
 * a call per member name would cost about as much as scanning it.
 */
static inline __attribute__((always_inline)) size_t pg_json_plain_end(const unsigned char *s,
                                                                      size_t p, size_t len)
{
	uint64_t w, m;

#ifdef PG_JSON_SSE2
	if (p + 16 <= len) {
		unsigned m16 =
		    (unsigned)_mm_movemask_epi8(pg_json_sse2_plain(pg_json_load16(s + p)));

		if (m16 != 0xffff)
			return p + (size_t)__builtin_ctz(~m16);
		p += 16;
#ifdef PG_JSON_AVX2
		if (pg_json_use_avx2 && p + 64 <= len) {
			p = pg_json_avx2_skip(s, p, len);
			if (p + 64 <= len)
				return p;
		}
#endif
		for (; p + 32 <= len; p += 32) {
			__m128i lo = pg_json_sse2_plain(pg_json_load16(s + p)),
			        hi = pg_json_sse2_plain(pg_json_load16(s + p + 16));

			if (_mm_movemask_epi8(_mm_and_si128(lo, hi)) != 0xffff)
				return p + (size_t)__builtin_ctz(
				               ~((unsigned)_mm_movemask_epi8(lo) |
				                 (unsigned)_mm_movemask_epi8(hi) << 16));
		}
		if (p + 16 <= len) {
			m16 =
			    (unsigned)_mm_movemask_epi8(pg_json_sse2_plain(pg_json_load16(s + p)));
			if (m16 != 0xffff)
				return p + (size_t)__builtin_ctz(~m16);
			p += 16;
		}
	}
#endif
	for (; p + 8 <= len; p += 8) {
		memcpy(&w, s + p, 8);
		m = pg_json_swar_special(w);
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

#endif /* PG_JSON_SCAN_H */
