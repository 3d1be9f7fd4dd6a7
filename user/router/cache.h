/* SPDX-License-Identifier: MIT */
/*
 * cache_aware's choice, pure: each usable instance's predicted time to
 * first token for the request (work.h: its queue in work, what its cache
 * saves, its learned speed), plus the prefill the request would add there
 * weighed by how many requests are queued in the fleet; the lowest wins.
 *
 *     cost(b) = ttft(b) + lambda x prefill(b)
 *     ttft(b) = overhead(b) + (queued(b) + own(b)) / rate(b) + decoding(b) x decode(b)
 *     prefill(b) = own(b) / rate(b),  own(b) = prompt - cached(b) (at least 1)
 *     lambda = PG_CA_WORK_BASE + PG_CA_WORK_QUEUED x (requests waiting for
 *              their first token, per usable instance)
 *
 * Why the second term: a request's prefill delays every request that
 * queues behind it on that instance. Below saturation few do, and the
 * quickest first token is the best choice; near saturation each token
 * recomputed there delays a growing queue, and the fleet's hit rate decides
 * whether the queues stay bounded at all. The mean queue length estimates
 * how many requests a prefill delays (ρ / (1 - ρ) for a single queue), so
 * the rule moves from "fastest first token" towards "follow the cache" as
 * the fleet fills, by itself. (tools/tracesim sweeps the constants: doc/routing.md,
 * Routing under load.)
 *
 * Ties. Costs within PG_CA_TIE_MS or PG_CA_TIE_FRAC of the lowest are equal,
 * so instances whose learned speeds differ by noise do not split a tie; of
 * those, the anchor's first ring candidate wins, so a new conversation's
 * place depends on the membership alone while loads are equal (gateways
 * that share nothing agree). NewConversationChoices N > 1: among the ties,
 * where the anchor was placed before, else the least recently sent of the
 * anchor's first N ring candidates. Before either, an instance that holds
 * as many conversations as its cache can (rq->full) is passed over among
 * the ties while another is not: a new one there would evict one.
 *
 * A shared head's first prefill. The choice counts a shared head
 * (rq->shared_tokens) held on every instance: each prefills it once and
 * then holds it while it is hot, so its first holder is no better a place
 * for a new conversation than any other. The one chosen is given the work
 * it really has, though (out->matched, est[0]: its queue ticket, hence what
 * its speed fit learns from the answer): the head too where it was not
 * sent it lately (rq->head_sent) and the index lists it holding less. Else
 * a 12,000-token prefill, predicted as a hit, teaches a fit a slow
 * instance, and every new conversation then goes to the instance whose
 * fit was taught by hits alone.
 *
 * No allocation; two passes over the usable ids (shared fields read once,
 * with relaxed atomic loads).
 */
#ifndef PG_ROUTER_CACHE_H
#define PG_ROUTER_CACHE_H

#include "router/strategy.h"
#include "router/index.h"
#include "router/work.h"

/* lambda's constants (tools/tracesim: the Mooncake trace at loads 0.5-1.1;
 * doc/routing.md, Routing under load). */
#define PG_CA_WORK_BASE   2.0
#define PG_CA_WORK_QUEUED 1.5
/* Costs this close to the lowest tie. */
#define PG_CA_TIE_MS   5.0
#define PG_CA_TIE_FRAC 0.05

/* What the index says of one request. */
struct pg_ca_req {
	uint32_t prompt_tokens; /* its prompt, estimated */
	uint32_t shared_tokens; /* its head that every instance is taken to hold
	                         * (a shared prefix, router/index.h) */
	/* backends believed to hold more of it, and how many tokens, longest
	 * first (they need not be usable: the rule checks) */
	const uint16_t *held;
	const uint32_t *held_tokens;
	size_t nheld;
	/* NewConversationChoices (0 counts as 1) and where this anchor went
	 * lately (pg_ca_anchor_key) */
	uint32_t choices;
	const uint16_t *placed;
	size_t nplaced;
	/* lambda = work_base + work_queued x queued requests per instance
	 * (PG_CA_WORK_BASE, PG_CA_WORK_QUEUED; tools/tracesim sweeps them) */
	double work_base, work_queued;
	/* whether an instance holds as many conversations as it can
	 * (router/capacity.h; NULL: none does): a request nothing holds goes
	 * to another among the ties, if one is there */
	bool (*full)(uint16_t id, void *arg);
	void *full_arg;
	/* whether instance id was sent the shared head lately
	 * (pg_ca_head_key; NULL: every instance is taken to hold it) */
	bool (*head_sent)(uint16_t id, void *arg);
	void *head_arg;
};

/* Index tiers a request's look reads (pg_ca_match_tiers): the longest
 * match, then the next, then the next: up to 12 holders. */
#define PG_CA_TIERS 3

/* What the index says of a request whose key text has the block chain
 * chain[0..n), an anchor (its hash and the key text bytes it covers) and
 * the whole text's name (key.h struct pg_key_blocks). */
struct pg_ca_look {
	uint32_t shared_blocks; /* its shared head (pg_ca_shared) */
	uint64_t anchor;        /* the anchor, moved past the shared head when
	                         * that covers it: the block that follows, or
	                         * the whole text */
	size_t nheld;           /* backends that hold more than the shared head */
	uint16_t held[PG_CA_TIERS * PG_CA_WAYS];
	uint32_t held_tokens[PG_CA_TIERS * PG_CA_WAYS];
};

/*
 * Look a request up: members, the instances that serve it (the share a
 * shared prefix must pass); ok: which holders count (as pg_ca_match);
 * explicit_key: the anchor is the client's and stays. About PG_CA_TIERS + 1
 * binary searches of the index.
 */
void pg_ca_look(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n, uint64_t anchor,
                uint32_t anchor_len, uint64_t whole, bool explicit_key, uint32_t members,
                pg_ca_ok_fn ok, void *arg, struct pg_ca_look *out);

/* rq's view of the index from a look (points into it). */
static inline void pg_ca_req_from(struct pg_ca_req *rq, const struct pg_ca_look *l)
{
	rq->shared_tokens = l->shared_blocks * (PG_CA_BLOCK / PG_CA_CHARS_PER_TOKEN);
	rq->held = l->held;
	rq->held_tokens = l->held_tokens;
	rq->nheld = l->nheld;
}

/* Whether the index lists backend id as holding more of rq than its
 * shared head (flow control keeps such an instance a candidate when it has
 * no room: route.c). */
bool pg_ca_holds_more(const struct pg_ca_req *rq, uint16_t id);

/*
 * Choose for rq among the usable backends 1..max_id not in exclude; cand:
 * the anchor's ring candidates. Fills out->backend, decision (CACHED: a
 * holder of the longest match beyond the shared head; BALANCED: another
 * instance, for its load; AFFINITY or EXPLICIT_KEY: nothing beyond the
 * shared head cached anywhere, the anchor's place), cand/ncand, matched
 * (tokens) and est[0] (chosen) / est[1] (runner-up). 0: none usable.
 */
uint16_t pg_balance_cached(const struct pg_backend *backends, unsigned max_id, const uint16_t *cand,
                           size_t ncand, const struct pg_ca_req *rq, const struct pg_idset *exclude,
                           uint64_t now_ms, bool explicit_key, struct pg_choice *out);

#endif /* PG_ROUTER_CACHE_H */
