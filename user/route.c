// SPDX-License-Identifier: MIT
#include "routestats.h"
#include "route.h"

static uint16_t choose(struct pg_gateway *gw, const struct pg_route_cfg *rc, const struct pg_key *key,
		       const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd,
		       struct pg_choice *choice)
{
	uint16_t cand[PG_RING_CANDIDATES];
	size_t ncand = 0;
	bool explicit_key =
		key->source == PG_KEY_SRC_HEADER || key->source == PG_KEY_SRC_CACHE_FIELD;

	if (rc->strategy == PG_STRATEGY_PREFIX_AWARE)
		ncand = pg_maps_candidates(&gw->maps, key->hash, cand);
	return pg_balance(rc, gw->maps.backends, pg_max_backend_id(gw), cand, ncand, exclude,
			  now_ms, rnd, explicit_key, choice);
}

/* What PREFIX_AWARE would choose for key now, with the same ring,
 * threshold and in-flight counts (those are the real routing's). */
static uint16_t shadow_choice(struct pg_gateway *gw, const struct pg_route_cfg *rc,
			      const struct pg_key *key, uint64_t now_ms, uint64_t rnd)
{
	struct pg_route_cfg pa = *rc;
	struct pg_choice ch;

	pa.strategy = PG_STRATEGY_PREFIX_AWARE;
	return choose(gw, &pa, key, NULL, now_ms, rnd, &ch);
}

static uint16_t route(struct pg_gateway *gw, const struct pg_route_input *in,
		      const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
		      struct pg_choice *choice, bool record)
{
	const uint64_t now = pg_now_ms();
	struct pg_route_cfg rc;
	uint16_t id, shadow = 0;

	pg_route_cfg_load(gw, &rc);
	pg_key_compute(in->api, in->header_key, in->body, in->body_len, in->complete,
		       rc.prefix_length, key, NULL, 0, NULL);
	id = choose(gw, &rc, key, exclude, now, rnd, choice);
	if (!record || !id)
		return id;
	if (gw->cfg && gw->cfg->shadow)
		shadow = rc.strategy == PG_STRATEGY_PREFIX_AWARE ? id
								 : shadow_choice(gw, &rc, key, now, rnd);
	pg_rstats_record(gw, key->hash, id, shadow, now);
	return id;
}

uint16_t pg_route(struct pg_gateway *gw, const struct pg_route_input *in,
		  const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
		  struct pg_choice *choice)
{
	return route(gw, in, exclude, rnd, key, choice, true);
}

uint16_t pg_route_dry(struct pg_gateway *gw, const struct pg_route_input *in,
		      const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
		      struct pg_choice *choice)
{
	return route(gw, in, exclude, rnd, key, choice, false);
}

uint16_t pg_route_again(struct pg_gateway *gw, const struct pg_key *key,
			const struct pg_idset *exclude, uint64_t rnd, struct pg_choice *choice)
{
	struct pg_route_cfg rc;

	pg_route_cfg_load(gw, &rc);
	return choose(gw, &rc, key, exclude, pg_now_ms(), rnd, choice);
}
