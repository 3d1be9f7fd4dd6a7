/* SPDX-License-Identifier: MIT */
/*
 * One routing decision, exactly as real traffic gets it: key extraction,
 * ring lookup through the shared maps, the strategy. Used by the workers,
 * by the admin API's dry run (POST /route), so the dry run cannot
 * disagree, and from the key on (pg_route_key) by tools/tracesim.
 */
#ifndef PG_ROUTER_ROUTE_H
#define PG_ROUTER_ROUTE_H

#include <limits.h>
#include "lib/flow.h"
#include "lib/key.h"
#include "router/index.h"
#include "router/router.h"
#include "router/strategy.h"

struct pg_route_input {
	enum pg_api api;
	struct pg_str header_key; /* X-Prefixgate-Key, len 0 if absent */
	const char *body;         /* body bytes held (decoded) */
	size_t body_len;
	bool complete; /* body is whole */
	unsigned pool; /* model pool (state/pools.h); 0: the default */
	/* The body's JSON parsed as it arrived (key.h pg_key_compute_ahead);
	 * NULL: none */
	const struct pg_json_stream *pre;
	struct pg_key_scratch *scratch; /* the worker's (key.h); NULL: none */
	/* Flow control: the request's deadline is this many ms away (0:
	 * none). A cache_aware choice whose first token is predicted later is
	 * not made: 0 is returned, choice->late set, nothing recorded. */
	uint32_t budget_ms;
	/* Flow control: the class it is routed as (lib/flow.h enum pg_prio;
	 * its own, but for the room: proxy/queue.c routed_class; 0,
	 * critical: only instances with room, which is also what a request
	 * with no class is given). Of the lower classes, cache_aware also sends a
	 * request to an instance without room that holds more of it than its
	 * shared head (route.c without_room). */
	uint8_t prio;
};

/* A worker argument: the dry run, no side effect at all. */
#define PG_ROUTE_DRY UINT_MAX

/*
 * Compute the key of a request and choose its backend. exclude: backends
 * already tried (may be NULL). Returns the chosen id (0: none usable) with
 * the key and the choice filled in. Does not touch in-flight counts.
 * For real traffic (worker: the caller's index), what was chosen is
 * recorded in the block index (cache_aware) and told to r->out (the
 * peers' indexes; the routing statistics: predicted hit, hot keys, and
 * with --shadow what PREFIX_AWARE would have chosen).
 */
uint16_t pg_route_worker(const struct pg_router *r, unsigned worker,
                         const struct pg_route_input *in, const struct pg_idset *exclude,
                         uint64_t rnd, struct pg_key *key, struct pg_choice *choice);

/* The same decision with no side effect at all: the admin dry run. */
uint16_t pg_route_dry(const struct pg_router *r, const struct pg_route_input *in,
                      const struct pg_idset *exclude, uint64_t rnd, struct pg_key *key,
                      struct pg_choice *choice);

/* The decision alone, for a key already computed (kb: its blocks, for
 * cache_aware; NULL: only the key, as a retry has), in pool, with the
 * first token due within budget_ms (0: no deadline), of flow control's
 * class prio (as pg_route_input's); worker as above. */
uint16_t pg_route_key(const struct pg_router *r, unsigned worker, unsigned pool, struct pg_key *key,
                      const struct pg_key_blocks *kb, const struct pg_idset *exclude, uint64_t rnd,
                      uint32_t budget_ms, uint8_t prio, struct pg_choice *choice);

/* What pg_route_pd chose. */
enum pg_pd_route {
	PG_PDR_NONE = 0,  /* no decode instance usable */
	PG_PDR_PAIR = 1,  /* a prefill instance (*pchoice), then the decode one */
	PG_PDR_ALONE = 2, /* the decode instance alone (conditional disaggregation) */
};

/*
 * A request of a prefill/decode pool (lib/pd.h; in->pool has a decode
 * set, pool dpool): its key, once; its decode instance by the decode
 * set's strategy (cache_aware unless configured: load in work, and where
 * the conversation's cache is); then, unless what the decode instance
 * would prefill is under min_tokens (pg_pd_decode_alone), its prefill
 * instance by the pool's strategy. pex, dex: prefill and decode instances
 * not to choose (tried; may be NULL). What is chosen is recorded in the
 * block index (both instances hold the prompt's KV once it is sent on)
 * and told to r->out.
 */
enum pg_pd_route pg_route_pd(const struct pg_router *r, unsigned worker,
                             const struct pg_route_input *in, unsigned dpool, uint32_t min_tokens,
                             const struct pg_idset *pex, const struct pg_idset *dex, uint64_t rnd,
                             struct pg_key *key, struct pg_choice *pchoice,
                             struct pg_choice *dchoice);

/* Re-choose for a request whose key is known (after a failed attempt), in
 * the pool of its first choice (choice->pool); not recorded again in the
 * routing statistics. */
uint16_t pg_route_again(const struct pg_router *r, const struct pg_key *key,
                        const struct pg_idset *exclude, uint64_t rnd, struct pg_choice *choice);

/* A key routed by rc comes with cache_aware's blocks (key.h). */
static inline bool pg_route_blocks(const struct pg_route_cfg *rc)
{
	return pg_strategy_of(rc->strategy)->blocks;
}

/* The window the body's JSON is parsed with for a key routed by rc
 * (key.h pg_key_window): a parse made before routing (pg_route_input.pre)
 * must use it to be used. */
size_t pg_route_key_window(const struct pg_route_cfg *rc);

/* Whether pool could take a request now under flow control (lib/flow.h):
 * some usable member has less prefill queued than queue_ms, as the load
 * model predicts it (router/work.h); or none is usable at all. Stops at the
 * first with room. */
enum pg_room {
	PG_ROOM = 0,   /* one has room */
	PG_FULL = 1,   /* every usable member is past queue_ms */
	PG_NO_ONE = 2, /* no member is usable */
};
/* Whether backend b could take a request now under flow control's
 * queue_ms (PG_FLOW_QUEUE_AUTO: its own service time; 0: nothing may be
 * queued): its engine says no request waits (if it said lately:
 * pg_work_waiting), and the prefill queued on it is predicted under
 * queue_ms, or none is. */
bool pg_route_has_room(const struct pg_backend *b, uint32_t queue_ms, uint64_t now_ms);

/* in_ms (may be NULL): when every usable member is full, in how many ms
 * one will have room by time alone: the load model drains a queue by time
 * at a measured speed, while its engine does not say requests wait
 * (UINT32_MAX: none will by time, but by an event: a first token, an
 * answer, a report). So that a queue waiting for room is run when it
 * comes, not at a first token an overhead later. */
enum pg_room pg_route_room(const struct pg_router *r, unsigned pool, uint32_t queue_ms,
                           uint64_t now_ms, uint32_t *in_ms);

/* pg_route_room's in_ms, 0 when one has room now. */
uint32_t pg_route_room_in_ms(const struct pg_router *r, unsigned pool, uint32_t queue_ms,
                             uint64_t now_ms);

/* The room, for pg_route_has_room and pg_route_room, of a request of flow
 * control's class prio under its pool's queue_ms (flow control on): a
 * sheddable request's is an instance with nothing queued (0), so that a
 * critical request that comes finds at most the prefill under way ahead
 * of it, not that and a sheddable one queued (at 1/3, 1 and 3 times the
 * default speed, critical's p99 under a sheddable flood was its own alone
 * plus about two service times); the others' is queue_ms. A sheddable
 * request that goes before a higher class, starved (lib/flow.h), is given
 * the standard room by its queue (proxy/queue.c). */
static inline uint32_t pg_route_class_room(uint32_t queue_ms, uint8_t prio)
{
	return prio == PG_PRIO_SHEDDABLE ? 0 : queue_ms;
}

/* Some member could take a request now (it is usable: healthy, not
 * draining, not skipped). Scans the members: for the rare request that
 * must know before its body is read (Expect: 100-continue). */
bool pg_route_any_usable(const struct pg_router *r, uint64_t now_ms);

#endif /* PG_ROUTER_ROUTE_H */
