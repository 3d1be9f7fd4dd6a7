/* SPDX-License-Identifier: MIT */
/*
 * mockllm as one instance of a prefill/decode pair (--role prefill|decode,
 * --pd-protocol vllm|sglang): the legs of pdreq.h served, the KV handed over
 * on a side connection (pd_side.c), the counts for /metrics. What the roles
 * do is described at the top of pd.c and in `mockllm --help`.
 */
#ifndef MOCKLLM_PD_H
#define MOCKLLM_PD_H

#include <stdbool.h>
#include <stdint.h>

#include "kvxfer.h"
#include "lib/buf.h"
#include "pdreq.h"
#include "rooms.h"

struct conn;
struct side;

/* What the flags set (main.c); durations in model time. */
struct pd_config {
	enum pd_role role;
	enum pd_proto proto;
	int side_port;          /* prefill: --kv-port / --bootstrap-port; 0: any */
	bool side_port_sglang;  /* it was given as --bootstrap-port */
	double ttl_ms;          /* --kv-transfer-ttl-ms */
	double wait_ms;         /* --kv-wait-timeout-ms */
	double kv_tokens_per_s; /* --kv-transfer-tokens-per-s */
	bool recompute;         /* --kv-load-failure-policy recompute */
	double time_scale;      /* --time-scale: model time / K is wall time */
};

/* The decode side's counts. */
enum pd_result { PDR_OK = 0, PDR_REFUSED, PDR_FAILED, PDR_TIMED_OUT, PDR__COUNT };

struct pd_state {
	struct pd_config cfg;
	char engine[64];        /* this instance's engine id (vLLM's remote_engine_id) */
	char host[PD_HOST_MAX]; /* the address decode instances reach the side port at */
	int lfd;                /* the side listener (prefill role), -1 */
	uint16_t port;          /* its port */
	struct xfer_table xfer; /* vLLM prefill: pinned transfers */
	struct rooms rooms;     /* SGLang prefill: bootstrap rooms */
	uint32_t waiting;       /* decode: requests waiting for their KV */
	uint64_t results[PDR__COUNT];
	uint64_t kv_tokens; /* decode: tokens whose KV arrived from a prefill */
	uint64_t side_accepted;
};

extern struct pd_state g_pd;

/* main.c, after the flags: the engine id, and (prefill) the side listener
 * on listen_host. Exits with a message when the port cannot be bound. */
void pd_setup(const char *listen_host, const char *id);
/* An epoll event for pd (the side listener or a side connection): true
 * when p was pd's and the event was handled. */
bool pd_event(void *p, uint32_t events);

/* routes.c */
/* The leg c's body is (c->req.pd); -1: answered with a 400. Before the
 * body is parsed for its prompt (which frees it). */
int pd_parse(struct conn *c);
/* After the prompt is parsed: 0 serve it now (route_go), 1 waiting for its
 * KV (route_go follows, or an error answer), -1 answered. */
int pd_begin(struct conn *c);
/* A prefill leg's answer is being completed: pin its blocks (vLLM) or hand
 * its KV to its rooms (SGLang). Once per request. */
void pd_prefill_done(struct conn *c);
/* The vLLM prefill leg's kv_transfer_params, appended to its answer. */
void pd_params_json(struct conn *c, struct pg_buf *b);
void pd_timer(struct conn *c, int kind);
/* c's request ends: whatever it waits for is given up. */
void pd_release(struct conn *c);
/* metrics.c: the disaggregation series of /metrics. */
struct sim_stats;
void pd_metrics(struct pg_buf *b, const char *model, const struct sim_stats *st);

/* pd_side.c: connections of the side protocol (described in pd.c) */
int side_listen(const char *host, int port, uint16_t *bound);
void side_accept_all(void);
/* Dial host:port for owner; NULL with *err (static text) on failure. */
struct side *side_dial(const char *host, uint16_t port, struct conn *owner, const char **err);
void side_send(struct side *s, const char *p, size_t n);
/* Close now; the record is freed at the end of the loop iteration
 * (side_free_dead). */
void side_close(struct side *s);
/* Close once what was sent has left (an answer, then the end). */
void side_close_when_sent(struct side *s);
bool side_is_server(const struct side *s);
struct conn *side_owner(const struct side *s);
void side_disown(struct side *s);
/* The rooms a server-side connection registered (unregistered at close). */
int side_add_room(struct side *s, uint64_t room);
void side_event(struct side *s, uint32_t events);
void side_free_dead(void);
/* pd.c: a complete line (no LF) arrived on s; the connection ended (gone:
 * why it ended, NULL for a clean close by the peer). */
void pd_side_line(struct side *s, char *line, size_t n);
void pd_side_gone(struct side *s, const char *why);
/* pd_side.c, for pd.c's server side */
const uint64_t *side_rooms(const struct side *s, size_t *n);

#endif /* MOCKLLM_PD_H */
