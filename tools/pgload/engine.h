/* SPDX-License-Identifier: MIT */
/*
 * Internal interface between engine.c (the event loop: arrivals, the
 * connection pool, timers, stopping) and conn.c (one HTTP/1.1 client
 * connection: connect, send one request, parse its response).
 */
#ifndef PGLOAD_ENGINE_H
#define PGLOAD_ENGINE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/http.h"
#include "pgload.h"
#include "rng.h"
#include "sse.h"
#include "timer.h"
#include "workload.h"

enum pg_conn_state {
	PG_C_FREE = 0,   /* slot unused, fd -1 */
	PG_C_CONNECTING, /* connect() in progress, request queued on it */
	PG_C_IDLE,       /* open keep-alive connection without a request */
	PG_C_SENDING,    /* request partly written */
	PG_C_RECEIVING,  /* request written, response in progress */
};

enum pg_body_state {
	PG_B_HEAD = 0, /* reading the response head */
	PG_B_BODY,     /* reading the body */
};

struct pg_conn {
	int fd;
	uint32_t slot;
	uint8_t target; /* index into opts.targets, set when opened */
	enum pg_conn_state state;
	bool reused;       /* already carried a complete exchange */
	bool want_out;     /* EPOLLOUT is registered */
	uint32_t idle_pos; /* index in eng->idle while PG_C_IDLE */
	uint64_t gen;      /* bumped per request: stale timeout timers mismatch */
	/* the request on this connection */
	size_t rec; /* index into run->recs */
	struct pg_wl_req wl;
	char head[1280]; /* head_prefix, then Content-Length's value, X-Trace-Index */
	size_t head_len, sent;
	bool retried;
	/* its response */
	enum pg_body_state bstate;
	struct pg_buf hbuf; /* partial head bytes */
	struct pg_http_response resp;
	struct pg_frame ch;
	uint64_t left; /* PG_BODY_LENGTH: body bytes still due */
	bool leftover; /* bytes after the response: do not reuse */
	struct pg_scan scan;
	struct pg_itl itl; /* its content events' gaps */
};

struct pg_eng {
	const struct pg_opts *o;
	struct pg_run *run;
	struct pg_workload *wl;
	int ep;
	struct sockaddr_in addr[PG_MAX_TARGETS];
	struct pg_heap heap;
	struct pg_conn *conns;
	uint32_t nslots;                  /* size of conns[] */
	uint32_t nopen;                   /* slots not PG_C_FREE */
	uint32_t *idle[PG_MAX_TARGETS];   /* per target, a stack of idle slots */
	uint32_t nidle_t[PG_MAX_TARGETS]; /* their sizes */
	uint32_t nidle;                   /* idle connections to any target */
	uint32_t *free_slots;             /* stack of free slots */
	uint32_t nfree;
	uint32_t inflight;
	char head_prefix[PG_MAX_TARGETS][1200]; /* request head up to "Content-Length: " */
	size_t head_prefix_len[PG_MAX_TARGETS];
	/* arrivals waiting for a connection or a ready conversation */
	uint64_t *pending; /* FIFO ring of scheduled start times */
	size_t pend_head, pend_n, pend_cap;
	uint64_t arrivals;        /* arrivals created so far */
	bool issuing;             /* arrivals still being created */
	bool wl_blocked;          /* pg_wl_next had no conversation ready */
	uint64_t wl_unblocked_ns; /* when one last became ready after that */
	bool finished;            /* hard deadline passed: end the loop */
	bool closed_loop;         /* --concurrency without --rate */
	uint64_t stop_ns;         /* arrivals at or after this are not made (0: none) */
	struct pg_rng arrival_rng;
	uint64_t next_arrival_ns;
	uint64_t sched_next; /* schedule mode: the arrival the timer is set for */
	char rbuf[65536];    /* shared receive buffer */
};

/* conn.c */
/* Open a connection in slot c (state FREE). Returns 0, or -1 with errno. */
int pg_conn_open(struct pg_eng *e, struct pg_conn *c);
/*
 * Put the request (rec, wl) on connection c (CONNECTING or IDLE) and start
 * writing it. The request ends later through pg_eng_request_done.
 */
void pg_conn_start(struct pg_eng *e, struct pg_conn *c, size_t rec, struct pg_wl_req *wl);
/* Handle epoll events on c. */
void pg_conn_event(struct pg_eng *e, struct pg_conn *c, uint32_t events);
/* Close c's socket and mark its slot FREE (no request may be on it). */
void pg_conn_close(struct pg_eng *e, struct pg_conn *c);
/* End c's request with err (timeouts, aborts); closes c unless reusable. */
void pg_conn_fail(struct pg_eng *e, struct pg_conn *c, enum pg_err err);

/* engine.c */
/*
 * c's request has ended with err. conn.c has filled the record's response
 * fields; the engine stamps e2e, returns or closes the connection, and
 * issues what comes next. reusable: the connection may take another request.
 */
void pg_eng_request_done(struct pg_eng *e, struct pg_conn *c, enum pg_err err, bool reusable);
/* Intern an X-Backend-Id value; PG_NO_BACKEND when the table is full. */
uint16_t pg_eng_backend(struct pg_eng *e, const char *v, size_t n);

#endif /* PGLOAD_ENGINE_H */
