// SPDX-License-Identifier: MIT
#include <limits.h>
#include <math.h>
#include <string.h>
#include "lib/fleet.h"
#include "lib/pd.h"
#include "router/cache.h"
#include "router/capacity.h"
#include "router/load.h"
#include "router/route.h"
#include "router/work.h"

struct holder_rule {
	const struct pg_router *r;
	unsigned max_id;
	const struct pg_idset *exclude;
	uint64_t now_ms;
	const uint64_t *anchor; /* the request's (its look's, as it moves) */
	uint64_t head;          /* its shared head's last block prefix (0: none) */
};

/* A holder counts when it could take the request at all (the strategies'
 * own test of a candidate) and still holds the request's conversation as
 * far as its learned bound in conversations goes (router/capacity.h). */
static bool holder_usable(uint16_t id, void *arg)
{
	const struct holder_rule *h = arg;

	return pg_backend_eligible(h->r->maps->backends, h->max_id, id, h->exclude, h->now_ms) &&
	       pg_capacity_holds(h->r, id, *h->anchor);
}

static bool holds(const struct pg_ca_index *ix, uint64_t h, uint16_t id)
{
	uint16_t ids[PG_CA_WAYS];
	const size_t n = pg_ca_holders(ix, h, NULL, NULL, ids);

	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* Whether id was sent the request's shared head lately: as a shared head
 * (pg_ca_head_key), or before it was one, as its first holders were
 * (they hold its last block still). */
static bool head_sent(uint16_t id, void *arg)
{
	const struct holder_rule *h = arg;
	const struct pg_ca_index ix = pg_router_index(h->r);

	return holds(&ix, pg_ca_head_key(h->head, id), id) || holds(&ix, h->head, id);
}

static bool backend_full(uint16_t id, void *arg)
{
	return pg_capacity_full(arg, id);
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
 * key->anchor past a shared head that covers it (router/cache.h). */
static void ca_view(const struct pg_router *r, unsigned pool, const struct pg_route_cfg *rc,
                    struct pg_key *key, const struct pg_key_blocks *kb, struct holder_rule *rule,
                    struct pg_ca_req *rq, struct pg_ca_look *look, uint16_t *placed)
{
	struct pg_ca_index ix = pg_router_index(r);
	const bool explicit_key = pg_key_source_explicit(key->source);

	*rq = (struct pg_ca_req){.prompt_tokens = key->tokens,
	                         .choices = rc->new_choices,
	                         .placed = placed,
	                         .work_base = r->ca_work_base,
	                         .work_queued = r->ca_work_queued,
	                         .full = r->caps ? backend_full : NULL,
	                         .full_arg = (void *)r};
	*look = (struct pg_ca_look){.anchor = key->anchor};
	rule->anchor = &look->anchor;
	if (kb)
		pg_ca_look(&ix, kb->chain, kb->n, key->anchor, kb->anchor_len, kb->whole,
		           explicit_key,
		           __atomic_load_n(&r->maps->state[pool].nbackends, __ATOMIC_RELAXED),
		           holder_usable, rule, look);
	key->anchor = look->anchor;
	pg_ca_req_from(rq, look);
	if (kb && look->shared_blocks) {
		rule->head = kb->chain[look->shared_blocks - 1];
		rq->head_sent = head_sent;
		rq->head_arg = rule;
	}
	if (rc->new_choices > 1 && !explicit_key && ix.capacity_blocks)
		rq->nplaced =
		    pg_ca_holders(&ix, pg_ca_anchor_key(key->anchor), holder_usable, rule, placed);
}

/* Into *full: p's exclusions and every backend without room under
 * queue_ms, but, when holders, those p->ca (cache_aware) lists as holding
 * more of the request than its shared head; whether some usable backend
 * has room. */
static bool without_room(uint32_t queue_ms, const struct pg_pick *p, bool holders,
                         struct pg_idset *full)
{
	bool left = false;

	if (p->exclude)
		*full = *p->exclude;
	else
		memset(full, 0, sizeof(*full));
	for (unsigned id = 1; id <= p->max_id; id++) {
		if (!pg_backend_open(p->backends, id, p->exclude, p->now_ms))
			continue;
		if (pg_route_has_room(&p->backends[id], queue_ms, p->now_ms))
			left = true;
		else if (!holders || !p->ca || !pg_ca_holds_more(p->ca, (uint16_t)id))
			pg_idset_add(full, id);
	}
	return left;
}

/* By rc's strategy (strategy.h): the ring's candidates for the key (its
 * anchor for cache_aware, once the index moved it), and for cache_aware
 * what the index says; kb: cache_aware's blocks (NULL when only the key
 * is known: a retry goes by its size and anchor alone); prio: its flow
 * control class (route.h pg_route_input). */
static uint16_t choose(const struct pg_router *r, unsigned pool, const struct pg_route_cfg *rc,
                       struct pg_key *key, const struct pg_key_blocks *kb,
                       const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd, uint8_t prio,
                       struct pg_choice *choice)
{
	const struct pg_strategy_ops *s = pg_strategy_of(rc->strategy);
	uint16_t cand[PG_RING_CANDIDATES], placed[PG_CA_WAYS];
	struct pg_pick p = {.cfg = rc,
	                    .backends = r->maps->backends,
	                    .max_id = pg_router_max_id(r),
	                    .cand = cand,
	                    .exclude = exclude,
	                    .now_ms = now_ms,
	                    .rnd = rnd,
	                    .explicit_key = pg_key_source_explicit(key->source)};
	struct pg_ca_look look;
	struct pg_ca_req rq;
	struct pg_idset full;
	/* lives as long as the choice: rq's callbacks read it */
	struct holder_rule rule = {r, p.max_id, exclude, now_ms, NULL, 0};

	if (s->blocks) {
		ca_view(r, pool, rc, key, kb, &rule, &rq, &look, placed);
		p.ca = &rq;
	}
	/* flow control: only instances with room, whatever the strategy (a
	 * request is sent on when one has; none with room: as without); for
	 * cache_aware, below the critical class, also the instances that hold
	 * more of the request than its shared head: its cost there counts
	 * their queue, and sent elsewhere its prefill would be done again
	 * (without them, the fleet's hit rate on the trace fell from 0.32 to
	 * 0.13: doc/results/flow.txt). A critical request goes for its own
	 * first token: a holder without room has lower classes' work queued
	 * that it would wait behind, traded by the cost's work term for the
	 * fleet's prefill. */
	if (rc->flow_queue_ms && without_room(pg_route_class_room(rc->flow_queue_ms, prio), &p,
	                                      prio != PG_PRIO_CRITICAL, &full))
		p.exclude = &full;
	if (s->ring)
		p.ncand = pg_maps_pool_candidates(r->maps, pool,
		                                  s->blocks ? key->anchor : key->hash, cand);
	return s->choose(&p, choice);
}

/* What PREFIX_AWARE would choose for key now, with the same ring,
 * threshold and in-flight counts (those are the real routing's). */
static uint16_t shadow_choice(const struct pg_router *r, unsigned pool,
                              const struct pg_route_cfg *rc, struct pg_key *key,
                              const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd)
{
	struct pg_route_cfg pa = *rc;
	struct pg_choice ch;

	pa.strategy = PG_STRATEGY_PREFIX_AWARE;
	return choose(r, pool, &pa, key, NULL, exclude, now_ms, rnd, PG_PRIO_CRITICAL, &ch);
}

/* chain[0..n) was sent to id: into the index, and in a fleet queued for
 * the other gateways' indexes too (never waits); request: the first of a
 * request's records, which the others count on their index clock as this
 * gateway did (pg_ca_tick). */
static void record_chain(const struct pg_router *r, const struct pg_ca_index *ix, unsigned worker,
                         const uint64_t *chain, uint32_t n, uint16_t id, bool request)
{
	unsigned ev = pg_ca_record(ix, chain, n, id);

	if (ev)
		__atomic_fetch_add((uint64_t *)&r->ca_evictions, ev, __ATOMIC_RELAXED);
	if (r->out && r->out->sent)
		r->out->sent(r, worker, id,
		             __atomic_load_n(&r->maps->backends[id].epoch, __ATOMIC_RELAXED), chain,
		             n, request);
}

/* cache_aware: what was sent where (and, when place, where the anchor
 * went; with a shared head of shared tokens, that id was sent it), and how
 * long the match was. */
static void record_blocks(const struct pg_router *r, unsigned worker, const struct pg_key *key,
                          const struct pg_key_blocks *kb, uint16_t id, uint32_t matched,
                          uint32_t shared, bool place)
{
	struct pg_ca_index ix = pg_router_index(r);
	const uint32_t per = PG_CA_BLOCK / PG_CA_CHARS_PER_TOKEN;
	uint32_t blocks = matched / per;
	unsigned bucket = 0;

	while (blocks && bucket < PG_CA_MATCH_BUCKETS - 1) {
		bucket++;
		blocks >>= 1;
	}
	__atomic_fetch_add((uint64_t *)&r->ca_matched[bucket], 1, __ATOMIC_RELAXED);
	if (!ix.capacity_blocks)
		return;
	pg_ca_tick(&ix);
	if (kb->n)
		record_chain(r, &ix, worker, kb->chain, kb->n, id, true);
	if (place) {
		/* a new anchor advances id's clock by one block it does not hold:
		 * once per conversation, against the blocks of every turn */
		const uint64_t anchor = pg_ca_anchor_key(key->anchor);

		record_chain(r, &ix, worker, &anchor, 1, id, !kb->n);
	}
	if (shared / per && shared / per <= kb->n) {
		const uint64_t head = pg_ca_head_key(kb->chain[shared / per - 1], id);

		record_chain(r, &ix, worker, &head, 1, id, false);
	}
}

/* The routing config a decision uses: pool's live one, with the threshold
 * divided among the gateways in load mode SHARE (r->fleet_share). */
static void decision_cfg(const struct pg_router *r, unsigned pool, struct pg_route_cfg *rc)
{
	uint32_t share = __atomic_load_n(&r->fleet_share, __ATOMIC_RELAXED);

	pg_router_cfg(r, pool, rc);
	if (share > 1)
		rc->concurrency_threshold = pg_fleet_threshold(rc->concurrency_threshold, share);
}

size_t pg_route_key_window(const struct pg_route_cfg *rc)
{
	return pg_key_window(pg_route_blocks(rc), rc->prefix_length);
}

/* Backend b's speed is not measured, nothing of the fleet's is queued on
 * it and no request sent there to learn it was cut at its deadline lately
 * (router/load.h pg_load_cut): a request with a deadline goes, whatever
 * the defaults predict. */
static bool explore(const struct pg_backend *b, uint64_t now_ms)
{
	return !pg_work_measured(b) && !__atomic_load_n(&b->prefill_reqs, __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&b->peer_prefill_reqs, __ATOMIC_RELAXED) &&
	       now_ms >= __atomic_load_n(&b->explore_after_ms, __ATOMIC_RELAXED);
}

/* The chain hash of the prefix the chosen one is believed to hold beyond
 * the shared head (0: nothing more). */
static uint64_t predicted_prefix(const struct pg_key_blocks *kb, const struct pg_choice *choice)
{
	const uint32_t per = PG_CA_BLOCK / PG_CA_CHARS_PER_TOKEN, blocks = choice->matched / per;

	return choice->matched > choice->shared && blocks && blocks <= kb->n ? kb->chain[blocks - 1]
	                                                                     : 0;
}

/* The first token of key's request at id, as the load model predicts it
 * (ms): cache_aware's own estimate, else the model's with nothing cached. */
static double predicted_ttft(const struct pg_router *r, bool ca, const struct pg_key *key,
                             const struct pg_choice *choice, uint16_t id, uint64_t now_ms)
{
	const struct pg_backend *b = &r->maps->backends[id];
	struct pg_speed sp;

	if (ca && choice->est[0].id == id)
		return choice->est[0].ttft_ms;
	pg_work_speed(b, &sp);
	return pg_speed_predict(&sp, pg_work_queued(b, &sp, now_ms) + key->tokens,
	                        pg_work_decoding(b));
}

/* key's first token at id is due past budget_ms by what was measured of
 * id: its speed; where no stream measured it, the bound its answers set
 * (its queue and key's whole prompt at that bound: a bound, not a guess);
 * where neither, it is explored (explore) or judged on the defaults. */
static bool late(const struct pg_router *r, bool ca, const struct pg_key *key,
                 const struct pg_choice *choice, uint16_t id, uint64_t now_ms, uint32_t budget_ms)
{
	const struct pg_backend *b = &r->maps->backends[id];
	struct pg_speed sp;

	if (!pg_work_measured(b) && pg_work_bound(b, &sp) &&
	    pg_speed_predict(&sp, pg_work_queued(b, &sp, now_ms) + key->tokens, 0) <= budget_ms)
		return false;
	return !explore(b, now_ms) && predicted_ttft(r, ca, key, choice, id, now_ms) > budget_ms;
}

/* pg_route_key at now (ms). */
static uint16_t route_key(const struct pg_router *r, unsigned worker, unsigned pool,
                          struct pg_key *key, const struct pg_key_blocks *kb,
                          const struct pg_idset *exclude, uint64_t rnd, uint32_t budget_ms,
                          uint8_t prio, uint64_t now, struct pg_choice *choice)
{
	struct pg_idset buf;
	const struct pg_idset *ex;
	struct pg_route_cfg rc;
	uint16_t id, shadow = 0;
	bool ca;

	if (pool >= r->maps->npools)
		pool = 0;
	ex = pg_router_exclude(r, pool, exclude, &buf);
	decision_cfg(r, pool, &rc);
	ca = pg_route_blocks(&rc) && kb;
	id = choose(r, pool, &rc, key, ca ? kb : NULL, ex, now, rnd, prio, choice);
	choice->pool = (uint8_t)pool;
	/* a deadline is judged on what was measured: an instance not measured
	 * yet is explored, one request at a time, so that it is (a prediction
	 * from the defaults could refuse every request, and nothing would
	 * ever be measured) */
	choice->late = id && budget_ms && late(r, ca, key, choice, id, now, budget_ms);
	if (choice->late)
		return 0;
	if (worker == PG_ROUTE_DRY || !id)
		return id;
	if (ca) {
		/* how far back id was sent what it is believed to hold, before
		 * this request refreshes it (what its answer will teach) */
		pg_capacity_sent(r, id, key->anchor, predicted_prefix(kb, choice), choice);
		record_blocks(r, worker, key, kb, id, choice->matched, choice->shared,
		              place_anchor(key, kb));
	}
	if (r->shadow)
		shadow = rc.strategy == PG_STRATEGY_PREFIX_AWARE
		             ? id
		             : shadow_choice(r, pool, &rc, key,
		                             pg_router_exclude(r, pool, NULL, &buf), now, rnd);
	if (r->out && r->out->decided)
		r->out->decided(r, worker, key->anchor, id, shadow, now);
	return id;
}

uint16_t pg_route_key(const struct pg_router *r, unsigned worker, unsigned pool, struct pg_key *key,
                      const struct pg_key_blocks *kb, const struct pg_idset *exclude, uint64_t rnd,
                      uint32_t budget_ms, uint8_t prio, struct pg_choice *choice)
{
	const uint64_t now = pg_router_now_ms(r);
	struct pg_key given;
	uint16_t id;

	if (worker == PG_ROUTE_DRY || !r->out || !r->out->routed)
		return route_key(r, worker, pool, key, kb, exclude, rnd, budget_ms, prio, now,
		                 choice);
	given = *key;
	id = route_key(r, worker, pool, key, kb, exclude, rnd, budget_ms, prio, now, choice);
	r->out->routed(r, worker, pool, &given, kb, rnd, budget_ms, prio, now, id, choice);
	return id;
}

/* The request's key (and, for cache_aware, its blocks into kb) by pool's
 * live configuration. */
static void key_of(const struct pg_router *r, const struct pg_route_input *in, unsigned pool,
                   struct pg_key *key, struct pg_key_blocks *kb, bool blocks)
{
	struct pg_route_cfg rc;

	decision_cfg(r, pool, &rc);
	pg_key_compute_ahead(in->api, in->header_key, in->body, in->body_len, in->complete, in->pre,
	                     rc.prefix_length, key, blocks ? kb : NULL, in->scratch);
}

uint16_t pg_route_worker(const struct pg_router *r, unsigned worker,
                         const struct pg_route_input *in, const struct pg_idset *exclude,
                         uint64_t rnd, struct pg_key *key, struct pg_choice *choice)
{
	const unsigned pool = in->pool < r->maps->npools ? in->pool : 0;
	struct pg_route_cfg rc;
	struct pg_key_blocks kb;
	bool ca;

	pg_router_cfg(r, pool, &rc);
	ca = pg_route_blocks(&rc);
	key_of(r, in, pool, key, &kb, ca);
	return pg_route_key(r, worker, pool, key, ca ? &kb : NULL, exclude, rnd, in->budget_ms,
	                    in->prio, choice);
}

uint16_t pg_route_dry(const struct pg_router *r, const struct pg_route_input *in,
                      const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
                      struct pg_choice *choice)
{
	return pg_route_worker(r, PG_ROUTE_DRY, in, exclude, rnd, key, choice);
}

enum pg_pd_route pg_route_pd(const struct pg_router *r, unsigned worker,
                             const struct pg_route_input *in, unsigned dpool, uint32_t min_tokens,
                             const struct pg_idset *pex, const struct pg_idset *dex, uint64_t rnd,
                             struct pg_key *key, struct pg_choice *pchoice,
                             struct pg_choice *dchoice)
{
	const uint64_t now = pg_router_now_ms(r);
	const unsigned pool = in->pool < r->maps->npools ? in->pool : 0;
	struct pg_idset pbuf, dbuf;
	struct pg_key_blocks kb;
	struct pg_route_cfg rc, dc;
	struct pg_key dk;
	uint16_t p = 0, d;
	bool pca, dca;

	if (dpool >= r->maps->npools)
		dpool = pool;
	decision_cfg(r, pool, &rc);
	decision_cfg(r, dpool, &dc);
	pca = pg_route_blocks(&rc);
	dca = pg_route_blocks(&dc);
	key_of(r, in, pool, key, &kb, pca || dca);
	dk = *key;
	d = choose(r, dpool, &dc, &dk, dca ? &kb : NULL, pg_router_exclude(r, dpool, dex, &dbuf),
	           now, rnd, in->prio, dchoice);
	dchoice->pool = (uint8_t)dpool;
	if (!d)
		return PG_PDR_NONE;
	if (!pg_pd_decode_alone(key->tokens, dca ? dchoice->matched : 0, min_tokens)) {
		p = choose(r, pool, &rc, key, pca ? &kb : NULL,
		           pg_router_exclude(r, pool, pex, &pbuf), now, rnd, in->prio, pchoice);
		pchoice->pool = (uint8_t)pool;
	}
	if (worker == PG_ROUTE_DRY)
		return p ? PG_PDR_PAIR : PG_PDR_ALONE;
	if (pca || dca) /* both hold the prompt's KV once it is sent on */
		record_blocks(r, worker, &dk, &kb, d, dca ? dchoice->matched : 0,
		              dca ? dchoice->shared : 0, place_anchor(&dk, &kb));
	if (p && (pca || dca))
		record_blocks(r, worker, key, &kb, p, pca ? pchoice->matched : 0,
		              pca ? pchoice->shared : 0, place_anchor(key, &kb));
	if (r->out && r->out->decided)
		r->out->decided(r, worker, key->anchor, p ? p : d, p ? p : d, now);
	return p ? PG_PDR_PAIR : PG_PDR_ALONE;
}

uint16_t pg_route_again(const struct pg_router *r, const struct pg_key *key,
                        const struct pg_idset *exclude, uint64_t rnd, struct pg_choice *choice)
{
	const unsigned pool = choice->pool < r->maps->npools ? choice->pool : 0;
	struct pg_idset buf;
	struct pg_route_cfg rc;
	struct pg_key k = *key; /* as the first decision left it (its anchor moved) */
	uint16_t id;

	decision_cfg(r, pool, &rc);
	/* (its blocks are gone: no holder to keep, whatever its class) */
	id = choose(r, pool, &rc, &k, NULL, pg_router_exclude(r, pool, exclude, &buf),
	            pg_router_now_ms(r), rnd, PG_PRIO_CRITICAL, choice);
	choice->pool = (uint8_t)pool;
	return id;
}

/* b's room under queue_ms at speed sp, in predicted ms of prefill. */
static double room_ms(const struct pg_backend *b, const struct pg_speed *sp, uint32_t queue_ms)
{
	return queue_ms == PG_FLOW_QUEUE_AUTO ? pg_work_service_ms(b, sp) : queue_ms;
}

bool pg_route_has_room(const struct pg_backend *b, uint32_t queue_ms, uint64_t now_ms)
{
	struct pg_speed sp;
	double q;

	/* the engine says requests wait: full, whatever the model predicts */
	if (pg_work_waiting(b, now_ms))
		return false;
	pg_work_speed(b, &sp);
	q = pg_work_queued(b, &sp, now_ms);
	/* an idle engine has room, whatever the room (none learned yet) */
	return q <= 0 || q * sp.ms_per_ktok < 1000.0 * room_ms(b, &sp, queue_ms);
}

/* In how many ms full backend b will have room under queue_ms by time
 * alone (UINT32_MAX: not by time). */
static double room_in(const struct pg_backend *b, uint32_t queue_ms, uint64_t now_ms)
{
	struct pg_speed sp;
	double in;

	if (!pg_work_measured(b) || pg_work_waiting(b, now_ms))
		return UINT32_MAX;
	pg_work_speed(b, &sp);
	/* pg_route_has_room: the queue's prefill under the room */
	in = floor(pg_work_queued(b, &sp, now_ms) * sp.ms_per_ktok / 1000.0 -
	           room_ms(b, &sp, queue_ms)) +
	     1;
	return in > 0 ? in : 0;
}

enum pg_room pg_route_room(const struct pg_router *r, unsigned pool, uint32_t queue_ms,
                           uint64_t now_ms, uint32_t *in_ms)
{
	const unsigned max = pg_router_max_id(r);
	const struct pg_backend *t = r->maps->backends;
	struct pg_idset buf;
	const struct pg_idset *ex = pg_router_exclude(r, pool, NULL, &buf);
	double soonest = UINT32_MAX;
	bool usable = false;

	for (unsigned id = 1; id <= max; id++) {
		if (!pg_backend_eligible(t, max, id, ex, now_ms))
			continue;
		usable = true;
		if (pg_route_has_room(&t[id], queue_ms, now_ms))
			return PG_ROOM;
		if (in_ms)
			soonest = fmin(soonest, room_in(&t[id], queue_ms, now_ms));
	}
	if (in_ms)
		*in_ms = (uint32_t)soonest;
	return usable ? PG_FULL : PG_NO_ONE;
}

uint32_t pg_route_room_in_ms(const struct pg_router *r, unsigned pool, uint32_t queue_ms,
                             uint64_t now_ms)
{
	uint32_t in = UINT32_MAX;

	return pg_route_room(r, pool, queue_ms, now_ms, &in) == PG_ROOM ? 0 : in;
}

bool pg_route_any_usable(const struct pg_router *r, uint64_t now_ms)
{
	unsigned max = pg_router_max_id(r);

	for (unsigned id = 1; id <= max; id++)
		if (pg_backend_usable(&r->maps->backends[id], now_ms))
			return true;
	return false;
}

const struct pg_idset *pg_router_exclude(const struct pg_router *r, unsigned pool,
                                         const struct pg_idset *exclude, struct pg_idset *buf)
{
	if (!r->members)
		return exclude;
	for (size_t i = 0; i < PG_MAX_BACKENDS / 64; i++)
		buf->bits[i] = ~__atomic_load_n(&r->members[pool].bits[i], __ATOMIC_RELAXED) |
		               (exclude ? exclude->bits[i] : 0);
	return buf;
}

void pg_router_tick(struct pg_router *r, uint64_t now_ms)
{
	const uint64_t elapsed = r->tick_ms && now_ms > r->tick_ms ? now_ms - r->tick_ms : 0;
	const unsigned hwm = pg_router_hwm(r);

	r->tick_ms = now_ms;
	for (unsigned id = 1; id <= hwm; id++) {
		uint32_t *p = &r->maps->backends[id].recent;
		uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);

		/* a worker's add between the load and the store is not lost */
		while (old &&
		       !__atomic_compare_exchange_n(p, &old, pg_recent_decay(old, elapsed), false,
		                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	pg_load_share_speeds(r);
}
