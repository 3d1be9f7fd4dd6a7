/* SPDX-License-Identifier: MIT */
/* One decision through the strategies' table (router/strategy.h), its
 * inputs as arguments: the unit tests' shorthand for a struct pg_pick. */
#ifndef PG_TEST_BALANCE_ARGS_H
#define PG_TEST_BALANCE_ARGS_H

#include "router/strategy.h"

static inline uint16_t balance(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                               unsigned max_id, const uint16_t *cand, size_t ncand,
                               const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd,
                               bool explicit_key, struct pg_choice *out)
{
	const struct pg_pick p = {.cfg = cfg,
	                          .backends = backends,
	                          .max_id = max_id,
	                          .cand = cand,
	                          .ncand = ncand,
	                          .exclude = exclude,
	                          .now_ms = now_ms,
	                          .rnd = rnd,
	                          .explicit_key = explicit_key};

	return pg_balance(&p, out);
}

#endif /* PG_TEST_BALANCE_ARGS_H */
