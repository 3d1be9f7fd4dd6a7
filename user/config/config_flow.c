// SPDX-License-Identifier: MIT
/*
 * Flow control's flags (config.h struct pg_flow_cfg): --flow-tenant and
 * --tenant, parsed into the config; the numbers are the table's
 * (config_opts.c).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "lib/flow.h"

int pg_flow_tenant_src_parse(struct pg_flow_cfg *fc, const char *v, char *err, size_t errlen)
{
	if (!strcmp(v, "bearer") || !strcmp(v, "user")) {
		fc->tenant_src = v[0] == 'b' ? PG_TENANT_BEARER : PG_TENANT_USER;
		fc->tenant_header = NULL;
		return 0;
	}
	if (!strncmp(v, "header:", 7) && v[7] && !strpbrk(v + 7, " \t:()<>@,;\\\"/[]?={}")) {
		fc->tenant_src = PG_TENANT_HEADER;
		fc->tenant_header = v + 7;
		return 0;
	}
	pg_errf(err, errlen,
	        "--flow-tenant: \"%s\" is not bearer, user or header:NAME (a header's name)", v);
	return -1;
}

/* "weight=W" or "priority=P" of a --tenant value at p (up to a comma). */
static int tenant_key(struct pg_tenant_cfg *t, const char *p, size_t n, char *err, size_t errlen)
{
	enum pg_prio prio;

	if (n > 7 && !strncmp(p, "weight=", 7)) {
		unsigned long w = 0;
		size_t i = 7;

		for (; i < n && p[i] >= '0' && p[i] <= '9' && w <= PG_TENANT_WEIGHT_MAX; i++)
			w = w * 10 + (unsigned long)(p[i] - '0');
		if (i == n && w >= 1 && w <= PG_TENANT_WEIGHT_MAX) {
			t->weight = (uint32_t)w;
			return 0;
		}
		pg_errf(err, errlen, "--tenant %s: weight: expected 1-%u, got \"%.*s\"", t->name,
		        PG_TENANT_WEIGHT_MAX, (int)(n - 7), p + 7);
		return -1;
	}
	if (n > 9 && !strncmp(p, "priority=", 9)) {
		if (!pg_flow_prio_parse(p + 9, n - 9, &prio)) {
			t->prio = (int)prio;
			return 0;
		}
		pg_errf(
		    err, errlen,
		    "--tenant %s: priority: expected critical, standard or sheddable, got \"%.*s\"",
		    t->name, (int)(n - 9), p + 9);
		return -1;
	}
	pg_errf(err, errlen, "--tenant %s: \"%.*s\": expected weight=W or priority=P", t->name,
	        (int)n, p);
	return -1;
}

int pg_tenant_spec_parse(struct pg_flow_cfg *fc, const char *v, char *err, size_t errlen)
{
	/* NAME ends at the first colon that is followed by a key (a name may
	 * hold colons: "team:a") */
	const char *colon = strstr(v, ":weight=") ? strstr(v, ":weight=") : strstr(v, ":priority=");
	const char *q = strstr(v, ":priority=");
	size_t len;
	char name[PG_FLOW_LABEL_MAX + 1], label[PG_FLOW_LABEL_MAX + 1];
	struct pg_tenant_cfg *t;
	const char *p;

	if (q && (!colon || q < colon))
		colon = q;
	len = colon ? (size_t)(colon - v) : strlen(v);
	if (len && len <= PG_FLOW_LABEL_MAX) {
		memcpy(name, v, len);
		name[len] = 0;
		pg_flow_label(name, len, false, label);
	}
	if (!len || len > PG_FLOW_LABEL_MAX || strcmp(label, name)) {
		pg_errf(
		    err, errlen,
		    "--tenant: \"%.*s\" is not a tenant's name (1-%d of A-Z a-z 0-9 . _ : @ -; a "
		    "bearer token's tenant is named t-HASH: see README, Flow control)",
		    (int)len, v, PG_FLOW_LABEL_MAX);
		return -1;
	}
	for (size_t i = 0; i < fc->ntenants; i++)
		if (!strcmp(fc->tenants[i].name, name)) {
			pg_errf(err, errlen, "--tenant %s: given twice", name);
			return -1;
		}
	if (fc->ntenants == PG_TENANTS_CFG_MAX) {
		pg_errf(err, errlen, "--tenant: more than %d", PG_TENANTS_CFG_MAX);
		return -1;
	}
	t = &fc->tenants[fc->ntenants];
	*t = (struct pg_tenant_cfg){.weight = 1, .prio = -1};
	memcpy(t->name, name, len + 1);
	for (p = colon ? colon + 1 : NULL; p && *p;) {
		size_t n = strcspn(p, ",");

		if (tenant_key(t, p, n, err, errlen))
			return -1;
		p += n + (p[n] == ',');
	}
	fc->ntenants++;
	return 0;
}
