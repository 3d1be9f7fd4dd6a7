// SPDX-License-Identifier: MIT
/* Flow control in a worker (queue.h). */
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "proxy/body.h"
#include "proxy/queue.h"
#include "proxy/tls.h"
#include "proxy/worker_state.h"
#include "state/flowctl.h"
#include "sys/lifecycle.h"

#define FLOW_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define FLOW_SUB(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_RELAXED)

static struct pg_client *client_of(struct pg_flow_item *it)
{
	return (struct pg_client *)((char *)it - offsetof(struct pg_client, x.fq));
}

static unsigned pool_of(const struct pg_exchange *x)
{
	return x->pool > 0 ? (unsigned)x->pool : 0;
}

/* --- the head ---------------------------------------------------------------- */

/* The tenant header's value (Authorization's token, or --flow-tenant
 * header:NAME's), into x; false when it is there twice. */
static bool head_tenant(struct pg_flowctl *f, struct pg_exchange *x,
                        const struct pg_http_request *req)
{
	const struct pg_http_header *h = NULL;
	const char *v;
	size_t n;

	for (size_t i = 0; i < req->nheaders; i++) {
		const struct pg_http_header *e = &req->headers[i];
		bool match = f->src == PG_TENANT_BEARER
		                 ? e->kind == PG_HF_AUTHORIZATION
		                 : strlen(f->header) == e->name.len &&
		                       !strncasecmp(e->name.p, f->header, e->name.len);

		if (!match)
			continue;
		if (h)
			return false;
		h = e;
	}
	if (!h)
		return true;
	v = h->value.p;
	n = h->value.len;
	if (f->src == PG_TENANT_BEARER && pg_flow_bearer(h->value.p, h->value.len, &v, &n)) {
		x->flow_bad = PG_FLOW_BAD_AUTH_SCHEME;
		return true;
	}
	x->tenant_key = pg_flow_label(v, n, f->src == PG_TENANT_BEARER, x->tenant_label);
	return true;
}

void pg_queue_head(struct pg_worker *w, struct pg_client *c, const struct pg_http_request *req)
{
	struct pg_flowctl *f = w->gw->flow;
	struct pg_exchange *x = &c->x;
	bool prio = false, deadline = false;

	x->prio_asked = -1;
	if (!f)
		return;
	for (size_t i = 0; i < req->nheaders && !x->flow_bad; i++) {
		const struct pg_http_header *h = &req->headers[i];
		enum pg_prio p;

		if (h->kind == PG_HF_X_PREFIXGATE_PRIORITY) {
			if (prio || pg_flow_prio_parse(h->value.p, h->value.len, &p))
				x->flow_bad = PG_FLOW_BAD_PRIORITY;
			x->prio_asked = (int8_t)p;
			prio = true;
		} else if (h->kind == PG_HF_X_PREFIXGATE_DEADLINE_MS) {
			if (deadline ||
			    pg_flow_deadline_parse(h->value.p, h->value.len, PG_FLOW_DEADLINE_MAX,
			                           &x->deadline_ms))
				x->flow_bad = PG_FLOW_BAD_DEADLINE;
			deadline = true;
		}
	}
	if (f->src == PG_TENANT_CERT) /* TLS hook: the client certificate's subject */
		x->tenant_key = pg_tls_tenant(&c->s, x->tenant_label);
	else if (f->src != PG_TENANT_USER && !x->flow_bad && !head_tenant(f, x, req))
		x->flow_bad = PG_FLOW_BAD_TENANT;
}

/* --- answers ----------------------------------------------------------------- */

static const char *bad_text(enum pg_flow_bad b)
{
	switch (b) {
	case PG_FLOW_BAD_PRIORITY:
		return "X-Prefixgate-Priority: expected one of critical, standard, sheddable "
		       "(once)";
	case PG_FLOW_BAD_DEADLINE:
		return "X-Prefixgate-Deadline-Ms: expected milliseconds, 1 to 3600000 (once)";
	case PG_FLOW_BAD_TENANT:
		return "the tenant header is given twice";
	case PG_FLOW_BAD_AUTH_SCHEME:
		return "Authorization: expected \\\"Bearer TOKEN\\\" (the tenant is its token)";
	default:
		return "";
	}
}

enum refusal { R_EXPIRED, R_LATE, R_CUT, R_SHED, R_FULL };

/* Answer a request flow control will not send on (it is out of the queue). */
static void refuse(struct pg_worker *w, struct pg_client *c, enum refusal why, uint64_t waited_ms)
{
	static const struct {
		const char *code, *msg;
		size_t off;
	} r[] = {
	    [R_EXPIRED] = {"deadline_exceeded", "the request's deadline passed while it waited",
	                   offsetof(struct pg_flow_stats, expired)},
	    [R_LATE] = {"deadline_exceeded",
	                "the request's first token is predicted past its deadline",
	                offsetof(struct pg_flow_stats, late)},
	    [R_CUT] = {"deadline_exceeded",
	               "the request's first token did not come by its deadline",
	               offsetof(struct pg_flow_stats, expired)},
	    [R_SHED] = {"shed", "sheddable request dropped for a request of a higher class",
	                offsetof(struct pg_flow_stats, shed)},
	    [R_FULL] = {"queue_full", "the gateway's queue is full",
	                offsetof(struct pg_flow_stats, refused)},
	};
	struct pg_flowctl *f = w->gw->flow;
	struct pg_flow_stats *st = &w->gw->maps.flow[pool_of(&c->x)];
	unsigned retry = (unsigned)((waited_ms + 999) / 1000);

	FLOW_ADD((uint64_t *)((char *)st + r[why].off), 1);
	if (why == R_EXPIRED || why == R_SHED) /* the access log's queue_us */
		c->x.wait_us =
		    waited_ms * 1000 < UINT32_MAX ? (uint32_t)(waited_ms * 1000) : UINT32_MAX;
	FLOW_ADD(&f->ts[c->x.fq.tenant].refused, 1);
	pg_client_throttled(w, c, r[why].code, r[why].msg, retry ? retry : 1);
}

/* --- the queue --------------------------------------------------------------- */

/* Where this worker's next request of pool stands (lib/flow.h
 * pg_flow_rank), for the other workers to see; returns it. */
static uint64_t publish(struct pg_worker *w, unsigned pool, uint64_t now)
{
	struct pg_flowctl *f = w->gw->flow;
	struct pg_flow_q *q = w->fq[pool];
	uint64_t rank = q ? pg_flow_rank(q, &f->tenants, &f->lim, now,
	                                 pg_flow_next(q, &f->tenants, &f->lim, now))
	                  : UINT64_MAX;

	__atomic_store_n(&f->wake[w->id].best[pool], rank, __ATOMIC_RELAXED);
	return rank;
}

static void stats_in(struct pg_worker *w, struct pg_flow_stats *st, const struct pg_flow_item *it)
{
	struct pg_flowctl *f = w->gw->flow;

	FLOW_ADD(&st->queued, 1);
	FLOW_ADD(&st->queued_class[it->prio], 1);
	FLOW_ADD(&st->queued_bytes, it->bytes);
	FLOW_ADD(&f->queued, 1);
	FLOW_ADD(&f->wake[w->id].waiting, 1);
}

/* it left queue q (pg_flow_remove done). */
static void stats_out(struct pg_worker *w, unsigned pool, const struct pg_flow_item *it)
{
	struct pg_flowctl *f = w->gw->flow;
	struct pg_flow_stats *st = &w->gw->maps.flow[pool];

	FLOW_SUB(&st->queued, 1);
	FLOW_SUB(&st->queued_class[it->prio], 1);
	FLOW_SUB(&st->queued_bytes, it->bytes);
	FLOW_SUB(&f->queued, 1);
	FLOW_SUB(&f->wake[w->id].waiting, 1);
}

/* The memory a waiting request holds: its connection, its body, its head. */
static uint32_t held_bytes(const struct pg_client *c)
{
	const struct pg_exchange *x = &c->x;
	size_t n = sizeof(*c) + x->hold.cap + x->fwd_cap + x->kcap + c->in_cap + x->hdr_key_len;

	return n < UINT32_MAX ? (uint32_t)n : UINT32_MAX;
}

/* Its class: the head's, held to its tenant's (a tenant configured
 * sheddable cannot ask for critical); else its tenant's; else standard. */
static uint8_t class_of(const struct pg_flowctl *f, const struct pg_exchange *x, unsigned tenant)
{
	int cap = __atomic_load_n(&f->tenants.t[tenant].prio, __ATOMIC_RELAXED);
	int p = x->prio_asked >= 0 ? x->prio_asked : cap >= 0 ? cap : PG_PRIO_STANDARD;

	return (uint8_t)(cap >= 0 && p < cap ? cap : p);
}

/* Its work in units of lib/flow.h: prompt tokens not cached (as routing
 * believed at the instance ch chose, where they are prefilled) and its
 * output. */
static uint64_t cost_of(const struct pg_exchange *x, const struct pg_choice *ch)
{
	return (uint64_t)pg_work_on(&x->key, ch, ch->backend) +
	       (x->key.max_tokens ? x->key.max_tokens : PG_FLOW_OUTPUT_DEFAULT);
}

/* Its tenant's slot: the head's, or (--flow-tenant user) its body's "user". */
static unsigned tenant_of(struct pg_flowctl *f, struct pg_exchange *x, const char *body, size_t len)
{
	if (f->src == PG_TENANT_USER && x->key.user_len &&
	    (size_t)x->key.user_off + x->key.user_len <= len)
		x->tenant_key =
		    pg_flow_label(body + x->key.user_off, x->key.user_len, false, x->tenant_label);
	return pg_flow_tenant(&f->tenants, x->tenant_key, x->tenant_label);
}

/* A body that arrived whole in a provided buffer (lent) would hold a
 * receive buffer while it waits: copied out, the buffer given back. */
static void own_body(struct pg_worker *w, struct pg_exchange *x)
{
	char *copy;

	if (!x->hold.lent)
		return;
	copy = malloc(x->held_len ? x->held_len : 1);
	if (!copy)
		abort(); /* out of memory: as pg_bytes_append */
	memcpy(copy, x->held, x->held_len);
	pg_hold_give(w, &x->hold);
	x->held = copy;
	x->hold = (struct pg_hold){.buf = copy, .cap = x->held_len ? x->held_len : 1};
}

/* How long the oldest request of q has waited, ms. */
static uint64_t oldest_wait(const struct pg_flow_q *q, uint64_t now)
{
	uint64_t oldest = now;

	for (unsigned c = 0; c < PG_PRIO_COUNT; c++)
		if (q->cls[c].head && q->cls[c].head->enq_ms < oldest)
			oldest = q->cls[c].head->enq_ms;
	return now - oldest;
}

/* How often a worker takes the present tenants' share (lib/flow.h
 * pg_flow_share, a scan of the tenant table): a tenant that comes back
 * holds the others to it within this long. */
#define SHARE_EVERY_MS 100

/*
 * The class a request of class prio and tenant t is routed as at now: the
 * room it waits for and is sent to (router/route.h pg_route_class_room,
 * its choice's). Its own, but a standard request of a tenant ahead of its
 * share (lib/flow.h pg_flow_ahead) is routed as sheddable, to an instance
 * with nothing queued: a tenant behind it that comes then waits for the
 * prefill under way at most, not for that and a request of the tenant
 * ahead queued behind it. Fair sharing orders the gateway's queue; this
 * keeps the instances' queues from undoing it.
 */
static uint8_t routed_class(struct pg_worker *w, uint8_t prio, unsigned t, uint64_t now)
{
	struct pg_flow_tenants *ts = &w->gw->flow->tenants;

	if (prio != PG_PRIO_STANDARD)
		return prio;
	if (now >= w->flow_share.when_ms + SHARE_EVERY_MS)
		pg_flow_share(ts, now, &w->flow_share);
	return pg_flow_ahead(ts, &w->flow_share, t) ? PG_PRIO_SHEDDABLE : prio;
}

static uint64_t deadline_of(const struct pg_exchange *x, const struct pg_route_cfg *rc)
{
	uint32_t rel = x->deadline_ms ? x->deadline_ms : rc->flow_deadline_ms;

	return rel ? x->t0_ns / 1000000 + rel : 0;
}

bool pg_queue_arrive(struct pg_worker *w, struct pg_client *c, struct pg_route_input *in, size_t n,
                     const struct pg_route_cfg *rc)
{
	struct pg_flowctl *f = w->gw->flow;
	struct pg_exchange *x = &c->x;
	const unsigned pool = in->pool;
	struct pg_flow_q *q = w->fq[pool];
	struct pg_flow_item *shed;
	uint64_t now = w->now_ms, deadline = deadline_of(x, rc);
	enum pg_room room;
	uint8_t rprio;

	if (!f)
		return true;
	if (x->flow_bad) {
		pg_client_error(w, c, 400, bad_text((enum pg_flow_bad)x->flow_bad));
		return false;
	}
	x->fq.tenant = (uint16_t)tenant_of(f, x, NULL, 0); /* the body's "user": below */
	if (deadline && now >= deadline) {
		refuse(w, c, R_EXPIRED, now - x->t0_ns / 1000000);
		return false;
	}
	/* its class as sent on now: by its header's tenant (the body's
	 * "user" is read once its key is: below) */
	pg_flow_seen(&f->tenants, x->fq.tenant, now);
	in->prio = class_of(f, x, x->fq.tenant);
	rprio = routed_class(w, in->prio, x->fq.tenant, now);
	room = pg_route_room(&w->gw->router, pool, pg_route_class_room(rc->flow_queue_ms, rprio),
	                     now, NULL);
	/* nothing of its pool waits, in any worker: no one to go before */
	if (!__atomic_load_n(&w->gw->maps.flow[pool].queued, __ATOMIC_RELAXED) && room != PG_FULL) {
		in->budget_ms = deadline ? (uint32_t)(deadline - now) : 0;
		in->prio = rprio;
		return true; /* routed now (no one usable: its 502 there) */
	}
	if (!in->complete) { /* only a body held whole can wait */
		FLOW_ADD(&w->gw->maps.flow[pool].bypassed, 1);
		in->budget_ms = deadline ? (uint32_t)(deadline - now) : 0;
		return true;
	}
	if (!q && !(q = w->fq[pool] = calloc(1, sizeof(*q))))
		abort();
	/* Its key, tenant and work, as routing sees them now (nothing recorded). */
	if (!pg_route_dry(&w->gw->router, in, NULL, pg_worker_rand(w), &x->key, &x->choice)) {
		pg_parse_ahead_end(w, x);
		pg_client_error(w, c, 502, "no healthy backend");
		return false;
	}
	pg_parse_ahead_end(w, x);
	x->fq = (struct pg_flow_item){.tenant = (uint16_t)tenant_of(f, x, in->body, in->body_len),
	                              .deadline_ms = deadline,
	                              .cost = cost_of(x, &x->choice)};
	x->fq.prio = class_of(f, x, x->fq.tenant);
	x->queued_ns = pg_now_ns(); /* (its wait and routing latency: one clock) */
	pg_body_take(w, c, n);
	own_body(w, x);
	x->fq.bytes = held_bytes(c);
	switch (pg_flow_push(q, &f->tenants, &x->fq, &f->lim, now, &shed)) {
	case PG_FLOW_REFUSED:
		refuse(w, c, R_FULL, oldest_wait(q, now));
		return false;
	case PG_FLOW_SHED:
		stats_out(w, pool, shed); /* counted in before: out as any other */
		refuse(w, client_of(shed), R_SHED, now - shed->enq_ms);
		break;
	case PG_FLOW_QUEUED:
		break;
	}
	stats_in(w, &w->gw->maps.flow[pool], &x->fq);
	FLOW_ADD(&w->gw->maps.flow[pool].enqueued, 1);
	c->state = PG_C_QUEUED;
	publish(w, pool, now);
	w->flow_run = true; /* room may be there (others were waiting) */
	return false;
}

void pg_queue_charge(struct pg_worker *w, struct pg_client *c, const struct pg_choice *where)
{
	struct pg_flowctl *f = w->gw->flow;
	struct pg_exchange *x = &c->x;

	if (!f || x->flow_charged)
		return;
	x->flow_charged = true;
	if (!x->fq.enq_ms && !__atomic_load_n(&f->queued, __ATOMIC_RELAXED) &&
	    !__atomic_load_n(&f->peer_queued, __ATOMIC_RELAXED))
		return; /* no one waits, in the fleet: service is not counted (lib/flow.h) */
	if (!x->fq.enq_ms)
		x->fq.tenant = (uint16_t)tenant_of(f, x, NULL, 0);
	x->fq.cost = cost_of(x, where);
	pg_flow_charge(&f->tenants, &x->fq);
	FLOW_ADD(&f->ts[x->fq.tenant].served, x->fq.cost);
}

void pg_queue_late(struct pg_worker *w, struct pg_client *c)
{
	refuse(w, c, R_LATE, c->x.wait_us / 1000);
}

void pg_queue_cut(struct pg_worker *w, struct pg_client *c)
{
	refuse(w, c, R_CUT, w->now_ms - c->x.t0_ns / 1000000);
}

void pg_queue_leave(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;
	const unsigned pool = pool_of(x);

	if (!x->fq.queued || !w->fq[pool])
		return;
	pg_flow_remove(w->fq[pool], &w->gw->flow->tenants, &x->fq);
	stats_out(w, pool, &x->fq);
	FLOW_ADD(&w->gw->maps.flow[pool].gone, 1);
	publish(w, pool, w->now_ms);
}

/* Its turn: routed now, on the cache and load as they are. */
static void dispatch(struct pg_worker *w, struct pg_client *c, uint8_t prio, uint64_t now_ms)
{
	struct pg_flowctl *f = w->gw->flow;
	struct pg_exchange *x = &c->x;
	const unsigned pool = pool_of(x);
	struct pg_flow_stats *st = &w->gw->maps.flow[pool];
	struct pg_route_input in = {.api = (enum pg_api)x->api,
	                            .header_key = {x->hdr_key, x->hdr_key_len},
	                            .body = x->kbuf ? x->kbuf : x->held,
	                            .body_len = x->kbuf ? x->klen : x->held_len,
	                            .complete = true,
	                            .pool = pool,
	                            .scratch = &w->key_scratch};
	const uint64_t t = pg_now_ns(), waited_us = (t - x->queued_ns) / 1000;

	x->wait_us = waited_us < UINT32_MAX ? (uint32_t)waited_us : UINT32_MAX;
	FLOW_ADD(&st->wait_ms_total, waited_us / 1000);
	pg_flow_hist_add(&f->ts[x->fq.tenant].wait, waited_us);
	pg_flow_hist_add(&f->cls[x->fq.prio], waited_us);
	if (x->fq.deadline_ms)
		in.budget_ms = (uint32_t)(x->fq.deadline_ms - now_ms);
	in.prio = prio;
	if (pg_dispatch(w, c, &in, 0, t)) /* (not routed: answered there) */
		FLOW_ADD(&st->dispatched, 1);
}

/* The class whose room it (q's next request) waits for and is routed by:
 * routed_class's, but a request that goes before a higher class, starved,
 * is standard: it goes first to make progress, and must not hold the
 * others back waiting for an empty instance. */
static uint8_t room_class(struct pg_worker *w, const struct pg_flow_q *q,
                          const struct pg_flow_item *it, uint64_t now)
{
	if (it->prio > pg_flow_top(q))
		return PG_PRIO_STANDARD;
	return routed_class(w, it->prio, it->tenant, now);
}

/* Pool's queue q: what is past its deadline answered, then what can go. */
static void run_pool(struct pg_worker *w, unsigned pool, struct pg_flow_q *q, uint64_t now)
{
	struct pg_flowctl *f = w->gw->flow;
	struct pg_flow_item *it;
	struct pg_route_cfg rc;

	while ((it = pg_flow_expired(q, now))) {
		pg_flow_remove(q, &f->tenants, it);
		stats_out(w, pool, it);
		refuse(w, client_of(it), R_EXPIRED, now - it->enq_ms);
	}
	pg_router_cfg(&w->gw->router, pool, &rc);
	while (q->n) {
		const uint8_t prio =
		    room_class(w, q, pg_flow_next(q, &f->tenants, &f->lim, now), now);
		uint32_t in = UINT32_MAX;
		/* flow control turned off meanwhile: everything goes */
		enum pg_room room =
		    rc.flow_queue_ms
		        ? pg_route_room(&w->gw->router, pool,
		                        pg_route_class_room(rc.flow_queue_ms, prio), now, &in)
		        : PG_ROOM;
		int other;

		if (room == PG_FULL) {
			if (in != UINT32_MAX && (!w->flow_room_ms || now + in < w->flow_room_ms))
				w->flow_room_ms = now + in;
			break;
		}
		/* another worker's next request goes first: it is woken for it */
		other = pg_flowctl_better(f, w->id, pool, publish(w, pool, now));
		if (other >= 0 && room == PG_ROOM) {
			pg_flowctl_kick(f, (unsigned)other);
			break;
		}
		it = pg_flow_pop(q, &f->tenants, &f->lim, now);
		stats_out(w, pool, it);
		dispatch(w, client_of(it), prio, now); /* no one usable: its 502 there */
	}
	publish(w, pool, now);
}

void pg_queue_run(struct pg_worker *w)
{
	struct pg_flowctl *f = w->gw->flow;
	uint64_t now = w->now_ms;

	w->flow_run = false;
	w->flow_room_ms = 0; /* run_pool sets it again */
	if (!f)
		return;
	if (w->flow_kicked) {
		/* its eventfd polled readable: emptied (a poll that finds it
		 * readable again only wakes the loop once more) */
		uint64_t v;
		ssize_t r;

		w->flow_kicked = false;
		__atomic_store_n(&f->wake[w->id].kicked, 0, __ATOMIC_RELEASE);
		r = read(f->wake[w->id].fd, &v, sizeof(v));
		(void)r;
	}
	for (unsigned p = 0; p < PG_MAX_POOLS; p++)
		if (w->fq[p] && w->fq[p]->n)
			run_pool(w, p, w->fq[p], now);
}

uint32_t pg_queue_next_ms(const struct pg_worker *w)
{
	uint64_t next = 0, now = w->now_ms;

	for (unsigned p = 0; p < PG_MAX_POOLS; p++)
		if (w->fq[p] && w->fq[p]->next_deadline_ms &&
		    (!next || w->fq[p]->next_deadline_ms < next))
			next = w->fq[p]->next_deadline_ms;
	if (w->flow_room_ms && (!next || w->flow_room_ms < next))
		next = w->flow_room_ms;
	if (!next)
		return UINT32_MAX;
	return next > now ? (uint32_t)(next - now) : 0;
}

void pg_queue_room(struct pg_worker *w)
{
	struct pg_flowctl *f = w->gw->flow;

	if (!f || !__atomic_load_n(&f->queued, __ATOMIC_RELAXED))
		return;
	if (__atomic_load_n(&f->wake[w->id].waiting, __ATOMIC_RELAXED))
		w->flow_run = true;
	pg_flowctl_wake(f, w->id);
}

void pg_queue_free(struct pg_worker *w)
{
	for (unsigned p = 0; p < PG_MAX_POOLS; p++) {
		free(w->fq[p]);
		w->fq[p] = NULL;
	}
}
