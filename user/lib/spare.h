/* SPDX-License-Identifier: MIT */
/*
 * Buffers a worker keeps once freed, for the next requests: a request's
 * body and the like are 32 KiB or more, which malloc serves from its bins
 * and coalesces on free (hundreds of instructions a buffer, a few buffers
 * a request); a kept one is taken back in a few. Bounded: at most
 * PG_SPARE_MAX buffers, each of at most PG_SPARE_KEEP bytes (a larger one,
 * from a rare huge body, is freed at once). Pure; one owner (a worker):
 * no locking.
 */
#ifndef PG_SPARE_H
#define PG_SPARE_H

#include <stddef.h>

#define PG_SPARE_MAX  8
#define PG_SPARE_KEEP (2u << 20)
/* A kept buffer serves a need of more than 1/PG_SPARE_SLACK of its size
 * only: a small need (a head, on a connection that may then idle for
 * minutes) would hold a body's buffer as long as it lasts. */
#define PG_SPARE_SLACK 4

/* Built with AddressSanitizer (gcc's macro, clang's feature test): kept
 * buffers are poisoned (spare.c). */
#if defined(__SANITIZE_ADDRESS__)
#define PG_SPARE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PG_SPARE_ASAN 1
#endif
#endif

struct pg_spares {
	struct {
		void *p;
		size_t cap;
	} v[PG_SPARE_MAX];
	unsigned n;
};

/* A kept buffer of at least need bytes and less than PG_SPARE_SLACK times
 * need, the smallest such (its size in *cap), taken out of s; NULL if there
 * is none. */
void *pg_spare_take(struct pg_spares *s, size_t need, size_t *cap);

/* Keep p (cap bytes; NULL: nothing) for a later take, or free it: when it
 * is over PG_SPARE_KEEP, or s is full and p is no larger than every kept
 * one (else the smallest kept one makes room). */
void pg_spare_give(struct pg_spares *s, void *p, size_t cap);

/* Free every kept buffer. */
void pg_spares_free(struct pg_spares *s);

#endif /* PG_SPARE_H */
