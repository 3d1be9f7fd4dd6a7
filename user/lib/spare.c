// SPDX-License-Identifier: MIT
/* Buffers kept for reuse (spare.h). */
#include <stdlib.h>
#include "lib/spare.h"

/* A kept buffer is poisoned under AddressSanitizer, so that a use of one
 * after its owner gave it back is still reported, as a use after free. */
#ifdef PG_SPARE_ASAN
#include <sanitizer/asan_interface.h>
#define KEPT(p, n)  ASAN_POISON_MEMORY_REGION((p), (n))
#define TAKEN(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define KEPT(p, n)  ((void)(p), (void)(n))
#define TAKEN(p, n) ((void)(p), (void)(n))
#endif

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
	TAKEN(p, *cap);
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
		KEPT(p, cap);
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
	TAKEN(s->v[small].p, s->v[small].cap);
	free(s->v[small].p);
	KEPT(p, cap);
	s->v[small].p = p;
	s->v[small].cap = cap;
}

void pg_spares_free(struct pg_spares *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		TAKEN(s->v[i].p, s->v[i].cap);
		free(s->v[i].p);
	}
	s->n = 0;
}
