/* SPDX-License-Identifier: MIT */
/*
 * Reading an inference server's own metrics: the HTTP/1.0 response to
 * GET /metrics (Prometheus text format), fed in pieces as it arrives, and
 * the few vLLM series prefixgate uses. Pure: no I/O (health.c moves the
 * bytes), so it is unit-tested directly.
 *
 * Series read (each summed over its label sets, e.g. one per model):
 *   vllm:prefix_cache_hits_total     tokens served from the prefix cache
 *   vllm:prefix_cache_queries_total  tokens looked up in it
 *   vllm:num_requests_waiting        requests queued, not yet scheduled
 *   vllm:num_requests_running        requests in the running batch
 *   vllm:cache_config_info           its labels block_size x num_gpu_blocks:
 *                                    the KV cache's capacity in tokens
 *                                    (PG_SCRAPE_KV_TOKENS; the value is 1)
 *   sglang:num_queue_reqs            SGLang's names of the waiting and
 *   sglang:num_running_reqs          running requests
 * Every other line (comments, other series, histograms) is skipped, and so
 * is a line longer than PG_SCRAPE_LINE_MAX.
 */
#ifndef PG_SCRAPE_H
#define PG_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PG_SCRAPE_LINE_MAX 1024
/* A response larger than this is abandoned (a real vLLM /metrics is
 * a few hundred KiB at most). */
#define PG_SCRAPE_MAX_BYTES (16u * 1024 * 1024)

enum pg_scrape_series {
	PG_SCRAPE_HITS = 0,
	PG_SCRAPE_QUERIES = 1,
	PG_SCRAPE_WAITING = 2,
	PG_SCRAPE_RUNNING = 3,
	PG_SCRAPE_KV_TOKENS = 4,
	PG_SCRAPE_NSERIES = 5,
};

struct pg_scrape {
	int phase;     /* 0: status line, 1: headers, 2: body, -1: failed */
	int status;    /* HTTP status */
	size_t total;  /* bytes fed */
	size_t llen;   /* bytes in line */
	bool overlong; /* the current line exceeded line[]: skip it */
	char line[PG_SCRAPE_LINE_MAX + 1];
	double value[PG_SCRAPE_NSERIES]; /* sums */
	unsigned seen;                   /* bit per series found */
};

void pg_scrape_init(struct pg_scrape *s);

/* Feed received bytes. Returns 0 (go on), or -1 once the response cannot
 * be used (not HTTP, status not 200, too large): stop reading. */
int pg_scrape_feed(struct pg_scrape *s, const char *p, size_t n);

/* At EOF: 0 if a 200 response's body was read (its last line, without a
 * final newline, is parsed now), else -1. s->seen says which series came. */
int pg_scrape_finish(struct pg_scrape *s);

/* Parse one exposition line (no newline) into s (used by pg_scrape_feed;
 * exposed for tests). */
void pg_scrape_line(struct pg_scrape *s, const char *line, size_t len);

#endif /* PG_SCRAPE_H */
