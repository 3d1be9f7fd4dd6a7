/* SPDX-License-Identifier: MIT */
/*
 * Consistent-hash ring, pure: membership in, table out (struct pg_ring from
 * include/prefixgate.h). Each slot holds its PG_RING_CANDIDATES best backends
 * by rendezvous (highest random weight) score of (backend identity, slot), so:
 * adding a backend only changes slots it now wins (keys move only to it),
 * removing one only changes the slots it held, and the table depends on the
 * set of identities, not on their order or ids' assignment order.
 */
#ifndef PG_RING_H
#define PG_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "prefixgate.h"

struct pg_ring_member {
	uint16_t id;   /* backend id written into slots (1..PG_MAX_BACKENDS-1) */
	uint64_t seed; /* identity: pg_ring_seed("addr:port") */
};

/* Identity hash of a backend's canonical "a.b.c.d:port" text. */
uint64_t pg_ring_seed(const char *ident, size_t len);

/*
 * Fill ring->slot and ring->nbackends from members (n may be 0). Each slot
 * gets the min(n, PG_RING_CANDIDATES) members with the highest score for it,
 * best first; unused entries are 0. Distinct seeds never tie (the score is a
 * bijection of the seed per slot); equal seeds rank the lower id first; so the
 * result never depends on the members' order. Members must have distinct ids
 * in 1..PG_MAX_BACKENDS-1 and should have distinct seeds. Does not touch seq
 * or generation (the caller's seqlock).
 */
void pg_ring_build(struct pg_ring *ring, const struct pg_ring_member *members, size_t n);

/*
 * How pg_ring_build scans a slot's members: eight at a time with AVX-512
 * (F, DQ) where the CPU has it, or in portable C. AUTO, pg_ring_build's
 * choice, takes AVX-512 when the CPU has it and there are enough members to
 * gain from it. The table is the same either way; tests and benchmarks
 * choose one to check or time it.
 */
enum pg_ring_scan {
	PG_RING_SCAN_AUTO,
	PG_RING_SCAN_PORTABLE,
	PG_RING_SCAN_AVX512,
};

/* pg_ring_build with the given scan; -1, ring untouched, if this CPU or
 * build lacks it, or n > PG_MAX_BACKENDS - 1 (for which pg_ring_build
 * aborts). */
int pg_ring_build_with(struct pg_ring *ring, const struct pg_ring_member *members, size_t n,
                       enum pg_ring_scan scan);

/* "avx512" or "portable": the scan that scan (AUTO: pg_ring_build's) uses
 * for n members. */
const char *pg_ring_scan_name(enum pg_ring_scan scan, size_t n);

/*
 * The last table built and its membership, for pg_ring_update. Zeroed: none
 * yet. About 520 KiB: keep it static or on the heap.
 */
struct pg_ring_last {
	bool valid;
	size_t n;
	struct pg_ring_member m[PG_MAX_BACKENDS];
	uint16_t slot[PG_RING_SLOTS][PG_RING_CANDIDATES];
};

/*
 * pg_ring_build(ring, members, n), the same bytes, computed from last (the
 * previous call's table and members) when few members differ: a member
 * added or removed costs a few scores per slot instead of n. last then
 * holds this build. Returns whether it updated (false: built in full, as
 * the first time, or after many changes). ring's previous content is not
 * used: it may be any copy.
 */
bool pg_ring_update(struct pg_ring *ring, struct pg_ring_last *last,
                    const struct pg_ring_member *members, size_t n);

/* Slot a key hash falls in. */
static inline uint32_t pg_ring_slot(uint64_t key_hash)
{
	return (uint32_t)(key_hash >> (64 - PG_RING_SLOT_BITS));
}

/* Copy the ordered candidates for key_hash into out; returns how many (0 if
 * the ring is empty). */
size_t pg_ring_candidates(const struct pg_ring *ring, uint64_t key_hash,
                          uint16_t out[PG_RING_CANDIDATES]);

/*
 * Share of slots, in parts per million, whose first candidate differs. Slots
 * are compared by id: ids are assigned per process and the identity is the
 * seed, so the result means "keys moved" only when an id denotes the same
 * member in both rings (as between two builds by the same control thread).
 */
uint64_t pg_ring_moved_ppm(const struct pg_ring *a, const struct pg_ring *b);

/*
 * Digest of a ring as placement, not as ids: XXH3 over every slot's
 * candidates written as their identity seeds (seed_of_id[id]; 0 for an
 * unused entry), so gateways that hold the same members under different ids
 * agree on it exactly when they route every key alike.
 */
uint64_t pg_ring_digest(const struct pg_ring *ring, const uint64_t seed_of_id[PG_MAX_BACKENDS]);

#endif /* PG_RING_H */
