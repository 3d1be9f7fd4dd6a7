/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 message-body framing state — one definition for the proxy's
 * chunked decoder (user/lib/http_chunked.c) and the in-kernel response paths
 * (bpf/splice.bpf.c), so a response's end is found by the same rules
 * whichever side reads its bytes, and the state can be handed across:
 * the proxy gives the program the state after the bytes it forwarded itself,
 * the program gives it back after the bytes it redirected.
 *
 * Included by the BPF program (only <linux/types.h> before it) and by
 * userspace. Pure: no helpers, no libc.
 *
 * Chunked grammar (RFC 9112 section 7.1):
 *   chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
 *   chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] )
 *   last-chunk trailer-section CRLF
 * Limits: 16 hex digits per chunk-size, PG_CHUNK_LINE_MAX bytes per
 * chunk-size line (extensions included), PG_CHUNK_TRAILER_MAX bytes of
 * trailers. No obs-fold, no bare LF.
 */
#ifndef PG_FRAME_H
#define PG_FRAME_H

#include <linux/types.h>

#define PG_CHUNK_LINE_MAX    4096        /* chunk-size line incl. extensions */
#define PG_CHUNK_TRAILER_MAX (64 * 1024) /* all trailer fields together */

enum pg_frame_kind {
	PG_FRAME_NONE = 0,    /* not tracked: the body ends with the connection */
	PG_FRAME_LENGTH = 1,  /* Content-Length: `remaining` body bytes left */
	PG_FRAME_CHUNKED = 2, /* Transfer-Encoding: chunked: `state` below */
};

/* Chunked decoder states (pg_frame.state). */
enum pg_chunk_state {
	PG_CH_SIZE_START = 0, /* first hex digit of a chunk-size */
	PG_CH_SIZE,           /* more hex digits, ';', BWS or CR */
	PG_CH_SIZE_BWS,       /* BWS after the size: only ';' may follow */
	PG_CH_EXT_NAME_START, /* after ';': BWS, then a token */
	PG_CH_EXT_NAME,
	PG_CH_EXT_NAME_BWS, /* BWS after a name: ';' or '=' */
	PG_CH_EXT_VAL_START,
	PG_CH_EXT_TOKEN,
	PG_CH_EXT_QS,
	PG_CH_EXT_QS_ESC,
	PG_CH_EXT_VAL_END, /* after a value: BWS then ';', or CR */
	PG_CH_EXT_VAL_BWS,
	PG_CH_SIZE_LF,
	PG_CH_DATA, /* `remaining` bytes of chunk data left */
	PG_CH_DATA_CR,
	PG_CH_DATA_LF,
	PG_CH_TRAILER_START, /* start of a trailer line or of the final CRLF */
	PG_CH_TRAILER_NAME,
	PG_CH_TRAILER_VALUE,
	PG_CH_TRAILER_LF,
	PG_CH_FINAL_LF,
	PG_CH_DONE,
	PG_CH_ERROR,
};

/*
 * Where a body stands. Zeroed = PG_FRAME_NONE. For a chunked body start
 * from { .kind = PG_FRAME_CHUNKED } (state PG_CH_SIZE_START); for a
 * Content-Length body from { .kind = PG_FRAME_LENGTH, .remaining = length }.
 */
struct pg_frame {
	__u64 remaining; /* LENGTH: body bytes left; CHUNKED: data bytes left in the chunk */
	__u32 kind;      /* enum pg_frame_kind */
	__u32 state;     /* CHUNKED: enum pg_chunk_state */
	__u32 digits;    /* CHUNKED: hex digits of the chunk-size so far */
	__u32 line_len;  /* CHUNKED: bytes of this chunk-size line, or of all trailers */
};
_Static_assert(sizeof(struct pg_frame) == 24, "pg_frame layout");

/* True once the whole body has gone by (a NONE body never ends by framing). */
static inline int pg_frame_done(const struct pg_frame *f)
{
	if (f->kind == PG_FRAME_LENGTH)
		return f->remaining == 0;
	return f->kind == PG_FRAME_CHUNKED && f->state == PG_CH_DONE;
}

static inline int pg_frame_hex(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* tchar (RFC 9110 section 5.6.2). */
static inline int pg_frame_tchar(unsigned char c)
{
	if ((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))
		return 1;
	switch (c) {
	case '!':
	case '#':
	case '$':
	case '%':
	case '&':
	case '\'':
	case '*':
	case '+':
	case '-':
	case '.':
	case '^':
	case '_':
	case '`':
	case '|':
	case '~':
		return 1;
	}
	return 0;
}

/* Field value bytes: VCHAR, obs-text, SP, HTAB. */
static inline int pg_frame_fchar(unsigned char c)
{
	return c == '\t' || (c >= ' ' && c != 0x7f);
}

static inline int pg_frame_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

static inline __u32 pg_chunk_next(struct pg_frame *f, unsigned char ch)
{
	int h;

	switch (f->state) {
	case PG_CH_SIZE_START:
	case PG_CH_SIZE:
		h = pg_frame_hex(ch);
		if (h >= 0) {
			if (++f->digits > 16)
				return PG_CH_ERROR; /* beyond 64 bits, even if leading zeros */
			f->remaining = f->remaining << 4 | (__u64)h;
			return PG_CH_SIZE;
		}
		if (f->state == PG_CH_SIZE_START)
			return PG_CH_ERROR;
		if (ch == ';')
			return PG_CH_EXT_NAME_START;
		if (ch == '\r')
			return PG_CH_SIZE_LF;
		return pg_frame_ows(ch) ? PG_CH_SIZE_BWS : PG_CH_ERROR;
	case PG_CH_SIZE_BWS:
	case PG_CH_EXT_NAME_BWS:
	case PG_CH_EXT_VAL_BWS:
		if (pg_frame_ows(ch))
			return f->state;
		if (ch == ';')
			return PG_CH_EXT_NAME_START;
		if (ch == '=' && f->state == PG_CH_EXT_NAME_BWS)
			return PG_CH_EXT_VAL_START;
		return PG_CH_ERROR;
	case PG_CH_EXT_NAME_START:
		if (pg_frame_ows(ch))
			return f->state;
		return pg_frame_tchar(ch) ? PG_CH_EXT_NAME : PG_CH_ERROR;
	case PG_CH_EXT_NAME:
		if (pg_frame_tchar(ch))
			return PG_CH_EXT_NAME;
		if (ch == '=')
			return PG_CH_EXT_VAL_START;
		if (ch == ';')
			return PG_CH_EXT_NAME_START;
		if (ch == '\r')
			return PG_CH_SIZE_LF;
		return pg_frame_ows(ch) ? PG_CH_EXT_NAME_BWS : PG_CH_ERROR;
	case PG_CH_EXT_VAL_START:
		if (pg_frame_ows(ch))
			return f->state;
		if (ch == '"')
			return PG_CH_EXT_QS;
		return pg_frame_tchar(ch) ? PG_CH_EXT_TOKEN : PG_CH_ERROR;
	case PG_CH_EXT_TOKEN:
		if (pg_frame_tchar(ch))
			return PG_CH_EXT_TOKEN;
		/* fall through */
	case PG_CH_EXT_VAL_END:
		if (ch == ';')
			return PG_CH_EXT_NAME_START;
		if (ch == '\r')
			return PG_CH_SIZE_LF;
		return pg_frame_ows(ch) ? PG_CH_EXT_VAL_BWS : PG_CH_ERROR;
	case PG_CH_EXT_QS:
		/* qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
		if (ch == '"')
			return PG_CH_EXT_VAL_END;
		if (ch == '\\')
			return PG_CH_EXT_QS_ESC;
		return pg_frame_fchar(ch) ? PG_CH_EXT_QS : PG_CH_ERROR;
	case PG_CH_EXT_QS_ESC:
		return pg_frame_fchar(ch) ? PG_CH_EXT_QS : PG_CH_ERROR;
	case PG_CH_SIZE_LF:
		if (ch != '\n')
			return PG_CH_ERROR;
		f->line_len = 0;
		f->digits = 0;
		return f->remaining ? PG_CH_DATA : PG_CH_TRAILER_START;
	case PG_CH_DATA_CR:
		return ch == '\r' ? PG_CH_DATA_LF : PG_CH_ERROR;
	case PG_CH_DATA_LF:
		return ch == '\n' ? PG_CH_SIZE_START : PG_CH_ERROR;
	case PG_CH_TRAILER_START:
		if (ch == '\r')
			return PG_CH_FINAL_LF;
		return pg_frame_tchar(ch) ? PG_CH_TRAILER_NAME : PG_CH_ERROR;
	case PG_CH_TRAILER_NAME:
		if (pg_frame_tchar(ch))
			return PG_CH_TRAILER_NAME;
		return ch == ':' ? PG_CH_TRAILER_VALUE : PG_CH_ERROR;
	case PG_CH_TRAILER_VALUE:
		if (pg_frame_fchar(ch))
			return PG_CH_TRAILER_VALUE;
		return ch == '\r' ? PG_CH_TRAILER_LF : PG_CH_ERROR;
	case PG_CH_TRAILER_LF:
		return ch == '\n' ? PG_CH_TRAILER_START : PG_CH_ERROR;
	case PG_CH_FINAL_LF:
		return ch == '\n' ? PG_CH_DONE : PG_CH_ERROR;
	}
	return PG_CH_ERROR;
}

/*
 * Feed one byte of chunked framing (anything but chunk data: the caller
 * skips PG_CH_DATA's `remaining` bytes itself). Updates f->state and bounds
 * the bytes one line, or all trailers, may take. Returns the new state.
 */
static inline __u32 pg_chunk_step(struct pg_frame *f, unsigned char ch)
{
	int trailer = f->state >= PG_CH_TRAILER_START;

	f->state = pg_chunk_next(f, ch);
	if (f->state != PG_CH_DATA &&
	    ++f->line_len > (trailer ? PG_CHUNK_TRAILER_MAX : PG_CHUNK_LINE_MAX))
		f->state = PG_CH_ERROR;
	return f->state;
}

#endif /* PG_FRAME_H */
