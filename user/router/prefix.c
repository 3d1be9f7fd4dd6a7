// SPDX-License-Identifier: MIT
/*
 * PREFIX_AWARE (strategy.h; SageMaker's): the first usable ring candidate
 * of the key whose requests in flight (pg_backend_inflight: this
 * gateway's and its peers') are below ConcurrencyThreshold: decision
 * AFFINITY (EXPLICIT_KEY for a client's key) if it is the first
 * candidate, OVERFLOW otherwise; if none, the least outstanding usable
 * backend (OVERFLOW, even when it happens to be the first candidate). A
 * later candidate taking the request because the first is down, draining
 * or excluded is OVERFLOW too. out->cand/ncand list the candidates.
 */
#include <string.h>

#include "router/strategy.h"

static uint16_t choose(const struct pg_pick *p, struct pg_choice *out)
{
	unsigned max_id;
	size_t ncand;

	pg_pick_start(p, &max_id, &ncand, out);
	out->ncand = (uint8_t)ncand;
	if (ncand)
		memcpy(out->cand, p->cand, ncand * sizeof(*p->cand));
	for (size_t i = 0; i < ncand; i++) {
		const uint16_t id = p->cand[i];

		if (!pg_backend_eligible(p->backends, max_id, id, p->exclude, p->now_ms) ||
		    pg_backend_inflight(&p->backends[id]) >= (int64_t)p->cfg->concurrency_threshold)
			continue;
		out->decision = i > 0             ? PG_DEC_OVERFLOW
		                : p->explicit_key ? PG_DEC_EXPLICIT_KEY
		                                  : PG_DEC_AFFINITY;
		out->backend = id;
		return id;
	}
	out->decision = PG_DEC_OVERFLOW;
	out->backend = pg_least_outstanding(p);
	return out->backend;
}

const struct pg_strategy_ops pg_strategy_prefix = {.choose = choose, .ring = true};
