/* SPDX-License-Identifier: MIT */
/*
 * Binary min-heap of deadlines, pure. Nodes are embedded in their owners
 * (recover the owner with container_of); ties pop in insertion order, so a
 * simulation driven by it is deterministic.
 */
#ifndef MOCKLLM_HEAP_H
#define MOCKLLM_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef container_of
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#endif

#define HEAP_NONE SIZE_MAX

struct heap_node {
	uint64_t due; /* ns, CLOCK_MONOTONIC for the server */
	uint64_t seq; /* insertion order, breaks ties */
	size_t idx;   /* position in the heap, HEAP_NONE when not queued */
};

struct heap {
	struct heap_node **v;
	size_t n, cap;
	uint64_t seq;
};

static inline void heap_node_init(struct heap_node *n)
{
	n->idx = HEAP_NONE;
}

static inline bool heap_queued(const struct heap_node *n)
{
	return n->idx != HEAP_NONE;
}

/* The earliest node, or NULL when empty. */
static inline struct heap_node *heap_top(const struct heap *h)
{
	return h->n ? h->v[0] : NULL;
}

/* Queue n (not queued) at due. Returns -1 on allocation failure. */
int heap_push(struct heap *h, struct heap_node *n, uint64_t due);
/* Remove n if queued; no-op otherwise. */
void heap_remove(struct heap *h, struct heap_node *n);
/* Remove and return the earliest node if it is due at or before now. */
struct heap_node *heap_pop_due(struct heap *h, uint64_t now);
void heap_free(struct heap *h);

#endif /* MOCKLLM_HEAP_H */
