// SPDX-License-Identifier: MIT
/*
 * The growable byte buffer (buf.h).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/buf.h"

bool pg_grow(char **p, size_t *cap, size_t need)
{
	size_t ncap = *cap ? *cap : PG_BUF_MIN_CAP;
	char *np;

	if (need <= *cap)
		return true;
	if (need > SIZE_MAX / 2)
		return false;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap);
	if (!np)
		return false;
	*p = np;
	*cap = ncap;
	return true;
}

char *pg_buf_reserve(struct pg_buf *b, size_t n)
{
	if (b->oom)
		return NULL;
	if (b->len + n > b->cap && b->off) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	/* need at least 1: the pointer returned is never NULL + 0 */
	if (b->len + n < b->len || !pg_grow(&b->p, &b->cap, b->len + n ? b->len + n : 1)) {
		b->oom = true;
		return NULL;
	}
	return b->p + b->len;
}

char *pg_buf_extend(struct pg_buf *b, size_t n)
{
	char *d = pg_buf_reserve(b, n);

	if (d)
		b->len += n;
	return d;
}

void pg_buf_append(struct pg_buf *b, const void *s, size_t n)
{
	char *d;

	if (!n || !(d = pg_buf_reserve(b, n)))
		return;
	memcpy(d, s, n);
	b->len += n;
}

void pg_buf_puts(struct pg_buf *b, const char *s)
{
	pg_buf_append(b, s, strlen(s));
}

void pg_buf_printf(struct pg_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !pg_buf_reserve(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	uint32_t cp;

	if (s[0] < 0xc2 || s[0] > 0xf4 || n < len)
		return 0;
	cp = s[0] & (0x3f >> (len - 1));
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

void pg_buf_json_str(struct pg_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, run = 0, l;

	pg_buf_append(b, "\"", 1);
	while (i < n) {
		if (u[i] >= 0x20 && u[i] < 0x7f && u[i] != '"' && u[i] != '\\') {
			i++;
			continue;
		}
		l = u[i] >= 0x80 ? utf8_len(u + i, n - i) : 0;
		if (l) {
			i += l;
			continue;
		}
		pg_buf_append(b, s + run, i - run);
		if (u[i] == '"' || u[i] == '\\')
			pg_buf_printf(b, "\\%c", u[i]);
		else if (u[i] == '\n')
			pg_buf_puts(b, "\\n");
		else if (u[i] < 0x80)
			pg_buf_printf(b, "\\u%04x", u[i]);
		else
			pg_buf_puts(b, "\\ufffd"); /* not UTF-8: the output stays valid */
		run = ++i;
	}
	pg_buf_append(b, s + run, n - run);
	pg_buf_append(b, "\"", 1);
}

void pg_buf_reset(struct pg_buf *b)
{
	b->len = b->off = 0;
	b->oom = false;
}

void pg_buf_free(struct pg_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void pg_bytes_room(char **buf, size_t len, size_t *cap, size_t n)
{
	if (len + n < len || !pg_grow(buf, cap, len + n))
		abort();
}
