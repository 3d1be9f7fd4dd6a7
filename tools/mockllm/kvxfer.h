/* SPDX-License-Identifier: MIT */
/*
 * A vLLM-protocol prefill instance's KV transfers, pure (no I/O, no clock:
 * the caller passes the time). Each prefill leg it answers pins its prompt's
 * blocks for a decode instance to pull (NIXL's READ), until they are pulled
 * or their TTL passes (vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT; mockllm
 * --kv-transfer-ttl-ms), whichever comes first; then they are released.
 *
 * Block ids are this instance's and never reused: a transfer's n blocks get
 * the next n ids, consecutive, from 1 up (0 is vLLM's null block). A pull
 * names the engine and the exact list its prefill leg's answer gave; the
 * KV itself is imaginary, so what a pull returns is the transfer's size and
 * the hash of its last block (the hashes are chained: the last one names
 * the whole prefix), for the decode to check that it is its prompt's.
 * Ended transfers are remembered (XFER_KEEP of them) so that a late or a
 * second pull is told why it is refused rather than "unknown".
 */
#ifndef MOCKLLM_KVXFER_H
#define MOCKLLM_KVXFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XFER_KEEP    65536 /* ended transfers remembered, at most */
#define XFER_WHY_MAX 200

enum xfer_result {
	XFER_OK = 0,
	XFER_ENGINE,     /* another engine's transfer (or a restarted one's) */
	XFER_UNKNOWN,    /* no transfer starts at that block id (or long forgotten) */
	XFER_STALE,      /* its TTL passed before the pull: released */
	XFER_PULLED,     /* pulled already: released */
	XFER_MISMATCH,   /* the ids are not exactly the transfer's list */
	XFER_REQUEST_ID, /* both legs named an X-Request-Id, and not the same */
	XFER__COUNT,
};

/* "ok", "engine", "unknown", "stale", "pulled", "mismatch", "request_id". */
const char *xfer_reason(enum xfer_result r);

enum xfer_state { XS_LIVE = 0, XS_PULLED, XS_EXPIRED };

struct xfer {
	uint64_t first_id;
	uint64_t last_hash;
	uint64_t expires; /* ns */
	uint64_t rid;     /* hash of the prefill leg's X-Request-Id; 0: none */
	uint32_t n;
	uint8_t state; /* enum xfer_state */
};

struct xfer_table {
	char engine[128]; /* this instance's engine id */
	uint64_t ttl_ns;
	uint64_t next_id;
	struct xfer *v; /* v[head..n): transfers in id order */
	size_t head, n, cap;
	size_t live_from; /* v[head..live_from) have all ended */
	/* gauges and counters for /metrics */
	uint64_t pinned, pinned_blocks;
	uint64_t served, served_blocks, expired, refused[XFER__COUNT];
};

/* engine: plain ASCII, < 128 bytes. Returns 0. */
int xfer_init(struct xfer_table *t, const char *engine, uint64_t ttl_ns);
void xfer_free(struct xfer_table *t);

/*
 * Pin n >= 1 blocks (their chained hashes ending in last_hash) at now, for
 * the prefill leg whose X-Request-Id hashes to rid (0: it had none).
 * Returns the first of their ids, or 0 when out of memory.
 */
uint64_t xfer_pin(struct xfer_table *t, uint64_t now, uint32_t n, uint64_t last_hash, uint64_t rid);

/*
 * A pull at now of ids[0..n) by engine, for the decode leg whose
 * X-Request-Id hashes to rid (0: none), which holds the first skip of the
 * blocks itself (so skip <= n). XFER_OK: the transfer is released (counted
 * pulled), *blocks and *last_hash are its size and last hash. Otherwise
 * nothing changes but the refusal count, and why says what was wrong.
 */
enum xfer_result xfer_pull(struct xfer_table *t, uint64_t now, const char *engine, uint64_t rid,
                           const uint64_t *ids, size_t n, size_t skip, uint32_t *blocks,
                           uint64_t *last_hash, char why[XFER_WHY_MAX]);

/* Release what expired by now (pulls find it stale from then on anyway). */
void xfer_sweep(struct xfer_table *t, uint64_t now);

#endif /* MOCKLLM_KVXFER_H */
