// SPDX-License-Identifier: MIT
/* Buffers kept for reuse (spare.h). */
#include <stdlib.h>
#include "lib/spare.h"

void *pg_spare_take(struct pg_spares *s, size_t need, size_t *cap)
{
	unsigned best = s->n;
	void *p;

	for (unsigned i = 0; i < s->n; i++)
		if (s->v[i].cap >= need && s->v[i].cap / PG_SPARE_SLACK < need &&
		    (best == s->n || s->v[i].cap < s->v[best].cap))
			best = i;
	if (best == s->n)
		return NULL;
	p = s->v[best].p;
	*cap = s->v[best].cap;
	s->v[best] = s->v[--s->n];
	return p;
}

void pg_spare_give(struct pg_spares *s, void *p, size_t cap)
{
	unsigned small = 0;

	if (!p)
		return;
	if (cap > PG_SPARE_KEEP) {
		free(p);
		return;
	}
	if (s->n < PG_SPARE_MAX) {
		s->v[s->n].p = p;
		s->v[s->n++].cap = cap;
		return;
	}
	for (unsigned i = 1; i < s->n; i++)
		if (s->v[i].cap < s->v[small].cap)
			small = i;
	if (cap <= s->v[small].cap) {
		free(p);
		return;
	}
	free(s->v[small].p);
	s->v[small].p = p;
	s->v[small].cap = cap;
}

void pg_spares_free(struct pg_spares *s)
{
	for (unsigned i = 0; i < s->n; i++)
		free(s->v[i].p);
	s->n = 0;
}
