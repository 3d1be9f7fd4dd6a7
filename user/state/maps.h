/* SPDX-License-Identifier: MIT */
/*
 * The shared routing state (include/prefixgate.h): backends, ring copies,
 * gateway state, cache_aware's block index. Either BPF array maps pinned under --bpf-pin-path and
 * mmapped (the default when privileged: bpftool can read them), or plain
 * shared memory (--no-bpf). Either way every thread sees the same counts
 * through the same pointers.
 */
#ifndef PG_MAPS_H
#define PG_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "prefixgate.h"

struct prefixgate_bpf;

struct pg_maps {
	struct pg_backend *backends; /* PG_MAX_BACKENDS entries */
	struct pg_ring *rings;       /* PG_RING_COPIES entries per pool */
	struct pg_state *state;      /* one entry per pool; gateway-wide fields in entry 0 */
	struct pg_pool *pools;       /* PG_MAX_POOLS entries (what bpftool shows of the pools) */
	struct pg_flow_stats *flow;  /* one entry per pool: flow control's queue */
	unsigned npools;             /* model pools (1: the default pool alone) */
	struct pg_ca_slot *ca;       /* cache_aware's block index, ca_slots entries */
	uint32_t ca_slots;           /* a power of two */
	bool bpf;                    /* BPF maps (else shared memory) */
	int lock_fd;                 /* pin directory, flock()ed while we run */
	char pin_path[256];
	struct prefixgate_bpf *skel;
};

/*
 * Open the shared state. use_bpf: create or reuse the pinned BPF maps under
 * pin_path (mounting bpffs at /sys/fs/bpf if needed); otherwise anonymous
 * shared memory. On failure returns -errno and a message naming the cause
 * in err. A pin path already used by a running prefixgate is refused
 * (-EBUSY). Maps pinned there by a previous run (which may have been
 * killed) are reused, and those of a version whose layout differs replaced.
 * The state is reset: no stale in-flight counts survive a restart.
 * ca_slots: entries of the block index, a power of two (0: the smallest);
 * a pinned index of another size is replaced.
 */
int pg_maps_open(struct pg_maps *m, bool use_bpf, const char *pin_path, uint32_t ca_slots,
                 char *err, size_t errlen);

/* The same with npools model pools (1-PG_MAX_POOLS): a ring pair and a
 * state entry each; maps pinned for another pool count are replaced. */
int pg_maps_open_pools(struct pg_maps *m, bool use_bpf, const char *pin_path, uint32_t ca_slots,
                       unsigned npools, char *err, size_t errlen);

/* Smallest block index (ca_slots 0 asks for it). */
#define PG_CA_SLOTS_MIN 4096u

/* Unmap and release the pin path. BPF maps stay pinned: bpftool can read
 * the last state after exit, and the next run on the pin path reuses them
 * (and resets them). Remove the directory to free them. */
void pg_maps_close(struct pg_maps *m);

/* fd of the pg_state BPF map (for probing bpf(2) permissions), or -1. */
int pg_maps_state_fd(const struct pg_maps *m);

/* Ring candidates for a key hash in pool's ring through the seqlock: never a
 * half-built ring. */
size_t pg_maps_pool_candidates(const struct pg_maps *m, unsigned pool, uint64_t key_hash,
                               uint16_t out[PG_RING_CANDIDATES]);

/* Control thread only: start rebuilding pool's spare ring copy (returned,
 * with its seqlock held), then publish it as the live one; and pool's live
 * copy (for reading by the control thread, the only writer). */
struct pg_ring *pg_maps_pool_ring_begin(struct pg_maps *m, unsigned pool);
void pg_maps_pool_ring_publish(struct pg_maps *m, unsigned pool, struct pg_ring *ring);
const struct pg_ring *pg_maps_pool_live_ring(const struct pg_maps *m, unsigned pool);

#endif /* PG_MAPS_H */
