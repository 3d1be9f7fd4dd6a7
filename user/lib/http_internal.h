/* SPDX-License-Identifier: MIT */
/*
 * The head parser's character classes (http.c) as 256-byte tables: the
 * same sets as pg_frame_tchar() and pg_frame_fchar() in include/pg_frame.h
 * (the rules the chunked decoder and the BPF programs use), kept as tables
 * so each lookup in the parser's inner loops is a plain indexed load with a
 * compile-time address. tests/unit/test_http.c checks that both agree on
 * every byte. Also the case-insensitive comparison with a literal both
 * the parser and the field names (http_field.c) use. Not part of the
 * public API: include only from http.c, http_field.c (and that test).
 */
#ifndef PG_HTTP_INTERNAL_H
#define PG_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

/* tchar (RFC 9110 §5.6.2): the bytes of a method, field name or token. */
static const bool tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1,         ['&'] = 1,         ['\''] = 1,
    ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,         ['^'] = 1,         ['_'] = 1,
    ['`'] = 1, ['|'] = 1, ['~'] = 1, ['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1,
};

/* Field value / reason phrase bytes: VCHAR, obs-text, SP, HTAB. No CTL, no DEL. */
static const bool fchar[256] = {
    ['\t'] = 1,
    [' ' ... '~'] = 1,
    [0x80 ... 0xff] = 1,
};

/*
 * s[0..n) equals the lowercase literal lit, ASCII case-insensitive; with
 * us, '_' in s also matches '-' (see the framing fields in http.c's
 * field_seen).
 */
static inline bool eq_lower(const char *s, size_t n, const char *lit, size_t litlen, bool us)
{
	if (n != litlen)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 'A' && c <= 'Z')
			c += 'a' - 'A';
		if (us && c == '_')
			c = '-';
		if (c != (unsigned char)lit[i])
			return false;
	}
	return true;
}

#define EQ(s, n, lit)    eq_lower((s), (n), (lit), sizeof(lit) - 1, false)
#define EQ_US(s, n, lit) eq_lower((s), (n), (lit), sizeof(lit) - 1, true)

#endif /* PG_HTTP_INTERNAL_H */
