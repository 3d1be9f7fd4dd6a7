/* SPDX-License-Identifier: MIT */
/*
 * Growable byte buffers: struct pg_buf for building replies (admin API,
 * /metrics), and pg_bytes_append for the plain arrays of the request path.
 * Pure: no I/O.
 */
#ifndef PG_BUF_H
#define PG_BUF_H

#include <stdbool.h>
#include <stddef.h>

/* A growing output buffer. Zero-initialised is empty; after an allocation
 * failure oom is set and further appends are dropped. */
struct pg_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

void pg_buf_append(struct pg_buf *b, const void *s, size_t n);
void pg_buf_puts(struct pg_buf *b, const char *s);
void pg_buf_printf(struct pg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s[0..n) as a JSON string literal, quotes included. Bytes >= 0x80 are
 * copied as they are (callers pass UTF-8 or ASCII). */
void pg_buf_json_str(struct pg_buf *b, const char *s, size_t n);
void pg_buf_free(struct pg_buf *b);

/* Append to a plain growable array of bytes (*buf may be NULL with *cap 0);
 * aborts on out of memory, for buffers on the request path. */
void pg_bytes_append(char **buf, size_t *len, size_t *cap, const void *data, size_t n);

#endif /* PG_BUF_H */
