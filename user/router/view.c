// SPDX-License-Identifier: MIT
/*
 * The backend view (view.h). The backend table is the mmapped BPF array
 * that worker threads (and other processes) update with atomics, so
 * in_flight, flags and down_until_ms are read with relaxed atomic loads:
 * any value is a valid recent snapshot, and a decision made on a slightly
 * stale count is harmless (the count is only a load hint).
 */
#include <math.h>

#include "router/view.h"

const char *pg_backend_health(const struct pg_backend *b, uint64_t now_ms)
{
	uint16_t f = __atomic_load_n(&b->flags, __ATOMIC_RELAXED);

	if (f & PG_BACKEND_DRAINING)
		return "draining";
	if (f & PG_BACKEND_UNHEALTHY)
		return "unhealthy";
	return pg_backend_flags_healthy(b, f, now_ms) ? "up" : "down";
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

uint32_t pg_recent_decay(uint32_t recent, uint64_t elapsed_ms)
{
	return (uint32_t)(recent * exp(-(double)elapsed_ms / PG_CA_RECENT_MS));
}
