// SPDX-License-Identifier: MIT
#include <stdlib.h>

#include "heap.h"

static bool before(const struct heap_node *a, const struct heap_node *b)
{
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void put(struct heap *h, size_t i, struct heap_node *n)
{
	h->v[i] = n;
	n->idx = i;
}

static void sift_up(struct heap *h, size_t i)
{
	struct heap_node *n = h->v[i];

	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (!before(n, h->v[p]))
			break;
		put(h, i, h->v[p]);
		i = p;
	}
	put(h, i, n);
}

static void sift_down(struct heap *h, size_t i)
{
	struct heap_node *n = h->v[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && before(h->v[c + 1], h->v[c]))
			c++;
		if (!before(h->v[c], n))
			break;
		put(h, i, h->v[c]);
		i = c;
	}
	put(h, i, n);
}

int heap_push(struct heap *h, struct heap_node *n, uint64_t due)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 64;
		struct heap_node **v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -1;
		h->v = v;
		h->cap = cap;
	}
	n->due = due;
	n->seq = h->seq++;
	put(h, h->n++, n);
	sift_up(h, n->idx);
	return 0;
}

void heap_remove(struct heap *h, struct heap_node *n)
{
	size_t i = n->idx;
	struct heap_node *last;

	if (i == HEAP_NONE)
		return;
	n->idx = HEAP_NONE;
	last = h->v[--h->n];
	if (i == h->n)
		return;
	put(h, i, last);
	if (i > 0 && before(last, h->v[(i - 1) / 2]))
		sift_up(h, i);
	else
		sift_down(h, i);
}

struct heap_node *heap_pop_due(struct heap *h, uint64_t now)
{
	struct heap_node *n = heap_top(h);

	if (!n || n->due > now)
		return NULL;
	heap_remove(h, n);
	return n;
}

void heap_free(struct heap *h)
{
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}
