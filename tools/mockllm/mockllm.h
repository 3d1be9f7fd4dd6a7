/* SPDX-License-Identifier: MIT */
/*
 * mockllm: a simulated OpenAI-compatible inference server (one vLLM-like
 * instance) for prefixgate's end-to-end tests, demo and benchmarks.
 * Single-threaded: one epoll loop, timers on a heap driven through a timerfd,
 * so simulated time costs no CPU. State shared by the files of the program.
 */
#ifndef MOCKLLM_H
#define MOCKLLM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heap.h"
#include "lib/buf.h"
#include "lib/http.h"
#include "pd.h"
#include "prompt.h"
#include "sim.h"

#define MOCK_MAX_JSON_BODY (64u << 20) /* larger OpenAI request bodies: 413 */
#define MOCK_MAX_PIPELINED (1u << 20)  /* buffered input beyond the request */
#define MOCK_BULK_CHUNK    16384       /* X-Mock-Chunked: data per chunk */
#define MOCK_OUT_LOW       262144      /* generate bulk body below this */

/* Byte buffers are struct pg_buf (lib/buf.h); for output, off is how much
 * has been sent, for input how much has been parsed. mockllm cannot answer
 * without memory: it aborts rather than send a truncated message.
 * mock_room() is pg_buf_reserve() that aborts; mock_buf_ok() aborts if an
 * append to b failed, and is called before b's bytes are used. */
char *mock_room(struct pg_buf *b, size_t n);
void mock_buf_ok(const struct pg_buf *b);

enum route {
	R_HEALTH,
	R_MODELS,
	R_METRICS,
	R_CHAT,
	R_COMPLETIONS,
	R_INVOCATIONS,
	R_MATCH_CHAT,        /* /mock/match/v1/chat/completions */
	R_MATCH_COMPLETIONS, /* /mock/match/v1/completions */
	R_SPEED,             /* /mock/speed */
	R_OTHER,
	R_COUNT,
};

enum mock_fail { FAIL_NONE = 0, FAIL_RESET, FAIL_CLOSE, FAIL_RESET_MID, FAIL_CLOSE_MID };

/* How a connection is waiting, besides I/O. */
enum ctimer {
	CT_NONE = 0,
	CT_DELAY,
	CT_CHUNK,
	CT_RST_WAIT,
	CT_LINGER,
	CT_PD_WAIT, /* a decode leg waits for its KV: the timeout */
	CT_PD_XFER, /* its KV arrives: the transfer time */
};

enum phase {
	PH_HEAD,   /* reading a request head */
	PH_BODY,   /* reading its body */
	PH_WORK,   /* body read; producing the response */
	PH_LINGER, /* response sent before closing: draining input, then close */
	PH_DEAD,   /* closed, freed at the end of the loop iteration */
};

/* The request being answered on a connection (one at a time: pipelined
 * requests wait in the input buffer, so responses go out in order). */
struct mreq {
	enum route route;
	bool is_get, is_post, is_head, keep_alive;
	enum pg_body_kind body_kind;
	uint64_t body_left;
	struct pg_frame ck;
	bool want_body; /* keep the body: an OpenAI endpoint needs its JSON */
	struct pg_buf body;
	uint64_t body_len;
	uint32_t crc;
	/* test knobs, -1 when absent */
	int64_t delay_ms, chunks, chunk_interval_ms, resp_bytes;
	bool resp_chunked;
	enum mock_fail fail;
	/* generation */
	bool chat;
	struct prompt_req pr;
	uint64_t *hashes;
	struct sim_req sim;
	uint32_t prompt_tokens, cached_tokens, out_tokens, sent_tokens;
	uint64_t seq, created;
	bool delayed; /* X-Mock-Delay-Ms already waited */
	uint64_t rid; /* hash of its X-Request-Id (a pair's legs share it); 0: none */
	/* prefill/decode disaggregation (pd.c): the leg it is */
	struct pd_req pd;
	struct side *side;  /* decode leg: its side connection while it waits */
	bool pd_wait;       /* decode leg: waiting for its KV */
	bool pd_done;       /* prefill leg: its KV pinned or handed to its rooms */
	uint64_t rooms_got; /* SGLang decode leg: bit k, room[k]'s KV arrived */
	uint32_t pd_skip;   /* vLLM decode leg: blocks it held itself */
	uint64_t pd_first;  /* vLLM prefill leg: its blocks' first id (0: none) */
	uint32_t pd_blocks; /* ... and how many */
	/* The identity fields the request carried, as "X-Seen-<name>: value"
	 * lines for the response (what a proxy in front added or kept). */
	char seen[896];
	size_t seen_len;
};

/* Deterministic bulk body generator (X-Mock-Response-Bytes). */
struct bulk {
	bool active;
	bool chunked;
	uint64_t total;   /* body bytes */
	uint64_t stop_at; /* generate only this many (reset-mid-body) */
	uint64_t made;    /* body bytes generated so far */
};

struct conn {
	int fd;
	enum phase phase;
	uint32_t events; /* registered epoll events */
	struct pg_buf in, out;
	struct mreq req;
	struct bulk bulk;
	bool rd_eof;      /* peer finished sending */
	bool close_after; /* close once out is sent */
	bool rst_after;   /* reset once out is sent (reset-mid-body) */
	bool fin_after;   /* close cleanly once out is sent (close-mid-body) */
	bool dirty;
	bool in_process; /* inside process(): do not re-enter */
	enum ctimer tkind;
	struct heap_node timer;
	uint32_t rst_polls;
	struct conn *next_dirty, *next_dead;
};

struct config {
	const char *listen;
	char id[64];
	const char *model;
	struct sim_params sim;
	bool cache_output; /* cache output blocks too (not --no-cache-output) */
	char host[256];    /* --listen's address, unbracketed */
};

struct server {
	struct config cfg;
	int epfd, lfd, tfd;
	bool accept_paused;
	uint64_t tfd_armed;
	uint64_t now; /* CLOCK_MONOTONIC ns, read once per loop iteration */
	struct sim *sim;
	struct heap timers;
	struct conn *dirty, *dead;
	uint64_t seq;
	uint64_t requests[R_COUNT];
	uint64_t conns_open;
	uint64_t conns_accepted;
};

extern struct server g_srv;

/* conn.c */
void conn_accept_all(void);
void conn_event(struct conn *c, uint32_t events);
void conn_mark_dirty(struct conn *c);
void conn_flush_dirty(void);
void conn_free_dead(void);
void conn_close(struct conn *c, bool reset);
void conn_set_timer(struct conn *c, enum ctimer kind, uint64_t delay_ns);
void conn_timer_fired(struct conn *c);
void conn_response_done(struct conn *c);

/* routes.c */
void route_request(struct conn *c);
void route_timer(struct conn *c, enum ctimer kind); /* CT_DELAY or CT_CHUNK fired */
void route_sim_token(void *ctx, struct sim_req *r, bool last);
void route_release(struct conn *c); /* free per-request generation state */
/* Generate c's completion now (its prompt parsed, its KV there). */
void route_go(struct conn *c);
/* c's request is being worked on (simulated, or waiting for its KV): a
 * client that goes away aborts it. */
bool route_busy(const struct conn *c);
/* Parse c's OpenAI body (chat if c->req.chat) into c->req.pr, hashes (the
 * output's blocks too if with_output and they are cached) and
 * prompt_tokens, as the completion endpoints do. -1: answered (400, 500). */
int route_parse_prompt(struct conn *c, bool with_output);

/* usage.c: what --help prints */
extern const char mock_usage[];

/* metrics.c: GET /metrics */
void metrics(struct conn *c);

/* mockapi.c: the /mock/ endpoints */
void mock_match(struct conn *c);
void mock_speed(struct conn *c);

/* http_out.c */
void out_head(struct conn *c, int status, const char *ctype, int64_t content_length,
              const char *extra);
void out_simple(struct conn *c, int status, const char *ctype, const char *body, size_t len);
void out_error(struct conn *c, int status, const char *msg);
void out_chunk(struct conn *c, const char *data, size_t len);
void out_chunk_end(struct conn *c);
void out_bulk_start(struct conn *c, uint64_t total, bool chunked, uint64_t stop_at);
bool out_bulk_fill(struct conn *c); /* true when the bulk body is complete */
void bulk_pattern(uint64_t offset, char *dst, size_t len);

#endif /* MOCKLLM_H */
