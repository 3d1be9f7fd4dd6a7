// SPDX-License-Identifier: MIT
/*
 * Incremental decoder for chunked message bodies (RFC 9112 section 7.1),
 * see pg_chunked_feed in http.h. The per-byte rules are pg_chunk_step in
 * include/pg_frame.h, shared with the in-kernel response paths, which hand
 * the same state back and forth with this decoder. Pure: no I/O, no
 * allocation.
 */
#include <string.h>
#include "lib/http.h"

void pg_chunked_init(struct pg_frame *f)
{
	memset(f, 0, sizeof(*f));
	f->kind = PG_FRAME_CHUNKED;
	f->state = PG_CH_SIZE_START;
}

enum pg_chunked_rc pg_chunked_feed(struct pg_frame *f, const char *buf, size_t len,
                                   size_t *consumed, size_t *data_off, size_t *data_len)
{
	size_t i = 0;

	*data_off = 0;
	*data_len = 0;
	while (i < len && f->state != PG_CH_DONE && f->state != PG_CH_ERROR) {
		if (f->state == PG_CH_DATA) {
			size_t n = len - i;
			if (n > f->remaining)
				n = (size_t)f->remaining;
			f->remaining -= n;
			if (f->remaining == 0)
				f->state = PG_CH_DATA_CR;
			*data_off = i;
			*data_len = n;
			*consumed = i + n;
			return PG_CHUNKED_DATA;
		}
		pg_chunk_step(f, (unsigned char)buf[i++]);
	}
	*consumed = i;
	if (f->state == PG_CH_ERROR)
		return PG_CHUNKED_ERROR;
	return f->state == PG_CH_DONE ? PG_CHUNKED_DONE : PG_CHUNKED_MORE;
}
