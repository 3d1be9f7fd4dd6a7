/* SPDX-License-Identifier: MIT */
/*
 * Which of a worker's provided receive buffers the kernel may fill next.
 *
 * The kernel takes provided buffers from the head of the ring and we give
 * them back at its tail: with every buffer posted, the one just given back
 * (still in the CPU's cache from the send that read it) is filled again
 * only after all the others, so every receive writes, and the JSON scan
 * and the send then read, memory that left the cache long ago. Measured
 * (tools/bench/profile.py --vs-floor, 32 KiB bodies): with all 128 of
 * 64 KiB posted the receive copy took 5.1 µs a request and the send's copy
 * 2.2, against 2.2 and 0.7 with 16, and 1.9 and 0.8 for the floor proxy,
 * whose per-connection buffer stays in the cache.
 *
 * So only a few buffers are posted at a time (depth), taken from a stack
 * of the given-back ones, the most recently given back first. A receive
 * that finds the ring empty (ENOBUFS) doubles the depth at the next
 * posting, up to every buffer: a burst is served as before. The depth
 * halves back towards PG_HOTBUFS_MIN at each tick with no such receive.
 *
 * Every buffer is in exactly one place: free (on the stack), posted (in
 * the kernel's ring) or out (held by a connection, counted by the worker):
 * nbufs = nfree + posted + out. No I/O here; worker.c posts what
 * pg_hotbufs_next() hands out.
 */
#ifndef PG_HOTBUFS_H
#define PG_HOTBUFS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Buffers kept posted when no receive has lacked one since the last tick:
 * a turn's worth of receives at 32 clients a worker, measured, and
 * 16 x 32 KiB bodies = half of a core's 1 MiB L2 here. */
#define PG_HOTBUFS_MIN 16

struct pg_hotbufs {
	uint16_t *free;   /* given back, not posted; free[nfree - 1] the latest */
	unsigned nfree;   /* on the stack */
	unsigned posted;  /* in the kernel's ring, not yet filled by a receive */
	unsigned depth;   /* post up to this many */
	unsigned nbufs;   /* all of them */
	bool lacked;      /* a receive found the ring empty since the last posting */
	bool lacked_tick; /* ... since the last tick */
};

/* All nbufs (<= 65536) buffers free, bid 0 on top. 0, or -1 out of memory. */
static inline int pg_hotbufs_init(struct pg_hotbufs *h, unsigned nbufs)
{
	*h = (struct pg_hotbufs){.nbufs = nbufs, .depth = PG_HOTBUFS_MIN};
	h->free = malloc((nbufs ? nbufs : 1) * sizeof(*h->free));
	if (!h->free)
		return -1;
	for (unsigned i = 0; i < nbufs; i++)
		h->free[i] = (uint16_t)(nbufs - 1 - i);
	h->nfree = nbufs;
	return 0;
}

static inline void pg_hotbufs_free(struct pg_hotbufs *h)
{
	free(h->free);
	h->free = NULL;
}

/* Buffer bid is back from its connection: the first to be posted next. */
static inline void pg_hotbufs_give(struct pg_hotbufs *h, uint16_t bid)
{
	h->free[h->nfree++] = bid;
}

/* A receive filled a posted buffer (a completion carried it). */
static inline void pg_hotbufs_filled(struct pg_hotbufs *h)
{
	h->posted--;
}

/* A receive found no buffer posted. */
static inline void pg_hotbufs_lacked(struct pg_hotbufs *h)
{
	h->lacked = h->lacked_tick = true;
}

/* The next buffer to post, hottest first, or -1: the ring holds depth
 * buffers already, or none is free. The first call after a receive
 * lacked one doubles the depth (once however many lacked). */
static inline int pg_hotbufs_next(struct pg_hotbufs *h)
{
	if (h->lacked) {
		h->lacked = false;
		h->depth = h->depth * 2 < h->nbufs ? h->depth * 2 : h->nbufs;
	}
	if (h->posted >= h->depth || !h->nfree)
		return -1;
	h->posted++;
	return h->free[--h->nfree];
}

/* The periodic tick: a depth that no receive needed since the last one
 * halves, down to PG_HOTBUFS_MIN. Buffers already posted stay posted. */
static inline void pg_hotbufs_tick(struct pg_hotbufs *h)
{
	if (!h->lacked_tick && h->depth / 2 >= PG_HOTBUFS_MIN)
		h->depth /= 2;
	h->lacked_tick = false;
}

#endif /* PG_HOTBUFS_H */
