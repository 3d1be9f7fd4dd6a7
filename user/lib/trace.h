/* SPDX-License-Identifier: MIT */
/*
 * W3C Trace Context for OpenTelemetry traces (sys/otel.h): a traceparent
 * field read and written, the sampling decision, span ids. Pure: no I/O,
 * no allocation, no clock; random numbers come from the caller.
 *
 * traceparent is "VV-TTTT...(32)-PPPP...(16)-FF" in lowercase hex
 * (https://www.w3.org/TR/trace-context/ §3.2): version 00 is exactly 55
 * bytes; a later version may carry more after a '-' at byte 55; version ff,
 * an all-zero trace id or parent id, upper-case hex or any other byte make
 * it invalid. An invalid one is ignored (a new trace begins, its tracestate
 * dropped with it), never answered with an error.
 */
#ifndef PG_TRACE_H
#define PG_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PG_TRACE_ID_LEN    16   /* bytes of a trace id */
#define PG_SPAN_ID_LEN     8    /* bytes of a span id */
#define PG_TRACEPARENT_LEN 55   /* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define PG_TRACE_SAMPLED   0x01 /* trace-flags: the caller records this trace */
/* pg_trace_ratio_parse's threshold for a ratio of 1: every trace. */
#define PG_TRACE_ALL UINT64_MAX

/* A request's place in a trace: the trace it belongs to, and the span
 * that is its parent (the client's, from its traceparent). */
struct pg_trace_ctx {
	uint8_t trace_id[PG_TRACE_ID_LEN];
	uint8_t parent_id[PG_SPAN_ID_LEN];
	uint8_t flags; /* trace-flags */
};

/* Field value s[0, n) as a traceparent into *out: true if valid. */
bool pg_traceparent_parse(const char *s, size_t n, struct pg_trace_ctx *out);

/* The traceparent the gateway sends on: version 00, trace_id, span as the
 * parent, the sampled flag. PG_TRACEPARENT_LEN bytes into out (no NUL). */
void pg_traceparent_format(char *out, const uint8_t *trace_id, const uint8_t *span_id,
                           bool sampled);

/* A sampling ratio ("0", "0.01", "1", "1e-3": 0 to 1) as the threshold
 * pg_trace_sample compares with: 0, or -1 if s is not one. */
int pg_trace_ratio_parse(const char *s, uint64_t *threshold);

/* Parent-based sampling: a request with a valid parent (parent non-NULL)
 * is recorded if its parent was; one without is recorded if the low 8
 * bytes of its (random) trace id, as a big-endian number, fall under
 * threshold (PG_TRACE_ALL: always; 0: never). Every gateway given the
 * same ratio decides a trace alike. */
bool pg_trace_sample(const struct pg_trace_ctx *parent, const uint8_t *trace_id,
                     uint64_t threshold);

/* A new id from random numbers: never all zero (an invalid id). */
void pg_trace_new_id(uint8_t *id, size_t len, uint64_t r1, uint64_t r2);

/* The k-th child (k >= 1) of span id `span`'s id: distinct for distinct
 * k (a hash: clashes as likely as between random ids), never zero. The
 * exporter names a request's inner spans so, with nothing kept per span
 * on the worker. */
void pg_trace_child_id(uint8_t *out, const uint8_t *span, unsigned k);

/* n bytes as 2n lowercase hex digits into out (no NUL). */
void pg_trace_hex(char *out, const uint8_t *id, size_t n);

#endif /* PG_TRACE_H */
