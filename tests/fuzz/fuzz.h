/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers of the libFuzzer targets tests/fuzz/fuzz_*.c: invariant
 * checks that abort (libFuzzer then saves the input as a crash), and a
 * deterministic split generator seeded from the input bytes, so a saved
 * input replays with the same splits.
 */
#ifndef PG_FUZZ_H
#define PG_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* An invariant: on failure name it and abort, which libFuzzer reports. */
#define FUZZ_CHECK(cond)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__,       \
			        #cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* A fixture file the target reads: path = text. */
static inline void fuzz_write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	FUZZ_CHECK(f);
	fputs(text, f);
	FUZZ_CHECK(fclose(f) == 0);
}

/* xorshift64*: the split sizes. Seeded from input bytes, never zero. */
struct fuzz_rng {
	uint64_t s;
};

static inline void fuzz_rng_seed(struct fuzz_rng *r, const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the seed bytes */

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	r->s = h | 1;
}

static inline uint64_t fuzz_rng_next(struct fuzz_rng *r)
{
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

/* A piece length in 1..max (max >= 1), biased to small pieces: a third
 * are 1 byte, a third up to 8, the rest up to max. */
static inline size_t fuzz_piece(struct fuzz_rng *r, size_t max)
{
	uint64_t x = fuzz_rng_next(r);
	size_t cap = (x & 3) == 0 ? 1 : (x & 3) == 1 ? 8 : max;

	if (cap > max)
		cap = max;
	return 1 + (size_t)((x >> 8) % cap);
}

#endif /* PG_FUZZ_H */
