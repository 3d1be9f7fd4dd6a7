// SPDX-License-Identifier: MIT
/*
 * /metrics: quotas and usage accounting (doc/operations.md "Usage
 * accounting"; state/quotas.h): each tenant's and each model pool's
 * requests, errors, 429s and tokens (kind: prompt, cached, completion;
 * source: exact, the engine's usage, or estimated), each tenant's quota
 * refusals and what its quota leaves it in the minute.
 */
#include <stdio.h>
#include "admin/metrics.h"
#include "state/flowctl.h"
#include "state/pools.h"
#include "state/quotas.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* The label sets: each tenant (slot 0, "other", always) and each pool. */
struct series {
	const struct pg_gateway *gw;
	bool tenants;
};

static unsigned count_of(const struct series *s)
{
	return s->tenants ? PG_FLOW_TENANTS : (s->gw->maps.npools ? s->gw->maps.npools : 1);
}

/* Series i's account and labels (false: none there). */
static const struct pg_account *series_at(const struct series *s, unsigned i, char *l, size_t cap)
{
	const struct pg_gateway *gw = s->gw;

	if (!s->tenants) {
		snprintf(l, cap, "model=\"%s\"", pg_pool_name(gw, i));
		return &gw->quotas->pool[i];
	}
	if (i && !LOAD(&gw->flow->tenants.t[i].key))
		return NULL;
	snprintf(l, cap, "tenant=\"%s\"", gw->flow->tenants.t[i].label);
	return &gw->quotas->tenant[i];
}

static void accounts(const struct series *s, const char *pre, struct pg_buf *o)
{
	static const char *const kind[PG_ACCT_FIGS] = {"prompt", "cached", "completion"};
	static const struct {
		const char *name, *help;
		size_t off;
	} c[] = {
	    {"requests_total", "Requests that ended.", offsetof(struct pg_account, requests)},
	    {"errors_total", "Requests that ended in a 5xx or a broken answer.",
	     offsetof(struct pg_account, errors)},
	    {"throttled_total", "Requests answered 429 (a quota, flow control or the instance).",
	     offsetof(struct pg_account, throttled)},
	};
	char name[64], l[64];
	const unsigned n = count_of(s);

	for (size_t k = 0; k < sizeof(c) / sizeof(c[0]); k++) {
		snprintf(name, sizeof(name), "prefixgate_%s_%s", pre, c[k].name);
		pg_metrics_family(o, name, "counter", c[k].help);
		for (unsigned i = 0; i < n; i++) {
			const struct pg_account *a = series_at(s, i, l, sizeof(l));

			if (a)
				pg_buf_printf(o, "%s{%s} %llu\n", name, l,
				              (unsigned long long)LOAD(
				                  (const uint64_t *)((const char *)a + c[k].off)));
		}
	}
	snprintf(name, sizeof(name), "prefixgate_%s_tokens_total", pre);
	pg_metrics_family(o, name, "counter",
	                  "Tokens used, by kind; source exact: the engine's usage, read as "
	                  "the answer passed; estimated: the gateway's.");
	for (unsigned i = 0; i < n; i++) {
		const struct pg_account *a = series_at(s, i, l, sizeof(l));

		for (unsigned f = 0; a && f < PG_ACCT_FIGS; f++)
			pg_buf_printf(o,
			              "%s{%s,kind=\"%s\",source=\"exact\"} %llu\n"
			              "%s{%s,kind=\"%s\",source=\"estimated\"} %llu\n",
			              name, l, kind[f], (unsigned long long)LOAD(&a->tokens[f][0]),
			              name, l, kind[f], (unsigned long long)LOAD(&a->tokens[f][1]));
	}
}

static void quotas(const struct pg_gateway *gw, struct pg_buf *o)
{
	const struct pg_quotas *q = gw->quotas;
	const uint64_t now = pg_quotas_clock();
	static const char *const limit[PG_QUOTA_KINDS] = {"requests", "tokens"};

	pg_metrics_family(
	    o, "prefixgate_quota_refused_total", "counter",
	    "Requests answered 429 by the tenant's quota, by the limit they were over.");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (!t || LOAD(&gw->flow->tenants.t[t].key))
			for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
				pg_buf_printf(
				    o,
				    "prefixgate_quota_refused_total{tenant=\"%s\",limit=\"%s\"} "
				    "%llu\n",
				    gw->flow->tenants.t[t].label, limit[k],
				    (unsigned long long)LOAD(&q->refused[t][k]));
	pg_metrics_family(o, "prefixgate_quota_remaining", "gauge",
	                  "What the tenant's quota leaves it in the sliding minute (tenants "
	                  "with a limit).");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++) {
		struct pg_quota_lim lim;
		struct pg_quota_view v;

		if (t && !LOAD(&gw->flow->tenants.t[t].key))
			continue;
		pg_quotas_lim(q, t, &lim);
		pg_quota_view(&q->counts[t], &lim, now, &v);
		for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
			if (lim.max[k])
				pg_buf_printf(
				    o,
				    "prefixgate_quota_remaining{tenant=\"%s\",limit=\"%s\"} "
				    "%llu\n",
				    gw->flow->tenants.t[t].label, limit[k],
				    (unsigned long long)v.remaining[k]);
	}
}

void pg_metrics_usage_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	if (!gw->quotas || !gw->flow)
		return;
	accounts(&(struct series){gw, true}, "tenant", o);
	accounts(&(struct series){gw, false}, "model", o);
	quotas(gw, o);
}
