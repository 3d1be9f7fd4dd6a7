/* SPDX-License-Identifier: MIT */
/*
 * Inter-token latency and the distributions the report prints, pure (no
 * I/O, no clock: the caller passes the times).
 *
 * A streamed response's inter-token latency (ITL) is the gaps between its
 * consecutive content events after the first (the first is its TTFT): n
 * content events give n - 1 gaps. Events are timed when the client reads
 * them, so several events in one read give gaps of 0 after the first: what
 * a client of the server sees, batching by the network included.
 */
#ifndef PGLOAD_ITL_H
#define PGLOAD_ITL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable list of durations (ns). */
struct pg_gaps {
	uint64_t *v;
	size_t n, cap;
};

/* Append v[0..n). Returns 0, or -1 when out of memory (dst unchanged). */
int pg_gaps_append(struct pg_gaps *dst, const uint64_t *v, size_t n);
void pg_gaps_free(struct pg_gaps *g);

/* One response's content events, as they are read. */
struct pg_itl {
	uint64_t last_ns; /* the last content event's time; 0: none yet */
	uint64_t sum_ns, max_ns;
	bool oom;           /* a gap could not be kept: gaps is incomplete */
	struct pg_gaps gap; /* every gap, in order; gap.n is the count */
};

/* Start a new response; keeps the memory of earlier ones. */
void pg_itl_reset(struct pg_itl *t);
/*
 * k content events ended at now_ns (k = 0: nothing happens). The first
 * event of the response is its TTFT and makes no gap; every other one makes
 * the gap since the previous event (0 for the second and later of a batch).
 */
void pg_itl_events(struct pg_itl *t, uint64_t now_ns, unsigned k);
void pg_itl_free(struct pg_itl *t);

/*
 * The arithmetic mean, then the nearest-rank 50th, 90th and 99th
 * percentiles of v[0..n), in ms, into out[0..4); every one -1 when n is 0.
 * Sorts v in place.
 */
void pg_dist(uint64_t *v, size_t n, double out[4]);

#endif /* PGLOAD_ITL_H */
