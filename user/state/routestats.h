/* SPDX-License-Identifier: MIT */
/*
 * Statistics of routing decisions that explain the KV-cache hit rate:
 *
 * - predicted hits: a request is a predicted hit when its key hash went to
 *   the same backend within the last --predict-window ms. One shared lossy
 *   table of PG_PREDICT_SLOTS entries (key tag, backend id, time) packed in
 *   a uint64_t, read and written with relaxed atomics: two keys sharing a
 *   slot evict each other (a miss counted, never a wrong hit unless their
 *   16-bit tags collide too), two workers racing on one slot lose one
 *   update. Both are noise well below what the ratio is used for.
 * - shadow mode (--shadow): the same prediction for the backend that
 *   PREFIX_AWARE would have chosen, plus its per-backend spread.
 * - hot keys: per worker, a space-saving table of PG_HOT_SLOTS key hashes
 *   counted over PG_HOT_WINDOW_MS windows, one request in PG_HOT_SAMPLE
 *   sampled; each finished window is published through a seqcount and
 *   merged by the reader.
 *
 * All of it is one object, struct pg_rstats, that the gateway owns
 * (gw->rstats, made at start-up with one slot of counters per worker).
 * Writers are the worker threads, through pg_route_worker() (route.c)
 * only, worker i writing slot i alone: single writer per slot, so its
 * counters take a plain relaxed load + store (no locked instruction) and
 * its hot-key window needs no lock. There is no shared slot: a worker
 * index outside the slots is not recorded. Readers (metrics, control
 * thread) sum the slots with relaxed loads.
 */
#ifndef PG_ROUTESTATS_H
#define PG_ROUTESTATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gateway.h"

#define PG_PREDICT_SLOTS (1u << 16)
/* Key hashes tracked per worker and per window for hot keys. */
#define PG_HOT_SLOTS     16
#define PG_HOT_WINDOW_MS 10000
/* One request in this many is counted for hot keys (then scaled back). */
#define PG_HOT_SAMPLE 8
/* Hot keys shown by the metrics. */
#define PG_HOT_TOP 5

/* ---- pure pieces (unit-tested) -------------------------------------------- */

/*
 * Look up and refresh the prediction table entry of hash: true if hash
 * went to backend id (1..PG_MAX_BACKENDS - 1) within window_ms before now_ms. Then the
 * entry records (hash, id, now_ms). table has PG_PREDICT_SLOTS entries.
 */
bool pg_predict(uint64_t *table, uint64_t hash, uint16_t id, uint64_t now_ms, uint64_t window_ms);

/* Space-saving top-k counter of key hashes. Zero-initialise. */
struct pg_hot {
	uint64_t hash[PG_HOT_SLOTS];
	uint32_t count[PG_HOT_SLOTS]; /* 0: slot free */
};

/* Count one occurrence of hash: its slot's count + 1, else the slot with
 * the lowest count is taken over (count = that lowest + 1, an upper bound
 * of the true count, as space-saving does). hash 0 is counted like any. */
void pg_hot_add(struct pg_hot *h, uint64_t hash);

struct pg_hot_key {
	uint64_t hash;
	uint64_t count;
};

/* Merge count into a list of at most cap distinct hashes kept sorted by
 * count, highest first (the lowest falls off when full). *n: entries. */
void pg_hot_merge(struct pg_hot_key *list, size_t *n, size_t cap, uint64_t hash, uint64_t count);

/* ---- the object ------------------------------------------------------------ */

struct pg_rstats;

/* Statistics for nslots writers (the workers: gw->nworkers), all zero; the
 * prediction tables are allocated here too. NULL if out of memory. */
struct pg_rstats *pg_rstats_create(unsigned nslots);
void pg_rstats_free(struct pg_rstats *rs);

/* ---- recording (workers) ------------------------------------------------ */

/*
 * Record one routed request of worker `worker` into gw->rstats (nothing
 * when that is NULL or worker is not below its nslots): key hash, the
 * backend chosen (1..PG_MAX_BACKENDS - 1), the backend PREFIX_AWARE would have chosen in
 * shadow mode (0: shadow off or no usable backend) and the time. Called
 * by pg_route_worker() only.
 */
void pg_rstats_record(const struct pg_gateway *gw, unsigned worker, uint64_t hash, uint16_t id,
                      uint16_t shadow_id, uint64_t now_ms);

/* ---- reading (control thread) ------------------------------------------- */

struct pg_rstats_totals {
	uint64_t requests;        /* requests recorded */
	uint64_t hits;            /* of which predicted hits */
	uint64_t shadow_requests; /* requests with a shadow choice */
	uint64_t shadow_hits;     /* of which predicted hits for the shadow choice */
	uint64_t shadow_agree;    /* shadow choice == real choice */
	uint64_t shadow_by_backend[PG_MAX_BACKENDS];
};

/* Sum every slot's counters (relaxed loads: a recent snapshot); all zero
 * when rs is NULL. */
void pg_rstats_sum(const struct pg_rstats *rs, struct pg_rstats_totals *t);

/* The hottest keys of the last finished window of each slot (windows that
 * ended more than 2 windows before now_ms are ignored), merged: at most max
 * entries, highest count first. Returns how many (0 when rs is NULL). */
size_t pg_rstats_hot(const struct pg_rstats *rs, uint64_t now_ms, struct pg_hot_key *out,
                     size_t max);

#endif /* PG_ROUTESTATS_H */
