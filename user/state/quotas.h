/* SPDX-License-Identifier: MIT */
/*
 * Quotas and usage accounting at run time (doc/routing.md "Quotas";
 * lib/quota.h has the windows, lib/account.h the figures): the limits in
 * force for each tenant of flow control's table (its own, given by
 * --tenant NAME:rpm=N,tpm=N, the file or PUT /tenants/NAME, else --quota's),
 * each tenant's counts in the sliding minute, and the usage counters by
 * tenant and by model pool. Shared by the workers (atomics), set by the
 * control thread. With etcd, its P/config/quota (the default) and
 * P/tenants/NAME (a tenant's own) are laid over the configuration's.
 */
#ifndef PG_STATE_QUOTAS_H
#define PG_STATE_QUOTAS_H

#include <stdbool.h>
#include <stdint.h>
#include "config/config.h"
#include "lib/account.h"
#include "lib/flow.h"
#include "lib/quota.h"

struct pg_flowctl;
struct pg_etcd_view;

/* etcd's quotas, key by key over the configuration's (PG_QUOTA_KINDS
 * bits of set: the keys it gives). */
#define PG_QUOTAS_ETCD_MAX 256
struct pg_quota_named {
	char name[PG_FLOW_LABEL_MAX + 1];
	struct pg_quota_lim lim;
	uint8_t set;
};

struct pg_quotas {
	/* Limits in force anywhere (atomic): 0 and no request pays for
	 * quotas beyond this load. */
	uint32_t on;
	struct pg_quota_lim def; /* --quota: every tenant's without its own */
	/* Each tenant's own, by its slot in flow control's table; bit k of
	 * own_set: own[t].max[k] is its own (else def's). */
	struct pg_quota_lim own[PG_FLOW_TENANTS];
	uint8_t own_set[PG_FLOW_TENANTS];
	struct pg_quota_counts counts[PG_FLOW_TENANTS];
	/* quota refusals, by tenant and by what was over (enum pg_quota_kind) */
	uint64_t refused[PG_FLOW_TENANTS][PG_QUOTA_KINDS];
	struct pg_account tenant[PG_FLOW_TENANTS];
	struct pg_account pool[PG_MAX_POOLS];
	/* etcd's, the control thread's alone: the default's and the tenants' */
	struct pg_quota_named etcd_def;
	struct pg_quota_named etcd[PG_QUOTAS_ETCD_MAX];
	size_t netcd;
};

/* The state, with the configuration's quotas (fc's) in f's tenant table;
 * NULL when out of memory. */
struct pg_quotas *pg_quotas_new(const struct pg_flow_cfg *fc, struct pg_flowctl *f);
void pg_quotas_free(struct pg_quotas *q);

/* fc's quotas (--quota, each --tenant's rpm= and tpm=) made the ones in
 * force: a tenant no longer given its own has the default's. Control
 * thread (start-up, reload). */
void pg_quotas_apply(struct pg_quotas *q, struct pg_flowctl *f, const struct pg_flow_cfg *fc);

/* Tenant name's own limits set to lim's, for the kinds of bit set (the
 * others back to the default's); its slot, or -1 when the table is full.
 * Control thread (PUT /tenants/NAME). */
int pg_quotas_set(struct pg_quotas *q, struct pg_flowctl *f, const char *name,
                  const struct pg_quota_lim *lim, uint8_t set);

/* etcd's quotas (view v's P/config/quota and P/tenants/NAME) laid over
 * fc's from now on, and applied; the number of values refused (not
 * applied; the first one's key and reason in err). Control thread. */
size_t pg_quotas_etcd(struct pg_quotas *q, struct pg_flowctl *f, const struct pg_flow_cfg *fc,
                      const struct pg_etcd_view *v, char *err, size_t errlen);

/* The limits in force for tenant slot t. */
void pg_quotas_lim(const struct pg_quotas *q, unsigned t, struct pg_quota_lim *out);

/* The wall clock the windows count by (ms): the fleet's gateways agree
 * on it to within their clocks' skew. */
uint64_t pg_quotas_clock(void);

#endif /* PG_STATE_QUOTAS_H */
