// SPDX-License-Identifier: MIT
/*
 * A worker's provided receive buffers: PG_NBUFS of PG_BUFSZ in one block,
 * the io_uring buffer ring they are posted to, and which of them are
 * posted (hotbufs.h: a few at a time, the ones given back last first).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "proxy/worker_state.h"

bool pg_worker_can_lend(const struct pg_worker *w)
{
	return w->bufs_out < PG_NBUFS / 2;
}

char *pg_buf_addr(struct pg_worker *w, int bid)
{
	return w->bufs + (size_t)bid * PG_BUFSZ;
}

/* Top the ring up to the depth, the buffers given back last first
 * (hotbufs.h); before each wait. */
void pg_bufs_post(struct pg_worker *w)
{
	int bid, n = 0;

	while ((bid = pg_hotbufs_next(&w->hot)) >= 0)
		io_uring_buf_ring_add(w->br, pg_buf_addr(w, bid), PG_BUFSZ, (unsigned short)bid,
		                      io_uring_buf_ring_mask(PG_NBUFS), n++);
	if (n)
		io_uring_buf_ring_advance(w->br, n);
}

int pg_bufs_init(struct pg_worker *w)
{
	struct io_uring_buf_reg reg = {0};
	size_t ring_bytes = PG_NBUFS * sizeof(struct io_uring_buf);
	int rc;

	/* liburing 2.3 has no io_uring_setup_buf_ring(): map the ring ourselves. */
	w->br = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (w->br == MAP_FAILED) {
		w->br = NULL;
		return -errno;
	}
	/* Mapped, not malloc'd: pages of buffers never posted are never
	 * touched, so not resident (most of them, at a steady load). */
	w->bufs = mmap(NULL, (size_t)PG_NBUFS * PG_BUFSZ, PROT_READ | PROT_WRITE,
	               MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (w->bufs == MAP_FAILED) {
		w->bufs = NULL;
		return -errno;
	}
	if (pg_hotbufs_init(&w->hot, PG_NBUFS))
		return -ENOMEM;
	reg.ring_addr = (uint64_t)(uintptr_t)w->br;
	reg.ring_entries = PG_NBUFS;
	reg.bgid = PG_BGID;
	rc = io_uring_register_buf_ring(&w->ring, &reg, 0);
	if (rc)
		return rc;
	io_uring_buf_ring_init(w->br); /* posted before the first wait */
	return 0;
}

/* The ring's memory (its registration went with the ring). */
void pg_bufs_free(struct pg_worker *w)
{
	if (w->br)
		munmap(w->br, PG_NBUFS * sizeof(struct io_uring_buf));
	if (w->bufs)
		munmap(w->bufs, (size_t)PG_NBUFS * PG_BUFSZ);
	pg_hotbufs_free(&w->hot);
}

/* Posted at once if the ring holds fewer than the depth: a receive armed
 * by a submit before the next wait (a connect, a close) finds it. */
void pg_bufs_return(struct pg_worker *w, int bid)
{
	pg_hotbufs_give(&w->hot, (unsigned)bid);
	w->bufs_out--;
	pg_bufs_post(w);
}
