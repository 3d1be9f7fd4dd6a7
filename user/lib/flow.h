/* SPDX-License-Identifier: MIT */
/*
 * Flow control's order, pure: which queued request goes next, which waits,
 * which is refused (--flow-control; doc/routing.md, Flow control). No I/O, no
 * allocation, no clock (the caller gives the time).
 *
 * - Classes: critical before standard before sheddable, strictly, except
 *   that a request of a lower class that has waited PG_FLOW_STARVE_MS (or
 *   the configured bound) goes first: the oldest such.
 * - Tenants, within a class: the one with the least service received per
 *   weight (a virtual token counter, in work units: prompt tokens not
 *   cached + max output tokens) goes next, its requests in arrival order. A
 *   tenant that had nothing queued is lifted to PG_FLOW_BURST_WORK below
 *   the least counter of the tenants that had, so idling banks no more
 *   credit than one burst (AIBrix's VTC, with a burst allowance). Counters
 *   are the gateway's, shared by its workers (each worker orders its own
 *   queue by them), and with --nats the fleet's.
 * - Deadlines: a request past its deadline leaves the queue (answered 429
 *   by the caller) without reaching an instance.
 * - Bounds: at most max_requests queued and max_bytes held; a request that
 *   finds them reached sheds the newest sheddable request queued (when it is
 *   not sheddable itself), else is refused.
 *
 * The tenant table is shared by the workers: a tenant is added once (by a
 * compare-and-swap on its key) and never removed; its counters are updated
 * with atomics. Slot 0 takes every tenant past the table's capacity.
 */
#ifndef PG_FLOW_H
#define PG_FLOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pg_prio {
	PG_PRIO_CRITICAL = 0,
	PG_PRIO_STANDARD = 1, /* the default */
	PG_PRIO_SHEDDABLE = 2,
	PG_PRIO_COUNT = 3,
};

/* Tenants the table tells apart; the rest share slot 0 ("other"). */
#define PG_FLOW_TENANTS 256
/* A tenant's label: what metrics, the access log and --tenant call it. */
#define PG_FLOW_LABEL_MAX 23
/* A lower class's request that has waited this long goes before the
 * higher classes, one such request a queue in this long (--flow-starve-ms's
 * default): the bound guarantees a flood of a lower class progress, never
 * the higher classes' capacity. */
#define PG_FLOW_STARVE_MS 5000
/* The credit a tenant comes back with after idling, in work units (x its
 * weight): a light tenant's burst up to this much goes before a heavy
 * tenant's backlog, rather than alternating with it; past it, the two share
 * by weight. About 8 long prompts (8,000 tokens) or 250 chat turns: a quiet
 * tenant's burst is served at once, and a tenant that bursts all the time
 * gains one burst, never more. */
#define PG_FLOW_BURST_WORK 65536
/* A tenant is present while its last request came within this long; of the
 * tenants present, one ahead of its share (pg_flow_ahead) is held to an
 * empty instance, so that the others' requests do not queue behind its
 * (proxy/queue.c). A quiet tenant sending one request a few seconds stays
 * present between them. */
#define PG_FLOW_PRESENT_MS 5000

struct pg_flow_tenant {
	uint64_t key; /* XXH3-64 of its name (never the token itself); 0: free */
	char label[PG_FLOW_LABEL_MAX + 1]; /* pg_flow_label's */
	uint32_t weight;                   /* share, relative (1 when not configured) */
	int8_t prio; /* its default class, -1: none (the request's, or standard) */
	/* shared counters (atomics) */
	uint64_t vtc;     /* service received, work units x 1000 / weight */
	uint32_t queued;  /* its requests queued, every worker's */
	uint64_t seen_ms; /* its last request came then (pg_flow_seen) */
	/* The fleet (--nats): work served here the peers have not been told
	 * of yet, the work they told of, and their requests queued. */
	uint64_t fleet_out, peer_served;
	uint32_t peer_queued;
};

struct pg_flow_tenants {
	struct pg_flow_tenant t[PG_FLOW_TENANTS];
};

/* The tenant of key (0 is not a key): found, or added with label, weight 1
 * and no class; slot 0 when the table is full. Safe from any thread. */
unsigned pg_flow_tenant(struct pg_flow_tenants *ts, uint64_t key, const char *label);

/* Tenant t's request came at now (to a gateway's flow control). */
void pg_flow_seen(struct pg_flow_tenants *ts, unsigned t, uint64_t now_ms);

/* What a present tenant's share is measured against: the least counter of
 * the tenants present (seen within PG_FLOW_PRESENT_MS) at when_ms. A
 * worker takes it now and then (a scan of the table), not per request. */
struct pg_flow_share {
	uint64_t least; /* UINT64_MAX: no one present */
	uint64_t when_ms;
};
void pg_flow_share(const struct pg_flow_tenants *ts, uint64_t now_ms, struct pg_flow_share *s);

/* Whether tenant t is ahead of its share: it has received more than one
 * burst (PG_FLOW_BURST_WORK per weight) more service than the least served
 * tenant present, who would then wait behind its requests. A tenant alone
 * is never ahead of itself; two sharing by weight stay within a burst. */
bool pg_flow_ahead(const struct pg_flow_tenants *ts, const struct pg_flow_share *s, unsigned t);

/* One queued request (embedded in the caller's request). */
struct pg_flow_item {
	struct pg_flow_item *tprev, *tnext; /* its tenant's FIFO in its class */
	struct pg_flow_item *cprev, *cnext; /* its class's FIFO */
	uint16_t tenant;
	uint8_t prio;
	bool queued;
	uint64_t enq_ms;
	uint64_t deadline_ms; /* 0: none */
	uint64_t cost;        /* work units */
	uint32_t bytes;       /* memory it holds while queued */
};

struct pg_flow_fifo {
	struct pg_flow_item *head, *tail;
};

/* One worker's queue. Zeroed is empty. */
struct pg_flow_q {
	struct pg_flow_fifo cls[PG_PRIO_COUNT];
	struct pg_flow_fifo ten[PG_PRIO_COUNT][PG_FLOW_TENANTS];
	uint64_t mask[PG_PRIO_COUNT][PG_FLOW_TENANTS / 64]; /* tenants with a request queued */
	uint32_t n, bytes, n_cls[PG_PRIO_COUNT];
	uint64_t next_deadline_ms; /* none earlier queued (0: none at all) */
	uint64_t jump_ms;          /* no starved request goes first before (pg_flow_pop) */
};

struct pg_flow_limits {
	uint32_t max_requests, max_bytes; /* this queue's bounds */
	uint64_t starve_ms;
};

/* What pg_flow_push did. */
enum pg_flow_push {
	PG_FLOW_QUEUED = 0,  /* queued */
	PG_FLOW_SHED = 1,    /* queued, and *shed (another, sheddable) left the queue */
	PG_FLOW_REFUSED = 2, /* the bounds are reached: not queued */
};

/* The highest class with a request queued in q (PG_PRIO_COUNT: none): a
 * request of a lower one that goes first is starved. */
static inline unsigned pg_flow_top(const struct pg_flow_q *q)
{
	unsigned top = 0;

	while (top < PG_PRIO_COUNT && !q->cls[top].head)
		top++;
	return top;
}

/* Queue it (its tenant, prio, deadline, cost and bytes set) at now. */
enum pg_flow_push pg_flow_push(struct pg_flow_q *q, struct pg_flow_tenants *ts,
                               struct pg_flow_item *it, const struct pg_flow_limits *lim,
                               uint64_t now_ms, struct pg_flow_item **shed);

/* The request that goes next at now (still queued), NULL when none. */
struct pg_flow_item *pg_flow_next(const struct pg_flow_q *q, const struct pg_flow_tenants *ts,
                                  const struct pg_flow_limits *lim, uint64_t now_ms);
/* The same, out of the queue (to be dispatched). A starved request that so
 * went before a higher class's holds the next one back for the bound. */
struct pg_flow_item *pg_flow_pop(struct pg_flow_q *q, struct pg_flow_tenants *ts,
                                 const struct pg_flow_limits *lim, uint64_t now_ms);

/*
 * Where it (pg_flow_next's answer for q at now) stands against the next
 * request of another worker's queue: the lower goes first. A starved
 * request (of a class below q's highest, waited past the bound, q's turn
 * for one) ranks by its age, before any other; the rest by class, then their tenant's
 * counter. UINT64_MAX for NULL. Each worker publishes its next request's
 * rank, so the workers' queues are served as one (proxy/queue.c).
 */
uint64_t pg_flow_rank(const struct pg_flow_q *q, const struct pg_flow_tenants *ts,
                      const struct pg_flow_limits *lim, uint64_t now_ms,
                      const struct pg_flow_item *it);

/* It leaves the queue (dispatched, expired, its client gone). */
void pg_flow_remove(struct pg_flow_q *q, struct pg_flow_tenants *ts, struct pg_flow_item *it);

/* It was dispatched: its tenant is charged its cost (and the cost is kept
 * for the fleet: fleet_out). */
void pg_flow_charge(struct pg_flow_tenants *ts, const struct pg_flow_item *it);

/* Another gateway of the fleet served work units to tenant key (label:
 * what it calls it): charged here too, by the weight it has here, so that
 * tenants share the fleet, not each gateway. Returns the tenant's slot. */
unsigned pg_flow_heard(struct pg_flow_tenants *ts, uint64_t key, const char *label,
                       uint64_t served);

/* A queued request past its deadline at now, NULL when none (the queue's
 * next_deadline_ms says when to look again). */
struct pg_flow_item *pg_flow_expired(struct pg_flow_q *q, uint64_t now_ms);

/* --- what a request says of itself (flow_req.c) ---------------------------- */

/* The class names, by enum pg_prio: "critical", "standard", "sheddable". */
extern const char *const pg_prio_names[PG_PRIO_COUNT];

/* X-Prefixgate-Priority's value v[0..n) (a class name, ASCII
 * case-insensitive): 0 and *out, or -1. */
int pg_flow_prio_parse(const char *v, size_t n, enum pg_prio *out);

/* X-Prefixgate-Deadline-Ms's value: decimal digits only, 1 to max: 0 and
 * *ms, or -1. */
int pg_flow_deadline_parse(const char *v, size_t n, uint32_t max, uint32_t *ms);

/* The token of an Authorization value "Bearer TOKEN" (scheme
 * case-insensitive, RFC 9110 §11.4): 0 and *tok, *tok_len, or -1 (another
 * scheme, or no token). */
int pg_flow_bearer(const char *v, size_t n, const char **tok, size_t *tok_len);

/*
 * The tenant named v[0..n): its label into label (PG_FLOW_LABEL_MAX + 1
 * bytes), and its key, the XXH3-64 of the label (never 0). A secret name (a
 * bearer token) is never its own label: "t-" and 12 hex digits of its hash,
 * so metrics and logs cannot show it; a name of at most PG_FLOW_LABEL_MAX
 * characters of [A-Za-z0-9._:@-] is its own label; any other, "t-" and its
 * hash too.
 */
uint64_t pg_flow_label(const char *v, size_t n, bool secret, char *label);

#endif /* PG_FLOW_H */
