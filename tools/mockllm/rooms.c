// SPDX-License-Identifier: MIT
/*
 * Bootstrap rooms of an SGLang-protocol prefill instance; see rooms.h. A
 * pool of records linked by 32-bit indices: hash chains by room, and one
 * time list of the rooms that wait on the clock (held KV, remembered
 * rooms), oldest first. Every entry joins the list at now + TTL, so the
 * list is in expiry order and a sweep stops at the first young entry.
 */
#include <stdlib.h>
#include <string.h>

#include "rooms.h"

#define NIL UINT32_MAX

enum rstate { RS_FREE = 0, RS_WAITING, RS_HELD, RS_DONE, RS_EXPIRED };

struct room {
	uint64_t room;
	uint64_t due; /* in the time list: when it next changes */
	void *waiter;
	struct room_kv kv;
	uint32_t chain;      /* next in the hash chain */
	uint32_t prev, next; /* time list; next also links free records */
	uint8_t state;       /* enum rstate */
};

const char *room_result_name(enum room_result r)
{
	static const char *const names[] = {
	    [ROOM_WAITING] = "waiting",     [ROOM_HELD] = "held", [ROOM_MATCHED] = "matched",
	    [ROOM_DUPLICATE] = "duplicate", [ROOM_DONE] = "done", [ROOM_EXPIRED] = "expired",
	};

	return (size_t)r < sizeof(names) / sizeof(names[0]) ? names[r] : "?";
}

void rooms_init(struct rooms *t, uint64_t ttl_ns)
{
	memset(t, 0, sizeof(*t));
	t->free_head = t->old = t->young = NIL;
	t->ttl_ns = ttl_ns;
}

void rooms_free(struct rooms *t)
{
	free(t->pool);
	free(t->bucket);
	rooms_init(t, t->ttl_ns);
}

static uint32_t *bucket_of(const struct rooms *t, uint64_t room)
{
	uint64_t h = room * 0x9e3779b97f4a7c15ull;

	return &t->bucket[(uint32_t)(h >> 32) & (t->nbuckets - 1)];
}

static uint32_t find(const struct rooms *t, uint64_t room)
{
	uint32_t i = t->nbuckets ? *bucket_of(t, room) : NIL;

	while (i != NIL && t->pool[i].room != room)
		i = t->pool[i].chain;
	return i;
}

/* Rebuild the chains over nb buckets. */
static int rehash(struct rooms *t, uint32_t nb)
{
	uint32_t *b = malloc(nb * sizeof(*b));

	if (!b)
		return -1;
	memset(b, 0xff, nb * sizeof(*b));
	free(t->bucket);
	t->bucket = b;
	t->nbuckets = nb;
	for (uint32_t i = 0; i < t->used; i++) {
		uint32_t *head;

		if (t->pool[i].state == RS_FREE)
			continue;
		head = bucket_of(t, t->pool[i].room);
		t->pool[i].chain = *head;
		*head = i;
	}
	return 0;
}

/* A new record for room (state set by the caller), or NIL. */
static uint32_t add(struct rooms *t, uint64_t room)
{
	uint32_t i, *head;

	if (t->free_head == NIL && t->used == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 64;
		struct room *p = cap > t->cap ? realloc(t->pool, cap * sizeof(*p)) : NULL;

		if (!p)
			return NIL;
		t->pool = p;
		t->cap = cap;
	}
	if (t->used >= t->nbuckets && rehash(t, t->nbuckets ? 2 * t->nbuckets : 64) == -1)
		return NIL;
	if (t->free_head != NIL) {
		i = t->free_head;
		t->free_head = t->pool[i].next;
	} else {
		i = t->used++;
	}
	memset(&t->pool[i], 0, sizeof(t->pool[i]));
	t->pool[i].room = room;
	t->pool[i].prev = t->pool[i].next = NIL;
	head = bucket_of(t, room);
	t->pool[i].chain = *head;
	*head = i;
	return i;
}

static void time_unlink(struct rooms *t, uint32_t i)
{
	struct room *r = &t->pool[i];

	if (r->prev != NIL)
		t->pool[r->prev].next = r->next;
	else
		t->old = r->next;
	if (r->next != NIL)
		t->pool[r->next].prev = r->prev;
	else
		t->young = r->prev;
	r->prev = r->next = NIL;
}

/* Into the time list's young end, due at now + TTL, as state. */
static void time_push(struct rooms *t, uint32_t i, uint64_t now, enum rstate state)
{
	struct room *r = &t->pool[i];

	r->state = state;
	r->due = now + t->ttl_ns;
	r->next = NIL;
	r->prev = t->young;
	if (t->young != NIL)
		t->pool[t->young].next = i;
	else
		t->old = i;
	t->young = i;
}

static void drop(struct rooms *t, uint32_t i)
{
	uint32_t *link = bucket_of(t, t->pool[i].room);

	while (*link != i)
		link = &t->pool[*link].chain;
	*link = t->pool[i].chain;
	t->pool[i].state = RS_FREE;
	t->pool[i].next = t->free_head;
	t->free_head = i;
}

void rooms_sweep(struct rooms *t, uint64_t now)
{
	while (t->old != NIL && t->pool[t->old].due <= now) {
		uint32_t i = t->old;

		time_unlink(t, i);
		if (t->pool[i].state == RS_HELD) {
			t->held--;
			t->timed_out++;
			time_push(t, i, now, RS_EXPIRED);
		} else {
			drop(t, i);
		}
	}
}

/* A refusal for a room in state s (not free). */
static int refused(struct rooms *t, enum rstate s)
{
	t->refused++;
	return s == RS_DONE ? ROOM_DONE : s == RS_EXPIRED ? ROOM_EXPIRED : ROOM_DUPLICATE;
}

int rooms_register(struct rooms *t, uint64_t room, void *waiter, uint64_t now, struct room_kv *kv)
{
	uint32_t i;

	rooms_sweep(t, now);
	i = find(t, room);
	if (i == NIL) {
		i = add(t, room);
		if (i == NIL)
			return -1;
		t->pool[i].state = RS_WAITING;
		t->pool[i].waiter = waiter;
		t->waiting++;
		return ROOM_WAITING;
	}
	if (t->pool[i].state != RS_HELD)
		return refused(t, (enum rstate)t->pool[i].state);
	*kv = t->pool[i].kv;
	time_unlink(t, i);
	time_push(t, i, now, RS_DONE);
	t->held--;
	t->matched++;
	return ROOM_MATCHED;
}

int rooms_ready(struct rooms *t, uint64_t room, const struct room_kv *kv, uint64_t now,
                void **waiter)
{
	uint32_t i;

	rooms_sweep(t, now);
	i = find(t, room);
	if (i == NIL) {
		i = add(t, room);
		if (i == NIL)
			return -1;
		t->pool[i].kv = *kv;
		time_push(t, i, now, RS_HELD);
		t->held++;
		return ROOM_HELD;
	}
	if (t->pool[i].state != RS_WAITING)
		return refused(t, t->pool[i].state == RS_HELD ? RS_WAITING
		                                              : (enum rstate)t->pool[i].state);
	*waiter = t->pool[i].waiter;
	t->pool[i].kv = *kv;
	t->pool[i].waiter = NULL;
	time_push(t, i, now, RS_DONE);
	t->waiting--;
	t->matched++;
	return ROOM_MATCHED;
}

void rooms_unregister(struct rooms *t, uint64_t room, void *waiter)
{
	uint32_t i = find(t, room);

	if (i == NIL || t->pool[i].state != RS_WAITING || t->pool[i].waiter != waiter)
		return;
	t->waiting--;
	drop(t, i);
}
