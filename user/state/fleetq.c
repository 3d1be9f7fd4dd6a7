// SPDX-License-Identifier: MIT
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "prefixgate.h"
#include "state/fleetq.h"

/* One decision in a buffer, followed by n hashes (8-byte aligned). */
struct entry {
	uint16_t id;
	uint16_t n : 15, request : 1; /* n <= PG_CA_MAX_BLOCKS */
	uint32_t epoch;
};
_Static_assert(PG_CA_MAX_BLOCKS < 1 << 15, "fleetq entry: n in 15 bits");

struct wbuf {
	pthread_mutex_t mu;
	uint64_t *live;  /* the worker appends here, under mu */
	uint64_t *spare; /* the fleet thread's, between takes */
	size_t len;      /* bytes used in live */
} __attribute__((aligned(64)));

struct pg_fleetq {
	unsigned n;
	uint64_t dropped;
	struct wbuf *w;
};

struct pg_fleetq *pg_fleetq_create(unsigned nworkers)
{
	struct pg_fleetq *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->w = aligned_alloc(64, sizeof(*q->w) * (nworkers ? nworkers : 1));
	if (!q->w) {
		free(q);
		return NULL;
	}
	for (unsigned i = 0; i < nworkers; i++, q->n++) {
		struct wbuf *b = &q->w[i];

		pthread_mutex_init(&b->mu, NULL);
		b->live = malloc(PG_FLEETQ_BYTES);
		b->spare = malloc(PG_FLEETQ_BYTES);
		b->len = 0;
		if (!b->live || !b->spare) {
			q->n++;
			pg_fleetq_free(q);
			return NULL;
		}
	}
	return q;
}

void pg_fleetq_free(struct pg_fleetq *q)
{
	if (!q)
		return;
	for (unsigned i = 0; i < q->n; i++) {
		free(q->w[i].live);
		free(q->w[i].spare);
		pthread_mutex_destroy(&q->w[i].mu);
	}
	free(q->w);
	free(q);
}

void pg_fleetq_push(struct pg_fleetq *q, unsigned w, uint16_t id, uint32_t epoch,
                    const uint64_t *chain, uint32_t n, bool request)
{
	size_t need;
	struct wbuf *b;
	struct entry e;

	if (w >= q->n || !n)
		return;
	if (n > PG_CA_MAX_BLOCKS)
		n = PG_CA_MAX_BLOCKS;
	b = &q->w[w];
	need = sizeof(e) + (size_t)n * 8;
	if (pthread_mutex_trylock(&b->mu)) {
		__atomic_fetch_add(&q->dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	if (PG_FLEETQ_BYTES - b->len < need) {
		pthread_mutex_unlock(&b->mu);
		__atomic_fetch_add(&q->dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	e = (struct entry){.id = id, .n = (uint16_t)n, .request = request, .epoch = epoch};
	memcpy((char *)b->live + b->len, &e, sizeof(e));
	memcpy((char *)b->live + b->len + sizeof(e), chain, (size_t)n * 8);
	b->len += need;
	pthread_mutex_unlock(&b->mu);
}

void pg_fleetq_take(struct pg_fleetq *q, unsigned w, pg_fleetq_fn fn, void *arg)
{
	struct wbuf *b;
	uint64_t *full;
	size_t len, off = 0;

	if (w >= q->n)
		return;
	b = &q->w[w];
	pthread_mutex_lock(&b->mu);
	full = b->live;
	len = b->len;
	b->live = b->spare;
	b->len = 0;
	b->spare = full;
	pthread_mutex_unlock(&b->mu);
	while (off + sizeof(struct entry) <= len) {
		struct entry e;

		memcpy(&e, (char *)full + off, sizeof(e));
		fn(e.id, e.epoch, (const uint64_t *)((char *)full + off + sizeof(e)), e.n,
		   e.request, arg);
		off += sizeof(e) + (size_t)e.n * 8;
	}
}

uint64_t pg_fleetq_dropped(const struct pg_fleetq *q)
{
	return __atomic_load_n(&q->dropped, __ATOMIC_RELAXED);
}
