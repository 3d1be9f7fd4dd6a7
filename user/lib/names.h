/* SPDX-License-Identifier: MIT */
/*
 * The names of the routing enums, one table each: decisions (metrics
 * labels, GET /backends, the dry run, the access log), strategies (the
 * --strategy flag and SageMaker's RoutingStrategy spelling), load signals
 * (--load-signal) and key sources (the dry run, the access log). Pure: no
 * I/O. Everything that prints, parses or lists these names goes through
 * here.
 */
#ifndef PG_NAMES_H
#define PG_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include "router/strategy.h"
#include "prefixgate.h"

#define PG_STRATEGY_COUNT    (PG_STRATEGY_CACHE_AWARE + 1)
#define PG_LOAD_SIGNAL_COUNT (PG_LOAD_BOTH + 1)

/* Lower-case decision name as used in labels and in the /route dry run
 * ("affinity", "overflow", "random", "least_outstanding", "retry",
 * "explicit_key", "cached", "balanced"), or "unknown". */
const char *pg_decision_name(unsigned decision);

/* Strategy by name, case-insensitive: random, least_outstanding_requests,
 * prefix_aware, cache_aware (so SageMaker's RANDOM etc. too). 0 or -1. */
int pg_strategy_parse(const char *s, size_t len, enum pg_strategy *out);
/* The flag spelling: "random", ..., "cache_aware"; "unknown" if out of range. */
const char *pg_strategy_flag(enum pg_strategy s);
/* SageMaker spelling: "RANDOM", "LEAST_OUTSTANDING_REQUESTS", "PREFIX_AWARE"
 * (and prefixgate's "CACHE_AWARE"); "UNKNOWN" if out of range. */
const char *pg_strategy_name(enum pg_strategy s);
/* Every strategy name into buf (len bytes, truncated to fit), SageMaker's
 * spelling or the flag's, sep between two names and last before the last
 * one: "random, ..., cache_aware", "RANDOM, ... or CACHE_AWARE". Returns
 * buf. */
const char *pg_strategy_list(char *buf, size_t len, bool sagemaker, const char *sep,
                             const char *last);

/* --load-signal names: "inflight", "backend", "both"; "unknown" if out of
 * range. Parsed case-insensitively: 0 or -1. */
const char *pg_load_signal_name(enum pg_load_signal s);
int pg_load_signal_parse(const char *s, enum pg_load_signal *out);
/* Every load signal name, sep between two: like pg_strategy_list. */
const char *pg_load_signal_list(char *buf, size_t len, const char *sep);

/* Where a key came from (enum pg_key_source, lib/key.h): "raw",
 * "messages", "header", "prompt_cache_key", "prompt", "input",
 * "previous_response_id"; "unknown" if out of range. */
const char *pg_key_source_name(unsigned source);

#endif /* PG_NAMES_H */
