/* SPDX-License-Identifier: MIT */
/*
 * Prefill/decode disaggregation in a worker (doc/routing.md "Prefill/decode
 * disaggregation"; lib/pd.h has the bodies, router/route.h pg_route_pd the
 * choice): a request of a pool with a decode set goes to a prefill
 * instance and a decode instance, as its protocol says.
 *
 * The decode leg is the exchange's ordinary attempt (x->up): its response
 * streams to the client by every path an ordinary one takes. The prefill
 * leg is a second backend connection of the exchange (pd->u, marked by
 * u->leg) whose answer is read here, never sent to the client: vLLM's is
 * collected (its kv_transfer_params go into the decode leg's body, sent
 * only then), SGLang's drained (both legs go at once). Each leg holds its
 * own in-flight slot and place in its instance's queue, given back exactly
 * once; both go when the client does.
 *
 * Failures before a response byte reached the client: a prefill that fails
 * (no connection, an error status, no answer in --first-byte-timeout)
 * gives way to another prefill instance, then to the decode instance
 * alone; a decode leg that fails is tried again with a fresh prefill (its
 * transfer parameters named blocks only that decode could pull). A vLLM
 * prefill answer without usable kv_transfer_params is a 502 saying so.
 */
#ifndef PG_PROXY_PD_H
#define PG_PROXY_PD_H

#include <stdbool.h>
#include <stddef.h>
#include "lib/buf.h"
#include "lib/http.h"
#include "proxy/conn.h"
#include "gateway.h"
#include "router/route.h"

/* Prefill instances a request tries before the decode instance serves it
 * alone; decode legs it tries with fresh prefills. */
#define PG_PD_PREFILL_TRIES 2
#define PG_PD_DECODE_TRIES  2
/* A prefill answer larger than this is a failed prefill (a 1-token answer
 * and its transfer parameters are a few KiB). */
#define PG_PD_ANSWER_MAX (1u << 20)

/* One disaggregated request (pg_exchange.pd). */
struct pg_pd_x {
	uint8_t proto; /* enum pg_pd */
	uint8_t route; /* enum pg_pd_route of the last choice */
	uint8_t ptries, dtries;
	struct pg_idset ptried, dtried;
	/* the request as it came: the forwarded head (before any attempt
	 * changed it) and the whole body, decoded */
	char *head, *body;
	size_t head_len, body_len;
	/* the body's parse, made once for every leg it sends (parsed: 0 not
	 * yet, 1 made, -1 not JSON) */
	struct pg_json req;
	int8_t parsed;
	/* the prefill leg */
	uint16_t prefill;
	struct pg_choice pchoice;
	struct pg_upstream *u; /* its connection; NULL: none under way */
	bool counted;          /* holds prefill's in-flight slot */
	struct pg_load_ticket load;
	uint64_t sent_ms;
	bool answered; /* sglang: its answer came (the decode may still be running) */
	bool fresh;    /* on a new connection (a kept one was found closed) */
	/* its answer: the head, then the body as it came (its end found by
	 * the connection's framing, u->frame, as any response's) */
	struct pg_buf ans;
	size_t ans_head; /* bytes of ans that are the head; 0: not complete */
	int status;
	bool chunked; /* its body is chunked (decoded when it is read) */
};

/* The pool is disaggregated: its requests are routed by pg_route_pd and
 * go through pg_pd_start (conn.h pg_dispatch). */
bool pg_pd_pool(const struct pg_gateway *gw, unsigned pool);

/* A request of disaggregated pool, before it is routed (its pg_exchange.pd). */
struct pg_pd_x *pg_pd_new(const struct pg_gateway *gw, unsigned pool);

/* Request c of a disaggregated pool was routed (pg_dispatch: x->pd->route,
 * its pair or its decode instance alone) and its body taken, whole or not
 * (too large to hold: it streams to the decode instance alone): sent
 * (c->state WAIT, or STREAM). true. */
bool pg_pd_start(struct pg_worker *w, struct pg_client *c, bool whole);

/* Send its legs as x->pd->route says (its body held whole): the prefill
 * leg, the decode leg (vLLM: once the prefill answered; SGLang: at once),
 * or the decode instance alone. */
void pg_pd_send(struct pg_worker *w, struct pg_client *c);

/* The decode leg failed before a response byte reached the client: a fresh
 * pair (or the decode alone) is tried, or the client answered 502. */
void pg_pd_decode_failed(struct pg_worker *w, struct pg_client *c, const char *why);

/* The exchange ends (reset): the prefill leg is closed, its slot given
 * back, the buffers freed. */
void pg_pd_free(struct pg_worker *w, struct pg_exchange *x);

/* The worker's tick: a prefill leg past --first-byte-timeout fails. */
void pg_pd_tick(struct pg_worker *w, struct pg_client *c);

/* The prefill leg's socket events (upstream.c hands a connection marked
 * u->leg here): bytes of its answer (the buffer is never kept); its end or
 * failure (why NULL: the connection closed, which ends an answer framed by
 * it; down: the instance is skipped for a while). */
bool pg_pd_leg_data(struct pg_worker *w, struct pg_upstream *u, const char *data, size_t len);
void pg_pd_leg_failed(struct pg_worker *w, struct pg_upstream *u, const char *why, bool down);

#endif /* PG_PROXY_PD_H */
