// SPDX-License-Identifier: MIT
/*
 * Flow control's flags (config.h struct pg_flow_cfg): --flow-tenant and
 * --tenant (its quota keys too: lib/quota.h), parsed into the config; the
 * numbers are the table's (config_opts.c).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "lib/flow.h"

int pg_flow_tenant_src_parse(struct pg_flow_cfg *fc, const char *v, char *err, size_t errlen)
{
	if (!strcmp(v, "bearer") || !strcmp(v, "user") || !strcmp(v, "cert")) {
		fc->tenant_src = v[0] == 'b'   ? PG_TENANT_BEARER
		                 : v[0] == 'u' ? PG_TENANT_USER
		                               : PG_TENANT_CERT;
		fc->tenant_header = NULL;
		return 0;
	}
	if (!strncmp(v, "header:", 7) && v[7] && !strpbrk(v + 7, " \t:()<>@,;\\\"/[]?={}")) {
		fc->tenant_src = PG_TENANT_HEADER;
		fc->tenant_header = v + 7;
		return 0;
	}
	pg_errf(err, errlen,
	        "--flow-tenant: \"%s\" is not bearer, user, cert or header:NAME (a header's name)",
	        v);
	return -1;
}

int pg_tenant_key(struct pg_tenant_cfg *t, const char *key, size_t klen, const char *val,
                  size_t vlen, char *err, size_t errlen)
{
	enum pg_prio prio;

	if (klen == 6 && !strncmp(key, "weight", 6)) {
		unsigned long w = 0;
		size_t i = 0;

		for (; i < vlen && val[i] >= '0' && val[i] <= '9' && w <= PG_TENANT_WEIGHT_MAX; i++)
			w = w * 10 + (unsigned long)(val[i] - '0');
		if (vlen && i == vlen && w >= 1 && w <= PG_TENANT_WEIGHT_MAX) {
			t->weight = (uint32_t)w;
			return 0;
		}
		pg_errf(err, errlen, "--tenant %s: weight: expected 1-%u, got \"%.*s\"", t->name,
		        PG_TENANT_WEIGHT_MAX, (int)(vlen < 64 ? vlen : 64), val);
		return -1;
	}
	if (klen == 8 && !strncmp(key, "priority", 8)) {
		if (vlen && !pg_flow_prio_parse(val, vlen, &prio)) {
			t->prio = (int)prio;
			return 0;
		}
		pg_errf(
		    err, errlen,
		    "--tenant %s: priority: expected critical, standard or sheddable, got \"%.*s\"",
		    t->name, (int)(vlen < 64 ? vlen : 64), val);
		return -1;
	}
	if (pg_quota_key(key, klen) >= 0) {
		const int k = pg_quota_key(key, klen);

		if (!pg_quota_value(val, vlen, &t->quota.max[k])) {
			t->quota_set |= (uint8_t)(1u << k);
			return 0;
		}
		pg_errf(err, errlen,
		        "--tenant %s: %.3s: expected 0 (no limit) to %u a minute, got \"%.*s\"",
		        t->name, key, PG_QUOTA_MAX, (int)(vlen < 64 ? vlen : 64), val);
		return -1;
	}
	pg_errf(err, errlen, "--tenant %s: unknown key \"%.*s\" (weight, priority, rpm, tpm)",
	        t->name, (int)(klen < 64 ? klen : 64), key);
	return -1;
}

struct pg_tenant_cfg *pg_tenant_add(struct pg_flow_cfg *fc, const char *v, size_t len, char *err,
                                    size_t errlen)
{
	char name[PG_FLOW_LABEL_MAX + 1], label[PG_FLOW_LABEL_MAX + 1];
	struct pg_tenant_cfg *t;

	if (len && len <= PG_FLOW_LABEL_MAX) {
		memcpy(name, v, len);
		name[len] = 0;
		pg_flow_label(name, len, false, label);
	}
	if (!len || len > PG_FLOW_LABEL_MAX || strcmp(label, name)) {
		pg_errf(
		    err, errlen,
		    "--tenant: \"%.*s\" is not a tenant's name (1-%d of A-Z a-z 0-9 . _ : @ -; a "
		    "bearer token's tenant is named t-HASH: see doc/routing.md, Flow control)",
		    (int)(len < 64 ? len : 64), v, PG_FLOW_LABEL_MAX);
		return NULL;
	}
	for (size_t i = 0; i < fc->ntenants; i++)
		if (!strcmp(fc->tenants[i].name, name)) {
			pg_errf(err, errlen, "--tenant %s: given twice", name);
			return NULL;
		}
	if (fc->ntenants == PG_TENANTS_CFG_MAX) {
		pg_errf(err, errlen, "--tenant: more than %d", PG_TENANTS_CFG_MAX);
		return NULL;
	}
	t = &fc->tenants[fc->ntenants++];
	*t = (struct pg_tenant_cfg){.weight = 1, .prio = -1};
	memcpy(t->name, name, len + 1);
	return t;
}

/* Tenant i of fc (one the file gave) dropped: a --tenant replaces it. */
static void tenant_drop(struct pg_flow_cfg *fc, size_t i)
{
	memmove(&fc->tenants[i], &fc->tenants[i + 1],
	        (fc->ntenants - i - 1) * sizeof(fc->tenants[0]));
	fc->ntenants--;
	fc->from_file--;
}

int pg_tenant_spec_parse(struct pg_flow_cfg *fc, const char *v, bool merge, char *err,
                         size_t errlen)
{
	/* NAME ends at the first colon that is followed by a key (a name may
	 * hold colons: "team:a") */
	static const char *const keys[] = {":weight=", ":priority=", ":rpm=", ":tpm="};
	const char *colon = NULL;
	struct pg_tenant_cfg *t;
	size_t len;
	const char *p;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *q = strstr(v, keys[i]);

		if (q && (!colon || q < colon))
			colon = q;
	}
	len = colon ? (size_t)(colon - v) : strlen(v);
	for (size_t i = 0; merge && i < fc->from_file; i++)
		if (strlen(fc->tenants[i].name) == len && !strncmp(fc->tenants[i].name, v, len)) {
			tenant_drop(fc, i);
			break;
		}
	t = pg_tenant_add(fc, v, len, err, errlen);
	if (!t)
		return -1;
	for (p = colon ? colon + 1 : NULL; p && *p;) {
		size_t n = strcspn(p, ","), k = strcspn(p, "=");

		if (k > n)
			k = n;
		if (!(k == 6 && !strncmp(p, "weight", 6)) &&
		    !(k == 8 && !strncmp(p, "priority", 8)) && pg_quota_key(p, k) < 0) {
			pg_errf(
			    err, errlen,
			    "--tenant %s: \"%.*s\": expected weight=W, priority=P, rpm=N or tpm=N",
			    t->name, (int)(n < 64 ? n : 64), p);
			fc->ntenants--;
			return -1;
		}
		if (pg_tenant_key(t, p, k, p + k + (k < n), n - k - (k < n), err, errlen)) {
			fc->ntenants--;
			return -1;
		}
		p += n + (p[n] == ',');
	}
	return 0;
}
