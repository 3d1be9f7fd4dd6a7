// SPDX-License-Identifier: MIT
/* Inter-token latency and distributions; see itl.h. */
#include "itl.h"

#include <stdlib.h>
#include <string.h>

int pg_gaps_append(struct pg_gaps *dst, const uint64_t *v, size_t n)
{
	if (dst->n + n > dst->cap) {
		size_t cap = dst->cap ? dst->cap : 64;
		uint64_t *p;

		while (cap < dst->n + n)
			cap *= 2;
		p = realloc(dst->v, cap * sizeof(*p));
		if (!p)
			return -1;
		dst->v = p;
		dst->cap = cap;
	}
	if (n)
		memcpy(dst->v + dst->n, v, n * sizeof(*v));
	dst->n += n;
	return 0;
}

void pg_gaps_free(struct pg_gaps *g)
{
	free(g->v);
	memset(g, 0, sizeof(*g));
}

void pg_itl_reset(struct pg_itl *t)
{
	t->last_ns = 0;
	t->sum_ns = t->max_ns = 0;
	t->oom = false;
	t->gap.n = 0;
}

void pg_itl_events(struct pg_itl *t, uint64_t now_ns, unsigned k)
{
	for (unsigned i = 0; i < k; i++) {
		uint64_t g;

		if (t->last_ns == 0) { /* the first: TTFT, no gap */
			t->last_ns = now_ns ? now_ns : 1;
			continue;
		}
		g = now_ns > t->last_ns ? now_ns - t->last_ns : 0;
		t->last_ns = now_ns > t->last_ns ? now_ns : t->last_ns;
		t->sum_ns += g;
		if (g > t->max_ns)
			t->max_ns = g;
		if (pg_gaps_append(&t->gap, &g, 1) == -1)
			t->oom = true;
	}
}

void pg_itl_free(struct pg_itl *t)
{
	pg_gaps_free(&t->gap);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void pg_dist(uint64_t *v, size_t n, double out[4])
{
	static const double pcts[3] = {50, 90, 99};
	double sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	out[0] = n ? sum / (double)n / 1e6 : -1;
	out++;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (int i = 0; i < 3; i++) {
		size_t rank;

		if (!n) {
			out[i] = -1;
			continue;
		}
		rank = (size_t)((pcts[i] / 100.0) * (double)n + 0.999999);
		if (rank < 1)
			rank = 1;
		if (rank > n)
			rank = n;
		out[i] = (double)v[rank - 1] / 1e6;
	}
}
