// SPDX-License-Identifier: MIT
/*
 * cache_aware's block index (router/index.h). Pure: slots and clocks are shared
 * memory written with relaxed atomics (several workers at once; a torn slot
 * is only a wrong hint).
 */
#include "router/index.h"

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

uint32_t pg_ca_capacity_blocks(uint64_t capacity_tokens)
{
	uint64_t b = capacity_tokens * PG_CA_CHARS_PER_TOKEN / PG_CA_BLOCK;

	return b < 1 ? 1 : b > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)b;
}

uint32_t pg_ca_slots_for(uint64_t capacity_tokens, uint32_t min_slots)
{
	uint64_t want = (uint64_t)pg_ca_capacity_blocks(capacity_tokens) * PG_CA_SLOTS_PER_BLOCK;
	uint32_t n = min_slots ? min_slots : 1;

	while (n < want && n < PG_CA_SLOTS_MAX)
		n <<= 1;
	return n;
}

/* Slot i of the probe window of h (i = 0: its home slot). */
static inline struct pg_ca_slot *slot_at(const struct pg_ca_index *ix, uint64_t h, uint32_t i)
{
	return &ix->slots[(h + i) & (ix->nslots - 1)];
}

/* Backend id's cache in blocks: what its answers showed
 * (router/capacity.h), else what it reported, else the index's. */
static inline uint32_t capacity_of(const struct pg_ca_index *ix, uint16_t id)
{
	uint32_t c = LOAD(&ix->backends[id].ca_learned_blocks);

	if (!c)
		c = LOAD(&ix->backends[id].ca_capacity_blocks);
	return c ? c : ix->capacity_blocks;
}

/* A holder stamped at stamp still holds the prefix under the LRU model:
 * fewer than cap blocks were sent to it since (clock: its ca_clock now). */
static inline bool stamp_live(uint32_t cap, uint32_t clock, uint32_t stamp)
{
	return clock - stamp < cap;
}

/* Holder way w of slot s is live: an active backend that still holds the
 * prefix (ok decides the rest). */
static inline bool way_live(const struct pg_ca_index *ix, const struct pg_ca_slot *s, unsigned w,
                            uint16_t *id_out)
{
	uint16_t id = LOAD(&s->backend[w]);

	if (!id || id >= PG_MAX_BACKENDS)
		return false;
	if (!(LOAD(&ix->backends[id].flags) & PG_BACKEND_ACTIVE))
		return false;
	if (!stamp_live(capacity_of(ix, id), (uint32_t)LOAD(&ix->backends[id].ca_clock),
	                LOAD(&s->stamp[w])))
		return false;
	*id_out = id;
	return true;
}

static struct pg_ca_slot *find(const struct pg_ca_index *ix, uint64_t h)
{
	for (uint32_t i = 0; i < PG_CA_PROBE; i++) {
		struct pg_ca_slot *s = slot_at(ix, h, i);

		if (LOAD(&s->hash) == h)
			return s;
	}
	return NULL;
}

size_t pg_ca_holders(const struct pg_ca_index *ix, uint64_t h, pg_ca_ok_fn ok, void *arg,
                     uint16_t out[PG_CA_WAYS])
{
	const struct pg_ca_slot *s = find(ix, h);
	size_t n = 0;
	uint16_t id;

	if (!s)
		return 0;
	for (unsigned w = 0; w < PG_CA_WAYS; w++)
		if (way_live(ix, s, w, &id) && (!ok || ok(id, arg)))
			out[n++] = id;
	return n;
}

bool pg_ca_stamp(const struct pg_ca_index *ix, uint64_t h, uint16_t id, uint32_t *stamp)
{
	const struct pg_ca_slot *s = find(ix, h);

	if (!s)
		return false;
	for (unsigned w = 0; w < PG_CA_WAYS; w++)
		if (LOAD(&s->backend[w]) == id) {
			*stamp = LOAD(&s->stamp[w]);
			return true;
		}
	return false;
}

void pg_ca_prefetch(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		__builtin_prefetch(slot_at(ix, chain[i], 0), 1 /* to be written */);
}

/* pg_ca_match over chain[0..hi) of n. */
static void match_upto(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t hi,
                       pg_ca_ok_fn ok, void *arg, struct pg_ca_match *out)
{
	uint32_t lo = 0; /* prefixes of lo blocks match; of more than hi, none */
	uint16_t held[PG_CA_WAYS];
	size_t k;

	*out = (struct pg_ca_match){0};
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		out->probes++;
		k = pg_ca_holders(ix, chain[mid - 1], ok, arg, held);
		if (k) {
			lo = mid;
			out->n = (uint8_t)k;
			for (size_t i = 0; i < k; i++)
				out->holder[i] = held[i];
		} else {
			hi = mid - 1;
		}
	}
	out->blocks = lo; /* holder[] is from the last probe that matched: lo's */
}

void pg_ca_match(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n, pg_ca_ok_fn ok,
                 void *arg, struct pg_ca_match *out)
{
	match_upto(ix, chain, n, ok, arg, out);
}

/* The caller's rule, less the holders already found. */
struct tiered {
	pg_ca_ok_fn ok;
	void *arg;
	const uint16_t *found;
	size_t nfound;
};

static bool not_found_yet(uint16_t id, void *arg)
{
	const struct tiered *t = arg;

	for (size_t i = 0; i < t->nfound; i++)
		if (t->found[i] == id)
			return false;
	return !t->ok || t->ok(id, t->arg);
}

size_t pg_ca_match_tiers(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n,
                         pg_ca_ok_fn ok, void *arg, unsigned tiers, uint16_t *ids, uint32_t *blocks,
                         uint32_t *probes)
{
	struct tiered t = {ok, arg, ids, 0};
	uint32_t hi = n;

	for (unsigned k = 0; k < tiers && hi; k++) {
		struct pg_ca_match m;

		match_upto(ix, chain, hi, not_found_yet, &t, &m);
		if (probes)
			*probes += m.probes;
		if (!m.blocks)
			break;
		for (unsigned i = 0; i < m.n; i++) {
			ids[t.nfound] = m.holder[i];
			blocks[t.nfound++] = m.blocks;
		}
		hi = m.blocks; /* the others hold at most as much */
	}
	return t.nfound;
}

/* The way of id in s, else a free or expired one, else the stalest (the
 * most blocks sent to its backend since its stamp, relative to capacity).
 * id_live, clock: id's ACTIVE flag and ca_clock, read once per record
 * (way_live's test for id's own way, without reading them per block). */
static unsigned pick_way(const struct pg_ca_index *ix, const struct pg_ca_slot *s, uint16_t id,
                         bool id_live, uint32_t clock, uint32_t cap, bool *had)
{
	unsigned best = 0;
	uint32_t best_age = 0;
	uint16_t live;

	for (unsigned w = 0; w < PG_CA_WAYS; w++) {
		if (LOAD(&s->backend[w]) == id) {
			*had = id_live && stamp_live(cap, clock, LOAD(&s->stamp[w]));
			return w;
		}
	}
	*had = false;
	for (unsigned w = 0; w < PG_CA_WAYS; w++) {
		uint16_t b = LOAD(&s->backend[w]);
		uint32_t age;

		if (!way_live(ix, s, w, &live))
			return w;
		/* relative to its capacity: 2^16 parts of it */
		age = (uint32_t)(((uint64_t)((uint32_t)LOAD(&ix->backends[b].ca_clock) -
		                             LOAD(&s->stamp[w]))
		                  << 16) /
		                 capacity_of(ix, b));
		if (age >= best_age) {
			best_age = age;
			best = w;
		}
	}
	return best;
}

static bool slot_expired(const struct pg_ca_index *ix, const struct pg_ca_slot *s)
{
	uint16_t id;

	for (unsigned w = 0; w < PG_CA_WAYS; w++)
		if (way_live(ix, s, w, &id))
			return false;
	return true;
}

/* The slot for h: its own, else (*fresh: its holders cleared) a free one,
 * an expired one, else the home slot taken over (*evicted). One pass finds
 * h or the first free slot; expired ones are looked for only when there
 * is neither (a free slot is preferred to an expired one before it). */
static struct pg_ca_slot *claim(const struct pg_ca_index *ix, uint64_t h, uint32_t now, bool *fresh,
                                bool *evicted)
{
	struct pg_ca_slot *reuse = NULL;

	*fresh = *evicted = false;
	for (uint32_t i = 0; i < PG_CA_PROBE; i++) {
		struct pg_ca_slot *c = slot_at(ix, h, i);
		uint64_t v = LOAD(&c->hash);

		if (v == h)
			return c;
		if (!v && !reuse)
			reuse = c;
	}
	for (uint32_t i = 0; i < PG_CA_PROBE && !reuse; i++)
		if (slot_expired(ix, slot_at(ix, h, i)))
			reuse = slot_at(ix, h, i);
	if (!reuse) {
		reuse = slot_at(ix, h, 0);
		*evicted = true;
	}
	for (unsigned w = 0; w < PG_CA_WAYS; w++)
		STORE(&reuse->backend[w], 0);
	STORE(&reuse->uses, 0);
	STORE(&reuse->since, now);
	STORE(&reuse->hash, h);
	*fresh = true;
	return reuse;
}

/* One more request through s at request count now; the window slides by
 * halves, so uses / (now - since) follows the recent share. */
static void count_use(struct pg_ca_slot *s, uint32_t now)
{
	uint32_t since = LOAD(&s->since), uses = LOAD(&s->uses);

	if (now - since > PG_CA_SHARE_WINDOW) {
		STORE(&s->since, now - PG_CA_SHARE_WINDOW / 2);
		uses /= 2;
	}
	if (uses < UINT32_MAX)
		STORE(&s->uses, uses + 1);
}

unsigned pg_ca_record(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n, uint16_t id)
{
	__u64 *clock;
	uint32_t base, fresh = 0, cap, now;
	unsigned evictions = 0;
	bool live;

	if (!id || id >= PG_MAX_BACKENDS)
		return 0;
	clock = &ix->backends[id].ca_clock;
	base = (uint32_t)LOAD(clock);
	cap = capacity_of(ix, id);
	now = ix->requests ? (uint32_t)LOAD(ix->requests) : 0;
	live = LOAD(&ix->backends[id].flags) & PG_BACKEND_ACTIVE;
	for (uint32_t i = 0; i < n; i++) {
		bool fresh_slot, evicted, had = false;
		struct pg_ca_slot *s = claim(ix, chain[i], now, &fresh_slot, &evicted);
		/* a slot just claimed has no holder: pick_way would take way 0 */
		unsigned w = fresh_slot ? 0 : pick_way(ix, s, id, live, base, cap, &had);

		evictions += evicted;
		count_use(s, now);
		if (!had)
			fresh++; /* the engine computes and caches this block now */
		STORE(&s->backend[w], id);
		STORE(&s->stamp[w], base + fresh);
	}
	if (fresh)
		__atomic_fetch_add(clock, fresh, __ATOMIC_RELAXED);
	return evictions;
}

uint32_t pg_ca_occupancy(const struct pg_ca_index *ix)
{
	uint32_t used = 0;

	for (uint32_t i = 0; i < ix->nslots; i++)
		used += LOAD(&ix->slots[i].hash) && !slot_expired(ix, &ix->slots[i]);
	return used;
}

void pg_ca_forget(const struct pg_ca_index *ix, uint16_t id)
{
	if (id && id < PG_MAX_BACKENDS)
		__atomic_fetch_add(&ix->backends[id].ca_clock, capacity_of(ix, id),
		                   __ATOMIC_RELAXED);
}

void pg_ca_tick(const struct pg_ca_index *ix)
{
	if (ix->requests)
		__atomic_fetch_add(ix->requests, 1, __ATOMIC_RELAXED);
}

/* Prefix h is shared: at least PG_CA_SHARED_USES requests went through it
 * lately, and more than 1/members of all. */
static bool shared_at(const struct pg_ca_index *ix, uint64_t h, uint32_t now, uint32_t members)
{
	const struct pg_ca_slot *s = find(ix, h);
	uint32_t uses;

	if (!s)
		return false;
	uses = LOAD(&s->uses);
	return uses >= PG_CA_SHARED_USES &&
	       (uint64_t)uses * members >= (uint64_t)(now - LOAD(&s->since));
}

uint32_t pg_ca_shared(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n,
                      uint32_t members)
{
	uint32_t lo = 0, hi = n, now;

	if (!ix->requests || !members)
		return 0;
	now = (uint32_t)LOAD(ix->requests);
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (shared_at(ix, chain[mid - 1], now, members))
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}
