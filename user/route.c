// SPDX-License-Identifier: MIT
#include "route.h"

static uint16_t choose(struct pg_gateway *gw, const struct pg_route_cfg *rc, const struct pg_key *key,
		       const struct pg_idset *exclude, uint64_t rnd, struct pg_choice *choice)
{
	uint16_t cand[PG_RING_CANDIDATES];
	size_t ncand = 0;
	bool explicit_key =
		key->source == PG_KEY_SRC_HEADER || key->source == PG_KEY_SRC_CACHE_FIELD;

	if (rc->strategy == PG_STRATEGY_PREFIX_AWARE)
		ncand = pg_maps_candidates(&gw->maps, key->hash, cand);
	return pg_balance(rc, gw->maps.backends, pg_max_backend_id(gw), cand, ncand, exclude,
			  pg_now_ms(), rnd, explicit_key, choice);
}

uint16_t pg_route(struct pg_gateway *gw, const struct pg_route_input *in,
		  const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
		  struct pg_choice *choice)
{
	struct pg_route_cfg rc;

	pg_route_cfg_load(gw, &rc);
	pg_key_compute(in->api, in->header_key, in->body, in->body_len, in->complete,
		       rc.prefix_length, key, NULL, 0, NULL);
	return choose(gw, &rc, key, exclude, rnd, choice);
}

uint16_t pg_route_again(struct pg_gateway *gw, const struct pg_key *key,
			const struct pg_idset *exclude, uint64_t rnd, struct pg_choice *choice)
{
	struct pg_route_cfg rc;

	pg_route_cfg_load(gw, &rc);
	return choose(gw, &rc, key, exclude, rnd, choice);
}
