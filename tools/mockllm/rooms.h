/* SPDX-License-Identifier: MIT */
/*
 * An SGLang-protocol prefill instance's bootstrap rooms, pure (no I/O, no
 * clock). A room is the meeting point of a pair's two legs, which the
 * router sends at once: the decode instance registers the room on the
 * prefill's bootstrap port (its side connection waits there), and the
 * prefill, when the prefill leg naming the room has been prefilled, hands
 * the KV to the room. Whichever comes first waits for the other:
 *
 *   - a registered room waits for its KV until its decode gives up (the
 *     decode's own timeout closes the connection: rooms_unregister);
 *   - a room's KV waits for its decode until the TTL (--kv-transfer-ttl-ms,
 *     SGLang's bootstrap timeout), then is dropped: timed out.
 *
 * A room handed over or timed out is remembered for one more TTL, so a
 * second registration (or a late one) is told why it is refused. The KV is
 * imaginary: what is handed over is its size and the hash of its last
 * block (struct room_kv), for the decode to check that it is its prompt's.
 */
#ifndef MOCKLLM_ROOMS_H
#define MOCKLLM_ROOMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct room_kv {
	uint32_t blocks;
	uint64_t last_hash; /* 0 when blocks is 0 */
};

enum room_result {
	ROOM_WAITING = 0, /* registered: its KV is not there yet */
	ROOM_HELD,        /* the KV is kept for a decode yet to register */
	ROOM_MATCHED,     /* the two met: KV handed to the waiter */
	ROOM_DUPLICATE,   /* the room is already registered, or already has KV */
	ROOM_DONE,        /* the room was handed over already */
	ROOM_EXPIRED,     /* its KV timed out before a decode registered */
};

const char *room_result_name(enum room_result r);

struct room; /* private */

struct rooms {
	struct room *pool; /* records; free ones linked through the time list */
	uint32_t cap, used, free_head;
	uint32_t *bucket; /* hash chains, power-of-two count */
	uint32_t nbuckets;
	uint32_t old, young; /* time list: held and remembered rooms, oldest first */
	uint64_t ttl_ns;
	/* gauges and counters for /metrics */
	uint64_t waiting, held;
	uint64_t matched, timed_out, refused;
};

void rooms_init(struct rooms *t, uint64_t ttl_ns);
void rooms_free(struct rooms *t);

/*
 * A decode registers room for waiter (its connection) at now. ROOM_MATCHED:
 * the KV was there, *kv is it (the room is done). ROOM_WAITING: kept until
 * rooms_ready or rooms_unregister. Else refused (nothing kept): ROOM_DUPLICATE
 * (another waiter has it), ROOM_DONE, ROOM_EXPIRED. -1 when out of memory.
 */
int rooms_register(struct rooms *t, uint64_t room, void *waiter, uint64_t now, struct room_kv *kv);

/*
 * The prefill leg naming room has its KV at now. ROOM_MATCHED: *waiter is
 * the decode's connection to hand kv to (the room is done). ROOM_HELD: kept
 * until a decode registers or the TTL passes. ROOM_DUPLICATE, ROOM_DONE:
 * the room already had KV (two prefill legs named it). -1: out of memory.
 */
int rooms_ready(struct rooms *t, uint64_t room, const struct room_kv *kv, uint64_t now,
                void **waiter);

/* waiter gives up room (its connection closed); nothing if it has not it. */
void rooms_unregister(struct rooms *t, uint64_t room, void *waiter);

/* Time out held KV whose TTL passed by now; forget old done rooms. */
void rooms_sweep(struct rooms *t, uint64_t now);

#endif /* MOCKLLM_ROOMS_H */
