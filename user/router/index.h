/* SPDX-License-Identifier: MIT */
/*
 * cache_aware's block index, pure: which backends were recently sent each
 * block prefix of a key text (key.h, struct pg_key_blocks), learned from the
 * gateway's own decisions. No I/O, no allocation; the slots live in the
 * pinned BPF map pg_cache_index (include/prefixgate.h, struct pg_ca_slot).
 *
 * - A block prefix (its chain hash) lives in one of PG_CA_PROBE slots from
 *   its home slot (hash modulo the slot count), with up to PG_CA_WAYS
 *   holders.
 * - Aging follows the engines' LRU eviction: each backend has a clock
 *   (pg_backend.ca_clock) counting the blocks it was sent that it did not
 *   hold. A holder is live while fewer than capacity_blocks blocks were sent
 *   to that backend since its stamp; sending a prefix again refreshes it,
 *   as the engine's LRU touch does. So what the index believes cached on an
 *   instance is bounded by that instance's capacity, whatever the traffic.
 *   (Touches of older blocks do not advance the clock, so the model errs
 *   towards believing a block cached a little longer than an exact LRU.)
 * - A full window evicts: an expired slot first, else the home slot
 *   (counted). The table is bounded at start-up: PG_CA_SLOTS_PER_BLOCK
 *   slots per block of one instance's capacity.
 * - The longest cached prefix is found by binary search over chain
 *   positions (a prefix held implies its shorter prefixes were sent with
 *   it, and refreshed with it): about log2(blocks) + 1 probes.
 * - The same calls in the same order give the same state.
 * - Besides block prefixes it holds where each anchor of a request whose
 *   blocks do not reach past it was sent (pg_ca_anchor_key: a one-block
 *   chain, aged like the rest), for CacheAwareConfig.NewConversationChoices.
 */
#ifndef PG_ROUTER_INDEX_H
#define PG_ROUTER_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "prefixgate.h"

struct pg_ca_index {
	struct pg_ca_slot *slots;
	uint32_t nslots;             /* a power of two */
	struct pg_backend *backends; /* PG_MAX_BACKENDS entries: the clocks */
	uint32_t capacity_blocks;    /* a backend's cache, in blocks, unless it said
	                              * (pg_backend.ca_capacity_blocks) */
	__u64 *requests;             /* requests recorded (pg_ca_tick); NULL: no
	                              * shared prefix is ever detected */
};

/* Shared prefixes. A block prefix is shared when more than one
 * instance's share of the traffic passes through it (a system prompt, a
 * tool list, a document everyone asks about): at least PG_CA_SHARED_USES
 * requests through it, and more than 1/members of all the requests
 * recorded since it was first seen (in a fleet, all the gateways'
 * requests: the peers' count too, fleet/fleet.c), counted over a window
 * of about PG_CA_SHARE_WINDOW requests that slides by halves. Its owner
 * cannot be one instance (it would take more than its share), so
 * cache_aware counts it cached on every instance and lets what follows it
 * decide. */
#define PG_CA_SHARED_USES  8
#define PG_CA_SHARE_WINDOW 65536

/* The most slots an index gets (128 MiB), whatever --cache-capacity says:
 * past it, prefixes of big fleets evict each other early. */
#define PG_CA_SLOTS_MAX (1u << 22)

/* Each instance's capacity in blocks, for --cache-capacity tokens. */
uint32_t pg_ca_capacity_blocks(uint64_t capacity_tokens);
/* Index slots for it (a power of two, at least min_slots). */
uint32_t pg_ca_slots_for(uint64_t capacity_tokens, uint32_t min_slots);

/* Which holders count (the caller's rule: usable, not excluded, ...). */
typedef bool (*pg_ca_ok_fn)(uint16_t id, void *arg);

/* The live holders of block prefix h for which ok holds (ok may be NULL:
 * every live one); returns their number, ids in out. */
size_t pg_ca_holders(const struct pg_ca_index *ix, uint64_t h, pg_ca_ok_fn ok, void *arg,
                     uint16_t out[PG_CA_WAYS]);

/* Backend id's stamp on block prefix h, live or not (router/capacity.h
 * measures from it how far back id was sent it); false: none. */
bool pg_ca_stamp(const struct pg_ca_index *ix, uint64_t h, uint16_t id, uint32_t *stamp);

struct pg_ca_match {
	uint32_t blocks; /* matched prefix, in blocks (0: none) */
	uint32_t probes; /* index lookups it took */
	uint8_t n;       /* holders of it */
	uint16_t holder[PG_CA_WAYS];
};

/* Start loading the home slots of chain[0..n) into the CPU's cache. The
 * match's probes each wait for the one before, and the record then touches
 * every slot: issued first, their misses overlap instead of adding up. */
void pg_ca_prefetch(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n);

/* The longest prefix chain[0..k) whose last hash has a holder ok accepts. */
void pg_ca_match(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n, pg_ca_ok_fn ok,
                 void *arg, struct pg_ca_match *out);

/*
 * What each backend holds of chain[0..n): the longest prefix that any
 * holder ok accepts holds, then the longest the others hold, and so on,
 * `tiers` times at most. Writes (ids[i], blocks[i]) longest first and
 * returns their number (at most tiers x PG_CA_WAYS); adds the lookups it
 * took to *probes (may be NULL). About tiers x (log2(n) + 1) lookups.
 */
size_t pg_ca_match_tiers(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n,
                         pg_ca_ok_fn ok, void *arg, unsigned tiers, uint16_t *ids, uint32_t *blocks,
                         uint32_t *probes);

/* chain[0..n) was sent to backend id (1..PG_MAX_BACKENDS-1): record and
 * refresh it, advance id's clock by the blocks it did not hold. Returns the
 * slots evicted to make room. */
unsigned pg_ca_record(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n, uint16_t id);

/* The index entry that remembers where a request with this anchor (key.h)
 * was placed: recorded as a one-block chain (whatever
 * CacheAwareConfig.NewConversationChoices is, so that raising it live moves
 * nothing), looked up when it is above 1, so a conversation whose text is
 * still shorter than a block stays where it began. Never equal to a block's
 * chain hash but by a 64-bit accident, never 0. */
static inline uint64_t pg_ca_anchor_key(uint64_t anchor)
{
	uint64_t h = anchor ^ 0xa0761d6478bd642full;

	return h ? h : 1;
}

/* The index entry that remembers that backend id was sent the shared head
 * (pg_ca_shared) whose last block prefix is head: recorded as a one-block
 * chain with every request through that head, aged like the rest, so that
 * cache_aware knows where the head's first prefill is still to come
 * (router/cache.h) whatever the PG_CA_WAYS holders of the head's own
 * blocks are. One entry per (head, instance); never 0. */
static inline uint64_t pg_ca_head_key(uint64_t head, uint16_t id)
{
	uint64_t h = (head ^ 0x1d8e4e27c47d124full) * 0x9e3779b97f4a7c15ull + id;

	return h ? h : 1;
}

/* One request more (before its pg_ca_record): the clock shares count in. */
void pg_ca_tick(const struct pg_ca_index *ix);

/* The shared blocks at the head of chain[0..n) (see above), members: the
 * instances that serve it. About log2(n) + 1 lookups. */
uint32_t pg_ca_shared(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n,
                      uint32_t members);

/* Slots in use (a scan: for metrics, not the request path). */
uint32_t pg_ca_occupancy(const struct pg_ca_index *ix);

/* Forget everything the index remembers of backend id (its slot gets a new
 * member, or it left): its clock jumps by its capacity. */
void pg_ca_forget(const struct pg_ca_index *ix, uint16_t id);

#endif /* PG_ROUTER_INDEX_H */
