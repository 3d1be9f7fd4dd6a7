/* SPDX-License-Identifier: MIT */
/*
 * What each instance's cache really keeps, learned from its answers
 * (lib/cachecap.h has the model): cache_aware's index believes a prefix
 * held while fewer than the instance's capacity in blocks were sent to it
 * since (router/index.h); the capacity it goes by is learned here, in
 * blocks and in sequences at once, from every answer for which the index
 * predicted a hit: the engine's own report of its cached tokens
 * (lib/usage.h) where it gives one, its time to first token against the
 * prediction elsewhere. Nothing is configured for it.
 *
 * - Blocks: what was learned is published as pg_backend.ca_learned_blocks,
 *   which the index takes before the reported or configured capacity, so
 *   a prefix the engine evicted stops counting as held there.
 * - Sequences: each instance keeps a short list of the conversations
 *   (anchors, key.h) sent to it, most recent first (lib/cachecap.h
 *   pg_cc_recent). Once a bound is learned (a per-slot cache, llama.cpp's
 *   server, keeps a few sequences whatever their size), a conversation
 *   further down the list than the bound is not held there, whatever the
 *   blocks say; and an instance that already holds as many as its bound
 *   is "full": a new conversation placed on it would evict one, so
 *   cache_aware prefers another (router/cache.h). On a per-slot cache a
 *   conversation sent while a request of it is still computed there
 *   takes another slot, cold (lib/cachecap.h pg_cc_recent_take): it is
 *   counted as one more sequence, and its answer teaches nothing.
 *
 * One lock per instance guards its learner and list (taken once at
 * dispatch, once at the answer of a cache_aware request, and on a
 * per-slot cache once at its end), and by the decision's checks of the
 * list (pg_capacity_holds, pg_capacity_full).
 */
#ifndef PG_ROUTER_CAPACITY_H
#define PG_ROUTER_CAPACITY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "lib/cachecap.h"
#include "prefixgate.h"

struct pg_router;
struct pg_choice;

struct pg_capacity_slot {
	pthread_mutex_t mu;
	uint32_t epoch; /* the member its state is of */
	bool live;      /* initialised for epoch */
	struct pg_cc cc;
	struct pg_cc_recent recent;
};

struct pg_capacities {
	struct pg_capacity_slot slot[PG_MAX_BACKENDS];
};

/* NULL on allocation failure. */
struct pg_capacities *pg_capacities_new(void);
void pg_capacities_free(struct pg_capacities *c);

/*
 * A cache_aware request with anchor is sent to backend id (choice: the
 * decision, its prediction; its distances are filled in: d_blocks from
 * the stamp the index holds of the predicted prefix, hash, which must be
 * read before the decision is recorded; d_seqs from id's list, which the
 * anchor then heads).
 */
void pg_capacity_sent(const struct pg_router *r, uint16_t id, uint64_t anchor, uint64_t hash,
                      struct pg_choice *choice);

/* A request that pg_capacity_sent counted on id's per-slot cache
 * (choice->seq_taken; its load ticket's seq, router/load.h) has given
 * its in-flight slot back, however it ended: the copy it kept busy is
 * idle again. */
void pg_capacity_done(const struct pg_router *r, uint16_t id, uint64_t anchor);

/* Its answer says the predicted prefix was held, or lost (v; UNKNOWN:
 * nothing), and what kind of cache the instance has, if it tells (kind:
 * llama.cpp's answers carry timings, vLLM's and SGLang's a usage without
 * them; PG_CC_ANY_KIND: it does not tell). */
void pg_capacity_answer(const struct pg_router *r, const struct pg_choice *choice,
                        enum pg_cc_kind kind, enum pg_cc_verdict v);

/* Whether backend id still holds conversation anchor as far as its
 * sequences go (no bound learned: yes; a per-slot cache: by its most
 * recent idle copy, as a busy one is not used: computed again in another
 * slot). */
bool pg_capacity_holds(const struct pg_router *r, uint16_t id, uint64_t anchor);

/* Whether backend id holds as many conversations as its learned bound. */
bool pg_capacity_full(const struct pg_router *r, uint16_t id);

/*
 * Held or lost from a stream's time to first token, ttft_ms, where the
 * engine reports no cached tokens: the prediction with the hit, pred_ms,
 * and the prefill the hit was to save, saved_ms. Later than halfway to
 * the prediction without the hit: lost; else held; a saving too small to
 * tell from the model's noise (PG_CAPACITY_TTFT_MIN_MS): unknown.
 */
#define PG_CAPACITY_TTFT_MIN_MS 20.0
enum pg_cc_verdict pg_capacity_ttft_verdict(double pred_ms, double saved_ms, double ttft_ms);

#endif /* PG_ROUTER_CAPACITY_H */
