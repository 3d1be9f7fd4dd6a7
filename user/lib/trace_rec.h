/* SPDX-License-Identifier: MIT */
/*
 * What a worker keeps of one traced request (struct pg_trace_rec), the
 * bounded ring it hands the records over in, and the spans the exporter
 * makes of a record (pg_trace_spans). Pure: no I/O, no allocation, no
 * clock.
 *
 * One record per request, not one per span: the worker fills the slot at
 * the request's end with times it already took (monotonic ns) and ids it
 * made at the head; the inner spans' ids are derived from the request's
 * span id (trace.h pg_trace_child_id), their names and attributes are
 * written by the exporter. The ring is single-producer (the worker),
 * single-consumer (the exporter): no lock, no syscall; a full ring drops
 * the record and counts it.
 */
#ifndef PG_TRACE_REC_H
#define PG_TRACE_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/otlp.h"
#include "lib/trace.h"

#define PG_TRACE_ATTEMPTS 4  /* attempts recorded per request: the first ones */
#define PG_TRACE_METHOD   16 /* text fields' sizes, bytes (cut to them) */
#define PG_TRACE_PATH     96
#define PG_TRACE_CLIENT   46
#define PG_TRACE_RING     1024 /* records per worker's ring (a power of 2) */
/* Spans one record makes, at most: the request's, queue, route, first
 * token, response, and each attempt's and its connect's. */
#define PG_TRACE_SPANS (5 + 2 * PG_TRACE_ATTEMPTS)

/* How an attempt ended. */
enum pg_trace_result {
	PG_TRACE_ANSWERED = 0, /* its response reached the client (or began to) */
	PG_TRACE_FAILED = 1,   /* it failed before answering: tried elsewhere or 502 */
};

/* How the request ended (access log's outcomes, sys/accesslog.h). */
enum pg_trace_outcome {
	PG_TRACE_OK = 0,
	PG_TRACE_CLIENT_ABORT = 1,
	PG_TRACE_BACKEND_ERROR = 2,
	PG_TRACE_GATEWAY = 3,
};

struct pg_trace_attempt {
	uint64_t start_ns;     /* the attempt began (connect or a pooled connection) */
	uint64_t connected_ns; /* its connection was made (0: reused, or never) */
	uint64_t end_ns;       /* it failed, or the request ended */
	uint16_t backend;
	uint8_t result; /* enum pg_trace_result */
	bool reused;    /* a pooled connection */
};

struct pg_trace_rec {
	uint8_t trace_id[PG_TRACE_ID_LEN];
	uint8_t span_id[PG_SPAN_ID_LEN];   /* the request's span: the instance's parent */
	uint8_t parent_id[PG_SPAN_ID_LEN]; /* the client's span */
	bool has_parent;
	bool tls;
	bool stream;      /* the body asked for a streamed answer */
	uint8_t api;      /* enum pg_api (key.h) */
	uint8_t strategy; /* enum pg_strategy */
	uint8_t decision; /* enum pg_decision of the first routing */
	uint8_t outcome;  /* enum pg_trace_outcome */
	uint8_t attempts; /* made in all (att[] holds the first PG_TRACE_ATTEMPTS) */
	uint16_t status;  /* the answer's status (0: none was sent) */
	uint16_t backend; /* chosen by the first routing (0: none) */
	uint16_t runner_up;
	uint32_t matched;    /* prompt tokens the chosen one was believed to hold */
	uint32_t key_len;    /* the prefix key's length */
	uint32_t max_tokens; /* the body's max_tokens (or its kin; 0: none) */
	/* Monotonic ns (pg_now_ns); 0: did not happen. */
	uint64_t start_ns, end_ns, queued_ns, route_start_ns, route_end_ns, ttft_ns;
	struct pg_trace_attempt att[PG_TRACE_ATTEMPTS];
	uint8_t method_len, path_len, client_len;
	char method[PG_TRACE_METHOD];
	char path[PG_TRACE_PATH]; /* without its query */
	char client[PG_TRACE_CLIENT];
};

/* What an exchange keeps of its trace as it goes (proxy/tracing.h), from
 * which its record is made at its end. Zeroed = not traced. */
struct pg_trace_x {
	bool on;         /* sampled: its record is kept at its end */
	bool has_parent; /* the client's traceparent was valid */
	uint8_t natt;    /* attempts recorded in att[] */
	uint8_t decision, strategy;
	uint16_t backend, runner_up; /* the first routing's choice and its runner-up */
	uint32_t matched;
	uint8_t trace_id[PG_TRACE_ID_LEN];
	uint8_t span_id[PG_SPAN_ID_LEN];
	uint8_t parent_id[PG_SPAN_ID_LEN];
	uint64_t route_start_ns, route_end_ns;
	struct pg_trace_attempt att[PG_TRACE_ATTEMPTS];
};

/* A worker's ring. Zeroed = empty. */
struct pg_trace_ring {
	uint32_t head; /* written by the worker */
	char pad1[60];
	uint32_t tail; /* written by the exporter */
	char pad2[60];
	uint64_t dropped; /* spans of the records the worker found no room for */
	struct pg_trace_rec rec[PG_TRACE_RING];
} __attribute__((aligned(64)));

/* The worker: a free slot to fill, or NULL (full: the record's nspans
 * spans counted as dropped). */
static inline struct pg_trace_rec *pg_trace_ring_slot(struct pg_trace_ring *g, unsigned nspans)
{
	uint32_t h = g->head;

	if (h - __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE) == PG_TRACE_RING) {
		__atomic_fetch_add(&g->dropped, nspans, __ATOMIC_RELAXED);
		return NULL;
	}
	return &g->rec[h % PG_TRACE_RING];
}

/* The worker: the slot pg_trace_ring_slot gave is filled. */
static inline void pg_trace_ring_commit(struct pg_trace_ring *g)
{
	__atomic_store_n(&g->head, g->head + 1, __ATOMIC_RELEASE);
}

/* The exporter: the oldest record not yet taken, or NULL; it stays valid
 * until pg_trace_ring_pop. */
static inline const struct pg_trace_rec *pg_trace_ring_peek(const struct pg_trace_ring *g)
{
	uint32_t t = g->tail;

	if (t == __atomic_load_n(&g->head, __ATOMIC_ACQUIRE))
		return NULL;
	return &g->rec[t % PG_TRACE_RING];
}

/* The exporter: the record pg_trace_ring_peek gave is done with. */
static inline void pg_trace_ring_pop(struct pg_trace_ring *g)
{
	__atomic_store_n(&g->tail, g->tail + 1, __ATOMIC_RELEASE);
}

/* Names the spans need that the record holds as ids: a backend's
 * address ("HOST:PORT", "[V6]:PORT", "https://..."); empty if unknown. */
typedef void pg_trace_name_fn(void *arg, uint16_t backend, char *buf, size_t cap);

/* Text the spans point into; lives as long as they do. */
struct pg_trace_text {
	char backend[PG_TRACE_ATTEMPTS + 2][64];
	char name[PG_TRACE_METHOD + PG_TRACE_PATH + 2]; /* the request span's name */
	char status[8];                                 /* its error.type: the status */
};

/* The spans of record r into out[PG_TRACE_SPANS] (their text in *t and
 * in r: both outlive them), times moved to Unix ns by adding wall_off (the
 * realtime clock less the monotonic one): how many. */
size_t pg_trace_spans(const struct pg_trace_rec *r, uint64_t wall_off, pg_trace_name_fn *name,
                      void *arg, struct pg_trace_text *t, struct pg_otlp_span *out);

#endif /* PG_TRACE_REC_H */
