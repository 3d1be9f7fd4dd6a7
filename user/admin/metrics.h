/* SPDX-License-Identifier: MIT */
/*
 * GET /metrics: the gateway's counters in Prometheus text exposition format
 * 0.0.4, read from the shared maps (per backend) and the workers' stats
 * (summed). Every family has HELP and TYPE lines. Durations are in
 * seconds, Prometheus' base unit (the _microseconds latency families and
 * the _milliseconds ones of the load model and flow control are deprecated
 * copies, kept for one release).
 */
#ifndef PG_METRICS_H
#define PG_METRICS_H

#include "gateway.h"
#include "lib/buf.h"
#include "lib/names.h" /* pg_decision_name, which its callers use */

#define PG_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Append the whole exposition to out. Reads shared counters with relaxed
 * atomic loads; never blocks, never changes anything. */
void pg_metrics_render(const struct pg_gateway *gw, struct pg_buf *out);

/*
 * The operations families (metrics_ops.c): predicted and delivered KV hit
 * rates side by side, the backends' scraped load, hot keys, shadow mode.
 * Ratios cover the last PG_METRICS_WINDOW_MS (since start-up before that),
 * from samples pg_metrics_sample() takes; called by pg_metrics_render().
 */
#define PG_METRICS_WINDOW_MS 60000
#define PG_METRICS_SAMPLE_MS 5000
void pg_metrics_ops_render(const struct pg_gateway *gw, struct pg_buf *out);

/* cache_aware's load model (metrics_load.c): each backend's queue of
 * prefill work and learned speed, and how well first tokens were
 * predicted. */
void pg_metrics_load_render(const struct pg_gateway *gw, struct pg_buf *out);

/* Flow control's families (metrics_flow.c): the queues, waits by class
 * and by tenant, sheds and refusals. */
void pg_metrics_flow_render(const struct pg_gateway *gw, struct pg_buf *out);
/* Quotas and usage accounting by tenant and by model pool (metrics_usage.c). */
void pg_metrics_usage_render(const struct pg_gateway *gw, struct pg_buf *out);

/* TLS's families (metrics_tls.c): handshakes by side, resumption,
 * version and cipher, failures by reason, certificates' expiry, reloads;
 * nothing without gw->tls. */
void pg_metrics_tls_render(const struct pg_gateway *gw, struct pg_buf *out);

/* OpenTelemetry traces' export (metrics_otel.c; sys/otel.h). */
void pg_metrics_otel_render(const struct pg_gateway *gw, struct pg_buf *out);
/* "# HELP" and "# TYPE" of a family. */
void pg_metrics_family(struct pg_buf *o, const char *name, const char *type, const char *help);

/* The model pools' families, each labelled pool="NAME" (metrics_pools.c;
 * only when pools are configured). */
void pg_metrics_pools_render(const struct pg_gateway *gw, struct pg_buf *out);

/* The samples behind the ratios, for gw->mwin: made empty (NULL if out of
 * memory); used by the control thread alone. */
struct pg_metrics_window *pg_metrics_window_create(void);
void pg_metrics_window_free(struct pg_metrics_window *w);

/* Take a sample of the counters behind the ratios into gw->mwin (none
 * without one) if PG_METRICS_SAMPLE_MS have passed since the last (control
 * thread: pg_control_tick). */
void pg_metrics_sample(const struct pg_gateway *gw, uint64_t now_ms);

#endif /* PG_METRICS_H */
