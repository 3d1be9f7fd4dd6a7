/* SPDX-License-Identifier: MIT */
/*
 * Character classes shared by the HTTP head parser (http.c) and the chunked
 * decoder (http_chunked.c). Not part of the public API: include only from
 * those files. The tables are static so each lookup stays a plain indexed
 * load with a compile-time address.
 */
#ifndef PG_HTTP_INTERNAL_H
#define PG_HTTP_INTERNAL_H

#include <stdbool.h>
#include "lib/hexval.h"

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

static inline bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

#endif /* PG_HTTP_INTERNAL_H */
