// SPDX-License-Identifier: MIT
/*
 * Routing statistics (routestats.h): predicted KV hits, shadow choices and
 * hot keys. pg_rstats_record() runs on every request, so it takes no lock,
 * issues no locked instruction on its worker's counters and touches at
 * most two shared cache lines (the prediction tables' entries).
 */
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "state/routestats.h"

/* Prediction entry: tag (16 bits of the hash the index does not use), then
 * backend id (12 bits: ids are below PG_MAX_BACKENDS <= 4096), then the
 * time in ms (36 bits, 795 days; ages are taken modulo 2^36, so the
 * wrap-around is harmless). 0: empty (id 0 is never chosen). */
#define ID_BITS   12
#define TIME_BITS 36
#define TIME_MASK ((1ull << TIME_BITS) - 1)
/* An entry already saying (key, backend) is rewritten only if older than
 * this: a hot key then costs no cache-line bouncing between workers, for a
 * window at most this much shorter. */
#define REFRESH_MS 256

_Static_assert(PG_MAX_BACKENDS <= 1 << ID_BITS, "prediction entries hold 12-bit backend ids");

static inline uint64_t relaxed(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* +1 on a counter only this thread writes: no locked instruction. */
static inline void bump(uint64_t *p)
{
	__atomic_store_n(p, relaxed(p) + 1, __ATOMIC_RELAXED);
}

bool pg_predict(uint64_t *table, uint64_t hash, uint16_t id, uint64_t now_ms, uint64_t window_ms)
{
	uint64_t *e = &table[hash & (PG_PREDICT_SLOTS - 1)];
	const uint64_t tag = hash >> 16 & 0xffff, t = now_ms & TIME_MASK;
	const uint64_t old = __atomic_load_n(e, __ATOMIC_RELAXED);
	const uint64_t mine = tag << 48 | (uint64_t)(id & ((1u << ID_BITS) - 1)) << TIME_BITS;
	/* Age, sign-extended from 40 bits: another worker may have stored a
	 * time a little ahead of ours (then the age is negative: a hit). */
	const int64_t age =
	    (int64_t)((t - (old & TIME_MASK)) << (64 - TIME_BITS)) >> (64 - TIME_BITS);
	const bool same = old && (old & ~TIME_MASK) == mine;

	if (!same || age >= REFRESH_MS)
		__atomic_store_n(e, mine | t, __ATOMIC_RELAXED);
	return same && age <= (int64_t)window_ms;
}

void pg_hot_add(struct pg_hot *h, uint64_t hash)
{
	unsigned min = 0;

	for (unsigned i = 0; i < PG_HOT_SLOTS; i++) {
		if (h->count[i] && h->hash[i] == hash) {
			h->count[i]++;
			return;
		}
		if (h->count[i] < h->count[min])
			min = i;
	}
	h->hash[min] = hash;
	h->count[min]++;
}

void pg_hot_merge(struct pg_hot_key *list, size_t *n, size_t cap, uint64_t hash, uint64_t count)
{
	size_t i;

	for (i = 0; i < *n && list[i].hash != hash; i++)
		;
	if (i < *n) {
		count += list[i].count;
		memmove(&list[i], &list[i + 1], (*n - i - 1) * sizeof(*list));
		(*n)--;
	}
	for (i = *n; i > 0 && list[i - 1].count < count; i--)
		;
	if (i >= cap)
		return;
	if (*n == cap)
		(*n)--;
	memmove(&list[i + 1], &list[i], (*n - i) * sizeof(*list));
	list[i] = (struct pg_hot_key){.hash = hash, .count = count};
	(*n)++;
}

/* ---- the object ------------------------------------------------------------ */

/* One writer's counters: worker i writes slots[i] only. */
struct slot {
	uint64_t requests, hits;
	uint64_t shadow_requests, shadow_hits, shadow_agree;
	uint64_t hot_start_ms; /* current window began */
	struct pg_hot hot;     /* current window: its writer only */
	uint32_t seq;          /* seqcount of pub: odd while written */
	uint64_t pub_end_ms;   /* last finished window ended (0: none) */
	uint64_t pub_len_ms;   /* and lasted */
	struct pg_hot pub;     /* its counts */
	uint64_t shadow_by_backend[PG_MAX_BACKENDS];
} __attribute__((aligned(64)));

struct pg_rstats {
	uint64_t predict_table[PG_PREDICT_SLOTS];
	uint64_t shadow_table[PG_PREDICT_SLOTS];
	unsigned nslots;
	struct slot *slots; /* nslots, cache-line aligned */
};

struct pg_rstats *pg_rstats_create(unsigned nslots)
{
	struct pg_rstats *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->nslots = nslots;
	rs->slots = aligned_alloc(64, sizeof(*rs->slots) * (nslots ? nslots : 1));
	if (!rs->slots) {
		pg_rstats_free(rs);
		return NULL;
	}
	memset(rs->slots, 0, sizeof(*rs->slots) * (nslots ? nslots : 1));
	return rs;
}

void pg_rstats_free(struct pg_rstats *rs)
{
	if (!rs)
		return;
	free(rs->slots);
	free(rs);
}

/* Publish the finished hot-key window and start the next. */
static void hot_roll(struct slot *s, uint64_t now_ms)
{
	uint32_t q = s->seq;

	__atomic_store_n(&s->seq, q + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (unsigned i = 0; i < PG_HOT_SLOTS; i++) {
		__atomic_store_n(&s->pub.hash[i], s->hot.hash[i], __ATOMIC_RELAXED);
		__atomic_store_n(&s->pub.count[i], s->hot.count[i], __ATOMIC_RELAXED);
	}
	__atomic_store_n(&s->pub_end_ms, now_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&s->pub_len_ms, now_ms - s->hot_start_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, q + 2, __ATOMIC_RELEASE);
	memset(&s->hot, 0, sizeof(s->hot));
	s->hot_start_ms = now_ms;
}

void pg_rstats_record(const struct pg_gateway *gw, unsigned worker, uint64_t hash, uint16_t id,
                      uint16_t shadow_id, uint64_t now_ms)
{
	const uint64_t window =
	    gw->cfg && gw->cfg->predict_window_ms ? gw->cfg->predict_window_ms : 60000;
	struct pg_rstats *rs = gw->rstats;
	struct slot *s;

	if (!rs || worker >= rs->nslots)
		return;
	s = &rs->slots[worker];
	bump(&s->requests);
	if (pg_predict(rs->predict_table, hash, id, now_ms, window))
		bump(&s->hits);
	if (shadow_id) {
		bump(&s->shadow_requests);
		if (pg_predict(rs->shadow_table, hash, shadow_id, now_ms, window))
			bump(&s->shadow_hits);
		if (shadow_id == id)
			bump(&s->shadow_agree);
		bump(&s->shadow_by_backend[shadow_id]);
	}
	/* Hot keys look at one request in PG_HOT_SAMPLE: a miss in the table
	 * costs a scan of all of it, and a key hot enough to matter is seen
	 * often enough anyway. */
	if (relaxed(&s->requests) % PG_HOT_SAMPLE)
		return;
	if (!s->hot_start_ms)
		s->hot_start_ms = now_ms;
	else if (now_ms - s->hot_start_ms >= PG_HOT_WINDOW_MS)
		hot_roll(s, now_ms);
	pg_hot_add(&s->hot, hash);
}

/* ---- reading ----------------------------------------------------------------- */

void pg_rstats_sum(const struct pg_rstats *rs, struct pg_rstats_totals *t)
{
	const unsigned n = rs ? rs->nslots : 0;

	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < n; i++) {
		const struct slot *s = &rs->slots[i];

		t->requests += relaxed(&s->requests);
		t->hits += relaxed(&s->hits);
		t->shadow_requests += relaxed(&s->shadow_requests);
		t->shadow_hits += relaxed(&s->shadow_hits);
		t->shadow_agree += relaxed(&s->shadow_agree);
		for (unsigned b = 0; b < PG_MAX_BACKENDS; b++)
			t->shadow_by_backend[b] += relaxed(&s->shadow_by_backend[b]);
	}
}

size_t pg_rstats_hot(const struct pg_rstats *rs, uint64_t now_ms, struct pg_hot_key *out,
                     size_t max)
{
	const unsigned n = rs ? rs->nslots : 0;
	size_t nout = 0;

	for (unsigned i = 0; i < n; i++) {
		const struct slot *s = &rs->slots[i];
		struct pg_hot h;
		uint64_t end = 0, len = 0;
		bool ok = false;

		/* A few tries; a thread publishing right now is skipped. */
		for (int tries = 0; tries < 4 && !ok; tries++) {
			uint32_t q = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

			if (q & 1)
				continue;
			for (unsigned k = 0; k < PG_HOT_SLOTS; k++) {
				h.hash[k] = __atomic_load_n(&s->pub.hash[k], __ATOMIC_RELAXED);
				h.count[k] = __atomic_load_n(&s->pub.count[k], __ATOMIC_RELAXED);
			}
			end = relaxed(&s->pub_end_ms);
			len = relaxed(&s->pub_len_ms);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			ok = __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == q;
		}
		if (!ok || !end || !len || end + 2 * PG_HOT_WINDOW_MS < now_ms)
			continue;
		/* Counts scaled to one PG_HOT_WINDOW_MS (a window may run longer
		 * when the thread was idle: it ends at its next request). */
		for (unsigned k = 0; k < PG_HOT_SLOTS; k++)
			if (h.count[k])
				pg_hot_merge(out, &nout, max, h.hash[k],
				             (uint64_t)h.count[k] * PG_HOT_SAMPLE *
				                 PG_HOT_WINDOW_MS / len);
	}
	return nout;
}
