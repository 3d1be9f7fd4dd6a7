/* SPDX-License-Identifier: MIT */
/*
 * Deterministic randomness for pgload: xoshiro256** seeded through
 * splitmix64, plus the distributions the workloads and arrivals use. Every
 * stream is derived from (--seed, a purpose tag, an index) so that request i
 * of a run has the same content whatever the timing of the run was.
 */
#ifndef PGLOAD_RNG_H
#define PGLOAD_RNG_H

#include <stddef.h>
#include <stdint.h>

struct pg_rng {
	uint64_t s[4];
};

/* Mix (seed, tag, index) into one 64-bit value (splitmix64 finaliser). */
uint64_t pg_mix(uint64_t seed, uint64_t tag, uint64_t index);

void pg_rng_seed(struct pg_rng *r, uint64_t seed);
uint64_t pg_rng_next(struct pg_rng *r);
/* Uniform double in [0, 1). */
double pg_rng_unit(struct pg_rng *r);
/* Uniform integer in [lo, hi] (hi >= lo). */
uint64_t pg_rng_range(struct pg_rng *r, uint64_t lo, uint64_t hi);
/* Exponential with the given rate (mean 1/rate). */
double pg_rng_exp(struct pg_rng *r, double rate);
/* Lognormal with the given median and sigma of the underlying normal. */
double pg_rng_lognormal(struct pg_rng *r, double median, double sigma);

/*
 * Zipf(s) over ranks 0..n-1: P(k) proportional to 1/(k+1)^s. The table holds
 * the cumulative distribution; sampling is a binary search.
 */
struct pg_zipf {
	double *cdf;
	size_t n;
};

/* Returns 0, or -1 when out of memory. n >= 1, s >= 0 (0 = uniform). */
int pg_zipf_init(struct pg_zipf *z, size_t n, double s);
size_t pg_zipf_sample(const struct pg_zipf *z, struct pg_rng *r);
void pg_zipf_free(struct pg_zipf *z);

#endif /* PGLOAD_RNG_H */
