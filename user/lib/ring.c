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
 * Cost: PG_RING_SLOTS * n score computations. That count belongs to the
 * definition (any member's score can decide a slot), so the build makes each
 * one cheap and keeps unpredictable branches out of the loop over members:
 *  - the mix's first step is linear over GF(2), so it is applied once per
 *    member and once per slot instead of once per pair (mix_first);
 *  - a slot's scan keeps, without a branch, every member scoring at least a
 *    threshold that about SCAN_EXPECTED of n random scores pass, and the top
 *    K is then taken among those few, with masks instead of branches. (A
 *    running top K over all n members makes ~K ln(n/K) insertions per slot
 *    at unpredictable places: mispredicted branches cost more than the
 *    scores.) If fewer than K members pass (~1% of slots), the slot is
 *    scanned again keeping all of them: the threshold decides how much work
 *    there is, never the result;
 *  - on x86-64 CPUs with AVX-512 (F and DQ) the scan can do eight members
 *    at a time (scan_avx512, chosen at run time); it keeps the same
 *    candidates in the same order as the portable scan.
 * The table is pinned by tests/unit/test_ring.c (digests of fixed
 * memberships, and a plain reference build): gateways of different versions
 * that share a membership must route a key alike.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "lib/ring.h"

#define K PG_RING_CANDIDATES
/* Members in the scan's arrays, padded for eight-wide loads. */
#define SCAN_CAP ((PG_MAX_BACKENDS + 7) & ~7)
/* Members a slot's threshold lets through on average (when n > it). Lower
 * means less top-K work per slot, but more slots where fewer than K pass
 * and the scan runs again (Poisson: 1.0% of slots at 10, 4.2% at 8). */
#define SCAN_EXPECTED 10
/* Candidate id of an unused top-K entry: ranks after every real member,
 * whose ids are below PG_MAX_BACKENDS. */
#define NO_ID 0xffffu

_Static_assert(PG_MAX_BACKENDS <= NO_ID, "ids must rank before the unused entry");

#define MIX_M1 0xbf58476d1ce4e5b9ull
#define MIX_M2 0x94d049bb133111ebull

/* The splitmix64 finalizer: a bijective 64-bit mix whose output bits each
 * depend on every input bit. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= MIX_M1;
	x ^= x >> 27;
	x *= MIX_M2;
	x ^= x >> 31;
	return x;
}

/*
 * mix64 split at its first step: mix64(x) == mix_rest(mix_first(x)), and
 * mix_first is linear over GF(2) (x ^ x >> 30), so
 *   score(seed, salt) = mix64(seed ^ salt)
 *                     = mix_rest(mix_first(seed) ^ mix_first(salt)).
 * The scans take both halves precomputed.
 */
static inline uint64_t mix_first(uint64_t x)
{
	return x ^ x >> 30;
}

static inline uint64_t mix_rest(uint64_t x)
{
	x *= MIX_M1;
	x ^= x >> 27;
	x *= MIX_M2;
	x ^= x >> 31;
	return x;
}

/* Per-slot salt: spreads consecutive slot numbers over the whole 64-bit
 * space so seed ^ salt differs in many bits between neighbouring slots. */
static inline uint64_t slot_salt(uint32_t s)
{
	return mix64((uint64_t)s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
}

uint64_t pg_ring_seed(const char *ident, size_t len)
{
	return XXH3_64bits(ident, len);
}

/* The members as the scans read them; entries n..SCAN_CAP-1 are zero. */
struct scan_in {
	size_t n;
	uint64_t pre[SCAN_CAP]; /* mix_first(seed) */
	uint64_t id[SCAN_CAP];
};

/* A slot's candidates: score and id of each member that passed, in member
 * order. Eight spare entries for the eight-wide stores. */
struct scan_out {
	uint64_t score[SCAN_CAP + 8];
	uint64_t id[SCAN_CAP + 8];
};

/* Members scoring >= thr in the slot whose mix_first(salt) is pre_salt, into
 * out; returns how many. Every member is stored, only the count depends on
 * the score. */
static inline size_t scan_portable(const struct scan_in *in, uint64_t pre_salt, uint64_t thr,
                                   struct scan_out *out)
{
	size_t c = 0;

	for (size_t m = 0; m < in->n; m++) {
		const uint64_t x = mix_rest(in->pre[m] ^ pre_salt);

		out->score[c] = x;
		out->id[c] = in->id[m];
		c += x >= thr;
	}
	return c;
}

#if defined(__x86_64__)
#define HAVE_AVX512   1
#define AVX512_TARGET __attribute__((target("avx512f,avx512dq,popcnt")))

/* scan_portable, eight members at a time. */
AVX512_TARGET static inline size_t scan_avx512(const struct scan_in *in, uint64_t pre_salt,
                                               uint64_t thr, struct scan_out *out)
{
	const __m512i salt = _mm512_set1_epi64((long long)pre_salt);
	const __m512i m1 = _mm512_set1_epi64((long long)MIX_M1);
	const __m512i m2 = _mm512_set1_epi64((long long)MIX_M2);
	const __m512i vthr = _mm512_set1_epi64((long long)thr);
	size_t c = 0;

	for (size_t m = 0; m < in->n; m += 8) {
		__m512i x = _mm512_xor_si512(_mm512_loadu_si512(in->pre + m), salt);
		__mmask8 pass;

		x = _mm512_mullo_epi64(x, m1);
		x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
		x = _mm512_mullo_epi64(x, m2);
		x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
		pass = _mm512_cmpge_epu64_mask(x, vthr);
		if (in->n - m < 8) /* the padding is not a member */
			pass &= (__mmask8)((1u << (in->n - m)) - 1);
		/* The passing lanes packed to the front, in order; all 8 stored. */
		_mm512_storeu_si512(out->score + c, _mm512_maskz_compress_epi64(pass, x));
		_mm512_storeu_si512(
		    out->id + c, _mm512_maskz_compress_epi64(pass, _mm512_loadu_si512(in->id + m)));
		c += (size_t)_mm_popcnt_u32(pass);
	}
	return c;
}

/* The compilers' CPU checks also require the OS to save the AVX-512
 * registers (XCR0), so a true here means the instructions can run. */
static int have_avx512(void)
{
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}
#else
#define HAVE_AVX512 0
static int have_avx512(void)
{
	return 0;
}
#endif

/*
 * Ranking: higher score first, then lower id. For a given slot the score is
 * a bijection of the seed (xor with a constant, then a bijective mix), so two
 * members' scores tie only if their seeds are equal: ranking by score already
 * breaks every tie between distinct identities by seed alone, independently
 * of input order. The id only orders duplicate identities, which callers
 * should not pass, so that even they give one table.
 *
 * The top K is kept in registers, best first; each candidate goes down it
 * swapping with every entry it ranks before. Masks, not branches: where a
 * candidate lands is as unpredictable as the scores. An unused entry is
 * (0, NO_ID), which every member ranks before.
 */
#define SWAP_IF(cond, t, tid, x, xid)                                                              \
	do {                                                                                       \
		const uint64_t swap_ = -(uint64_t)(cond);                                          \
		const uint64_t ds_ = (x ^ t) & swap_, di_ = (xid ^ tid) & swap_;                   \
		t ^= ds_;                                                                          \
		x ^= ds_;                                                                          \
		tid ^= di_;                                                                        \
		xid ^= di_;                                                                        \
	} while (0)
/* The full order: score, then id. */
#define RANK_SWAP(t, tid, x, xid) SWAP_IF((t < x) | ((t == x) & (xid < tid)), t, tid, x, xid)
/* Score alone: the same order when scores are distinct, and x > 0. */
#define SCORE_SWAP(t, tid, x, xid) SWAP_IF(t < x, t, tid, x, xid)

#define TOP_K(SWAP, cand, c, slot)                                                                 \
	do {                                                                                       \
		uint64_t t0 = 0, t1 = 0, t2 = 0, t3 = 0;                                           \
		uint64_t i0 = NO_ID, i1 = NO_ID, i2 = NO_ID, i3 = NO_ID;                           \
                                                                                                   \
		for (size_t i_ = 0; i_ < (c); i_++) {                                              \
			uint64_t x = (cand)->score[i_], xid = (cand)->id[i_];                      \
                                                                                                   \
			SWAP(t0, i0, x, xid);                                                      \
			SWAP(t1, i1, x, xid);                                                      \
			SWAP(t2, i2, x, xid);                                                      \
			SWAP(t3, i3, x, xid);                                                      \
		}                                                                                  \
		(slot)[0] = i0 == NO_ID ? 0 : (uint16_t)i0;                                        \
		(slot)[1] = i1 == NO_ID ? 0 : (uint16_t)i1;                                        \
		(slot)[2] = i2 == NO_ID ? 0 : (uint16_t)i2;                                        \
		(slot)[3] = i3 == NO_ID ? 0 : (uint16_t)i3;                                        \
	} while (0)

_Static_assert(K == 4, "TOP_K keeps four entries");

static void top_k_ranked(const struct scan_out *cand, size_t c, uint16_t slot[K])
{
	TOP_K(RANK_SWAP, cand, c, slot);
}

/*
 * The best k = min(n, K) of c >= k candidates into slot[], then zeros.
 * distinct: no two members share a seed, so comparing scores is enough,
 * except for a candidate scoring exactly 0 (never ahead of an unused entry):
 * it can only belong in the slot when c <= K, that is c == k, and then it
 * leaves entry k - 1 unused: the slot is taken again in the full order.
 */
static inline void top_k(const struct scan_out *cand, size_t c, size_t k, int distinct,
                         uint16_t slot[K])
{
	if (!distinct) {
		top_k_ranked(cand, c, slot);
		return;
	}
	TOP_K(SCORE_SWAP, cand, c, slot);
	if (slot[k - 1] == 0)
		top_k_ranked(cand, c, slot);
}

/* The slots' loop, with the scan inlined into each variant below. */
static inline __attribute__((always_inline)) void
build_slots(struct pg_ring *ring, const struct scan_in *in, int distinct,
            size_t (*scan)(const struct scan_in *, uint64_t, uint64_t, struct scan_out *))
{
	const size_t n = in->n, k = n < K ? n : K;
	/* P(score >= thr) = SCAN_EXPECTED / n for a uniform score. */
	const uint64_t thr = n > SCAN_EXPECTED ? UINT64_MAX - UINT64_MAX / n * SCAN_EXPECTED : 0;
	struct scan_out out;

	for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
		const uint64_t pre_salt = mix_first(slot_salt(s));
		size_t c = scan(in, pre_salt, thr, &out);

		if (c < k)
			c = scan(in, pre_salt, 0, &out);
		top_k(&out, c, k, distinct, ring->slot[s]);
	}
}

static void build_portable(struct pg_ring *ring, const struct scan_in *in, int distinct)
{
	build_slots(ring, in, distinct, scan_portable);
}

#if HAVE_AVX512
AVX512_TARGET static void build_avx512(struct pg_ring *ring, const struct scan_in *in, int distinct)
{
	build_slots(ring, in, distinct, scan_avx512);
}
#endif

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * Members must have distinct ids in 1..PG_MAX_BACKENDS-1 (0 means "none" in
 * a slot) and should have distinct seeds; n may be 0. Only ring->slot and
 * ring->nbackends are written: the caller owns seq/generation (the seqlock
 * around this rebuild).
 */
void pg_ring_build(struct pg_ring *ring, const struct pg_ring_member *members, size_t n)
{
	/* AUTO runs on any CPU: only more members than ids can fail. */
	if (pg_ring_build_with(ring, members, n, PG_RING_SCAN_AUTO))
		abort();
}

/* AUTO's choice for n members: below AVX512_MIN_MEMBERS the portable scan
 * measured as fast (there is too little to scan eight at a time). */
#define AVX512_MIN_MEMBERS 32

static enum pg_ring_scan scan_for(enum pg_ring_scan scan, size_t n)
{
	if (scan != PG_RING_SCAN_AUTO)
		return scan;
	return n >= AVX512_MIN_MEMBERS && have_avx512() ? PG_RING_SCAN_AVX512
	                                                : PG_RING_SCAN_PORTABLE;
}

int pg_ring_build_with(struct pg_ring *ring, const struct pg_ring_member *members, size_t n,
                       enum pg_ring_scan scan)
{
	struct scan_in in = {.n = n};
	uint64_t seeds[PG_MAX_BACKENDS];
	int distinct = 1;

	scan = scan_for(scan, n);
	if (n > PG_MAX_BACKENDS - 1 ||
	    (scan != PG_RING_SCAN_PORTABLE && (scan != PG_RING_SCAN_AVX512 || !have_avx512())))
		return -1;
	ring->nbackends = (uint32_t)n;
	if (n == 0) {
		memset(ring->slot, 0, sizeof(ring->slot));
		return 0;
	}
	for (size_t m = 0; m < n; m++) {
		in.pre[m] = mix_first(members[m].seed);
		in.id[m] = members[m].id;
		seeds[m] = members[m].seed;
	}
	qsort(seeds, n, sizeof(seeds[0]), cmp_u64);
	for (size_t m = 1; m < n; m++)
		distinct &= seeds[m] != seeds[m - 1];
#if HAVE_AVX512
	if (scan == PG_RING_SCAN_AVX512) {
		build_avx512(ring, &in, distinct);
		return 0;
	}
#endif
	build_portable(ring, &in, distinct);
	return 0;
}

const char *pg_ring_scan_name(enum pg_ring_scan scan, size_t n)
{
	return scan_for(scan, n) == PG_RING_SCAN_AVX512 ? "avx512" : "portable";
}

/*
 * Updates. The table is the same function of membership whichever way it is
 * computed; from the last table, one member more or fewer only changes a
 * little of it, found with a few scores per slot instead of n:
 *  - adding a: a enters a slot only if it ranks before the slot's last
 *    entry (K/(n+1) of slots); elsewhere the slot stays as it was;
 *  - removing r: only the slots listing r change (K/n of them): r's entry
 *    goes, the ones after it move up, and the best member ranking after
 *    the (new) last entry fills the end, found by scoring the members.
 * Each step leaves exactly the table of the membership so far (removals
 * first, then additions), so the result is the full build's.
 */

/* The membership being stepped through: its members in scan_in form, and
 * each id's seed. */
struct step {
	struct scan_in in;
	bool has[PG_MAX_BACKENDS];
	uint64_t seed[PG_MAX_BACKENDS];
};

static inline uint64_t score_of(uint64_t seed, uint64_t pre_salt)
{
	return mix_rest(mix_first(seed) ^ pre_salt);
}

/* Strict "ranks before" on (score, id): higher score, then lower id. */
static inline bool ranks_before(uint64_t xs, uint64_t xid, uint64_t ys, uint64_t yid)
{
	return xs != ys ? xs > ys : xid < yid;
}

static void step_add(struct step *st, struct pg_ring_last *last, const struct pg_ring_member *a)
{
	const size_t full = st->in.n >= K; /* every slot lists K members */

	for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
		uint16_t *e = last->slot[s];
		const uint64_t pre_salt = mix_first(slot_salt(s));
		const uint64_t as = score_of(a->seed, pre_salt);
		size_t j = full ? K - 1 : st->in.n; /* a's place, from the end */

		if (full &&
		    !ranks_before(as, a->id, score_of(st->seed[e[K - 1]], pre_salt), e[K - 1]))
			continue;
		while (j > 0 &&
		       ranks_before(as, a->id, score_of(st->seed[e[j - 1]], pre_salt), e[j - 1])) {
			e[j] = e[j - 1];
			j--;
		}
		e[j] = a->id;
	}
	st->in.pre[st->in.n] = mix_first(a->seed);
	st->in.id[st->in.n++] = a->id;
	st->has[a->id] = true;
	st->seed[a->id] = a->seed;
}

static void step_remove(struct step *st, struct pg_ring_last *last, uint16_t r)
{
	size_t m = 0;

	while (st->in.id[m] != r)
		m++;
	st->in.n--;
	st->in.pre[m] = st->in.pre[st->in.n];
	st->in.id[m] = st->in.id[st->in.n];
	st->in.pre[st->in.n] = st->in.id[st->in.n] = 0;
	st->has[r] = false;

	for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
		uint16_t *e = last->slot[s];
		uint64_t pre_salt, ls, best_s = 0, best_id = NO_ID;
		size_t j = 0;

		while (j < K && e[j] != r)
			j++;
		if (j == K)
			continue;
		for (; j + 1 < K; j++)
			e[j] = e[j + 1];
		e[K - 1] = 0;
		if (st->in.n < K) /* the slot lists every member already */
			continue;
		/* The top K - 1 are listed: the K-th is the best after them. */
		pre_salt = mix_first(slot_salt(s));
		ls = score_of(st->seed[e[K - 2]], pre_salt);
		for (size_t i = 0; i < st->in.n; i++) {
			const uint64_t x = mix_rest(st->in.pre[i] ^ pre_salt), id = st->in.id[i];

			if (ranks_before(ls, e[K - 2], x, id) &&
			    ranks_before(x, id, best_s, best_id))
				best_s = x, best_id = id;
		}
		e[K - 1] = (uint16_t)best_id;
	}
}

/* Members of b missing from a (by id and seed), into out; how many, or
 * SIZE_MAX if b repeats an id. */
static size_t missing(const struct pg_ring_member *a, size_t na, const struct pg_ring_member *b,
                      size_t nb, struct pg_ring_member *out)
{
	bool in_a[PG_MAX_BACKENDS] = {false}, in_b[PG_MAX_BACKENDS] = {false};
	uint64_t seed_a[PG_MAX_BACKENDS];
	size_t c = 0;

	for (size_t i = 0; i < na; i++) {
		in_a[a[i].id] = true;
		seed_a[a[i].id] = a[i].seed;
	}
	for (size_t i = 0; i < nb; i++) {
		if (in_b[b[i].id])
			return SIZE_MAX;
		in_b[b[i].id] = true;
		if (!in_a[b[i].id] || seed_a[b[i].id] != b[i].seed)
			out[c++] = b[i];
	}
	return c;
}

/* Whether members are valid for an update: ids in 1..PG_MAX_BACKENDS-1. */
static bool ids_in_range(const struct pg_ring_member *m, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (m[i].id == 0 || m[i].id >= PG_MAX_BACKENDS)
			return false;
	return n < PG_MAX_BACKENDS;
}

bool pg_ring_update(struct pg_ring *ring, struct pg_ring_last *last,
                    const struct pg_ring_member *members, size_t n)
{
	struct step st;
	struct pg_ring_member gone[PG_MAX_BACKENDS], added[PG_MAX_BACKENDS];
	size_t ngone = SIZE_MAX, nadded = SIZE_MAX;

	if (last->valid && ids_in_range(members, n) && ids_in_range(last->m, last->n)) {
		ngone = missing(members, n, last->m, last->n, gone);
		nadded = missing(last->m, last->n, members, n, added);
	}
	/* A step costs about (K + 2) * PG_RING_SLOTS scores, a build n *
	 * PG_RING_SLOTS: update only while clearly cheaper. */
	if (ngone == SIZE_MAX || nadded == SIZE_MAX ||
	    (ngone + nadded) * (K + 2) * 2 > (n < last->n ? n : last->n)) {
		pg_ring_build(ring, members, n);
		memcpy(last->slot, ring->slot, sizeof(last->slot));
		memcpy(last->m, members, n * sizeof(*members));
		last->n = n;
		last->valid = true;
		return false;
	}
	memset(&st, 0, sizeof(st));
	for (size_t i = 0; i < last->n; i++) {
		st.in.pre[i] = mix_first(last->m[i].seed);
		st.in.id[i] = last->m[i].id;
		st.has[last->m[i].id] = true;
		st.seed[last->m[i].id] = last->m[i].seed;
	}
	st.in.n = last->n;
	for (size_t i = 0; i < ngone; i++)
		step_remove(&st, last, gone[i].id);
	for (size_t i = 0; i < nadded; i++)
		step_add(&st, last, &added[i]);
	memcpy(ring->slot, last->slot, sizeof(ring->slot));
	ring->nbackends = (uint32_t)n;
	memcpy(last->m, members, n * sizeof(*members));
	last->n = n;
	return true;
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

uint64_t pg_ring_digest(const struct pg_ring *ring, const uint64_t seed_of_id[PG_MAX_BACKENDS])
{
	uint64_t row[PG_RING_CANDIDATES * 256], h = 0;
	size_t n = 0;

	/* Blocks of 256 slots chained through the seed: no streaming state. */
	for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
		for (size_t k = 0; k < PG_RING_CANDIDATES; k++) {
			uint16_t id = ring->slot[s][k];

			row[n++] = id && id < PG_MAX_BACKENDS ? seed_of_id[id] : 0;
		}
		if (n == sizeof(row) / sizeof(row[0])) {
			h = XXH3_64bits_withSeed(row, sizeof(row), h);
			n = 0;
		}
	}
	return n ? XXH3_64bits_withSeed(row, n * sizeof(row[0]), h) : h;
}
