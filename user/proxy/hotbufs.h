/* SPDX-License-Identifier: MIT */
/*
 * Which of a worker's provided receive buffers are posted to the kernel.
 *
 * The kernel fills provided buffers from the head of the ring and we give
 * them back at its tail: with every buffer posted, the one just given back
 * (still in the CPU's cache from the send that read it) is filled again
 * only after all the others, so every receive writes, and the JSON scan
 * and the send then read, memory that left the cache long ago. Measured
 * (tools/bench/profile.py --vs-floor, 32 KiB bodies, 128 of 64 KiB): the
 * receive copy took 3.6-3.9 µs a request with all posted, 2.6-3.3 with
 * this, 1.6-2.0 for the floor proxy, whose per-connection buffer stays in
 * the cache (doc/benchmarks.md, "Receive buffers").
 *
 * So only a few are posted at a time (depth): what receives use cycles
 * through a few hundred KiB, not the worker's 8 MiB. Free buffers wait on
 * a stack and the one given back last is posted first. The ring is still
 * filled in order, so a buffer posted now is filled after those already
 * there: the gain is the small set in use, not the exact order.
 *
 * A turn in which a receive found the ring empty (ENOBUFS), or starved
 * sockets were left waiting, doubles the depth at the next posting, up to
 * every buffer: a burst is served as before. After PG_HOTBUFS_QUIET_TICKS
 * ticks in a row with none, the depth halves, down to PG_HOTBUFS_MIN.
 *
 * Every buffer is in exactly one place: free (on the stack), posted (in
 * the kernel's ring) or out (held by a connection, counted by the worker):
 * nbufs = nfree + posted + out. No I/O here; bufs.c posts what
 * pg_hotbufs_next() hands out.
 */
#ifndef PG_HOTBUFS_H
#define PG_HOTBUFS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

/* Buffers kept posted when no receive lacked one lately: a turn's worth
 * of receives at 32 clients a worker (measured: deeper only now and then),
 * and 16 x 32 KiB bodies = half of a core's 1 MiB L2 here. */
#define PG_HOTBUFS_MIN 16
/* Quiet ticks (100 ms each) in a row before the depth halves: a load that
 * needs a deeper ring now and then keeps it. */
#define PG_HOTBUFS_QUIET_TICKS 10

enum { PG_BUF_FREE, PG_BUF_POSTED, PG_BUF_OUT }; /* where a buffer is */

struct pg_hotbufs {
	uint16_t *free;   /* given back, not posted; free[nfree - 1] the latest */
	uint8_t *where;   /* PG_BUF_*, by bid */
	unsigned nfree;   /* on the stack */
	unsigned posted;  /* in the kernel's ring, not yet filled by a receive */
	unsigned depth;   /* post up to this many */
	unsigned nbufs;   /* all of them */
	unsigned quiet;   /* ticks in a row with nothing lacking */
	bool lacked;      /* a receive lacked a buffer since the last posting */
	bool lacked_tick; /* ... since the last tick */
};

/* All nbufs (1-65536) buffers free, bid 0 on top. 0, or -1 out of memory. */
static inline int pg_hotbufs_init(struct pg_hotbufs *h, unsigned nbufs)
{
	*h = (struct pg_hotbufs){.nbufs = nbufs, .depth = PG_HOTBUFS_MIN};
	h->free = malloc(nbufs * sizeof(*h->free));
	h->where = calloc(nbufs, 1); /* all PG_BUF_FREE */
	if (!h->free || !h->where) {
		free(h->free);
		free(h->where);
		h->free = NULL;
		h->where = NULL;
		return -1;
	}
	for (unsigned i = 0; i < nbufs; i++)
		h->free[i] = (uint16_t)(nbufs - 1 - i);
	h->nfree = nbufs;
	return 0;
}

static inline void pg_hotbufs_free(struct pg_hotbufs *h)
{
	free(h->free);
	free(h->where);
	h->free = NULL;
	h->where = NULL;
}

/* Buffer bid is back from its connection: the first to be posted next.
 * A buffer given back twice, or one never handed out, would be filled by
 * two receives at once, mixing two connections' bytes: stop instead. */
static inline void pg_hotbufs_give(struct pg_hotbufs *h, unsigned bid)
{
	if (bid >= h->nbufs || h->where[bid] != PG_BUF_OUT)
		abort();
	h->where[bid] = PG_BUF_FREE;
	h->free[h->nfree++] = (uint16_t)bid;
}

/* A receive took posted buffer bid (a completion carried it). */
static inline void pg_hotbufs_filled(struct pg_hotbufs *h, unsigned bid)
{
	if (bid >= h->nbufs || h->where[bid] != PG_BUF_POSTED)
		abort(); /* the kernel took one we did not post */
	h->where[bid] = PG_BUF_OUT;
	h->posted--;
}

/* A receive found no buffer posted, or starved sockets were left waiting. */
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
	h->nfree--;
	h->where[h->free[h->nfree]] = PG_BUF_POSTED;
	return h->free[h->nfree];
}

/* The periodic tick: after PG_HOTBUFS_QUIET_TICKS in a row with nothing
 * lacking, the depth halves, down to PG_HOTBUFS_MIN. Buffers already
 * posted stay posted. */
static inline void pg_hotbufs_tick(struct pg_hotbufs *h)
{
	h->quiet = h->lacked_tick ? 0 : h->quiet + 1;
	h->lacked_tick = false;
	if (h->quiet >= PG_HOTBUFS_QUIET_TICKS && h->depth / 2 >= PG_HOTBUFS_MIN) {
		h->depth /= 2;
		h->quiet = 0;
	}
}

#endif /* PG_HOTBUFS_H */
