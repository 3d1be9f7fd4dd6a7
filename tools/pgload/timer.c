// SPDX-License-Identifier: MIT
/* Timer min-heap; see timer.h. */
#include "timer.h"

#include <stdlib.h>

static void swap(struct pg_timer *a, struct pg_timer *b)
{
	struct pg_timer t = *a;

	*a = *b;
	*b = t;
}

int pg_heap_push(struct pg_heap *h, const struct pg_timer *t)
{
	size_t i;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 1024;
		struct pg_timer *a = realloc(h->a, cap * sizeof(*a));

		if (!a)
			return -1;
		h->a = a;
		h->cap = cap;
	}
	i = h->n++;
	h->a[i] = *t;
	while (i > 0) {
		size_t p = (i - 1) / 2;

		if (h->a[p].due_ns <= h->a[i].due_ns)
			break;
		swap(&h->a[p], &h->a[i]);
		i = p;
	}
	return 0;
}

const struct pg_timer *pg_heap_peek(const struct pg_heap *h)
{
	return h->n ? &h->a[0] : NULL;
}

int pg_heap_pop(struct pg_heap *h, struct pg_timer *out)
{
	size_t i = 0;

	if (!h->n)
		return -1;
	*out = h->a[0];
	h->a[0] = h->a[--h->n];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < h->n && h->a[l].due_ns < h->a[m].due_ns)
			m = l;
		if (r < h->n && h->a[r].due_ns < h->a[m].due_ns)
			m = r;
		if (m == i)
			break;
		swap(&h->a[m], &h->a[i]);
		i = m;
	}
	return 0;
}

void pg_heap_free(struct pg_heap *h)
{
	free(h->a);
	h->a = NULL;
	h->n = h->cap = 0;
}
