/* SPDX-License-Identifier: MIT */
/*
 * OpenTelemetry traces (--otlp-endpoint): the exporter. Workers never
 * speak to the collector: each fills records of its traced requests into
 * its own bounded ring (lib/trace_rec.h: no lock, no syscall, no
 * allocation), and the exporter thread drains the rings every
 * PG_OTEL_TICK_MS, makes each record's spans, and POSTs them in batches
 * of at most PG_OTEL_BATCH records as OTLP/HTTP JSON, each POST bounded
 * by --otlp-timeout. A full ring drops the record, a failed or slow POST
 * drops its batch; both are counted (prefixgate_otlp_*), neither is ever
 * waited on by a request.
 */
#ifndef PG_OTEL_H
#define PG_OTEL_H

#include <stdbool.h>
#include <stdint.h>
#include "gateway.h"
#include "lib/trace_rec.h"

#define PG_OTEL_TICK_MS 200 /* the rings are drained this often */
#define PG_OTEL_BATCH   256 /* records per POST, at most */

struct pg_otel;

/* The counters /metrics shows. */
struct pg_otel_counts {
	uint64_t exported; /* spans the collector took (a 2xx answer) */
	uint64_t dropped;  /* spans lost: a ring full, or their POST failed */
	uint64_t errors;   /* POSTs that failed: no connection, timeout, non-2xx */
};

/* Start the exporter as gw->otel, one ring per worker (gw->nworkers must
 * be set), from gw->cfg->otlp. No-op, gw->otel NULL, when no endpoint is
 * configured. 0, or -1 with err set. */
int pg_otel_start(struct pg_gateway *gw, char *err, size_t errlen);
/* Export what is left (one try), stop the thread, free; gw->otel is NULL
 * after. Call once the workers have stopped. */
void pg_otel_stop(struct pg_gateway *gw);
/* Worker `worker`'s ring; NULL when tracing is off. */
struct pg_trace_ring *pg_otel_ring(struct pg_otel *o, unsigned worker);
/* The sampling threshold (lib/trace.h pg_trace_sample). */
uint64_t pg_otel_threshold(const struct pg_otel *o);
/* The counters (all 0 when o is NULL). */
void pg_otel_counts(const struct pg_otel *o, struct pg_otel_counts *c);

#endif /* PG_OTEL_H */
