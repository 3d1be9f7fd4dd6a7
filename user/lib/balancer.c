// SPDX-License-Identifier: MIT
/*
 * Backend choice for one request (the routing contract, doc/routing.md "How it routes").
 *
 * This runs on every request, so: no allocation, at most one pass over ids
 * 1..max_id, and each shared field read once per pass. The backend table is
 * the mmapped BPF array that worker threads (and other processes) update with
 * atomics, so in_flight, flags and down_until_ms are read with relaxed atomic
 * loads: any value is a valid recent snapshot, and a decision made on a
 * slightly stale count is harmless (the count is only a load hint).
 */
#include <math.h>
#include <string.h>

#include "lib/balancer.h"

/* pg_backend_healthy given b's flags as just loaded: one load of them per
 * backend on the scans below, and one snapshot. */
static inline bool healthy_flags(const struct pg_backend *b, uint16_t flags, uint64_t now_ms)
{
	if (flags & PG_BACKEND_UNHEALTHY)
		return false;
	if (!(flags & PG_BACKEND_DOWN))
		return true;
	return now_ms >= __atomic_load_n(&b->down_until_ms, __ATOMIC_RELAXED);
}

static inline bool usable_flags(const struct pg_backend *b, uint16_t flags, uint64_t now_ms)
{
	const uint16_t state =
	    PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING | PG_BACKEND_UNHEALTHY | PG_BACKEND_DOWN;

	if ((flags & state) == PG_BACKEND_ACTIVE) /* the common case, in one test */
		return true;
	if (!(flags & PG_BACKEND_ACTIVE) || (flags & PG_BACKEND_DRAINING))
		return false;
	return healthy_flags(b, flags, now_ms);
}

bool pg_backend_healthy(const struct pg_backend *b, uint64_t now_ms)
{
	return healthy_flags(b, __atomic_load_n(&b->flags, __ATOMIC_RELAXED), now_ms);
}

const char *pg_backend_health(const struct pg_backend *b, uint64_t now_ms)
{
	uint16_t f = __atomic_load_n(&b->flags, __ATOMIC_RELAXED);

	if (f & PG_BACKEND_DRAINING)
		return "draining";
	if (f & PG_BACKEND_UNHEALTHY)
		return "unhealthy";
	return healthy_flags(b, f, now_ms) ? "up" : "down";
}

bool pg_backend_usable(const struct pg_backend *b, uint64_t now_ms)
{
	return usable_flags(b, __atomic_load_n(&b->flags, __ATOMIC_RELAXED), now_ms);
}

int64_t pg_backend_load(const struct pg_backend *b, enum pg_load_signal s, uint64_t now_ms)
{
	const int64_t in_flight = pg_backend_inflight(b);

	if (s == PG_LOAD_INFLIGHT ||
	    now_ms >= __atomic_load_n(&b->metrics_until_ms, __ATOMIC_RELAXED))
		return in_flight;
	if (s == PG_LOAD_BACKEND)
		return (int64_t)__atomic_load_n(&b->running, __ATOMIC_RELAXED) +
		       __atomic_load_n(&b->waiting, __ATOMIC_RELAXED);
	return in_flight + __atomic_load_n(&b->waiting, __ATOMIC_RELAXED);
}

/* Uniform index in [0, n) from 64 random bits (n > 0): the high half of the
 * 128-bit product. Bias is at most n / 2^64: nothing for n < PG_MAX_BACKENDS. */
static inline size_t pick_index(uint64_t rnd, size_t n)
{
	return (size_t)(((unsigned __int128)rnd * n) >> 64);
}

/* id, known to be in 1..max_id (the scans' loops), may carry a request
 * now: not excluded, usable. */
static inline bool in_range_eligible(const struct pg_backend *backends, unsigned id,
                                     const struct pg_idset *exclude, uint64_t now_ms)
{
	if (!usable_flags(&backends[id], __atomic_load_n(&backends[id].flags, __ATOMIC_RELAXED),
	                  now_ms))
		return false;
	return !(exclude && pg_idset_has(exclude, id));
}

/* pg_backend_eligible, inline for the loops below. */
static inline bool eligible(const struct pg_backend *backends, unsigned max_id, unsigned id,
                            const struct pg_idset *exclude, uint64_t now_ms)
{
	return id && id <= max_id && in_range_eligible(backends, id, exclude, now_ms);
}

bool pg_backend_eligible(const struct pg_backend *backends, unsigned max_id, unsigned id,
                         const struct pg_idset *exclude, uint64_t now_ms)
{
	return eligible(backends, max_id, id, exclude, now_ms);
}

/*
 * The eligible backend with the lowest load (pg_backend_load), ties broken uniformly by
 * rnd; 0 if none. Tied ids are collected during the one scan and one is drawn
 * afterwards, instead of counting first and picking in a second scan: counts
 * change under us, and a second scan could disagree with the first.
 */
static uint16_t least_outstanding(const struct pg_backend *backends, unsigned max_id,
                                  const struct pg_idset *exclude, enum pg_load_signal signal,
                                  uint64_t now_ms, uint64_t rnd)
{
	uint16_t ties[PG_MAX_BACKENDS];
	size_t nties = 0;
	int64_t best = INT64_MAX;

	for (unsigned id = 1; id <= max_id; id++) {
		int64_t load;

		if (!in_range_eligible(backends, id, exclude, now_ms))
			continue;
		load = pg_backend_load(&backends[id], signal, now_ms);
		if (load < best) {
			best = load;
			nties = 0;
		}
		if (load == best)
			ties[nties++] = (uint16_t)id;
	}
	return nties ? ties[pick_index(rnd, nties)] : 0;
}

/* Uniform over eligible backends; 0 if none. One scan into a local list, for
 * the same reason as above (flags may change between two scans). */
static uint16_t random_usable(const struct pg_backend *backends, unsigned max_id,
                              const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd)
{
	uint16_t ids[PG_MAX_BACKENDS];
	size_t n = 0;

	for (unsigned id = 1; id <= max_id; id++)
		if (in_range_eligible(backends, id, exclude, now_ms))
			ids[n++] = (uint16_t)id;
	return n ? ids[pick_index(rnd, n)] : 0;
}

/* Backend id could take a request now: eligible, under the threshold. */
static bool open_cand(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                      unsigned max_id, uint16_t id, const struct pg_idset *exclude, uint64_t now_ms)
{
	return eligible(backends, max_id, id, exclude, now_ms) &&
	       pg_backend_inflight(&backends[id]) < (int64_t)cfg->concurrency_threshold;
}

uint16_t pg_balance(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                    unsigned max_id, const uint16_t *cand, size_t ncand,
                    const struct pg_idset *exclude, uint64_t now_ms, uint64_t rnd,
                    bool explicit_key, struct pg_choice *out)
{
	uint16_t id = 0;

	if (max_id > PG_MAX_BACKENDS - 1)
		max_id = PG_MAX_BACKENDS - 1;
	if (ncand > PG_RING_CANDIDATES)
		ncand = PG_RING_CANDIDATES;
	memset(out, 0, sizeof(*out));

	switch (cfg->strategy) {
	case PG_STRATEGY_RANDOM:
		id = random_usable(backends, max_id, exclude, now_ms, rnd);
		out->decision = PG_DEC_RANDOM;
		break;
	case PG_STRATEGY_LEAST_OUTSTANDING:
		id = least_outstanding(backends, max_id, exclude, cfg->load_signal, now_ms, rnd);
		out->decision = PG_DEC_LEAST_OUTSTANDING;
		break;
	case PG_STRATEGY_PREFIX_AWARE:
	default: /* config parsing rejects others; a hand-edited map gets the default */
		out->ncand = (uint8_t)ncand;
		if (ncand)
			memcpy(out->cand, cand, ncand * sizeof(*cand));
		for (size_t i = 0; i < ncand; i++) {
			if (!open_cand(cfg, backends, max_id, cand[i], exclude, now_ms))
				continue;
			id = cand[i];
			if (i > 0)
				out->decision = PG_DEC_OVERFLOW;
			else
				out->decision =
				    explicit_key ? PG_DEC_EXPLICIT_KEY : PG_DEC_AFFINITY;
			break;
		}
		if (!id) {
			id = least_outstanding(backends, max_id, exclude, cfg->load_signal, now_ms,
			                       rnd);
			out->decision = PG_DEC_OVERFLOW;
		}
		break;
	}
	out->backend = id;
	return id;
}

uint32_t pg_recent_decay(uint32_t recent, uint64_t elapsed_ms)
{
	return (uint32_t)(recent * exp(-(double)elapsed_ms / PG_CA_RECENT_MS));
}
