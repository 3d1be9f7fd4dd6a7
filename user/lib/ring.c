// SPDX-License-Identifier: MIT
/*
 * Consistent-hash ring by per-slot rendezvous hashing.
 *
 * Every (member, slot) pair gets a pseudo-random score that depends only on
 * the member's identity seed and the slot number; a slot lists the
 * PG_RING_CANDIDATES members with the highest scores, best first. Since a
 * member's score in a slot never depends on who else is present:
 *  - adding a member changes a slot's first candidate only where the new
 *    member scores highest, so keys move only to it (~1/(N+1) of them);
 *  - removing a member changes only the slots that listed it, and there the
 *    others keep their relative order (the old second candidate becomes the
 *    first);
 *  - the table is a function of the set of seeds (and of which id each seed
 *    is written as), never of the order members are given in.
 *
 * Cost: PG_RING_SLOTS * n score computations plus a top-K insertion that
 * almost always stops at one comparison; no sort over all members.
 */
#include <string.h>
#include <xxhash.h>

#include "lib/ring.h"

/* The splitmix64 finalizer: a bijective 64-bit mix whose output bits each
 * depend on every input bit. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* Per-slot salt: spreads consecutive slot numbers over the whole 64-bit
 * space so seed ^ salt differs in many bits between neighbouring slots. */
static inline uint64_t slot_salt(uint32_t s)
{
	return mix64((uint64_t)s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
}

/* Score of the member with identity seed in the slot with salt. */
static inline uint64_t score(uint64_t seed, uint64_t salt)
{
	return mix64(seed ^ salt);
}

uint64_t pg_ring_seed(const char *ident, size_t len)
{
	return XXH3_64bits(ident, len);
}

struct ranked {
	uint64_t score;
	uint16_t id;
};

/*
 * Strict "ranks before": higher score, then lower id. For a given slot the
 * score is a bijection of the seed (xor with a constant, then a bijective
 * mix), so two members' scores tie only if their seeds are equal: ranking by
 * score already breaks every tie between distinct identities by seed alone,
 * independently of input order. The id only orders duplicate identities,
 * which callers should not pass, so that even they give one table.
 */
static inline int ranks_before(uint64_t sc, uint16_t id, const struct ranked *r)
{
	if (sc != r->score)
		return sc > r->score;
	return id < r->id;
}

/*
 * Members must have distinct ids in 1..PG_MAX_BACKENDS-1 (0 means "none" in
 * a slot) and should have distinct seeds; n may be 0. Only ring->slot and
 * ring->nbackends are written: the caller owns seq/generation (the seqlock
 * around this rebuild).
 */
void pg_ring_build(struct pg_ring *ring, const struct pg_ring_member *members, size_t n)
{
	const size_t k = n < PG_RING_CANDIDATES ? n : PG_RING_CANDIDATES;

	ring->nbackends = (uint32_t)n;
	if (n == 0) {
		memset(ring->slot, 0, sizeof(ring->slot));
		return;
	}

	for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
		const uint64_t salt = slot_salt(s);
		struct ranked top[PG_RING_CANDIDATES];
		size_t have = 0;

		for (size_t m = 0; m < n; m++) {
			const uint16_t id = members[m].id;
			const uint64_t sc = score(members[m].seed, salt);
			size_t pos;

			/* Common case once the list is full: not better than
			 * the last kept entry, one comparison and done. */
			if (have == k && !ranks_before(sc, id, &top[k - 1]))
				continue;
			pos = have < k ? have++ : k - 1;
			while (pos > 0 && ranks_before(sc, id, &top[pos - 1])) {
				top[pos] = top[pos - 1];
				pos--;
			}
			top[pos] = (struct ranked){.score = sc, .id = id};
		}
		for (size_t c = 0; c < PG_RING_CANDIDATES; c++)
			ring->slot[s][c] = c < have ? top[c].id : 0;
	}
}

size_t pg_ring_candidates(const struct pg_ring *ring, uint64_t key_hash,
                          uint16_t out[PG_RING_CANDIDATES])
{
	const uint16_t *slot = ring->slot[pg_ring_slot(key_hash)];
	size_t n = 0;

	/* Entries are packed: the first 0 ends the list. */
	while (n < PG_RING_CANDIDATES && slot[n] != 0) {
		out[n] = slot[n];
		n++;
	}
	return n;
}

uint64_t pg_ring_moved_ppm(const struct pg_ring *a, const struct pg_ring *b)
{
	uint64_t moved = 0;

	for (uint32_t s = 0; s < PG_RING_SLOTS; s++)
		moved += a->slot[s][0] != b->slot[s][0];
	return moved * 1000000 / PG_RING_SLOTS;
}
