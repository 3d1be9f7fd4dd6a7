// SPDX-License-Identifier: MIT
#include <limits.h>
#include "lib/fleet.h"
#include "state/fleetq.h"
#include "state/routestats.h"
#include "state/route.h"
#include "lib/cachechoice.h"
#include "lib/pd.h"
#include "lib/work.h"
#include "state/pools.h"

struct holder_rule {
	const struct pg_backend *backends;
	unsigned max_id;
	const struct pg_idset *exclude;
	uint64_t now_ms;
};

/* A holder counts when it could take the request at all: the balancer's
 * own test of a candidate. */
static bool holder_usable(uint16_t id, void *arg)
{
	const struct holder_rule *r = arg;

	return pg_backend_eligible(r->backends, r->max_id, id, r->exclude, r->now_ms);
}

/* cache_aware: where a request went is remembered by its anchor too
 * (pg_ca_anchor_key) while its blocks do not reach past the anchor, so
 * that with NewConversationChoices above 1 a conversation stays where its
 * first turn was placed however short its text. Recorded whatever the
 * choices, so that raising them live moves no conversation; explicit keys
 * keep the ring's choice. */
static bool place_anchor(const struct pg_key *key, const struct pg_key_blocks *kb)
{
	return !pg_key_source_explicit(key->source) &&
	       (uint64_t)kb->n * PG_CA_BLOCK < kb->anchor_len;
}

/* cache_aware: what the index says of the request (kb NULL: a retry, whose
 * blocks are gone: its size and anchor only), into rq and look; moves
 * key->anchor past a shared head that covers it (cachechoice.h). */
static void ca_view(struct pg_gateway *gw, unsigned pool, const struct pg_route_cfg *rc,
                    struct pg_key *key, const struct pg_key_blocks *kb, struct holder_rule *rule,
                    struct pg_ca_req *rq, struct pg_ca_look *look, uint16_t *placed)
{
	struct pg_ca_index ix = pg_cache_index(gw);
	const bool explicit_key = pg_key_source_explicit(key->source);

	*rq = (struct pg_ca_req){.prompt_tokens = key->tokens,
	                         .choices = rc->new_choices,
	                         .placed = placed,
	                         .work_base = PG_CA_WORK_BASE,
	                         .work_queued = PG_CA_WORK_QUEUED};
	*look = (struct pg_ca_look){.anchor = key->anchor};
	if (kb)
		pg_ca_look(&ix, kb->chain, kb->n, key->anchor, kb->anchor_len, kb->whole,
		           explicit_key,
		           __atomic_load_n(&gw->maps.state[pool].nbackends, __ATOMIC_RELAXED),
		           holder_usable, rule, look);
	key->anchor = look->anchor;
	pg_ca_req_from(rq, look);
	if (rc->new_choices > 1 && !explicit_key && ix.capacity_blocks)
		rq->nplaced =
		    pg_ca_holders(&ix, pg_ca_anchor_key(key->anchor), holder_usable, rule, placed);
}

/* kb: cache_aware's blocks (NULL when only the key is known: a retry goes
 * by its size and anchor alone). */
static uint16_t choose(struct pg_gateway *gw, unsigned pool, const struct pg_route_cfg *rc,
                       struct pg_key *key, const struct pg_key_blocks *kb,
                       const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd,
                       struct pg_choice *choice)
{
	uint16_t cand[PG_RING_CANDIDATES];
	size_t ncand = 0;
	bool explicit_key = pg_key_source_explicit(key->source);
	unsigned max_id = pg_max_backend_id(gw);

	if (rc->strategy == PG_STRATEGY_PREFIX_AWARE)
		ncand = pg_maps_pool_candidates(&gw->maps, pool, key->hash, cand);
	if (rc->strategy == PG_STRATEGY_CACHE_AWARE) {
		struct holder_rule rule = {gw->maps.backends, max_id, exclude, now_ms};
		uint16_t placed[PG_CA_WAYS];
		struct pg_ca_look look;
		struct pg_ca_req rq;

		ca_view(gw, pool, rc, key, kb, &rule, &rq, &look, placed);
		ncand = pg_maps_pool_candidates(&gw->maps, pool, key->anchor, cand);
		return pg_balance_cached(gw->maps.backends, max_id, cand, ncand, &rq, exclude,
		                         now_ms, explicit_key, choice);
	}
	return pg_balance(rc, gw->maps.backends, max_id, cand, ncand, exclude, now_ms, rnd,
	                  explicit_key, choice);
}

/* What PREFIX_AWARE would choose for key now, with the same ring,
 * threshold and in-flight counts (those are the real routing's). */
static uint16_t shadow_choice(struct pg_gateway *gw, unsigned pool, const struct pg_route_cfg *rc,
                              struct pg_key *key, const struct pg_idset *exclude, uint64_t now_ms,
                              uint64_t rnd)
{
	struct pg_route_cfg pa = *rc;
	struct pg_choice ch;

	pa.strategy = PG_STRATEGY_PREFIX_AWARE;
	return choose(gw, pool, &pa, key, NULL, exclude, now_ms, rnd, &ch);
}

/* chain[0..n) was sent to id: into the index, and in a fleet queued for
 * the other gateways' indexes too (never waits); request: the first of a
 * request's records, which the others count on their index clock as this
 * gateway did (pg_ca_tick). */
static void record_chain(struct pg_gateway *gw, const struct pg_ca_index *ix, unsigned worker,
                         const uint64_t *chain, uint32_t n, uint16_t id, bool request)
{
	unsigned ev = pg_ca_record(ix, chain, n, id);

	if (ev)
		__atomic_fetch_add(&gw->ca_evictions, ev, __ATOMIC_RELAXED);
	if (gw->fleetq)
		pg_fleetq_push(gw->fleetq, worker, id,
		               __atomic_load_n(&gw->maps.backends[id].epoch, __ATOMIC_RELAXED),
		               chain, n, request);
}

/* cache_aware: what was sent where (and, when place, where the anchor
 * went), and how long the match was. */
static void record_blocks(struct pg_gateway *gw, unsigned worker, const struct pg_key *key,
                          const struct pg_key_blocks *kb, uint16_t id, uint32_t matched, bool place)
{
	struct pg_ca_index ix = pg_cache_index(gw);
	uint32_t blocks = matched / (PG_CA_BLOCK / PG_CA_CHARS_PER_TOKEN);
	unsigned bucket = 0;

	while (blocks && bucket < PG_CA_MATCH_BUCKETS - 1) {
		bucket++;
		blocks >>= 1;
	}
	__atomic_fetch_add(&gw->ca_matched[bucket], 1, __ATOMIC_RELAXED);
	if (!ix.capacity_blocks)
		return;
	pg_ca_tick(&ix);
	if (kb->n)
		record_chain(gw, &ix, worker, kb->chain, kb->n, id, true);
	if (place) {
		/* a new anchor advances id's clock by one block it does not hold:
		 * once per conversation, against the blocks of every turn */
		const uint64_t anchor = pg_ca_anchor_key(key->anchor);

		record_chain(gw, &ix, worker, &anchor, 1, id, !kb->n);
	}
}

/* The routing config a decision uses: pool's live one, with the threshold
 * divided among the gateways in load mode SHARE (gw->fleet_share). */
static void decision_cfg(const struct pg_gateway *gw, unsigned pool, struct pg_route_cfg *rc)
{
	uint32_t share = __atomic_load_n(&gw->fleet_share, __ATOMIC_RELAXED);

	pg_route_cfg_load_pool(gw, pool, rc);
	if (share > 1)
		rc->concurrency_threshold = pg_fleet_threshold(rc->concurrency_threshold, share);
}

size_t pg_route_key_window(const struct pg_route_cfg *rc)
{
	return pg_key_window(pg_route_blocks(rc), rc->prefix_length);
}

/* The first token of key's request at id, as the load model predicts it
 * (ms): cache_aware's own estimate, else the model's with nothing cached. */
static double predicted_ttft(const struct pg_gateway *gw, bool ca, const struct pg_key *key,
                             const struct pg_choice *choice, uint16_t id, uint64_t now_ms)
{
	const struct pg_backend *b = &gw->maps.backends[id];
	struct pg_speed sp;

	if (ca && choice->est[0].id == id)
		return choice->est[0].ttft_ms;
	pg_work_speed(b, &sp);
	return pg_speed_predict(&sp, pg_work_queued(b, &sp, now_ms) + key->tokens,
	                        pg_work_decoding(b));
}

/* route()'s worker argument: a worker index (< gw->nworkers), or one of these */
#define NO_RECORD UINT_MAX /* the dry run: no side effect */

static uint16_t route(struct pg_gateway *gw, const struct pg_route_input *in,
                      const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
                      struct pg_choice *choice, unsigned worker)
{
	const uint64_t now = pg_now_ms();
	const unsigned pool = in->pool < gw->maps.npools ? in->pool : 0;
	struct pg_idset buf;
	const struct pg_idset *ex = pg_pool_exclude(gw, pool, exclude, &buf);
	struct pg_key_blocks kb;
	struct pg_route_cfg rc;
	uint16_t id, shadow = 0;
	bool ca;

	decision_cfg(gw, pool, &rc);
	ca = pg_route_blocks(&rc);
	pg_key_compute_ahead(in->api, in->header_key, in->body, in->body_len, in->complete, in->pre,
	                     rc.prefix_length, key, ca ? &kb : NULL, in->scratch);
	id = choose(gw, pool, &rc, key, ca ? &kb : NULL, ex, now, rnd, choice);
	choice->pool = (uint8_t)pool;
	choice->late =
	    id && in->budget_ms && predicted_ttft(gw, ca, key, choice, id, now) > in->budget_ms;
	if (choice->late)
		return 0;
	if (worker == NO_RECORD || !id)
		return id;
	if (ca)
		record_blocks(gw, worker, key, &kb, id, choice->matched, place_anchor(key, &kb));
	if (gw->cfg && gw->cfg->shadow)
		shadow = rc.strategy == PG_STRATEGY_PREFIX_AWARE
		             ? id
		             : shadow_choice(gw, pool, &rc, key,
		                             pg_pool_exclude(gw, pool, NULL, &buf), now, rnd);
	pg_rstats_record(gw, worker, key->anchor, id, shadow, now);
	return id;
}

uint16_t pg_route_worker(struct pg_gateway *gw, unsigned worker, const struct pg_route_input *in,
                         const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
                         struct pg_choice *choice)
{
	return route(gw, in, exclude, rnd, key, choice, worker < NO_RECORD ? worker : NO_RECORD);
}

uint16_t pg_route_dry(struct pg_gateway *gw, const struct pg_route_input *in,
                      const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
                      struct pg_choice *choice)
{
	return route(gw, in, exclude, rnd, key, choice, NO_RECORD);
}

enum pg_pd_route pg_route_pd(struct pg_gateway *gw, unsigned worker,
                             const struct pg_route_input *in, const struct pg_idset *pex,
                             const struct pg_idset *dex, uint64_t rnd, struct pg_key *key,
                             struct pg_choice *pchoice, struct pg_choice *dchoice)
{
	const uint64_t now = pg_now_ms();
	const unsigned pool = in->pool < gw->maps.npools ? in->pool : 0;
	const struct pg_pool_cfg *pc = &gw->pools->table->pool[pool];
	const unsigned dpool = pc->decode < gw->maps.npools ? pc->decode : pool;
	struct pg_idset pbuf, dbuf;
	struct pg_key_blocks kb;
	struct pg_route_cfg rc, dc;
	struct pg_key dk;
	uint16_t p = 0, d;
	bool pca, dca;

	decision_cfg(gw, pool, &rc);
	decision_cfg(gw, dpool, &dc);
	pca = pg_route_blocks(&rc);
	dca = pg_route_blocks(&dc);
	pg_key_compute_ahead(in->api, in->header_key, in->body, in->body_len, in->complete, in->pre,
	                     rc.prefix_length, key, pca || dca ? &kb : NULL, in->scratch);
	dk = *key;
	d = choose(gw, dpool, &dc, &dk, dca ? &kb : NULL, pg_pool_exclude(gw, dpool, dex, &dbuf),
	           now, rnd, dchoice);
	dchoice->pool = (uint8_t)dpool;
	if (!d)
		return PG_PDR_NONE;
	if (!pg_pd_decode_alone(key->tokens, dca ? dchoice->matched : 0, pc->pd_min_tokens)) {
		p = choose(gw, pool, &rc, key, pca ? &kb : NULL,
		           pg_pool_exclude(gw, pool, pex, &pbuf), now, rnd, pchoice);
		pchoice->pool = (uint8_t)pool;
	}
	if (worker == NO_RECORD)
		return p ? PG_PDR_PAIR : PG_PDR_ALONE;
	if (pca || dca) /* both hold the prompt's KV once it is sent on */
		record_blocks(gw, worker, &dk, &kb, d, dca ? dchoice->matched : 0,
		              place_anchor(&dk, &kb));
	if (p && (pca || dca))
		record_blocks(gw, worker, key, &kb, p, pca ? pchoice->matched : 0,
		              place_anchor(key, &kb));
	pg_rstats_record(gw, worker, key->anchor, p ? p : d, p ? p : d, now);
	return p ? PG_PDR_PAIR : PG_PDR_ALONE;
}

uint16_t pg_route_again(struct pg_gateway *gw, const struct pg_key *key,
                        const struct pg_idset *exclude, uint64_t rnd, struct pg_choice *choice)
{
	const unsigned pool = choice->pool < gw->maps.npools ? choice->pool : 0;
	struct pg_idset buf;
	struct pg_route_cfg rc;
	struct pg_key k = *key; /* as the first decision left it (its anchor moved) */
	uint16_t id;

	decision_cfg(gw, pool, &rc);
	id = choose(gw, pool, &rc, &k, NULL, pg_pool_exclude(gw, pool, exclude, &buf), pg_now_ms(),
	            rnd, choice);
	choice->pool = (uint8_t)pool;
	return id;
}

enum pg_room pg_route_room(struct pg_gateway *gw, unsigned pool, uint32_t queue_ms, uint64_t now_ms)
{
	const unsigned max = pg_max_backend_id(gw);
	const struct pg_backend *t = gw->maps.backends;
	struct pg_idset buf;
	const struct pg_idset *ex = pg_pool_exclude(gw, pool, NULL, &buf);
	bool usable = false;

	for (unsigned id = 1; id <= max; id++) {
		struct pg_speed sp;

		if (!pg_backend_eligible(t, max, id, ex, now_ms))
			continue;
		usable = true;
		pg_work_speed(&t[id], &sp);
		if (pg_work_queued(&t[id], &sp, now_ms) * sp.ms_per_ktok < 1000.0 * queue_ms)
			return PG_ROOM;
	}
	return usable ? PG_FULL : PG_NO_ONE;
}

bool pg_route_any_usable(struct pg_gateway *gw, uint64_t now_ms)
{
	unsigned max = pg_max_backend_id(gw);

	for (unsigned id = 1; id <= max; id++)
		if (pg_backend_usable(&gw->maps.backends[id], now_ms))
			return true;
	return false;
}
