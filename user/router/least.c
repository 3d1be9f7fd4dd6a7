// SPDX-License-Identifier: MIT
/*
 * LEAST_OUTSTANDING_REQUESTS (strategy.h): the usable backend with the
 * lowest load (pg_backend_load under the configured load signal), ties
 * broken uniformly by rnd.
 */
#include "router/strategy.h"

/* Tied ids are collected during the one scan and one is drawn afterwards,
 * instead of counting first and picking in a second scan: counts change
 * under us, and a second scan could disagree with the first. */
uint16_t pg_least_outstanding(const struct pg_pick *p)
{
	const unsigned max_id = p->max_id < PG_MAX_BACKENDS - 1 ? p->max_id : PG_MAX_BACKENDS - 1;
	uint16_t ties[PG_MAX_BACKENDS];
	size_t nties = 0;
	int64_t best = INT64_MAX;

	for (unsigned id = 1; id <= max_id; id++) {
		int64_t load;

		if (!pg_backend_open(p->backends, id, p->exclude, p->now_ms))
			continue;
		load = pg_backend_load(&p->backends[id], p->cfg->load_signal, p->now_ms);
		if (load < best) {
			best = load;
			nties = 0;
		}
		if (load == best)
			ties[nties++] = (uint16_t)id;
	}
	return nties ? ties[pg_pick_index(p->rnd, nties)] : 0;
}

static uint16_t choose(const struct pg_pick *p, struct pg_choice *out)
{
	unsigned max_id;
	size_t ncand;

	pg_pick_start(p, &max_id, &ncand, out);
	out->decision = PG_DEC_LEAST_OUTSTANDING;
	out->backend = pg_least_outstanding(p);
	return out->backend;
}

const struct pg_strategy_ops pg_strategy_least = {.choose = choose};
