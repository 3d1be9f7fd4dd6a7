/* SPDX-License-Identifier: MIT */
/*
 * The growable byte buffer, one definition for the gateway and the tools
 * (pgload, mockllm, prefixgatectl link it from libprefixgate.a). Pure: no
 * I/O.
 *
 * struct pg_buf builds replies (admin API, /metrics) and queues bytes
 * (mockllm's input and output); pg_bytes_append grows the plain
 * (pointer, length, capacity) arrays of the request path with the same
 * rule: capacity doubles, starting at PG_BUF_MIN_CAP.
 */
#ifndef PG_BUF_H
#define PG_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PG_BUF_MIN_CAP 1024 /* the first allocation, in bytes */

/*
 * Zero-initialised is empty. The bytes held are p[off..len): off counts
 * bytes a reader has consumed from the front (0 unless the owner advances
 * it); growing drops them first. After an allocation failure oom is set and
 * further appends are dropped, until pg_buf_reset().
 */
struct pg_buf {
	char *p;
	size_t len, cap;
	size_t off;
	bool oom;
};

/*
 * Room for n more bytes: returns p + len, with at least n bytes writable
 * there, or NULL (and sets oom) when the allocation fails. len is not
 * changed: the caller writes, then adds what it wrote to len. Drops
 * p[0..off) first when that is needed to make room. Moves p.
 */
char *pg_buf_reserve(struct pg_buf *b, size_t n);
/* Append n bytes for the caller to fill: returns where they start, or NULL
 * (len unchanged) when the allocation fails. */
char *pg_buf_extend(struct pg_buf *b, size_t n);
void pg_buf_append(struct pg_buf *b, const void *s, size_t n);
void pg_buf_puts(struct pg_buf *b, const char *s);
/* Appends the formatted text; p[len] is then '\0' (not counted in len). */
void pg_buf_printf(struct pg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as a JSON string literal, quotes included. Valid UTF-8 is copied
 * as it is; a byte that does not start a valid sequence becomes \ufffd. */
void pg_buf_json_str(struct pg_buf *b, const char *s, size_t n);
/* Empty it (len, off and oom to 0) and keep the memory. */
void pg_buf_reset(struct pg_buf *b);
/* Free the memory; the buffer is empty and reusable. */
void pg_buf_free(struct pg_buf *b);

/* Grow *p (capacity *cap) to hold at least need bytes, the capacity
 * doubling from PG_BUF_MIN_CAP: the one growth rule of every buffer. false
 * (and *p, *cap unchanged) on out of memory or when need is too large. */
bool pg_grow(char **p, size_t *cap, size_t need);
/* Room for n more bytes after len in a plain growable array of bytes (*buf
 * may be NULL with *cap 0); aborts on out of memory, for buffers on the
 * request path. */
void pg_bytes_room(char **buf, size_t len, size_t *cap, size_t n);
/* Append to such an array: inline, a copy when there is room (a head is
 * written a dozen short pieces at a time). */
static inline void pg_bytes_append(char **buf, size_t *len, size_t *cap, const void *data, size_t n)
{
	if (n > *cap - *len)
		pg_bytes_room(buf, *len, cap, n);
	if (n)
		memcpy(*buf + *len, data, n);
	*len += n;
}

/* Lower-case hex digits, for every hex number the gateway writes. */
#define PG_HEX_DIGITS "0123456789abcdef"
/* Room for a uint64_t in decimal (or hex), and a sign. */
#define PG_DIGITS_MAX 21
/* v in base 10 or 16 (lower case), written to end at end (no NUL): where
 * it starts. The request path's numbers (Content-Length, chunk sizes,
 * token ids), without printf. */
static inline char *pg_digits(char *end, uint64_t v, unsigned base)
{
	do
		*--end = PG_HEX_DIGITS[v % base];
	while (v /= base);
	return end;
}

#endif /* PG_BUF_H */
