/* SPDX-License-Identifier: MIT */
/*
 * An instance's cache capacity, learned from what its answers say, pure:
 * no I/O, no allocation, no clock. One structure per instance, written by
 * one thread at a time (the caller's lock, or its one writer).
 *
 * Two measures at once. A paged cache (vLLM, SGLang) holds tokens: a
 * prefix stays while fewer than so many blocks were sent since. A per-slot
 * cache (llama.cpp's server) holds a few sequences, whatever their size: a
 * conversation stays while fewer than so many other conversations were
 * sent since. Either is an LRU, so each answer is read as: the prefix sent
 * at distance (d_blocks, d_seqs) was still held, or was not. The capacity
 * is the pair (K_blocks, K_seqs) under which a prefix is held exactly when
 * d_blocks < K_blocks and d_seqs < K_seqs: a hit at d says K > d, a miss
 * at d says K <= d on one measure or the other.
 *
 * Distances, as the caller measures them when it sends the request:
 * - d_blocks: the index's LRU clock (pg_backend.ca_clock, router/index.h)
 *   less the stamp of the longest prefix it predicted held (for an exact
 *   LRU of K blocks: the blocks of other prefixes sent since plus the
 *   prefix's own, less one). The capacity is learned in the clock's own
 *   units, so what the clock leaves out (touches of blocks already held)
 *   is learned along with it.
 * - d_seqs: distinct other sequences (conversations, by their 64-bit
 *   anchor, key.h) sent to the instance since this one was last:
 *   pg_cc_recent_send, on a short recency list per instance
 *   (PG_CC_SEQS entries; a sequence off it is at PG_CC_SEQS, "far").
 *
 * Which answers teach: one whose prefix the gateway predicted held (a
 * predicted hit: held or lost), and one whose prefix the index had let
 * expire but the engine reported cached (held, at the distance of the
 * expired stamp: the only way to learn that an instance holds more than
 * believed). Held or lost comes from the cached tokens the engine reports
 * (pg_cc_verdict), or where it reports none from the time to first token
 * against the prediction (the caller's).
 *
 * Noise. Engines evict early under memory pressure, and a TTFT verdict is
 * sometimes wrong, so the capacity is drawn from the last PG_CC_WINDOW
 * answers, and moves only when it misclassifies more than 1.5 times as
 * many of them as the best pair would, plus PG_CC_MARGIN: never on one
 * outlier, nor on the few wrong answers a pair fitted to them would
 * explain. A move changes one measure, of the current pair or of the
 * prior (the configured or reported blocks, no bound on sequences), to
 * the pair nearest the current one (the product of the two measures'
 * ratios) among those within one answer of the best: misses that either
 * measure explains go to the one that moves less, so an engine that
 * keeps few sequences of any size, under a large prior in blocks, is
 * learned as such. An answer the current pair predicts right costs O(1)
 * (but every PG_CC_WINDOW answers, a refit); one it predicts wrong a
 * refit, O(PG_CC_WINDOW^2) at worst (about 4 us).
 */
#ifndef PG_CACHECAP_H
#define PG_CACHECAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sequences an instance's recency list tells apart: a per-slot cache
 * holds a few; past this many, sequences are not what bounds it. */
#define PG_CC_SEQS 64
/* Answers the capacity is drawn from, the most recent. */
#define PG_CC_WINDOW 128
/* It moves when it misclassifies more than 1.5 times the best pair's
 * count of answers plus this many ... */
#define PG_CC_MARGIN 2
/* ... or this many, for a cache known to keep whole sequences
 * (PG_CC_SLOTS): a slot is reused whole, never emptied by memory pressure,
 * so one answer it contradicts is enough (3 were each a conversation's
 * turn lost again, and 4 conversations on 2 slots reached 0.84 of the
 * ideal cached share instead of 0.92). */
#define PG_CC_MARGIN_SLOTS 0

/* An instance's recent sequences, most recent first. In a per-slot cache
 * (pg_cc_recent_take) an entry is a copy in one slot: a sequence sent
 * while its copy computes another request of it is computed again, cold,
 * in another slot, so it may be on the list twice. */
struct pg_cc_recent {
	uint64_t id[PG_CC_SEQS];
	uint8_t busy[PG_CC_SEQS]; /* requests in flight on the copy (take/done) */
	uint32_t n;
};

static inline void pg_cc_recent_init(struct pg_cc_recent *r)
{
	r->n = 0;
}

/* Distinct other sequences sent since id was (0: it was the last one);
 * PG_CC_SEQS if it is not on the list. */
uint32_t pg_cc_recent_distance(const struct pg_cc_recent *r, uint64_t id);

/* id is sent now: its distance before (as above); it goes to the front,
 * the least recent falling off a full list. O(PG_CC_SEQS). */
uint32_t pg_cc_recent_send(struct pg_cc_recent *r, uint64_t id);

/* id is sent now to a per-slot cache, which computes it in an idle slot:
 * one that holds it if one is idle, else another, evicting what that one
 * held (llama.cpp's server, mockllm --slots). Its distance: the entries
 * ahead of its most recent idle copy, which goes to the front; PG_CC_SEQS
 * if no copy is idle (none, or every one busy: computed cold), and a new
 * copy goes to the front. Either is busy until pg_cc_recent_done. */
uint32_t pg_cc_recent_take(struct pg_cc_recent *r, uint64_t id);

/* The entries ahead of id's most recent idle copy (PG_CC_SEQS: none):
 * as pg_cc_recent_distance, for a per-slot cache. None while
 * pg_cc_recent_distance finds one: every copy is busy. */
uint32_t pg_cc_recent_idle(const struct pg_cc_recent *r, uint64_t id);

/* A request of id that pg_cc_recent_take counted has ended: a busy copy
 * of it is idle again (none if it fell off the list meanwhile). */
void pg_cc_recent_done(struct pg_cc_recent *r, uint64_t id);

/* id is known gone from the instance (its prefix found evicted). */
void pg_cc_recent_drop(struct pg_cc_recent *r, uint64_t id);

/* One answer that taught something. */
struct pg_cc_obs {
	uint32_t blocks; /* d_blocks */
	uint8_t seqs;    /* d_seqs, 0..PG_CC_SEQS */
	bool held;
};

/* What the instance's cache is, where its answers tell: llama.cpp's
 * carry timings (lib/usage.h PG_USAGE_TIMINGS), vLLM's and SGLang's a
 * usage without them. */
enum pg_cc_kind {
	PG_CC_ANY_KIND = 0, /* not known: both measures alike */
	PG_CC_PAGED,        /* it holds tokens: no bound in sequences is learned */
	PG_CC_SLOTS,        /* sequences first: blocks move only when they must */
};

/* One instance's capacity. Zeroed is not valid: pg_cc_init. */
struct pg_cc {
	struct pg_cc_obs obs[PG_CC_WINDOW]; /* a ring: the last n answers */
	uint32_t head, n;
	uint32_t dflt_blocks; /* the prior: configured or reported */
	uint32_t blocks;      /* learned; 0: none yet (dflt_blocks) */
	uint32_t seqs;        /* learned; 0: unbounded */
	uint32_t since_fit;   /* answers since the last refit */
	uint64_t answers;     /* taken, in all */
	uint32_t moves;       /* times the capacity changed */
	uint8_t kind;         /* enum pg_cc_kind */
};

/* dflt_blocks (>= 1): the capacity until answers say otherwise. */
void pg_cc_init(struct pg_cc *c, uint32_t dflt_blocks, enum pg_cc_kind kind);

/* A new prior (the engine reported its cache), kept with what was learned. */
void pg_cc_set_default(struct pg_cc *c, uint32_t dflt_blocks);

/* The kind of cache, once the answers tell. */
static inline void pg_cc_set_kind(struct pg_cc *c, enum pg_cc_kind kind)
{
	c->kind = (uint8_t)kind;
	if (kind == PG_CC_PAGED)
		c->seqs = 0;
}

/* One answer: the prefix sent at (d_blocks, d_seqs) was held, or not.
 * d_seqs past PG_CC_SEQS counts as PG_CC_SEQS. Returns whether the
 * capacity changed. */
bool pg_cc_observe(struct pg_cc *c, uint32_t d_blocks, uint32_t d_seqs, bool held);

/* The capacity to route on: in blocks (learned, else the prior) ... */
static inline uint32_t pg_cc_blocks(const struct pg_cc *c)
{
	return c->blocks ? c->blocks : c->dflt_blocks;
}

/* ... and in sequences (0: no bound learned). */
static inline uint32_t pg_cc_seqs(const struct pg_cc *c)
{
	return c->seqs;
}

/* A prefix at (d_blocks, d_seqs) is still held, as the capacity says. */
static inline bool pg_cc_holds(const struct pg_cc *c, uint32_t d_blocks, uint32_t d_seqs)
{
	return d_blocks < pg_cc_blocks(c) && (!c->seqs || d_seqs < c->seqs);
}

/* The sequences the instance holds now: those on its list within its
 * capacity. */
static inline uint32_t pg_cc_live(const struct pg_cc *c, const struct pg_cc_recent *r)
{
	return c->seqs && c->seqs < r->n ? c->seqs : r->n;
}

enum pg_cc_verdict {
	PG_CC_UNKNOWN = 0, /* the answer says nothing of it */
	PG_CC_HELD,
	PG_CC_LOST,
};

/*
 * Held or lost, from the cached tokens the engine reported: predicted,
 * the tokens the gateway believed cached there, shared the part of them it
 * counts cached everywhere (a prefix every instance is sent), both in its
 * own estimate, of a prompt of prompt tokens; cached of prompt_engine, the
 * engine's own count (its tokenizer's: scaled to the gateway's). Held when
 * the engine found at least half of what the instance alone was believed
 * to hold: an LRU keeps a prefix whole or drops its end first, so a hit
 * that reaches past the halfway point is the prefix held, short of it the
 * prefix lost (its shared head kept by other traffic).
 */
enum pg_cc_verdict pg_cc_verdict(uint32_t predicted, uint32_t shared, uint32_t prompt,
                                 uint32_t cached, uint32_t prompt_engine);

#endif /* PG_CACHECAP_H */
