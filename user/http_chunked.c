// SPDX-License-Identifier: MIT
/*
 * Incremental decoder for chunked message bodies (RFC 9112 section 7.1),
 * see pg_chunked_feed in http.h. Pure: no I/O, no allocation.
 */
#include <string.h>
#include "http.h"
#include "http_internal.h"

#define CHUNK_LINE_MAX    4096        /* chunk-size line incl. extensions */
#define CHUNK_TRAILER_MAX (64 * 1024) /* all trailer fields together */

/* ---- chunked decoder ----------------------------------------------------
 * chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
 * chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] )
 */
enum {
	CH_SIZE_START = 0, /* first hex digit of a chunk-size */
	CH_SIZE,           /* more hex digits, ';', BWS or CR */
	CH_SIZE_BWS,       /* BWS after the size: only ';' may follow */
	CH_EXT_NAME_START, /* after ';': BWS, then a token */
	CH_EXT_NAME,
	CH_EXT_NAME_BWS, /* BWS after a name: ';' or '=' */
	CH_EXT_VAL_START,
	CH_EXT_TOKEN,
	CH_EXT_QS,
	CH_EXT_QS_ESC,
	CH_EXT_VAL_END, /* after a value: BWS then ';', or CR */
	CH_EXT_VAL_BWS,
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TRAILER_START, /* start of a trailer line or of the final CRLF */
	CH_TRAILER_NAME,
	CH_TRAILER_VALUE,
	CH_TRAILER_LF,
	CH_FINAL_LF,
	CH_DONE,
	CH_ERROR,
};

void pg_chunked_init(struct pg_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CH_SIZE_START;
}

/* One byte of the framing (everything but chunk data). Returns the new state. */
static int chunk_step(struct pg_chunked *c, unsigned char ch)
{
	int h;

	switch (c->state) {
	case CH_SIZE_START:
	case CH_SIZE:
		h = hexval(ch);
		if (h >= 0) {
			if (++c->digits > 16)
				return CH_ERROR; /* beyond 64 bits, even if leading zeros */
			c->remaining = c->remaining << 4 | (unsigned)h;
			return CH_SIZE;
		}
		if (c->state == CH_SIZE_START)
			return CH_ERROR;
		if (ch == ';')
			return CH_EXT_NAME_START;
		if (ch == '\r')
			return CH_SIZE_LF;
		return is_ows(ch) ? CH_SIZE_BWS : CH_ERROR;
	case CH_SIZE_BWS:
	case CH_EXT_NAME_BWS:
	case CH_EXT_VAL_BWS:
		if (is_ows(ch))
			return c->state;
		if (ch == ';')
			return CH_EXT_NAME_START;
		if (ch == '=' && c->state == CH_EXT_NAME_BWS)
			return CH_EXT_VAL_START;
		return CH_ERROR;
	case CH_EXT_NAME_START:
		if (is_ows(ch))
			return c->state;
		return tchar[ch] ? CH_EXT_NAME : CH_ERROR;
	case CH_EXT_NAME:
		if (tchar[ch])
			return CH_EXT_NAME;
		if (ch == '=')
			return CH_EXT_VAL_START;
		if (ch == ';')
			return CH_EXT_NAME_START;
		if (ch == '\r')
			return CH_SIZE_LF;
		return is_ows(ch) ? CH_EXT_NAME_BWS : CH_ERROR;
	case CH_EXT_VAL_START:
		if (is_ows(ch))
			return c->state;
		if (ch == '"')
			return CH_EXT_QS;
		return tchar[ch] ? CH_EXT_TOKEN : CH_ERROR;
	case CH_EXT_TOKEN:
		if (tchar[ch])
			return CH_EXT_TOKEN;
		/* fall through */
	case CH_EXT_VAL_END:
		if (ch == ';')
			return CH_EXT_NAME_START;
		if (ch == '\r')
			return CH_SIZE_LF;
		return is_ows(ch) ? CH_EXT_VAL_BWS : CH_ERROR;
	case CH_EXT_QS:
		/* qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
		if (ch == '"')
			return CH_EXT_VAL_END;
		if (ch == '\\')
			return CH_EXT_QS_ESC;
		return fchar[ch] ? CH_EXT_QS : CH_ERROR;
	case CH_EXT_QS_ESC:
		return fchar[ch] ? CH_EXT_QS : CH_ERROR;
	case CH_SIZE_LF:
		if (ch != '\n')
			return CH_ERROR;
		c->line_len = 0;
		c->digits = 0;
		return c->remaining ? CH_DATA : CH_TRAILER_START;
	case CH_DATA_CR:
		return ch == '\r' ? CH_DATA_LF : CH_ERROR;
	case CH_DATA_LF:
		return ch == '\n' ? CH_SIZE_START : CH_ERROR;
	case CH_TRAILER_START:
		if (ch == '\r')
			return CH_FINAL_LF;
		return tchar[ch] ? CH_TRAILER_NAME : CH_ERROR; /* obs-fold, bare LF fail */
	case CH_TRAILER_NAME:
		if (tchar[ch])
			return CH_TRAILER_NAME;
		return ch == ':' ? CH_TRAILER_VALUE : CH_ERROR;
	case CH_TRAILER_VALUE:
		if (fchar[ch])
			return CH_TRAILER_VALUE;
		return ch == '\r' ? CH_TRAILER_LF : CH_ERROR;
	case CH_TRAILER_LF:
		return ch == '\n' ? CH_TRAILER_START : CH_ERROR;
	case CH_FINAL_LF:
		return ch == '\n' ? CH_DONE : CH_ERROR;
	}
	return CH_ERROR;
}

enum pg_chunked_rc pg_chunked_feed(struct pg_chunked *c, const char *buf, size_t len,
                                   size_t *consumed, size_t *data_off, size_t *data_len)
{
	size_t i = 0;

	*data_off = 0;
	*data_len = 0;
	while (i < len && c->state != CH_DONE && c->state != CH_ERROR) {
		if (c->state == CH_DATA) {
			size_t n = len - i;
			if (n > c->remaining)
				n = (size_t)c->remaining;
			c->remaining -= n;
			if (c->remaining == 0)
				c->state = CH_DATA_CR;
			*data_off = i;
			*data_len = n;
			*consumed = i + n;
			return PG_CHUNKED_DATA;
		}
		bool trailer = c->state >= CH_TRAILER_START;
		c->state = chunk_step(c, (unsigned char)buf[i++]);
		/* Bound the work one line (or all trailers) can make us do. */
		if (c->state != CH_DATA &&
		    ++c->line_len > (trailer ? CHUNK_TRAILER_MAX : CHUNK_LINE_MAX))
			c->state = CH_ERROR;
	}
	*consumed = i;
	if (c->state == CH_ERROR)
		return PG_CHUNKED_ERROR;
	return c->state == CH_DONE ? PG_CHUNKED_DONE : PG_CHUNKED_MORE;
}
