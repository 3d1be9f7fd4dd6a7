// SPDX-License-Identifier: MIT
/* Seeded PRNG and distributions; see rng.h. */
#include "rng.h"

#include <math.h>
#include <stdlib.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t pg_mix(uint64_t seed, uint64_t tag, uint64_t index)
{
	uint64_t x = seed;
	uint64_t a = splitmix64(&x) ^ tag;
	uint64_t b = splitmix64(&a) ^ index;

	return splitmix64(&b);
}

void pg_rng_seed(struct pg_rng *r, uint64_t seed)
{
	uint64_t x = seed;

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t pg_rng_next(struct pg_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double pg_rng_unit(struct pg_rng *r)
{
	return (double)(pg_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t pg_rng_range(struct pg_rng *r, uint64_t lo, uint64_t hi)
{
	uint64_t span = hi - lo + 1;

	if (span == 0) /* full 64-bit range */
		return pg_rng_next(r);
	/* Modulo bias is below 2^-40 for the spans used here; irrelevant. */
	return lo + pg_rng_next(r) % span;
}

double pg_rng_exp(struct pg_rng *r, double rate)
{
	/* 1 - u is in (0, 1], so the log is finite. */
	return -log(1.0 - pg_rng_unit(r)) / rate;
}

double pg_rng_lognormal(struct pg_rng *r, double median, double sigma)
{
	/* Box-Muller; one of the pair is discarded to keep the stream simple. */
	double u1 = 1.0 - pg_rng_unit(r);
	double u2 = pg_rng_unit(r);
	double n = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);

	return median * exp(sigma * n);
}

int pg_zipf_init(struct pg_zipf *z, size_t n, double s)
{
	double sum = 0;

	z->n = n;
	z->cdf = malloc(n * sizeof(*z->cdf));
	if (!z->cdf)
		return -1;
	for (size_t k = 0; k < n; k++) {
		sum += 1.0 / pow((double)(k + 1), s);
		z->cdf[k] = sum;
	}
	for (size_t k = 0; k < n; k++)
		z->cdf[k] /= sum;
	z->cdf[n - 1] = 1.0;
	return 0;
}

size_t pg_zipf_sample(const struct pg_zipf *z, struct pg_rng *r)
{
	double u = pg_rng_unit(r);
	size_t lo = 0, hi = z->n - 1;

	/* Smallest k with cdf[k] > u. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (z->cdf[mid] > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

void pg_zipf_free(struct pg_zipf *z)
{
	free(z->cdf);
	z->cdf = NULL;
}
