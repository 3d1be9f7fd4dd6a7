/* SPDX-License-Identifier: MIT */
/*
 * tracesim: replays a request trace (Mooncake's format) over simulated
 * instances (mockllm's timing model and prefix cache, tools/mockllm/sim.h)
 * in simulated time, routed by prefixgate's own routing code (balancer,
 * cache index, load model: user/lib/) and by reference rules that see each
 * instance's real cache and queue. Deterministic: the same flags give the
 * same figures. What `make bench` measures with real processes in minutes,
 * this computes in seconds, to design the rule by.
 */
#ifndef TRACESIM_H
#define TRACESIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../pgload/trace.h"

/* One request of the trace, as tracesim reads it. */
struct ts_rec {
	uint64_t t_ms;   /* arrival, ms from the trace's start */
	uint32_t input;  /* prompt tokens */
	uint32_t output; /* output tokens */
	uint32_t nids;   /* prefix blocks of TS_BLOCK_TOKENS tokens */
	const uint32_t *ids;
};

#define TS_BLOCK_TOKENS PG_TRACE_BLOCK_TOKENS

#endif /* TRACESIM_H */
