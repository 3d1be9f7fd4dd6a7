/* SPDX-License-Identifier: MIT */
/*
 * pgload — prefixgate's load generator. Shared types: options, per-request
 * records, and the small interfaces between the files of this tool:
 *   cli.c      option parsing
 *   usage.c    the --help text
 *   rng.c      seeded PRNG and the distributions the workloads draw from
 *   workload.c deterministic request bodies (shared-prefix, multi-turn, ...)
 *   body.c     the JSON pieces bodies are built from
 *   text.c     the word text of every prompt
 *   trace.c    a request trace (--trace): loading, W and D
 *   wl_trace.c the trace workload: prompts from block ids, send times
 *   sse.c      pure response-body scanning (SSE events, usage numbers)
 *   itl.c      pure inter-token latency and the report's distributions
 *   timer.c    binary min-heap of timers
 *   conn.c     one keep-alive HTTP/1.1 client connection (non-blocking I/O)
 *   engine.c   the epoll loop: arrivals, connection pool, timeouts, stop
 *   report.c   CSV rows, JSON summary, human summary
 */
#ifndef PGLOAD_H
#define PGLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "itl.h"

enum wl_kind {
	WL_SHARED_PREFIX = 0,
	WL_MULTI_TURN,
	WL_NO_PREFIX,
	WL_HOT_PREFIX,
	WL_FIXED,
	WL_AGENTIC,
	WL_SHORT_CHAT,
	WL_TRACE,
};

#define PG_MAX_TARGETS 8

/* One --target. */
struct pg_target {
	char name[64]; /* ADDR:PORT as given */
	char host[48]; /* numeric IPv4 address part */
	uint16_t port;
};

/* Conversation workloads: what an assistant turn re-sends (cli.c --help). */
enum pg_history {
	PG_HIST_SERVER = 0, /* the reply the server sent */
	PG_HIST_REPLAY,     /* the conversation's own drawn text */
};

struct pg_opts {
	char target[PG_MAX_TARGETS * 64]; /* every target, comma-separated */
	struct pg_target targets[PG_MAX_TARGETS];
	unsigned ntargets; /* each request goes to one, uniformly at random */
	char path[256];
	char model[64];
	char label[64];
	enum wl_kind workload;
	double rate;          /* open loop req/s; 0 = closed loop */
	unsigned concurrency; /* closed loop: requests in flight at once */
	unsigned max_conns;   /* open loop: connection cap (arrivals queue beyond) */
	double duration_s;    /* 0 = unbounded by time */
	uint64_t requests;    /* 0 = unbounded by count */
	unsigned max_tokens;
	bool stream;
	unsigned timeout_ms;
	uint64_t seed;
	unsigned docs;
	unsigned doc_tokens;
	double zipf_s;
	unsigned question_tokens;
	unsigned system_tokens; /* shared system message (prefix, agentic, short-chat) */
	double hot_share;
	unsigned conversations;
	unsigned min_turns, max_turns;
	unsigned user_tokens, assistant_tokens; /* lognormal medians */
	unsigned tools;                         /* agentic: function definitions in "tools" */
	unsigned tool_tokens;                   /* agentic: description text per function */
	unsigned history_tokens;                /* short-chat: bound on a request's prompt */
	enum pg_history history;                /* conversation workloads */
	size_t body_bytes;
	uint64_t first_index; /* request i is built as workload request first_index + i */
	char headers[512];    /* extra head lines, each "Name: value\r\n" */
	size_t headers_len;
	/* trace: the file, the part replayed, and its speed-up (trace.h) */
	const char *trace_path;
	uint64_t trace_start;    /* first request replayed (its index in the file) */
	uint64_t trace_requests; /* requests replayed; 0: to the end */
	double load;             /* RHO (--load); 0: not given */
	double capacity_tps;     /* C (--capacity-tokens-per-s) */
	double speedup;          /* S (--speedup); 0: not given */
	const char *csv_path;
	const char *json_path;
	bool quiet;
};

enum pg_err {
	PG_OK = 0,
	PG_ERR_CONNECT,   /* connect() failed or was refused */
	PG_ERR_IO,        /* send/recv error (reset, ...) */
	PG_ERR_EOF,       /* peer closed before the response was complete */
	PG_ERR_TIMEOUT,   /* --timeout-ms elapsed */
	PG_ERR_PARSE,     /* malformed response head or chunked framing */
	PG_ERR_STATUS,    /* complete response with a non-2xx status */
	PG_ERR_TRUNCATED, /* 2xx stream that ended without `data: [DONE]` */
	PG_ERR_ABORTED,   /* still in flight when the hard deadline ended the run */
	PG_ERR__COUNT,
};

const char *pg_err_name(enum pg_err e);

#define PG_NO_BACKEND       0xffff
#define PGLOAD_MAX_BACKENDS 256

/* One row of the CSV: everything recorded about one request. */
struct pg_rec {
	uint64_t start_ns; /* scheduled start (open loop: the arrival time) */
	uint64_t send_ns;  /* first byte handed to the kernel */
	uint64_t ttft_ns;  /* first content event, 0 = none (relative to start) */
	uint64_t e2e_ns;   /* response complete or failure (relative to start) */
	uint64_t bytes_sent, bytes_recv;
	/* inter-token latency (itl.h) of a streamed response: its gaps */
	uint64_t itl_sum_ns, itl_max_ns;
	uint32_t itl_n; /* gaps: content events - 1; 0 = none */
	int32_t prompt_tokens, cached_tokens, completion_tokens; /* -1 unknown */
	uint32_t group;   /* document id, conversation id, or trace index (trace) */
	uint32_t turn;    /* multi-turn: turn index within the conversation */
	uint16_t status;  /* HTTP status, 0 = none */
	uint16_t backend; /* index into backend names, PG_NO_BACKEND */
	uint8_t err;      /* enum pg_err */
	uint8_t target;   /* index into opts.targets */
	uint8_t done;     /* 1 when final */
};

/* The trace workload's numbers, for the report (trace.h). */
struct pg_trace_sum {
	bool on;
	uint64_t total;           /* requests in the file */
	uint64_t first, count;    /* the part replayed: first, first + count - 1 */
	uint64_t input_tokens;    /* of the whole file */
	uint64_t uncached_tokens; /* W, over the whole file */
	uint64_t distinct_blocks;
	double span_s;                           /* D */
	double speedup;                          /* S */
	double mean_rate;                        /* total / (D / S) requests/s; 0 when D is 0 */
	uint64_t padded_requests, padded_tokens; /* among the requests built */
	uint64_t built;                          /* requests built */
};

/* All records of a run plus what the report needs besides them. */
struct pg_run {
	struct pg_rec *recs;
	size_t nrecs, cap;
	char *backends[PGLOAD_MAX_BACKENDS]; /* X-Backend-Id values, interned */
	unsigned nbackends;
	uint64_t t0_ns;            /* run start */
	uint64_t issue_end_ns;     /* when issuing stopped */
	uint64_t end_ns;           /* when the last request finished */
	uint64_t max_lag_ns;       /* worst lateness of a timer */
	uint64_t arrivals_delayed; /* arrivals that waited for a connection/conversation */
	uint64_t arrivals_unsent;  /* arrivals still waiting when issuing stopped */
	uint64_t retries;          /* requests resent after a stale keep-alive close */
	uint64_t conns_opened;
	double cpu_user_s, cpu_sys_s;
	uint64_t preempted; /* involuntary context switches: CPU contention */
	bool hit_deadline;  /* the hard deadline cut the run short */
	/* every inter-token gap of the successful requests (8 bytes a token) */
	struct pg_gaps itl;
	bool itl_oom; /* some gaps could not be kept: the ITL figures lack them */
	struct pg_trace_sum trace;
};

/* cli.c */
/* Parse argv into *o (defaults first). Returns 0, 1 after --help, -1 on a
 * bad option (message already printed to stderr). */
int pg_parse_args(int argc, char **argv, struct pg_opts *o);
const char *pg_workload_name(enum wl_kind k);

/* usage.c: what --help prints */
extern const char pg_usage[];

/* The trace workload's default --timeout-ms: its outputs run to 2,000
 * tokens (a minute of decoding at 30 ms a token) and its bursts queue. */
#define PG_TRACE_TIMEOUT_MS 600000

/* Open loop at times the workload gives (the trace's), not --rate's. */
static inline bool pg_scheduled(const struct pg_opts *o)
{
	return o->workload == WL_TRACE;
}

/* engine.c: run the load; fills *run. Returns 0, or -1 on a setup error. */
int pg_engine_run(const struct pg_opts *o, struct pg_run *run);

/* report.c */
int pg_report(const struct pg_opts *o, const struct pg_run *run);

/* Monotonic clock in nanoseconds. */
uint64_t pg_now_ns(void);

#endif /* PGLOAD_H */
