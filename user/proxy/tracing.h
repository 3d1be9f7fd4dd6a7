/* SPDX-License-Identifier: MIT */
/*
 * OpenTelemetry traces in a worker (sys/otel.h is the exporter): what an
 * exchange keeps of its trace as it goes (struct pg_trace_x, in struct
 * pg_exchange), and the hooks the request's life calls. Off (no
 * --otlp-endpoint), a request is never traced: its traceparent and
 * tracestate pass untouched, and each hook is one test of x->trace.on.
 *
 * On, every request's head is read for a traceparent (lib/trace.h): a
 * valid one is its parent, anything else is ignored (a new trace, the
 * tracestate dropped with it). The gateway makes the request's span id
 * and sends the instance a traceparent naming it as the parent, sampled
 * or not (parent-based, else --otlp-sample's ratio). A sampled request
 * fills one record (lib/trace_rec.h) in its worker's ring at its end,
 * where the access log's record is made; a full ring drops it, counted.
 * Nothing here allocates, locks or makes a syscall.
 */
#ifndef PG_TRACING_H
#define PG_TRACING_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/trace_rec.h"

struct pg_worker;
struct pg_client;
struct pg_exchange;
struct pg_http_request;
struct pg_fwd_ident;

/* At the head, before it is rewritten for the backend: the trace read
 * from req, the sampling decided, and id->traceparent set to tp (of
 * PG_TRACEPARENT_LEN bytes, to live until the head is written). Nothing
 * when tracing is off. */
void pg_trace_begin(struct pg_worker *w, struct pg_exchange *x, const struct pg_http_request *req,
                    struct pg_fwd_ident *id, char *tp);

/* The first routing decision, made from t_ns to now (dispatch.c). */
void pg_trace_routed_(struct pg_worker *w, struct pg_exchange *x, uint64_t t_ns, uint64_t now);
static inline void pg_trace_routed(struct pg_worker *w, struct pg_exchange *x, struct pg_trace_x *t,
                                   uint64_t t_ns, uint64_t now)
{
	if (t->on && !t->route_start_ns)
		pg_trace_routed_(w, x, t_ns, now);
}

/* An attempt begins on backend id, on a pooled connection or a new one. */
void pg_trace_attempt_(struct pg_trace_x *t, uint16_t id, bool reused);
static inline void pg_trace_attempt(struct pg_trace_x *t, uint16_t id, bool reused)
{
	if (t->on)
		pg_trace_attempt_(t, id, reused);
}

/* The attempt's new connection is made; the attempt failed. */
void pg_trace_connected_(struct pg_trace_x *t);
void pg_trace_failed_(struct pg_trace_x *t);
static inline void pg_trace_connected(struct pg_trace_x *t)
{
	if (t->on)
		pg_trace_connected_(t);
}
static inline void pg_trace_failed(struct pg_trace_x *t)
{
	if (t->on)
		pg_trace_failed_(t);
}

/* The request ends (where its access-log record is made): its record
 * into the worker's ring, with its answer's status and its outcome (enum
 * pg_trace_outcome). */
void pg_trace_end_(struct pg_worker *w, const struct pg_client *c, unsigned status,
                   unsigned outcome);
static inline void pg_trace_end(struct pg_worker *w, const struct pg_client *c,
                                const struct pg_trace_x *t, unsigned status, unsigned outcome)
{
	if (t->on)
		pg_trace_end_(w, c, status, outcome);
}

#endif /* PG_TRACING_H */
