/* SPDX-License-Identifier: MIT */
/*
 * pg_json_find_n (json.h) for a name set known at compile time, inline: the
 * key text's walk (key.c) looks up "role" and "content" in every message,
 * and with the names' lengths and bytes constants each member costs a
 * length test and one or two word compares instead of a loop over a table
 * (measured: 175 instructions a message down to about 75; doc/benchmarks.md, Routing
 * cost). pg_json_find_n is this, called with a table known only at run
 * time.
 */
#ifndef PG_JSON_FIND_H
#define PG_JSON_FIND_H

#include <string.h>
#include "lib/json.h"

/* names: a static const table, n its size (both constants where it is
 * called, so the loops over them unroll and the compares fold). */
static inline __attribute__((always_inline)) bool
pg_json_find_fixed(const struct pg_json *js, uint32_t obj, const struct pg_json_name *names,
                   size_t n, int64_t *val)
{
	const bool is_obj = obj < js->ntok && js->tok[obj].type == PG_JSON_OBJECT;
	const uint32_t size = is_obj ? js->tok[obj].size : 0;
	uint32_t k = pg_json_first(obj);

#pragma GCC unroll 32
	for (size_t i = 0; i < n; i++)
		val[i] = -1;
	for (uint32_t m = 0; m < size; m++, k = pg_json_member_next(js, k)) {
		const struct pg_json_tok *t = &js->tok[k];
		const size_t len = t->end - t->start;
		const char *s = js->src + t->start;

		if (t->flags & PG_JSON_F_ESCAPED) {
#pragma GCC unroll 32
			for (size_t i = 0; i < n; i++)
				if (pg_json_str_eq(js, k, names[i].s, names[i].len)) {
					val[i] = k + 1;
					break; /* names are distinct */
				}
			continue;
		}
#pragma GCC unroll 32
		for (size_t i = 0; i < n; i++)
			if (len == names[i].len && !memcmp(s, names[i].s, names[i].len)) {
				val[i] = k + 1;
				break;
			}
	}
	return is_obj;
}

#endif /* PG_JSON_FIND_H */
