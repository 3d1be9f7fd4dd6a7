/* SPDX-License-Identifier: MIT */
/*
 * The key text of key.h being built, pure: a growing buffer of UTF-8 that
 * stops at a code point limit, with the unescaping, the separator escapes
 * and the canonical JSON of tools that the key text's grammar (key.h)
 * defines. key.c walks the parsed body and calls these in grammar order.
 */
#ifndef PG_KEY_TEXT_H
#define PG_KEY_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "lib/json.h"

/* Zero-initialise with a limit; free(buf) when done. */
struct pg_text {
	char *buf;
	size_t len, cap;
	uint32_t ncp, limit; /* code points written, and the most allowed */
	bool oom;
	bool nonascii; /* a code point above U+007F was written */
	/* The first message whose role is "user": where it starts, and its end
	 * (past its RS) once written (cache_aware's anchor, key.h). */
	bool user_seen, user_done;
	size_t user_start, user_end;
	/* Code point counts whose byte offsets are wanted once the text is
	 * written (cache_aware's cuts): for each, the last point the writing
	 * passed at or before it, so pg_text_mark_offset() need not count the
	 * text from its start. Set with pg_text_mark(). */
	uint32_t mark[2], mark_ncp[2], mark_max;
	size_t mark_len[2];
};

/* Nothing more can be written: the limit is reached, or memory ran out. */
static inline bool pg_text_full(const struct pg_text *e)
{
	return e->ncp >= e->limit || e->oom;
}

/* Note where the writing is, for the marks (at each write). */
static inline void pg_text_checkpoint(struct pg_text *e)
{
	if (e->ncp > e->mark_max) /* past them all, or none set */
		return;
	for (int i = 0; i < 2; i++)
		if (e->ncp <= e->mark[i]) {
			e->mark_len[i] = e->len;
			e->mark_ncp[i] = e->ncp;
		}
}

/* Mark i is ncp code points past the point written so far. */
static inline void pg_text_mark(struct pg_text *e, int i, uint32_t ncp)
{
	e->mark[i] = e->ncp + ncp < e->ncp ? UINT32_MAX : e->ncp + ncp;
	if (e->mark[i] > e->mark_max)
		e->mark_max = e->mark[i];
	e->mark_len[i] = e->len;
	e->mark_ncp[i] = e->ncp;
}

/* The byte offset after mark i's code points (or the text's end). */
size_t pg_text_mark_offset(const struct pg_text *e, int i);

/* Room for n more bytes; false (and oom set) if memory runs out. */
bool pg_text_reserve(struct pg_text *e, size_t n);

/* One code point, unless full. */
void pg_text_cp_any(struct pg_text *e, uint32_t cp);

/* pg_text_cp_any, inline for the common cases (the separators, ASCII):
 * an ASCII code point past every mark, with room, or the limit reached. */
static inline void pg_text_cp(struct pg_text *e, uint32_t cp)
{
	if (e->ncp > e->mark_max) {
		if (pg_text_full(e))
			return;
		if (cp < 0x80 && e->len < e->cap) {
			e->buf[e->len++] = (char)cp;
			e->ncp++;
			return;
		}
	}
	pg_text_cp_any(e, cp);
}

/* ASCII bytes s[0..n), one code point each. */
void pg_text_ascii(struct pg_text *e, const char *s, size_t n);

/* TEXT(s) of key.h: the unescaped string token i, each ESC, US, RS or GS in
 * it preceded by an ESC; cut at the limit, never inside a sequence. */
void pg_text_string_any(struct pg_text *e, const struct pg_json *js, uint32_t i);

/* pg_text_string_any, inline for the common case (every message's role and
 * content): a string without escapes or non-ASCII bytes, past every mark,
 * that fits whole in the limit and the buffer, is copied as it is. */
static inline void pg_text_string(struct pg_text *e, const struct pg_json *js, uint32_t i)
{
	const struct pg_json_tok *t = &js->tok[i];
	const size_t n = t->end - t->start;

	if (!(t->flags & (PG_JSON_F_ESCAPED | PG_JSON_F_NONASCII)) && e->ncp > e->mark_max &&
	    !e->oom && n <= e->limit - e->ncp && n <= e->cap - e->len) {
		memcpy(e->buf + e->len, js->src + t->start, n);
		e->len += n;
		e->ncp += (uint32_t)n;
		return;
	}
	pg_text_string_any(e, js, i);
}

/* CANON(v) of key.h for the value at token i. scratch: room for one index
 * per token of i's subtree; sp: where this value's part of it starts (0). */
void pg_text_canonical(struct pg_text *e, const struct pg_json *js, uint32_t i, uint32_t *scratch,
                       uint32_t sp);

/* Byte offset in buf[0..len) after ncp code points from offset from
 * (ascii: buf holds no multi-byte sequence, so bytes are code points). */
size_t pg_text_cp_offset(const char *buf, size_t len, size_t from, uint32_t ncp, bool ascii);

/* What else a JSON body says, for flow control (key.h pg_key.max_tokens,
 * user_off, user_len): the first of the members max (max_tokens,
 * max_completion_tokens, max_output_tokens; -1: absent) that is a
 * non-negative integer, and the member user when a non-empty string.
 * key_request.c; key.c calls it. */
struct pg_key;
void pg_key_flow_fields(const struct pg_json *js, const int64_t max[3], int64_t user,
                        struct pg_key *out);

#endif /* PG_KEY_TEXT_H */
