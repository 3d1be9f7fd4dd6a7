/* SPDX-License-Identifier: MIT */
/*
 * Deterministic request bodies. Every body is a function of (--seed, the
 * workload options, the request's index) — and for the conversation
 * workloads, of which conversation is ready next and, with --history server,
 * of the replies it got — so two runs with the same seed against servers
 * that answer alike send the same prompts. The workloads are described in cli.c's --help and
 * workload.c.
 */
#ifndef PGLOAD_WORKLOAD_H
#define PGLOAD_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pgload.h"

/*
 * Reply bytes kept for a turn of n tokens (--history server): room for long
 * tokens and JSON escapes (a tokenizer's token is rarely past 16 bytes;
 * \uXXXX is 6). Plain numbers: cli.c's --help prints them.
 */
#define PG_REPLY_BASE   256
#define PG_REPLY_TOKEN  32
#define PG_REPLY_MAX(n) (PG_REPLY_BASE + PG_REPLY_TOKEN * (size_t)(n))

/* One request body handed to the engine. */
struct pg_wl_req {
	char *body;
	size_t len;
	bool owned;     /* body is malloc'd for this request (else shared) */
	uint32_t group; /* document id, conversation slot's conversation id, or
	                 * trace index */
	uint32_t turn;  /* turn index (multi-turn), else 0 */
	uint32_t slot;  /* multi-turn: conversation slot, for pg_wl_done */
	/* --history server: capture up to this many bytes of the reply for
	 * pg_wl_done (struct pg_scan's text_max); 0: the reply is not needed */
	size_t reply_max;
	bool traced;          /* send X-Trace-Index: trace_index */
	uint64_t trace_index; /* the request's index in the trace file */
};

struct pg_workload;

/* Returns the workload, or NULL after printing why (bad options / memory). */
struct pg_workload *pg_wl_create(const struct pg_opts *o);
/*
 * Build request number idx into *out. Returns 0; 1 when nothing can be sent
 * now (multi-turn: every conversation waits for a response — call again
 * after pg_wl_done); -1 when out of memory.
 */
int pg_wl_next(struct pg_workload *w, uint64_t idx, struct pg_wl_req *out);
/*
 * The response to r has ended; frees r's body. ok: a complete 2xx response
 * whose reply (reply[0..len), raw JSON string bytes; see sse.h) was captured
 * whole. With --history server the reply becomes the conversation's
 * assistant turn; a turn that is not ok ends its conversation.
 */
void pg_wl_done(struct pg_workload *w, struct pg_wl_req *r, bool ok, const char *reply, size_t len);
void pg_wl_destroy(struct pg_workload *w);

/*
 * Workloads with their own send times (pg_scheduled): the offset from the
 * run's start of arrival k. Returns 0; 1 when there is no arrival k (the
 * workload is over).
 */
int pg_wl_at(const struct pg_workload *w, uint64_t k, uint64_t *off_ns);
/* The trace workload's numbers (sum->on false for the others). */
void pg_wl_trace_sum(const struct pg_workload *w, struct pg_trace_sum *sum);

/* Which of o->targets request idx goes to: uniform, from --seed and idx. */
unsigned pg_wl_target(const struct pg_opts *o, uint64_t idx);

/*
 * Pseudo-random word text of exactly n bytes from key: lowercase words
 * separated by single spaces, never starting or ending with a space, no
 * character that needs JSON escaping. Exposed for tests. In text.c.
 */
void pg_wl_text(char *out, size_t n, uint64_t key);

#endif /* PGLOAD_WORKLOAD_H */
