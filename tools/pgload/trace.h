/* SPDX-License-Identifier: MIT */
/*
 * A request trace in Mooncake's format (tools/bench/data/README.md): one
 * JSON object a line, {"timestamp": ms, "input_length": tokens,
 * "output_length": tokens, "hash_ids": [block ids]}, a block being 512
 * tokens. trace.c loads it compactly and computes the numbers that scale
 * its replay; wl_trace.c turns its requests into bodies and send times.
 *
 * Replay speed (pgload --help): W = the trace's prompt tokens a single
 * infinite prefix cache would not hold, walking the trace in order; D = its
 * span in seconds; S = RHO x C x D / W makes the fleet's prefill work with
 * perfect caching RHO x C tokens/s. Request i is sent (ts_i - ts_first) /
 * 1000 / S seconds after the run starts, ts_first being the first replayed
 * request's timestamp (0 for the whole Mooncake trace).
 */
#ifndef PGLOAD_TRACE_H
#define PGLOAD_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/json.h"
#include "pgload.h"
#include "workload.h"

#define PG_TRACE_BLOCK_TOKENS 512
#define PG_TRACE_TOKEN_BYTES  4 /* a token is 4 bytes of text, as elsewhere in pgload */
#define PG_TRACE_BLOCK_BYTES  (PG_TRACE_BLOCK_TOKENS * PG_TRACE_TOKEN_BYTES)
#define PG_TRACE_MAX_TOKENS   (1u << 24)  /* input_length / output_length bound */
#define PG_TRACE_MAX_LINE     (16u << 20) /* a longer line is not a trace line */
#define PG_TRACE_MAX_IDS      (1u << 30)  /* block ids in all (4 GiB of them) */

/* One request: 24 bytes; its block ids live in pg_trace.ids. */
struct pg_trace_req {
	uint64_t ts_ms;
	uint32_t input_len;  /* tokens */
	uint32_t output_len; /* tokens */
	uint32_t first_id;   /* its ids are ids[first_id .. first_id + nids) */
	uint32_t nids;
};

/* Zero-initialised is empty. */
struct pg_trace {
	struct pg_trace_req *req;
	size_t n, cap;
	uint32_t *ids; /* every request's hash_ids, back to back */
	size_t nids, ids_cap;
};

/*
 * Append the request of one line, line[0..len) (no newline), to t; js is a
 * parser kept across lines. Returns 0; 1 for a blank line (nothing added);
 * -1 with why in err (the member and what it wants; "out of memory").
 * Timestamps must not decrease from one request to the next.
 */
int pg_trace_add_line(struct pg_trace *t, struct pg_json *js, const char *line, size_t len,
                      char *err, size_t errlen);
/*
 * Load path, gzip'd or plain (zlib reads both). Returns 0, or -1 after
 * printing "pgload: --trace PATH:LINE: why" (or the open/read error).
 */
int pg_trace_load(struct pg_trace *t, const char *path);
void pg_trace_free(struct pg_trace *t);

/*
 * W: walk the trace in order with one cache that never evicts; a request's
 * cached part is its leading ids already seen (in any earlier request) x
 * 512 tokens, at most its input_length; add input_length minus that; then
 * all its ids are seen. Also counts the distinct ids. Returns 0, or -1
 * when out of memory.
 */
int pg_trace_uncached(const struct pg_trace *t, uint64_t *w, uint64_t *distinct);
/* D: (last timestamp - first timestamp) / 1000 seconds; 0 for n < 2. */
double pg_trace_span_s(const struct pg_trace *t);
/* Offset in ns of request first + k from request first, at speed-up s. */
uint64_t pg_trace_offset_ns(const struct pg_trace *t, size_t first, size_t k, double s);

/* wl_trace.c */
/*
 * The text of block id: a space, then 2,047 bytes of pg_wl_text keyed by
 * (seed, id). Each block is drawn whole, alone, so the same id gives the
 * same 2,048 bytes in every request; the leading space starts a new word
 * at every block boundary, so no word runs from one block into the next
 * (a tokenizer that splits words at spaces tokenizes a block alike
 * whatever follows it).
 */
void pg_trace_block_text(char *out, uint64_t seed, uint32_t id);
/*
 * Bytes [from, to) of request i's prompt appended to b. The prompt is
 * input_length x 4 bytes: its blocks' texts in order, the last cut short;
 * where input_length asks for more than its ids cover, the rest is padding
 * drawn from (seed, i), also starting with a space. Returns the padding
 * bytes appended (0 for nearly every trace request).
 */
size_t pg_trace_prompt(struct pg_buf *b, const struct pg_trace *t, uint64_t seed, size_t i,
                       size_t from, size_t to);

/* The trace workload (workload.c calls these for WL_TRACE). */
struct pg_trace_wl;
/* Load --trace, check the part, compute W, D and S. NULL after a message. */
struct pg_trace_wl *pg_trace_wl_create(const struct pg_opts *o);
/* Body of the part's request idx (trace request --trace-start + idx). */
int pg_trace_wl_next(struct pg_trace_wl *tw, uint64_t idx, struct pg_wl_req *out);
/* Send time of the part's request k from the run's start: 0; 1 past the part. */
int pg_trace_wl_at(const struct pg_trace_wl *tw, uint64_t k, uint64_t *off_ns);
void pg_trace_wl_sum(const struct pg_trace_wl *tw, struct pg_trace_sum *sum);
void pg_trace_wl_destroy(struct pg_trace_wl *tw);

#endif /* PGLOAD_TRACE_H */
