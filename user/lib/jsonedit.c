// SPDX-License-Identifier: MIT
/* Edits to a JSON object's top-level members (jsonedit.h). */
#include <stdbool.h>
#include <stdint.h>
#include "lib/jsonedit.h"

/* Raw bounds of token t: a string's quotes included. */
static uint32_t raw_start(const struct pg_json_tok *t)
{
	return t->type == PG_JSON_STRING ? t->start - 1 : t->start;
}

static uint32_t raw_end(const struct pg_json_tok *t)
{
	return t->type == PG_JSON_STRING ? t->end + 1 : t->end;
}

static int edit_of(const struct pg_json *js, uint32_t name, const struct pg_jedit *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pg_json_str_eq(js, name, e[i].name, e[i].nlen))
			return (int)i;
	return -1;
}

static void span(struct pg_buf *out, const char *src, uint32_t from, uint32_t to)
{
	if (to > from)
		pg_buf_append(out, src + from, to - from);
}

static bool sep(char c)
{
	return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int pg_json_edit(const struct pg_json *js, const struct pg_jedit *e, size_t n, struct pg_buf *out)
{
	const struct pg_json_tok *root = js->ntok ? &js->tok[0] : NULL;
	const char *src = js->src;
	const size_t len0 = out->len;
	bool done[PG_JEDIT_MAX] = {false};
	uint32_t k, at, kept = 0;

	if (!root || root->type != PG_JSON_OBJECT || n > PG_JEDIT_MAX)
		return -1;
	span(out, src, 0, root->start + 1); /* what precedes the object, its '{' */
	at = root->start + 1;
	/* Member by member: one kept comes with the bytes before it (the
	 * separator after the one before); one deleted goes with them, or, if
	 * nothing was kept before it, with the separator after it. at: the
	 * first byte not yet copied nor dropped. */
	k = pg_json_first(0);
	for (uint32_t i = 0; i < root->size; i++, k = pg_json_member_next(js, k)) {
		const struct pg_json_tok *name = &js->tok[k], *val = &js->tok[k + 1];
		const int ed = edit_of(js, k, e, n);

		if (ed >= 0 && (!e[ed].value || done[ed])) {
			uint32_t after = raw_end(val);

			if (kept) { /* the separator before it goes with it */
				at = after;
				continue;
			}
			/* nothing kept before it: the separator after it goes,
			 * the whitespace before it stays (but not around an
			 * object left empty) */
			while (after < root->end && sep(src[after]) && src[after] != ',')
				after++;
			if (src[after] != ',') {
				at = raw_end(val);
				continue;
			}
			span(out, src, at, raw_start(name));
			for (after++; after < root->end && sep(src[after]); after++)
				;
			at = after;
			continue;
		}
		span(out, src, at, raw_start(name)); /* its separator, if any */
		if (ed >= 0) {                       /* the name as written, the new value */
			span(out, src, raw_start(name), raw_start(val));
			pg_buf_append(out, e[ed].value, e[ed].vlen);
			done[ed] = true;
		} else {
			span(out, src, raw_start(name), raw_end(val));
		}
		at = raw_end(val);
		kept++;
	}
	for (size_t i = 0; i < n; i++) { /* the rest are added after the last */
		if (done[i] || !e[i].value)
			continue;
		if (kept++)
			pg_buf_append(out, ",", 1);
		pg_buf_json_str(out, e[i].name, e[i].nlen);
		pg_buf_append(out, ":", 1);
		pg_buf_append(out, e[i].value, e[i].vlen);
	}
	span(out, src, at, (uint32_t)js->len); /* whitespace, '}', what follows */
	if (out->oom) {
		out->len = len0;
		return -1;
	}
	return 0;
}
