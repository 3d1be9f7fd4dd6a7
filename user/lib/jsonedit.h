/* SPDX-License-Identifier: MIT */
/*
 * Edits to a JSON object's top-level members, pure: set (replace or add),
 * or delete, with every byte not edited kept as it was (whitespace, member
 * order, escapes, numbers as written). Prefill/decode disaggregation
 * rewrites request bodies with it (max_tokens, stream, kv_transfer_params,
 * bootstrap_room...) and what it does not touch reaches the instance
 * byte-exact.
 *
 * - set: every member of that name is edited: the first's value replaced,
 *   the others (duplicates) deleted; absent, it is added after the last
 *   member.
 * - delete: every member of that name is removed, with one comma, so the
 *   object stays valid JSON.
 * Names compare as their unescaped text. Values are raw JSON text the
 * caller vouches for. No I/O; the output is appended to a pg_buf.
 */
#ifndef PG_JSONEDIT_H
#define PG_JSONEDIT_H

#include <stddef.h>
#include "lib/buf.h"
#include "lib/json.h"

struct pg_jedit {
	const char *name; /* member name, unescaped */
	size_t nlen;
	const char *value; /* raw JSON text; NULL: delete */
	size_t vlen;
};

/* Most edits of one call. */
#define PG_JEDIT_MAX 16

/*
 * js: a parse (pg_json_parse, or a window of one) of a document whose root
 * is an object. Appends the document with edits e[0..n) applied to out.
 * 0, or -1 (root not an object, n past PG_JEDIT_MAX, out of memory: out's
 * oom) with out unchanged in length.
 */
int pg_json_edit(const struct pg_json *js, const struct pg_jedit *e, size_t n, struct pg_buf *out);

#endif /* PG_JSONEDIT_H */
