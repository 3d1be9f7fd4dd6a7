/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics: the gateway's counters in Prometheus text exposition format
 * 0.0.4, read from the shared maps (per backend) and the workers' stats
 * (summed). Every family has HELP and TYPE lines. Latencies are in
 * microseconds throughout, as the histogram's name says (its _sum too).
 */
#ifndef PG_METRICS_H
#define PG_METRICS_H

#include "admin.h"
#include "gateway.h"

#define PG_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Append the whole exposition to out. Reads shared counters with relaxed
 * atomic loads; never blocks, never changes anything. */
void pg_metrics_render(const struct pg_gateway *gw, struct pg_buf *out);

/* Lower-case decision name as used in labels and in the /route dry run
 * ("affinity", "overflow", "random", "least_outstanding", "retry",
 * "explicit_key"), or "unknown". */
const char *pg_decision_name(unsigned decision);

#endif /* PG_METRICS_H */
