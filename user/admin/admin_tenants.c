// SPDX-License-Identifier: MIT
/*
 * GET /tenants and PUT /tenants/NAME (admin.c dispatches to them): each
 * tenant's quota and where it stands in the minute, its usage (requests,
 * errors, 429s, tokens exact and estimated), and the usage by model pool
 * (doc/operations.md "Usage accounting"; the same counters as /metrics'
 * prefixgate_tenant_* and prefixgate_model_*). PUT sets a tenant's own
 * quota live, until the configuration is reloaded. Control thread only.
 */
#include <stdio.h>
#include <string.h>
#include "admin/admin_pools.h"
#include "lib/buf.h"
#include "state/flowctl.h"
#include "state/pools.h"
#include "state/quotas.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

static void usage_json(struct pg_buf *o, const struct pg_account *a)
{
	pg_buf_printf(o, "{\"requests\":%llu,\"errors\":%llu,\"throttled\":%llu",
	              (unsigned long long)LOAD(&a->requests), (unsigned long long)LOAD(&a->errors),
	              (unsigned long long)LOAD(&a->throttled));
	for (unsigned f = 0; f < PG_ACCT_FIGS; f++)
		pg_buf_printf(o, ",\"%s\":{\"exact\":%llu,\"estimated\":%llu}",
		              pg_acct_fig_names[f], (unsigned long long)LOAD(&a->tokens[f][0]),
		              (unsigned long long)LOAD(&a->tokens[f][1]));
	pg_buf_puts(o, "}");
}

/* A limit: its number, or null for none. */
static void limit_json(struct pg_buf *o, const char *name, uint32_t v, bool last)
{
	if (v)
		pg_buf_printf(o, "\"%s\":%u%s", name, v, last ? "" : ",");
	else
		pg_buf_printf(o, "\"%s\":null%s", name, last ? "" : ",");
}

static void tenant_json(struct pg_buf *o, const struct pg_gateway *gw, unsigned t, uint64_t now)
{
	const struct pg_quotas *q = gw->quotas;
	const uint8_t set = LOAD(&q->own_set[t]);
	struct pg_quota_lim lim;
	struct pg_quota_view v;

	pg_quotas_lim(q, t, &lim);
	pg_quota_view(&q->counts[t], &lim, now, &v);
	pg_buf_puts(o, "{\"tenant\":");
	pg_buf_json_str(o, gw->flow->tenants.t[t].label, strlen(gw->flow->tenants.t[t].label));
	pg_buf_puts(o, ",\"quota\":{");
	limit_json(o, "rpm", lim.max[PG_QUOTA_REQUESTS], false);
	limit_json(o, "tpm", lim.max[PG_QUOTA_TOKENS], false);
	pg_buf_printf(o, "\"own\":[%s%s%s]}", set & 1 ? "\"rpm\"" : "", set == 3 ? "," : "",
	              set & 2 ? "\"tpm\"" : "");
	pg_buf_printf(o,
	              ",\"minute\":{\"requests\":%llu,\"tokens\":%llu,\"peer_requests\":%llu,"
	              "\"peer_tokens\":%llu,\"reset_ms\":{\"requests\":%llu,\"tokens\":%llu}}",
	              (unsigned long long)pg_qwin_sum(&q->counts[t].local[PG_QUOTA_REQUESTS], now),
	              (unsigned long long)pg_qwin_sum(&q->counts[t].local[PG_QUOTA_TOKENS], now),
	              (unsigned long long)pg_qwin_sum(&q->counts[t].peer[PG_QUOTA_REQUESTS], now),
	              (unsigned long long)pg_qwin_sum(&q->counts[t].peer[PG_QUOTA_TOKENS], now),
	              (unsigned long long)v.reset_ms[PG_QUOTA_REQUESTS],
	              (unsigned long long)v.reset_ms[PG_QUOTA_TOKENS]);
	pg_buf_printf(o, ",\"refused\":{\"requests\":%llu,\"tokens\":%llu},\"usage\":",
	              (unsigned long long)LOAD(&q->refused[t][PG_QUOTA_REQUESTS]),
	              (unsigned long long)LOAD(&q->refused[t][PG_QUOTA_TOKENS]));
	usage_json(o, &q->tenant[t]);
	pg_buf_puts(o, "}");
}

/* (a gateway makes both at start-up; a test's may have neither) */
#define NO_TENANTS "no tenant table: flow control and quotas are not set up"

static int refused(struct pg_admin_reply *r, int status, const char *msg)
{
	pg_buf_puts(&r->body, "{\"error\":");
	pg_buf_json_str(&r->body, msg, strlen(msg));
	pg_buf_puts(&r->body, "}\n");
	return r->status = status;
}

static int bad(struct pg_admin_reply *r, const char *msg)
{
	return refused(r, 400, msg);
}

int pg_admin_tenants_get(struct pg_gateway *gw, struct pg_admin_reply *r)
{
	const struct pg_quotas *q = gw->quotas;
	const uint64_t now = pg_quotas_clock();
	bool first = true;

	if (!q || !gw->flow)
		return refused(r, 503, NO_TENANTS);
	pg_buf_puts(&r->body, "{\"quota\":{");
	limit_json(&r->body, "rpm", LOAD(&q->def.max[PG_QUOTA_REQUESTS]), false);
	limit_json(&r->body, "tpm", LOAD(&q->def.max[PG_QUOTA_TOKENS]), true);
	pg_buf_puts(&r->body, "},\"tenants\":[");
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++) {
		if (t && !LOAD(&gw->flow->tenants.t[t].key))
			continue;
		if (!first)
			pg_buf_puts(&r->body, ",");
		tenant_json(&r->body, gw, t, now);
		first = false;
	}
	pg_buf_puts(&r->body, "],\"models\":[");
	for (unsigned p = 0; p < (gw->maps.npools ? gw->maps.npools : 1); p++) {
		pg_buf_printf(&r->body, "%s{\"model\":", p ? "," : "");
		pg_buf_json_str(&r->body, pg_pool_name(gw, p), strlen(pg_pool_name(gw, p)));
		pg_buf_puts(&r->body, ",\"usage\":");
		usage_json(&r->body, &q->pool[p]);
		pg_buf_puts(&r->body, "}");
	}
	pg_buf_puts(&r->body, "]}\n");
	return r->status = 200;
}

int pg_admin_tenant_put(struct pg_gateway *gw, struct pg_str name, const char *body, size_t len,
                        struct pg_admin_reply *r)
{
	struct pg_quota_lim lim = {{0, 0}};
	char label[PG_FLOW_LABEL_MAX + 1], nm[PG_FLOW_LABEL_MAX + 1], err[160];
	uint8_t set = 0;
	int t;

	if (!gw->quotas || !gw->flow)
		return refused(r, 503, NO_TENANTS);
	if (!name.len || name.len > PG_FLOW_LABEL_MAX)
		return bad(r, "not a tenant's name (1-23 of A-Z a-z 0-9 . _ : @ -)");
	memcpy(nm, name.p, name.len);
	nm[name.len] = 0;
	pg_flow_label(nm, name.len, false, label);
	if (strcmp(label, nm))
		return bad(r, "not a tenant's name (1-23 of A-Z a-z 0-9 . _ : @ -)");
	if (pg_quota_json(body, len, &lim, &set, err, sizeof(err)))
		return bad(r, err);
	t = pg_quotas_set(gw->quotas, gw->flow, nm, &lim, set);
	if (t < 0)
		return bad(r, "the tenant table is full");
	tenant_json(&r->body, gw, (unsigned)t, pg_quotas_clock());
	pg_buf_puts(&r->body, "\n");
	return r->status = 200;
}
