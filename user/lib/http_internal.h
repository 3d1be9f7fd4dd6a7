/* SPDX-License-Identifier: MIT */
/*
 * The head parser's character classes (http.c) as 256-byte tables: the
 * same sets as pg_frame_tchar() and pg_frame_fchar() in include/pg_frame.h
 * (the rules the chunked decoder and the BPF programs use), kept as tables
 * so each lookup in the parser's inner loops is a plain indexed load with a
 * compile-time address. tests/unit/test_http.c checks that both agree on
 * every byte. Not part of the public API: include only from http.c (and
 * that test).
 */
#ifndef PG_HTTP_INTERNAL_H
#define PG_HTTP_INTERNAL_H

#include <stdbool.h>

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

#endif /* PG_HTTP_INTERNAL_H */
