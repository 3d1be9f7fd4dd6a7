/* SPDX-License-Identifier: MIT */
/*
 * The objects of the HTTP state machine and what its parts call of each
 * other:
 *  - struct pg_client: one client connection (client.c reads its requests);
 *  - struct pg_exchange: the request being served on it and its response,
 *    from the first byte of the request to the end of the response; reset
 *    whole between requests (dispatch.c: routed and sent on; exchange.c:
 *    attempts, retries, the end of a response, the gateway's own answers,
 *    timeouts);
 *  - struct pg_upstream: one backend connection (upstream.c: connecting,
 *    the response head and body; pool.c: idle keep-alive ones and lingering
 *    ones).
 * No part calls itself back through another: the end of a response and the
 * next pipelined request run from the worker's run list (worker.h), after
 * the event that caused them has returned.
 */
#ifndef PG_CONN_H
#define PG_CONN_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include "pg_frame.h"
#include "router/strategy.h"
#include "lib/flow.h"
#include "lib/http.h"
#include "lib/key.h"
#include "lib/trace_rec.h"
#include "lib/usage.h"
#include "proxy/io.h"
#include "router/load.h"

struct pg_worker;
struct pg_route_input;
struct pg_upstream;
struct pg_dp_conn;
struct pg_pd_x;

enum pg_client_state {
	PG_C_HEAD,    /* reading a request head */
	PG_C_KEY,     /* reading the body bytes the key needs */
	PG_C_QUEUED,  /* body held whole, waiting in the gateway (flow control, queue.h) */
	PG_C_STREAM,  /* dispatched; forwarding the rest of the body */
	PG_C_WAIT,    /* request fully sent; waiting for the response to end */
	PG_C_DISCARD, /* answered early: dropping the rest of its body (boundary.h) */
	PG_C_LINGER,  /* answered an error; draining input until close */
};
const char *pg_client_state_str(enum pg_client_state s);

/* A buffer request bytes are held in, and where it goes back: a heap
 * buffer of cap bytes (the worker's spares, lib/spare.h), or the provided
 * receive buffer bid, lent (the ring). Zeroed = none. */
struct pg_hold {
	char *buf;
	size_t cap;
	bool lent;
	uint16_t bid;
};

/* One request and its response. Zeroed = no request. */
struct pg_exchange {
	uint64_t t0_ns;    /* first byte of the request seen */
	uint8_t api;       /* enum pg_api */
	uint8_t minor;     /* HTTP/1.minor */
	bool keep_alive;   /* the client connection survives this exchange */
	bool head_method;  /* HEAD: the response has no body */
	bool resp_started; /* a response byte was queued to the client */
	bool counted;      /* holds an in-flight slot on backend */
	bool admitted;     /* holds a gateway-wide --max-in-flight slot */
	bool first_sent;   /* the request's first byte reached the backend socket */
	bool fwd_close;    /* "Connection: close" added to fwd (spliced attempt) */
	uint8_t attempts;
	int8_t pool; /* model pool (state/pools.h); PG_POOL_BY_MODEL: the body decides */
	uint16_t backend;
	uint16_t resp_status; /* status of the response being forwarded */
	uint64_t route_ns;    /* request start -> backend chosen, its wait apart (pg_dispatch) */
	uint64_t resp_bytes;  /* response bytes we gave the client: forwarded, or
	                       * the gateway's own answer (access log) */
	/* Its first token came (pg_exchange_first_token): a streamed 2xx
	 * response's first body byte; any other response's head. 0: none. */
	uint64_t ttft_ns;
	/* A spliced body (access log's bytes_out): at the hand-off, the client
	 * socket's carried bytes and resp_bytes (our queue was empty then). */
	bool dp_base;
	uint64_t dp_carried0, dp_resp0;
	uint64_t sent_ms; /* request handed to the backend (first-byte timeout) */
	/* The request body: what is left of it (no body: PG_FRAME_NONE). */
	struct pg_frame body;
	uint64_t body_seen; /* chunked: data bytes decoded so far (--max-body-size) */
	bool ch_done;       /* chunked: the last chunk and trailers were read */
	size_t ch_off;      /* chunked: raw bytes of c->in already decoded */
	size_t key_need;    /* body bytes the key needs */
	char *kbuf;         /* decoded chunked body held for the key */
	size_t klen, kcap;
	/* The body's JSON parsed as it arrives (PG_PARSE_AHEAD_MIN), with
	 * ahead_window (route.h pg_route_key_window; 0: not parsed ahead). */
	struct pg_json_stream *ahead;
	size_t ahead_window;
	char *hdr_key; /* X-Prefixgate-Key copy */
	size_t hdr_key_len;
	char *fwd; /* rewritten head (+ a re-framed chunked body held) */
	size_t fwd_len, fwd_cap;
	size_t fwd_head; /* length of the head in fwd */
	/* The X-Request-Id value in fwd (forward.h), echoed in the response
	 * and logged: fwd[id_off, id_off + id_len). */
	uint32_t id_off;
	uint8_t id_len;
	/* A Content-Length body held for the key: in the client's input buffer
	 * itself, taken over (not copied), or in the provided buffer it arrived
	 * in whole (lent: PG_LEND_BODY_MIN), given back once the response has
	 * begun and no send names it (pg_held_release); hold is that buffer.
	 * An attempt sends fwd, then held[0, held_len). */
	char *held;
	size_t held_len;
	struct pg_hold hold;
	uint64_t streamed; /* body bytes sent after fwd (no retry once > 0) */
	struct pg_key key;
	struct pg_choice choice;
	struct pg_idset tried;
	struct pg_upstream *up; /* the attempt's backend connection */
	/* The attempt's work in its backend's queue (router/load.h): taken
	 * with the in-flight slot, given back at the first token or with the
	 * slot. */
	struct pg_load_ticket load;
	/* The usage its answer reports (lib/usage.h; read from the body as
	 * the copy path passes it: a 2xx answer not compressed): its usage
	 * accounting (quota.h), and for a cache_aware choice that predicted a
	 * hit (cache_check), with its first token (ttft_ns), whether the hit
	 * held (router/capacity.h, cache_verdict in exchange.c) */
	struct pg_usage_parse usage;
	bool usage_on, cache_check;
	uint16_t
	    quota_tenant; /* slot + 1 of the tenant whose quota it counts in (quota.h); 0: none */
	/* Flow control (queue.h): what the head said of the request (its
	 * tenant's key and label, its class, its deadline, a header that was
	 * wrong), and its place in its worker's queue (fq.queued). */
	struct pg_flow_item fq;
	uint64_t tenant_key; /* 0: the head named none */
	char tenant_label[PG_FLOW_LABEL_MAX + 1];
	int8_t prio_asked;    /* enum pg_prio the head asked; -1: none */
	uint8_t flow_bad;     /* enum pg_flow_bad (queue.h); 0: none */
	bool flow_charged;    /* its tenant was charged its work */
	uint32_t deadline_ms; /* the head's X-Prefixgate-Deadline-Ms; 0: none */
	uint64_t queued_ns;   /* it began to wait (pg_now_ns, as t0_ns); 0: it did not */
	uint32_t wait_us;     /* how long it waited in the queue */
	/* Sent on with a deadline: its first token is due by cut_ms
	 * (CLOCK_MONOTONIC ms; 0: none), or it is cut (proxy/deadline.h). A
	 * streamed 2xx answer's head, as the client will get it, waits in
	 * head_wait for its first token meanwhile: until then, a 429 can still
	 * be the answer. */
	uint64_t cut_ms;
	char *head_wait;
	size_t head_wait_len;
	/* Prefill/decode disaggregation (pd.h): its two legs; NULL unless its
	 * pool has a decode set. */
	struct pg_pd_x *pd;
	struct pg_trace_x trace; /* OpenTelemetry (proxy/tracing.h); zeroed: not traced */
};

/* A list of clients, oldest first (the worker's idle and busy lists). */
struct pg_clist {
	struct pg_client *head, *tail;
};

struct pg_client {
	struct pg_sock s;              /* first member */
	struct pg_clist *list;         /* the worker's list it is on: idle or busy */
	struct pg_client *prev, *next; /* on it */
	struct pg_client *run_next;    /* on the worker's run list */
	bool scheduled;                /* on it */
	enum pg_client_state state;
	/* Received bytes not yet consumed: in[0, in_len), inside the buffer
	 * in_buf of in_cap bytes (input.h). */
	char *in;
	size_t in_len;
	char *in_buf;
	size_t in_cap;
	size_t head_scan; /* pg_http_head_ready() progress */
	uint64_t linger_until_ms;
	uint64_t last_rx_ms;    /* client bytes last received (timeouts) */
	uint64_t idle_since_ms; /* waiting for a request since then */
	uint64_t discard_left;  /* PG_C_DISCARD: body bytes still to drop */
	/* The peer's address as text (X-Forwarded-For, the access log); empty
	 * if it could not be read. */
	char peer[INET6_ADDRSTRLEN];
	uint8_t peer_len;
	struct pg_exchange x;
};

/* Which path carries a backend connection's response body (datapath.h). */
enum pg_dp_path { PG_DP_COPY = 0, PG_DP_SKB = 1, PG_DP_MSG = 2 };

enum pg_up_state {
	PG_U_HEAD,   /* reading the response head (the request may still be going) */
	PG_U_BODY,   /* forwarding the body; frame finds its end */
	PG_U_DONE,   /* the response is complete; its end is on the run list */
	PG_U_IDLE,   /* in the pool */
	PG_U_LINGER, /* done, waiting for the backend to close first */
};
const char *pg_up_state_str(enum pg_up_state s);

struct pg_upstream {
	struct pg_sock s; /* first member */
	enum pg_up_state state;
	uint16_t backend;
	uint32_t epoch;
	bool reused;         /* came from the pool */
	bool keep_alive;     /* may go back to the pool after this response */
	bool peer_closed;    /* the backend's EOF or error was read */
	bool early;          /* its response head came while request bytes were owed */
	bool leg;            /* a prefill leg's: its answer goes to pd.c, not the client */
	struct pg_client *c; /* NULL while idle or lingering */
	struct pg_upstream *pool_next; /* pool or linger list */
	uint64_t idle_since_ms;
	/* The response body: where it stands (PG_FRAME_NONE: it ends with the
	 * connection). One representation, shared with the kernel paths. */
	struct pg_frame frame;
	char *hbuf; /* response head being assembled */
	size_t hlen, hcap;
	struct pg_dp_conn *dp; /* kernel data path state (datapath.c); NULL: copy */
	/* An exchange's request buffers (fwd, hold) that a send still named
	 * when this connection closed: released when it is freed. */
	char *sent_fwd;
	struct pg_hold sent_hold;
};

/* --- client.c ---------------------------------------------------------------- */
struct pg_client *pg_client_new(struct pg_worker *w, int fd);
/* Run the request state machine as far as the input allows. */
void pg_client_advance(struct pg_worker *w, struct pg_client *c);
/* Close now (request_reset first). */
void pg_client_close(struct pg_worker *w, struct pg_client *c);
/* Close gracefully: flush, shut our side, drain input for a while. */
void pg_client_linger(struct pg_worker *w, struct pg_client *c);
/* Run pg_client_advance from the run list. */
void pg_client_schedule(struct pg_worker *w, struct pg_client *c);

/* --- dispatch.c -------------------------------------------------------------- */
/*
 * A request routed and sent on: the one path every request takes to its
 * backend, whether it comes straight from its client (client.c, once its
 * key's bytes are in hand), from flow control's queue (queue.c), again
 * after a failed attempt (exchange.c) or a failed leg (pd.c), and whether
 * its pool serves it from one instance or from a prefill/decode pair.
 * Done once there, for all of them: the routing call (router/route.h), the
 * routing and decision latencies (ns, on one clock: pg_now_ns), the
 * answers to a request that cannot be routed (429 when its first token is
 * predicted past its deadline, else 502), its tenant charged (queue.h),
 * the parse made as its body arrived dropped, the attempt started
 * (pg_attempt, or pd.h's legs). A retry is routed on the key the first
 * decision computed, the backends it tried excluded; it is neither timed
 * nor charged again.
 */
/* Route request c and send it on. in: its key's bytes (and in->budget_ms
 * from its deadline); n: bytes of c->in that are its body, to be taken
 * over (pg_body_take; a request that waited, x->queued_ns set, holds its
 * body whole already); t_ns: when it was ready to be routed (pg_now_ns:
 * its body's last piece in hand, or its turn in the queue), the decision's
 * latency runs from then. Its routing latency runs from its first byte,
 * less its wait in the queue (x->queued_ns to t_ns). false when it was
 * answered (429, 502); true once under way (c->state STREAM or WAIT). */
bool pg_dispatch(struct pg_worker *w, struct pg_client *c, struct pg_route_input *in, size_t n,
                 uint64_t t_ns);
/* What failed, and so how a request goes again. */
enum pg_again {
	PG_AGAIN_ATTEMPT, /* its attempt: another backend of its pool, none it tried */
	PG_AGAIN_PREFILL, /* its prefill leg: another prefill instance, the same decode one */
	PG_AGAIN_ALONE,   /* its prefill legs, as many as it tries: the decode instance alone */
	PG_AGAIN_PAIR,    /* its decode leg: a fresh pair (pd.h) */
};
/* Route c again after a failure (what) and send it on, or answer 502 when
 * nothing is left to try. */
void pg_dispatch_again(struct pg_worker *w, struct pg_client *c, enum pg_again what);

/* --- slot.c ------------------------------------------------------------------ */
/* A request's work (key) on backend id, as choice estimated it (the
 * load ticket's, router/load.h): its prompt less what id was believed to
 * hold, at least a token. */
static inline uint32_t pg_work_on(const struct pg_key *key, const struct pg_choice *ch, uint16_t id)
{
	uint32_t held = ch->est[0].id == id ? ch->est[0].matched : 0;

	return key->tokens > held ? key->tokens - held : 1;
}
/* Backend id takes an attempt or a prefill leg: an in-flight slot
 * (*counted: held) counting decision, and work's place in its queue (t). */
void pg_slot_take(struct pg_worker *w, uint16_t id, unsigned decision, uint32_t work,
                  struct pg_load_ticket *t, bool *counted);
/* Both given back, each at most once (pg_exchange_no_token for t). */
void pg_slot_give(struct pg_worker *w, uint16_t id, struct pg_load_ticket *t, bool *counted);
/* Ticket t of client c's exchange (its own, c->x.load, or its prefill
 * leg's) saw its first token at now_ns: its work leaves the backend's
 * queue and its time is learned (pg_load_first); its own: the client's
 * first token (x->ttft_ns); flow control's queues are woken to the room
 * made (queue.h pg_queue_room). Wherever a first token is seen: the first
 * body byte of a streamed response (upstream.c), a prefill's answer
 * (pd.c). No-op unless t is pending. */
void pg_exchange_first_token(struct pg_worker *w, struct pg_client *c, struct pg_load_ticket *t,
                             uint64_t now_ns);
/* The same for an answer that does not stream, at its head (whole by
 * then): its work leaves the queue if it had not (pg_load_answered), the
 * client's TTFT is its head; the queues are woken. */
void pg_exchange_answered(struct pg_worker *w, struct pg_client *c, struct pg_load_ticket *t,
                          uint64_t now_ns);
/* The same at the workers' tick (now_ms) for an answer that does not
 * stream, past its first token's predicted time on a measured speed
 * (pg_load_due): its work leaves the queue, the queues are woken. */
void pg_exchange_due(struct pg_worker *w, struct pg_load_ticket *t, uint64_t now_ms);
/* Ticket t ends without a first token or an answer (an error's or a
 * HEAD's response, an attempt or a prefill leg that ends): its work
 * leaves the queue, nothing learned, and the queues are woken the same.
 * No-op unless t is pending. */
void pg_exchange_no_token(struct pg_worker *w, struct pg_load_ticket *t);

/* --- exchange.c -------------------------------------------------------------- */
/* Forget the current request: its slots, backend connection and buffers. */
void pg_exchange_reset(struct pg_worker *w, struct pg_client *c);
/* Release the buffers an exchange owns (pg_exchange_reset does, and a
 * client being freed): freed, or kept for the next requests (the body's,
 * the parse made as it arrived: w->spares, w->ahead_spare); nothing else
 * is released. */
void pg_exchange_free(struct pg_worker *w, struct pg_exchange *x);
/* Answer status with a JSON error and close (or just close mid-response). */
void pg_client_error(struct pg_worker *w, struct pg_client *c, int status, const char *msg);
/* The same with a JSON body of the gateway's own (len bytes): an answer
 * (GET /v1/models) or an error in the API's own form (model_not_found). */
void pg_client_answer(struct pg_worker *w, struct pg_client *c, int status, const char *body,
                      size_t len);
/* Send the request to backend id (a pooled connection unless fresh). */
void pg_attempt(struct pg_worker *w, struct pg_client *c, uint16_t id, unsigned decision,
                bool fresh);
/* The attempt is given up, not failed (prefill/decode: its pair goes
 * again): its connection closed, its slot given back. */
void pg_attempt_abandon(struct pg_worker *w, struct pg_client *c);
/* The attempt failed before a response byte reached the client: retry
 * elsewhere (or fresh) while possible, else answer 502. */
void pg_attempt_failed(struct pg_worker *w, struct pg_client *c, const char *why, bool mark_down);
/* Give h's buffer back (to the worker's spares, or a lent one to the
 * worker's receive buffers); h is then empty. */
void pg_hold_give(struct pg_worker *w, struct pg_hold *h);
/* A lent body's provided buffer back to the worker once nothing can send it
 * again: the response has begun (no retry) and no send of u names it. */
void pg_held_release(struct pg_worker *w, struct pg_exchange *x, const struct pg_upstream *u);
/* The backend sent the whole response (run from the run list). */
void pg_response_end(struct pg_worker *w, struct pg_client *c);
/* The backend failed mid-response: the client gets what was sent, then a close. */
void pg_backend_broke(struct pg_worker *w, struct pg_client *c);
/* Answer 429 (flow control, queue.h; quotas, quota.h) with an OpenAI-style
 * error of code and msg and Retry-After; the connection goes on if the
 * request allowed it, after the rest of its body if any is dropped, or
 * closes (boundary.h pg_after_answer). */
void pg_client_throttled(struct pg_worker *w, struct pg_client *c, const char *code,
                         const char *msg, unsigned retry_after_s);
/* The client went away (EOF, reset or a failed send). */
void pg_client_gone(struct pg_worker *w, struct pg_client *c);
void pg_proxy_tick(struct pg_worker *w);
/* A backend's report came (gw->reports moved): the answers that do not
 * stream of this worker's clients leave their queues if it shows them
 * begun (router/load.h pg_load_due). A pass walks every busy client: at
 * most one each PG_REPORTS_PASS_MS (a fleet of many backends reports
 * hundreds of times a second). */
void pg_proxy_reports(struct pg_worker *w);
#define PG_REPORTS_PASS_MS 10
void pg_proxy_shutdown(struct pg_worker *w);

/* --- upstream.c -------------------------------------------------------------- */
/* A new connection to backend id, connecting; path: how its response
 * should travel (copy if the kernel path cannot be set up). */
struct pg_upstream *pg_upstream_new(struct pg_worker *w, uint16_t id, enum pg_dp_path path,
                                    struct pg_client *c);
void pg_upstream_close(struct pg_worker *w, struct pg_upstream *u);
/* Attach u to client c's exchange and send it the request. */
void pg_upstream_start(struct pg_worker *w, struct pg_upstream *u, struct pg_client *c);
/* Take back the body's state after bytes the kernel redirected; true if
 * the body is complete (the response's end is then scheduled). */
bool pg_upstream_take_frame(struct pg_worker *w, struct pg_upstream *u, const struct pg_frame *f);
/* Bytes from the backend the proxy must decode itself (also used by the
 * datapath when it reads a socket directly). */
bool pg_upstream_input(struct pg_worker *w, struct pg_upstream *u, char *data, size_t len, int bid);
void pg_upstream_ended(struct pg_worker *w, struct pg_upstream *u, int err);

/* --- pool.c ------------------------------------------------------------------ */
/* Backend connection u, its response just ended, may go back to the pool
 * by boundary.h's rules (pg_reuse_ok, on u's facts): whether its request
 * was read whole from its client (request_complete) and was HEAD. */
bool pg_pool_reusable(const struct pg_worker *w, const struct pg_upstream *u, bool request_complete,
                      bool head_request);
/* An idle keep-alive connection to backend id (NULL if none is usable). */
struct pg_upstream *pg_pool_get(struct pg_worker *w, uint16_t id);
void pg_pool_put(struct pg_worker *w, struct pg_upstream *u);
/* Take u off the pool or linger list it is on. */
void pg_pool_remove(struct pg_worker *w, struct pg_upstream *u);
/* A finished connection that was asked to close (spliced response): wait
 * for the backend's FIN before closing, so TIME_WAIT stays on its side and
 * not on the ephemeral port each spliced request binds; closed by its EOF
 * or after PG_LINGER_MS. */
void pg_upstream_linger(struct pg_worker *w, struct pg_upstream *u);
/* Close pooled connections idle too long or to a changed/removed member,
 * and lingering ones past PG_LINGER_MS. */
void pg_pool_tick(struct pg_worker *w);
void pg_pool_close_all(struct pg_worker *w);

#endif /* PG_CONN_H */
