// SPDX-License-Identifier: MIT
/*
 * Backend choice for one request (the routing contract, README "How it routes").
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

/* The fleet's load: pg_backend_inflight summed over eligible backends, and their
 * number. "Far busier than the rest" compares with the mean, not the least
 * busy: a new, idle instance must not pull every cached prefix away from
 * where it is cached (measured: make bench, scale event). */
struct fleet_load {
	int64_t sum, n;
};

static struct fleet_load fleet_load(const struct pg_backend *backends, unsigned max_id,
                                    const struct pg_idset *exclude, uint64_t now_ms)
{
	struct fleet_load f = {0, 0};

	for (unsigned id = 1; id <= max_id; id++) {
		if (!in_range_eligible(backends, id, exclude, now_ms))
			continue;
		f.sum += pg_backend_inflight(&backends[id]);
		f.n++;
	}
	return f;
}

/* A cached holder worth its cache now: under the threshold, and at most
 * gap requests above the mean in flight. The fleet's load is scanned (into
 * *f, once: n < 0 until then) only for a holder with more than gap in
 * flight: one with at most gap is at most gap above any mean, since no
 * count is below 0 (in_flight's releases follow its takes, peer_in_flight
 * is clamped at 0), and that is the common case of a lightly loaded fleet
 * (the scan of 255 backends was 3,200 of a route's instructions). */
static bool holder_fits(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                        unsigned max_id, uint16_t id, const struct pg_idset *exclude,
                        uint64_t now_ms, struct fleet_load *f, uint32_t gap)
{
	int64_t l;

	if (!open_cand(cfg, backends, max_id, id, exclude, now_ms))
		return false;
	l = pg_backend_inflight(&backends[id]);
	if (l <= (int64_t)gap)
		return true;
	if (f->n < 0)
		*f = fleet_load(backends, max_id, exclude, now_ms);
	return l * f->n <= f->sum + (int64_t)gap * f->n;
}

/* out says: cand[0..ncand) were considered, pick was chosen for decision. */
static uint16_t chosen(struct pg_choice *out, const uint16_t *cand, size_t ncand, uint16_t pick,
                       enum pg_decision decision)
{
	memset(out, 0, sizeof(*out));
	out->ncand = (uint8_t)ncand;
	if (ncand)
		memcpy(out->cand, cand, ncand * sizeof(*cand));
	out->backend = pick;
	out->decision = (uint8_t)decision;
	return pick;
}

/* The index of the first of cand[0..n) that could take it; n if none. */
static size_t first_open(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                         unsigned max_id, const uint16_t *cand, size_t n,
                         const struct pg_idset *exclude, uint64_t now_ms)
{
	size_t i = 0;

	while (i < n && !open_cand(cfg, backends, max_id, cand[i], exclude, now_ms))
		i++;
	return i;
}

/* Of cand[0..n), the index of the one with the lowest recent count that
 * holder_fits (under the threshold, not far busier than the rest); a later
 * one only when lower than the best before it by more than
 * PG_CA_RECENT_TIE (ring order wins ties); n if none fits. */
static size_t least_recent(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                           unsigned max_id, const uint16_t *cand, size_t n,
                           const struct pg_idset *exclude, uint64_t now_ms,
                           struct fleet_load *floor, uint32_t gap)
{
	size_t best = n;
	uint32_t low = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t r;

		if (!holder_fits(cfg, backends, max_id, cand[i], exclude, now_ms, floor, gap))
			continue;
		r = __atomic_load_n(&backends[cand[i]].recent, __ATOMIC_RELAXED);
		if (best == n || (uint64_t)r + PG_CA_RECENT_TIE < low) {
			best = i;
			low = r;
		}
	}
	return best;
}

/* The first of ids[0..n) that holder_fits, in the ring order of cand, then
 * as listed; 0 if none. */
static uint16_t first_fit(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                          unsigned max_id, const uint16_t *cand, size_t ncand, const uint16_t *ids,
                          size_t n, const struct pg_idset *exclude, uint64_t now_ms,
                          struct fleet_load *floor, uint32_t gap)
{
	for (size_t i = 0; i < ncand; i++)
		for (size_t h = 0; h < n; h++)
			if (ids[h] == cand[i])
				if (holder_fits(cfg, backends, max_id, cand[i], exclude, now_ms,
				                floor, gap))
					return cand[i];
	for (size_t h = 0; h < n; h++)
		if (holder_fits(cfg, backends, max_id, ids[h], exclude, now_ms, floor, gap))
			return ids[h];
	return 0;
}

uint16_t pg_balance_cached(const struct pg_route_cfg *cfg, const struct pg_backend *backends,
                           unsigned max_id, const uint16_t *cand, size_t ncand,
                           const struct pg_cached *cached, const struct pg_idset *exclude,
                           uint64_t now_ms, uint64_t rnd, bool explicit_key, struct pg_choice *out)
{
	struct pg_route_cfg pa = *cfg;
	struct fleet_load floor = {0, -1}; /* scanned when needed */
	uint16_t pick;

	if (max_id > PG_MAX_BACKENDS - 1)
		max_id = PG_MAX_BACKENDS - 1;
	if (ncand > PG_RING_CANDIDATES)
		ncand = PG_RING_CANDIDATES;
	if (cached && cached->specific &&
	    (pick = first_fit(cfg, backends, max_id, cand, ncand, cached->holder, cached->nholder,
	                      exclude, now_ms, &floor, cached->max_load_gap)))
		return chosen(out, cand, ncand, pick, PG_DEC_CACHED);
	if (cached && cached->choices > 1 && !explicit_key) {
		size_t n = ncand < cached->choices ? ncand : cached->choices, i;

		/* where this anchor went before: the conversation stays */
		pick = first_fit(cfg, backends, max_id, cand, ncand, cached->placed,
		                 cached->nplaced, exclude, now_ms, &floor, cached->max_load_gap);
		if (pick)
			return chosen(out, cand, ncand, pick, PG_DEC_AFFINITY);
		i = least_recent(cfg, backends, max_id, cand, n, exclude, now_ms, &floor,
		                 cached->max_load_gap);
		if (i < n) {
			/* the first candidate that could take it is named as
			 * PREFIX_AWARE names it; one passed over, balanced */
			size_t open = first_open(cfg, backends, max_id, cand, i, exclude, now_ms);

			return chosen(out, cand, ncand, cand[i],
			              open < i ? PG_DEC_BALANCED
			              : i      ? PG_DEC_OVERFLOW
			                       : PG_DEC_AFFINITY);
		}
	}
	pa.strategy = PG_STRATEGY_PREFIX_AWARE;
	return pg_balance(&pa, backends, max_id, cand, ncand, exclude, now_ms, rnd, explicit_key,
	                  out);
}

uint32_t pg_recent_decay(uint32_t recent, uint64_t elapsed_ms)
{
	return (uint32_t)(recent * exp(-(double)elapsed_ms / PG_CA_RECENT_MS));
}
