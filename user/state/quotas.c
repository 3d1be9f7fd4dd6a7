// SPDX-License-Identifier: MIT
/* Quotas and usage accounting at run time (quotas.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdio.h>
#include "lib/etcd.h"
#include "state/flowctl.h"
#include "state/quotas.h"

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

uint64_t pg_quotas_clock(void)
{
	struct timespec ts;

	/* coarse: a bucket is a second wide; the clock costs no syscall */
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether any limit is in force: the default's or a tenant's. */
static void recount(struct pg_quotas *q)
{
	uint32_t on = LOAD(&q->def.max[PG_QUOTA_REQUESTS]) || LOAD(&q->def.max[PG_QUOTA_TOKENS]);

	for (unsigned t = 0; !on && t < PG_FLOW_TENANTS; t++)
		for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
			on |= (LOAD(&q->own_set[t]) >> k & 1) && LOAD(&q->own[t].max[k]);
	STORE(&q->on, on);
}

static void set_slot(struct pg_quotas *q, unsigned t, const struct pg_quota_lim *lim, uint8_t set)
{
	for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
		STORE(&q->own[t].max[k], set >> k & 1 ? lim->max[k] : 0);
	STORE(&q->own_set[t], set);
}

/* Tenant name's slot in f's table (added when new). */
static unsigned slot_of(struct pg_flowctl *f, const char *name)
{
	char label[PG_FLOW_LABEL_MAX + 1];
	uint64_t key = pg_flow_label(name, strlen(name), false, label);

	return pg_flow_tenant(&f->tenants, key, label);
}

void pg_quotas_apply(struct pg_quotas *q, struct pg_flowctl *f, const struct pg_flow_cfg *fc)
{
	for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
		STORE(&q->def.max[k], fc->quota.max[k]);
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (LOAD(&q->own_set[t]))
			set_slot(q, t, &(struct pg_quota_lim){{0, 0}}, 0);
	for (size_t i = 0; i < fc->ntenants; i++)
		if (fc->tenants[i].quota_set)
			set_slot(q, slot_of(f, fc->tenants[i].name), &fc->tenants[i].quota,
			         fc->tenants[i].quota_set);
	/* etcd's, key by key over those */
	for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
		if (q->etcd_def.set >> k & 1)
			STORE(&q->def.max[k], q->etcd_def.lim.max[k]);
	for (size_t i = 0; i < q->netcd; i++) {
		const struct pg_quota_named *e = &q->etcd[i];
		const unsigned t = slot_of(f, e->name);
		struct pg_quota_lim lim = q->own[t];

		if (!t)
			continue; /* the table is full: not "other"'s */
		for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
			if (e->set >> k & 1)
				lim.max[k] = e->lim.max[k];
		set_slot(q, t, &lim, (uint8_t)(q->own_set[t] | e->set));
	}
	recount(q);
}

size_t pg_quotas_etcd(struct pg_quotas *q, struct pg_flowctl *f, const struct pg_flow_cfg *fc,
                      const struct pg_etcd_view *v, char *err, size_t errlen)
{
	static const char dir[] = PG_ETCD_TENANTS_DIR;
	const struct pg_etcd_kv *d = pg_etcd_view_get(v, PG_ETCD_QUOTA_KEY);
	size_t bad = 0;
	char why[160];

	q->etcd_def = (struct pg_quota_named){.set = 0};
	q->netcd = 0;
	if (d &&
	    pg_quota_json(d->val, d->vlen, &q->etcd_def.lim, &q->etcd_def.set, why, sizeof(why)) &&
	    !bad++)
		snprintf(err, errlen, PG_ETCD_QUOTA_KEY ": %s", why);
	for (size_t i = 0; i < v->n; i++) {
		const struct pg_etcd_kv *e = &v->e[i];
		const char *name = e->key + sizeof(dir) - 1;
		struct pg_quota_named *t = &q->etcd[q->netcd];
		char label[PG_FLOW_LABEL_MAX + 1];

		if (strncmp(e->key, dir, sizeof(dir) - 1))
			continue;
		if (q->netcd == PG_QUOTAS_ETCD_MAX || strlen(name) > PG_FLOW_LABEL_MAX || !*name ||
		    (pg_flow_label(name, strlen(name), false, label), strcmp(label, name))) {
			if (!bad++)
				snprintf(err, errlen, "%s: not a tenant's name, or more than %d",
				         e->key, PG_QUOTAS_ETCD_MAX);
			continue;
		}
		if (pg_quota_json(e->val, e->vlen, &t->lim, &t->set, why, sizeof(why))) {
			if (!bad++)
				snprintf(err, errlen, "%s: %s", e->key, why);
			continue;
		}
		strcpy(t->name, name);
		q->netcd++;
	}
	pg_quotas_apply(q, f, fc);
	return bad;
}

int pg_quotas_set(struct pg_quotas *q, struct pg_flowctl *f, const char *name,
                  const struct pg_quota_lim *lim, uint8_t set)
{
	unsigned t = slot_of(f, name);

	if (!t)
		return -1; /* slot 0 is everyone's past the table */
	set_slot(q, t, lim, set);
	recount(q);
	return (int)t;
}

void pg_quotas_lim(const struct pg_quotas *q, unsigned t, struct pg_quota_lim *out)
{
	const uint8_t set = LOAD(&q->own_set[t]);

	for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
		out->max[k] = set >> k & 1 ? LOAD(&q->own[t].max[k]) : LOAD(&q->def.max[k]);
}

struct pg_quotas *pg_quotas_new(const struct pg_flow_cfg *fc, struct pg_flowctl *f)
{
	struct pg_quotas *q = calloc(1, sizeof(*q));

	if (q)
		pg_quotas_apply(q, f, fc);
	return q;
}

void pg_quotas_free(struct pg_quotas *q)
{
	free(q);
}
