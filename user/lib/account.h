/* SPDX-License-Identifier: MIT */
/*
 * Usage accounting, pure (doc/operations.md "Usage accounting"): what one
 * request used, each figure the engine's own (exact: its answer's usage
 * was read as it passed, lib/usage.h) or the gateway's estimate, and the
 * counters they add up into, per tenant and per model pool. No I/O, no
 * allocation, no clock.
 *
 * The gateway reads an answer's usage where its bytes pass through it: a
 * non-streamed answer on the copy path, a stream that asked for
 * stream_options.include_usage. Where they do not (a body spliced by the
 * kernel data paths, an engine that reports nothing, an answer cut short)
 * the figure is estimated: the prompt tokens as routing counts them (its
 * bytes / PG_CA_CHARS_PER_TOKEN), the cached tokens routing believed the
 * instance held, the completion tokens from a stream's content events, else
 * the request's max_tokens, else the caller's default.
 */
#ifndef PG_ACCOUNT_H
#define PG_ACCOUNT_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/usage.h"

/* The token figures, each kept exact and estimated apart. */
enum pg_acct_fig {
	PG_ACCT_PROMPT = 0,
	PG_ACCT_CACHED = 1,
	PG_ACCT_COMPLETION = 2,
	PG_ACCT_FIGS = 3,
};
/* Their names in /metrics, GET /tenants and the access log, by enum pg_acct_fig. */
extern const char *const pg_acct_fig_names[PG_ACCT_FIGS];

/* How a request ended, for the counters. */
enum pg_acct_end {
	PG_ACCT_ANSWERED = 0,  /* any other end: an answer, the gateway's 4xx, the client gone */
	PG_ACCT_ERROR = 1,     /* 5xx, the gateway's or the instance's; a broken answer */
	PG_ACCT_THROTTLED = 2, /* 429: a quota, flow control, or the instance */
};

/* What one request used. */
struct pg_use {
	uint32_t n[PG_ACCT_FIGS];
	uint8_t exact; /* bit f: n[f] is the engine's own */
};

/* The estimates the gateway has of a request, where the engine's are not seen. */
struct pg_use_est {
	uint32_t prompt;     /* as routing counts them */
	uint32_t cached;     /* as routing believed the instance held (0: no belief) */
	uint32_t completion; /* max_tokens, or the caller's default */
};

/* What a request used: u (its answer's usage read so far; NULL: its body
 * was not seen) where it reports, est where not. */
void pg_use_of(const struct pg_usage *u, const struct pg_use_est *est, struct pg_use *out);

/* One tenant's or pool's counters (atomics). Zeroed is none. */
struct pg_account {
	uint64_t requests, errors, throttled;
	uint64_t tokens[PG_ACCT_FIGS][2]; /* [figure][0: exact, 1: estimated] */
};

/* A request ended as end; use (NULL: no instance answered it) its tokens. */
void pg_account_add(struct pg_account *a, enum pg_acct_end end, const struct pg_use *use);

/* How a response of status (0: none was sent) ended, broken: cut short. */
enum pg_acct_end pg_acct_end_of(unsigned status, bool broken);

#endif /* PG_ACCOUNT_H */
