// SPDX-License-Identifier: MIT
/*
 * RANDOM (strategy.h): uniform over the usable backends. One scan into a
 * local list, then one draw: flags may change under us, and counting
 * first then picking in a second scan could disagree.
 */
#include "router/strategy.h"

static uint16_t choose(const struct pg_pick *p, struct pg_choice *out)
{
	uint16_t ids[PG_MAX_BACKENDS];
	unsigned max_id;
	size_t ncand, n = 0;

	pg_pick_start(p, &max_id, &ncand, out);
	for (unsigned id = 1; id <= max_id; id++)
		if (pg_backend_open(p->backends, id, p->exclude, p->now_ms))
			ids[n++] = (uint16_t)id;
	out->decision = PG_DEC_RANDOM;
	out->backend = n ? ids[pg_pick_index(p->rnd, n)] : 0;
	return out->backend;
}

const struct pg_strategy_ops pg_strategy_random = {.choose = choose};
