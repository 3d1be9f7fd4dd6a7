/* SPDX-License-Identifier: MIT */
/*
 * Flow control in a worker (doc/routing.md "Flow control"; lib/flow.h has the
 * order, state/flowctl.h the gateway-wide state): its queues, one per pool
 * that has had a request wait, and the requests' way through them.
 *
 * A request of a pool with flow control on (FlowControlConfig
 * InstanceQueueMs > 0) is routed at once while nothing of its pool waits
 * in this worker and some instance of the pool has less prefill queued
 * than InstanceQueueMs (router/route.h pg_route_room). Otherwise it waits,
 * its body held whole (PG_C_QUEUED), and is routed when an instance has
 * room, in the order of lib/flow.h: bound late, on the cache and load as
 * they are then. It leaves with a 429 when its deadline passes, when its
 * first token is predicted past it, when the queue's bounds make it the
 * newest sheddable one; at once when its client goes.
 */
#ifndef PG_PROXY_QUEUE_H
#define PG_PROXY_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include "lib/http.h"
#include "lib/key.h"
#include "proxy/conn.h"
#include "router/route.h"

/* A request that says nothing of its output (no max_tokens) is charged
 * this many output tokens: a typical chat answer (its work here, its
 * estimated completion tokens in usage accounting, proxy/quota.h). */
#define PG_FLOW_OUTPUT_DEFAULT 256

/* What is wrong with a request's flow control headers (pg_exchange.flow_bad). */
enum pg_flow_bad {
	PG_FLOW_BAD_NONE = 0,
	PG_FLOW_BAD_PRIORITY,    /* X-Prefixgate-Priority: not a class, or twice */
	PG_FLOW_BAD_DEADLINE,    /* X-Prefixgate-Deadline-Ms: not 1 to an hour, or twice */
	PG_FLOW_BAD_TENANT,      /* the tenant's header, twice */
	PG_FLOW_BAD_AUTH_SCHEME, /* Authorization, not "Bearer TOKEN" (tenant from it) */
};

/* The body bytes a request whose pool has flow control on holds before it
 * is routed, its key needing need: the whole body, so that it can wait
 * (length: its Content-Length, -1 chunked), up to PG_KEY_JSON_BODY_MAX; a
 * longer one cannot wait and is sent on (counted: pg_flow_stats.bypassed). */
static inline size_t pg_queue_hold(size_t need, int64_t length)
{
	if (length < 0)
		return need > PG_KEY_JSON_BODY_MAX ? need : PG_KEY_JSON_BODY_MAX;
	return (uint64_t)length <= PG_KEY_JSON_BODY_MAX && (uint64_t)length > need ? (size_t)length
	                                                                           : need;
}

/* Its head, just parsed: the tenant, class and deadline it names
 * (pg_exchange.tenant_key, prio_asked, deadline_ms, flow_bad). */
void pg_queue_head(struct pg_worker *w, struct pg_client *c, const struct pg_http_request *req);

/* Its key's bytes are in hand, in (n: bytes of c->in they are) and flow
 * control is on for its pool (rc's InstanceQueueMs): true when it goes on
 * to be routed now (in->budget_ms set from its deadline), false when it
 * waits (its body taken over, c->state PG_C_QUEUED) or was answered. */
bool pg_queue_arrive(struct pg_worker *w, struct pg_client *c, struct pg_route_input *in, size_t n,
                     const struct pg_route_cfg *rc);

/* It was routed, its prompt to be prefilled at the instance where chose
 * (its backend; a prefill/decode pair's prefill instance): its tenant is
 * charged its work while anyone waits (lib/flow.h). */
void pg_queue_charge(struct pg_worker *w, struct pg_client *c, const struct pg_choice *where);

/* It was not routed: its first token was predicted past its deadline
 * (choice.late). Answered 429. */
void pg_queue_late(struct pg_worker *w, struct pg_client *c);

/* It was sent on and its first token did not come by its deadline
 * (proxy/deadline.h): answered 429, counted as expired. */
void pg_queue_cut(struct pg_worker *w, struct pg_client *c);

/* It leaves the queue without being served (its exchange is reset: the
 * client went away, the gateway stops). */
void pg_queue_leave(struct pg_worker *w, struct pg_client *c);

/* Route what can go now and answer what is past its deadline (the loop
 * runs it after a turn that made room, on a wake-up, and every tick). */
void pg_queue_run(struct pg_worker *w);

/* Milliseconds until the next deadline of a request waiting here, or the
 * room its queue's next request waits for by time (UINT32_MAX: neither),
 * so the loop wakes up for it. */
uint32_t pg_queue_next_ms(const struct pg_worker *w);

/* This worker saw an instance's queue shrink (a first token, an attempt
 * ended): its own queues are run after this turn, the other workers with
 * requests waiting are woken. Costs an atomic load while none waits. */
void pg_queue_room(struct pg_worker *w);

/* Its queues' memory, at the worker's end. */
void pg_queue_free(struct pg_worker *w);

#endif /* PG_PROXY_QUEUE_H */
