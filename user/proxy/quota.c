// SPDX-License-Identifier: MIT
/* Quotas and usage accounting in a worker (quota.h). */
#include <stdio.h>
#include <string.h>
#include "proxy/queue.h"
#include "proxy/quota.h"
#include "proxy/worker_state.h"
#include "state/flowctl.h"
#include "state/quotas.h"

/* The tenant's slot in flow control's table: the head's, or with
 * --flow-tenant user the body's "user" (in's; read by a dry routing call
 * when the key was not computed yet). */
static unsigned tenant_slot(struct pg_worker *w, struct pg_exchange *x,
                            const struct pg_route_input *in, bool dry)
{
	struct pg_flowctl *f = w->gw->flow;

	if (f->src == PG_TENANT_USER && !x->tenant_key && in) {
		if (dry)
			pg_route_dry(&w->gw->router, in, NULL, pg_worker_rand(w), &x->key,
			             &x->choice);
		if (x->key.user_len && (size_t)x->key.user_off + x->key.user_len <= in->body_len)
			x->tenant_key = pg_flow_label(in->body + x->key.user_off, x->key.user_len,
			                              false, x->tenant_label);
	}
	return pg_flow_tenant(&f->tenants, x->tenant_key, x->tenant_label);
}

bool pg_quota_arrive(struct pg_worker *w, struct pg_client *c, const struct pg_route_input *in)
{
	struct pg_quotas *q = w->gw->quotas;
	struct pg_exchange *x = &c->x;
	struct pg_quota_view v;
	struct pg_quota_lim lim;
	enum pg_quota_verdict verdict;
	unsigned t;
	char msg[200], dur[32];

	if (!q || !__atomic_load_n(&q->on, __ATOMIC_RELAXED) || x->flow_bad)
		return true; /* (a bad flow header: answered 400 by flow control) */
	t = tenant_slot(w, x, in, true);
	pg_quotas_lim(q, t, &lim);
	if (!lim.max[PG_QUOTA_REQUESTS] && !lim.max[PG_QUOTA_TOKENS])
		return true;
	x->quota_tenant = (uint16_t)(t + 1);
	verdict = pg_quota_take(&q->counts[t], &lim, pg_quotas_clock(), &v);
	if (verdict == PG_QUOTA_OK)
		return true;
	__atomic_fetch_add(&q->refused[t][verdict == PG_QUOTA_OVER_TOKENS], 1, __ATOMIC_RELAXED);
	pg_quota_duration(v.retry_ms, dur, sizeof(dur));
	snprintf(msg, sizeof(msg),
	         "Rate limit reached for tenant %s on %s per min: Limit %u. Please try again in "
	         "%s.",
	         w->gw->flow->tenants.t[t].label,
	         verdict == PG_QUOTA_OVER_TOKENS ? "tokens (TPM)" : "requests (RPM)",
	         lim.max[verdict == PG_QUOTA_OVER_TOKENS], dur);
	/* (its body may not all be read yet: pg_client_throttled drops the rest
	 * or closes, boundary.h) */
	pg_client_throttled(w, c, "rate_limit_exceeded", msg, pg_quota_retry_after(v.retry_ms));
	return false;
}

bool pg_quota_reads_usage(const struct pg_worker *w)
{
	const struct pg_quotas *q = w->gw->quotas;

	return w->gw->cfg->exact_usage || (q && __atomic_load_n(&q->on, __ATOMIC_RELAXED));
}

void pg_quota_routed(struct pg_worker *w, struct pg_client *c, const struct pg_route_input *in)
{
	struct pg_quotas *q = w->gw->quotas;
	struct pg_exchange *x = &c->x;

	if (!q)
		return;
	/* the body's "user" now that the key is computed: its usage is its own */
	if (!x->quota_tenant && w->gw->flow->src == PG_TENANT_USER)
		tenant_slot(w, x, in, false);
	if (x->quota_tenant)
		pg_quota_charge(&q->counts[x->quota_tenant - 1], x->key.tokens, pg_quotas_clock());
}

size_t pg_quota_head(struct pg_worker *w, const struct pg_exchange *x, char *out, size_t cap)
{
	struct pg_quotas *q = w->gw->quotas;
	struct pg_quota_view v;
	struct pg_quota_lim lim;

	if (cap)
		out[0] = 0;
	if (!q || !x->quota_tenant)
		return 0;
	pg_quotas_lim(q, x->quota_tenant - 1u, &lim);
	pg_quota_view(&q->counts[x->quota_tenant - 1], &lim, pg_quotas_clock(), &v);
	return pg_quota_headers(&v, out, cap);
}

bool pg_quota_end(struct pg_worker *w, const struct pg_client *c, unsigned status, bool broken,
                  struct pg_use *use)
{
	struct pg_quotas *q = w->gw->quotas;
	const struct pg_exchange *x = &c->x;
	const unsigned pool = x->pool > 0 ? (unsigned)x->pool : 0;
	const enum pg_acct_end end = pg_acct_end_of(status, broken);
	/* an instance's answer (not the gateway's own) */
	const bool answered = x->resp_started && x->backend;
	unsigned t;

	if (!q || !x->t0_ns)
		return false;
	t = x->quota_tenant ? x->quota_tenant - 1u
	                    : pg_flow_tenant(&w->gw->flow->tenants, x->tenant_key, x->tenant_label);
	if (answered) {
		struct pg_usage u;
		const struct pg_use_est est = {
		    .prompt = x->key.tokens,
		    .cached = x->choice.backend == x->backend ? x->choice.matched : 0,
		    .completion = x->key.max_tokens ? x->key.max_tokens : PG_FLOW_OUTPUT_DEFAULT};

		if (x->usage_on)
			pg_usage_get(&x->usage, &u);
		pg_use_of(x->usage_on ? &u : NULL, &est, use);
		if (x->quota_tenant && status < 300)
			pg_quota_charge(&q->counts[t], use->n[PG_ACCT_COMPLETION],
			                pg_quotas_clock());
	}
	pg_account_add(&q->tenant[t], end, answered ? use : NULL);
	pg_account_add(&q->pool[pool < PG_MAX_POOLS ? pool : 0], end, answered ? use : NULL);
	return answered;
}
