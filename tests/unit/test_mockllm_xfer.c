// SPDX-License-Identifier: MIT
/*
 * mockllm's KV hand-over between a prefill and a decode instance: vLLM's
 * pinned transfers (kvxfer.c: a pull served once; refused when unknown,
 * stale, already pulled, another engine's, not the exact list, another
 * request's; released at the TTL; forgotten after XFER_KEEP) and SGLang's
 * bootstrap rooms (rooms.c: matched whichever leg comes first, held KV
 * timing out, duplicates, a decode giving up, remembered then forgotten).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/mockllm/kvxfer.h"
#include "../../tools/mockllm/rooms.h"

#define MS  1000000ull
#define TTL (30000 * MS)

static void ids_of(uint64_t *ids, uint64_t first, size_t n)
{
	for (size_t k = 0; k < n; k++)
		ids[k] = first + k;
}

static enum xfer_result pull(struct xfer_table *t, uint64_t now, const char *engine, uint64_t rid,
                             const uint64_t *ids, size_t n, size_t skip, char *why)
{
	uint32_t blocks = 0;
	uint64_t h = 0;

	return xfer_pull(t, now, engine, rid, ids, n, skip, &blocks, &h, why);
}

static void test_pull_once(void **state)
{
	struct xfer_table t;
	uint64_t ids[8], h = 0;
	uint32_t blocks = 0;
	char why[XFER_WHY_MAX];

	(void)state;
	xfer_init(&t, "8001-abcd", TTL);
	assert_int_equal(xfer_pin(&t, 0, 0, 0, 0), 0); /* nothing to pin */
	assert_int_equal(xfer_pin(&t, 0, 3, 0x111, 0), 1);
	assert_int_equal(xfer_pin(&t, 0, 5, 0x222, 0), 4);
	assert_int_equal(t.pinned, 2);
	assert_int_equal(t.pinned_blocks, 8);
	ids_of(ids, 4, 5);
	assert_int_equal(xfer_pull(&t, 10 * MS, "8001-abcd", 0, ids, 5, 2, &blocks, &h, why),
	                 XFER_OK);
	assert_int_equal(blocks, 5);
	assert_int_equal(h, 0x222);
	assert_int_equal(t.pinned, 1);
	assert_int_equal(t.pinned_blocks, 3);
	assert_int_equal(t.served, 1);
	assert_int_equal(t.served_blocks, 3); /* the decode had 2 of them */
	/* the second pull of the same blocks */
	assert_int_equal(pull(&t, 20 * MS, "8001-abcd", 0, ids, 5, 0, why), XFER_PULLED);
	assert_non_null(strstr(why, "blocks 4-8 were pulled already"));
	assert_int_equal(t.refused[XFER_PULLED], 1);
	xfer_free(&t);
}

static void test_refusals(void **state)
{
	struct xfer_table t;
	uint64_t ids[8];
	char why[XFER_WHY_MAX];

	(void)state;
	xfer_init(&t, "e1", TTL);
	xfer_pin(&t, 0, 4, 0x1, 77); /* ids 1-4, X-Request-Id hash 77 */
	ids_of(ids, 1, 4);
	assert_int_equal(pull(&t, 0, "e2", 0, ids, 4, 0, why), XFER_ENGINE);
	assert_string_equal(why, "remote_engine_id e2 is not this instance's (e1)");
	ids_of(ids, 9, 4);
	assert_int_equal(pull(&t, 0, "e1", 0, ids, 4, 0, why), XFER_UNKNOWN);
	assert_non_null(strstr(why, "block 9 was never pinned here"));
	ids_of(ids, 1, 4);
	assert_int_equal(pull(&t, 0, "e1", 0, ids, 3, 0, why), XFER_MISMATCH); /* truncated */
	assert_non_null(strstr(why, "(3 from 1) are not the transfer's (4 from 1)"));
	ids_of(ids, 2, 3);
	assert_int_equal(pull(&t, 0, "e1", 0, ids, 3, 0, why), XFER_MISMATCH); /* shifted */
	ids_of(ids, 1, 4);
	ids[2] = 9;
	assert_int_equal(pull(&t, 0, "e1", 0, ids, 4, 0, why), XFER_MISMATCH); /* altered */
	ids_of(ids, 1, 4);
	assert_int_equal(pull(&t, 0, "e1", 0, ids, 4, 5, why), XFER_MISMATCH); /* skip > n */
	assert_int_equal(pull(&t, 0, "e1", 0, ids, 0, 0, why), XFER_MISMATCH);
	assert_int_equal(pull(&t, 0, "e1", 78, ids, 4, 0, why), XFER_REQUEST_ID);
	assert_int_equal(t.pinned, 1); /* refusals change nothing */
	/* the same request, or a decode leg without X-Request-Id, pulls */
	assert_int_equal(pull(&t, 0, "e1", 77, ids, 4, 0, why), XFER_OK);
	assert_int_equal(t.refused[XFER_ENGINE] + t.refused[XFER_UNKNOWN] +
	                     t.refused[XFER_MISMATCH] + t.refused[XFER_REQUEST_ID],
	                 1 + 1 + 5 + 1);
	xfer_pin(&t, 0, 2, 0x2, 5);
	ids_of(ids, 5, 2);
	assert_int_equal(pull(&t, 0, "e1", 0, ids, 2, 0, why), XFER_OK);
	xfer_free(&t);
}

static void test_ttl(void **state)
{
	struct xfer_table t;
	uint64_t ids[4];
	char why[XFER_WHY_MAX];

	(void)state;
	xfer_init(&t, "e", TTL);
	xfer_pin(&t, 0, 2, 1, 0);          /* 1-2, expires at 30 s */
	xfer_pin(&t, 10000 * MS, 2, 2, 0); /* 3-4, expires at 40 s */
	xfer_sweep(&t, TTL - 1);
	assert_int_equal(t.pinned, 2);
	xfer_sweep(&t, TTL);
	assert_int_equal(t.pinned, 1);
	assert_int_equal(t.pinned_blocks, 2);
	assert_int_equal(t.expired, 1);
	ids_of(ids, 1, 2);
	assert_int_equal(pull(&t, TTL + 250 * MS, "e", 0, ids, 2, 0, why), XFER_STALE);
	assert_string_equal(why, "blocks 1-2 expired 250 ms ago (--kv-transfer-ttl-ms)");
	/* no sweep between: the pull itself finds the second expired */
	ids_of(ids, 3, 2);
	assert_int_equal(pull(&t, 10000 * MS + TTL, "e", 0, ids, 2, 0, why), XFER_STALE);
	assert_int_equal(t.pinned, 0);
	assert_int_equal(t.pinned_blocks, 0);
	assert_int_equal(t.expired, 2);
	assert_int_equal(t.refused[XFER_STALE], 2);
	xfer_free(&t);
}

/* Past XFER_KEEP ended transfers the oldest are forgotten: unknown, said so. */
static void test_forgotten(void **state)
{
	struct xfer_table t;
	uint64_t id;
	char why[XFER_WHY_MAX];

	(void)state;
	xfer_init(&t, "e", TTL);
	for (uint64_t i = 0; i < XFER_KEEP + 10; i++) {
		uint64_t first = xfer_pin(&t, 0, 1, i, 0);

		assert_int_equal(first, i + 1);
		assert_int_equal(pull(&t, 0, "e", 0, &first, 1, 0, why), XFER_OK);
	}
	id = 1;
	assert_int_equal(pull(&t, 0, "e", 0, &id, 1, 0, why), XFER_UNKNOWN);
	assert_non_null(strstr(why, "ended long ago and is forgotten"));
	id = XFER_KEEP + 10;
	assert_int_equal(pull(&t, 0, "e", 0, &id, 1, 0, why), XFER_PULLED);
	assert_true(t.n - t.head <= XFER_KEEP + 1);
	xfer_free(&t);
}

static void test_rooms_either_first(void **state)
{
	struct rooms t;
	struct room_kv kv = {.blocks = 7, .last_hash = 0xabc}, got = {0};
	int w1, w2;
	void *who = NULL;

	(void)state;
	rooms_init(&t, TTL);
	/* decode first: it waits, the KV is handed to it */
	assert_int_equal(rooms_register(&t, 42, &w1, 0, &got), ROOM_WAITING);
	assert_int_equal(t.waiting, 1);
	assert_int_equal(rooms_ready(&t, 42, &kv, 5 * MS, &who), ROOM_MATCHED);
	assert_ptr_equal(who, &w1);
	assert_int_equal(t.waiting, 0);
	/* prefill first: the KV is held, the decode takes it */
	assert_int_equal(rooms_ready(&t, 43, &kv, 0, &who), ROOM_HELD);
	assert_int_equal(t.held, 1);
	assert_int_equal(rooms_register(&t, 43, &w2, 6 * MS, &got), ROOM_MATCHED);
	assert_int_equal(got.blocks, 7);
	assert_int_equal(got.last_hash, 0xabc);
	assert_int_equal(t.held, 0);
	assert_int_equal(t.matched, 2);
	/* a room handed over is not handed again, by either side */
	assert_int_equal(rooms_register(&t, 42, &w2, 7 * MS, &got), ROOM_DONE);
	assert_int_equal(rooms_ready(&t, 43, &kv, 7 * MS, &who), ROOM_DONE);
	assert_int_equal(t.refused, 2);
	/* ... until it is forgotten, a TTL after */
	rooms_sweep(&t, 6 * MS + TTL);
	assert_int_equal(rooms_register(&t, 42, &w1, 6 * MS + TTL, &got), ROOM_WAITING);
	rooms_free(&t);
}

static void test_rooms_timeouts(void **state)
{
	struct rooms t;
	struct room_kv kv = {.blocks = 1, .last_hash = 9}, got;
	int w1, w2;
	void *who;

	(void)state;
	rooms_init(&t, TTL);
	assert_int_equal(rooms_ready(&t, 1, &kv, 0, &who), ROOM_HELD);
	rooms_sweep(&t, TTL - 1);
	assert_int_equal(t.held, 1);
	rooms_sweep(&t, TTL);
	assert_int_equal(t.held, 0);
	assert_int_equal(t.timed_out, 1);
	/* the late decode is told */
	assert_int_equal(rooms_register(&t, 1, &w1, TTL + MS, &got), ROOM_EXPIRED);
	/* two decodes on one room; the second is refused */
	assert_int_equal(rooms_register(&t, 2, &w1, TTL, &got), ROOM_WAITING);
	assert_int_equal(rooms_register(&t, 2, &w2, TTL, &got), ROOM_DUPLICATE);
	/* two prefill legs on one room */
	assert_int_equal(rooms_ready(&t, 3, &kv, TTL, &who), ROOM_HELD);
	assert_int_equal(rooms_ready(&t, 3, &kv, TTL, &who), ROOM_DUPLICATE);
	/* a decode that gives up; another's unregister of it changes nothing */
	rooms_unregister(&t, 2, &w2);
	assert_int_equal(t.waiting, 1);
	rooms_unregister(&t, 2, &w1);
	assert_int_equal(t.waiting, 0);
	/* the room is free again: a prefill's KV for it is held */
	assert_int_equal(rooms_ready(&t, 2, &kv, TTL, &who), ROOM_HELD);
	rooms_free(&t);
}

/* Many rooms at once: the table grows, every room keeps its own KV. */
static void test_rooms_many(void **state)
{
	struct rooms t;
	void *who;
	int w;

	(void)state;
	rooms_init(&t, TTL);
	for (uint64_t r = 0; r < 5000; r++) {
		struct room_kv kv = {.blocks = (uint32_t)r, .last_hash = r * 3};

		assert_int_equal(rooms_ready(&t, r << 40, &kv, r, &who), ROOM_HELD);
	}
	for (uint64_t r = 5000; r-- > 0;) {
		struct room_kv got;

		assert_int_equal(rooms_register(&t, r << 40, &w, 5000, &got), ROOM_MATCHED);
		assert_int_equal(got.blocks, r);
		assert_int_equal(got.last_hash, r * 3);
	}
	assert_int_equal(t.matched, 5000);
	rooms_sweep(&t, 5000 + TTL);
	assert_int_equal(t.used, 5000);
	assert_int_equal(rooms_ready(&t, 1, &(struct room_kv){0}, 5000 + TTL, &who), ROOM_HELD);
	assert_int_equal(t.used, 5000); /* a forgotten room's record reused */
	rooms_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pull_once),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_ttl),
	    cmocka_unit_test(test_forgotten),
	    cmocka_unit_test(test_rooms_either_first),
	    cmocka_unit_test(test_rooms_timeouts),
	    cmocka_unit_test(test_rooms_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
