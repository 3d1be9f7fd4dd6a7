// SPDX-License-Identifier: MIT
/*
 * The etcd parts other threads see (etcd.h): the gateway's own record under
 * P/gateways/, the admin API's write-through of /backends, and the etcd
 * members of /health and /metrics.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config/config.h"
#include "members/members.h"
#include "fleet/etcd.h"
#include "fleet/etcd_internal.h"
#include "state/pools.h"
#include "sys/log.h"

void pg_etcd_gateway_init(struct pg_gateway *gw)
{
	struct pg_etcd_gateway *g = &pg_etcd.rec;

	pg_gateway_id(gw, g->id, sizeof(g->id));
	pg_addr_format(&gw->cfg->listen, g->address);
	snprintf(g->version, sizeof(g->version), "%s", PG_VERSION);
	snprintf(pg_etcd.rec_key, sizeof(pg_etcd.rec_key), "%s" PG_ETCD_GATEWAYS_DIR "%s",
	         pg_etcd.prefix, g->id);
}

static int lease_call(const char *path, int64_t id, unsigned ttl, struct pg_etcd_resp *r, char *err,
                      size_t errlen)
{
	struct pg_buf b = {0};
	int rc;

	if (ttl)
		pg_etcd_body_lease_grant(&b, ttl);
	else
		pg_etcd_body_lease_id(&b, id);
	rc = pg_etcd_call(&pg_etcd.cl, path, &b, r, err, errlen);
	pg_buf_free(&b);
	return rc;
}

void pg_etcd_gateway_record(struct pg_gateway *gw, uint64_t now)
{
	struct pg_etcd_gateway *g = &pg_etcd.rec;
	struct pg_etcd_resp r;
	struct pg_buf b = {0}, v = {0};
	char err[512];

	g->revision = __atomic_load_n(&pg_etcd.applied_rev, __ATOMIC_RELAXED);
	g->digest = __atomic_load_n(&gw->ring_digest, __ATOMIC_RELAXED);
	g->backends = __atomic_load_n(&gw->maps.state->nbackends, __ATOMIC_RELAXED);
	if (pg_etcd.lease && now >= pg_etcd.next_keepalive_ms) {
		pg_etcd.next_keepalive_ms = now + PG_ETCD_GATEWAY_TTL_S * 1000 / 3;
		if (lease_call("/v3/lease/keepalive", pg_etcd.lease, 0, &r, err, sizeof(err)) ||
		    r.ttl <= 0)
			pg_etcd.lease = 0; /* expired or unknown: a new one, and the record again */
		pg_etcd_resp_free(&r);
	}
	if (!pg_etcd.lease) {
		if (lease_call("/v3/lease/grant", 0, PG_ETCD_GATEWAY_TTL_S, &r, err, sizeof(err))) {
			pg_etcd_resp_free(&r);
			return;
		}
		pg_etcd.lease = r.lease_id;
		pg_etcd_resp_free(&r);
		pg_etcd.next_keepalive_ms = now + PG_ETCD_GATEWAY_TTL_S * 1000 / 3;
		memset(&pg_etcd.rec_put, 0, sizeof(pg_etcd.rec_put));
	}
	if (!memcmp(&pg_etcd.rec_put, g, sizeof(*g)))
		return;
	pg_etcd_gateway_json(&v, g);
	pg_etcd_body_put(&b, pg_etcd.rec_key, v.p, v.len, pg_etcd.lease);
	if (!pg_etcd_call(&pg_etcd.cl, "/v3/kv/put", &b, &r, err, sizeof(err)))
		pg_etcd.rec_put = *g;
	else
		pg_warn("etcd: writing %s: %s", pg_etcd.rec_key, err);
	pg_etcd_resp_free(&r);
	pg_buf_free(&b);
	pg_buf_free(&v);
}

void pg_etcd_gateway_revoke(void)
{
	struct pg_etcd_resp r;
	char err[512];

	if (pg_etcd.lease && lease_call("/v3/lease/revoke", pg_etcd.lease, 0, &r, err, sizeof(err)))
		pg_warn("etcd: revoking the gateway's lease: %s", err);
	pg_etcd_resp_free(&r);
	pg_etcd.lease = 0;
}

/* ---- admin write-through -------------------------------------------------- */

static int reply(struct pg_buf *o, int status, const char *msg, const char *key, int64_t rev)
{
	o->len = 0;
	pg_buf_puts(o, status < 300 ? "{\"etcd_key\":" : "{\"error\":");
	pg_buf_json_str(o, status < 300 ? key : msg, strlen(status < 300 ? key : msg));
	if (status < 300)
		pg_buf_printf(o, ",\"revision\":%lld,\"note\":\"%s\"", (long long)rev, msg);
	pg_buf_puts(o, "}\n");
	return status;
}

int pg_etcd_admin_backend(struct pg_gateway *gw, const char *addr, const char *pool, bool add,
                          struct pg_buf *body)
{
	const size_t dl = strlen(PG_ETCD_BACKENDS_DIR);
	struct pg_hostport hp;
	struct pg_etcd_resp er = {0};
	struct pg_buf b = {0}, v = {0};
	char name[PG_HOSTPORT_STRLEN], kname[PG_HOSTPORT_STRLEN], err[700], key[1200], a[256];
	int64_t rev = 0;
	bool active;
	int n = 0, status;

	(void)gw;
	if (pg_ctl_parse_addr(addr, &hp, err, sizeof(err)))
		return reply(body, 400, err, NULL, 0);
	pg_hostport_format(&hp, name);
	if (add) {
		snprintf(key, sizeof(key), "%s" PG_ETCD_BACKENDS_DIR "%s", pg_etcd.prefix, name);
		pg_etcd_backend_json(&v, name, pool, true);
		pg_etcd_body_put(&b, key, v.p, v.len, 0);
		if (pg_etcd_call(&pg_etcd.admin_cl, "/v3/kv/put", &b, &er, err, sizeof(err)))
			goto fail;
		rev = er.revision;
		n = 1;
	}
	/* Delete every key naming this address (a registered backend's key need
	 * not be its address). */
	for (size_t i = 0; !add && i < pg_etcd.applied.n; i++) {
		const struct pg_etcd_kv *kv = &pg_etcd.applied.e[i];
		struct pg_hostport khp;

		if (strncmp(kv->key, PG_ETCD_BACKENDS_DIR, dl) ||
		    pg_etcd_backend_parse(kv->val, kv->vlen, a, sizeof(a), NULL, &active, err,
		                          sizeof(err)) ||
		    pg_hostport_parse(a, &khp, false, err, sizeof(err)) ||
		    strcmp(pg_hostport_format(&khp, kname), name))
			continue;
		snprintf(key, sizeof(key), "%s%s", pg_etcd.prefix, kv->key);
		b.len = 0;
		pg_etcd_body_delete(&b, key);
		pg_etcd_resp_free(&er);
		if (pg_etcd_call(&pg_etcd.admin_cl, "/v3/kv/deleterange", &b, &er, err,
		                 sizeof(err)))
			goto fail;
		rev = er.revision;
		n++;
	}
	pg_etcd_resp_free(&er);
	pg_buf_free(&b);
	pg_buf_free(&v);
	if (!n) {
		snprintf(err, sizeof(err), "%s is not under %.300s" PG_ETCD_BACKENDS_DIR, name,
		         pg_etcd.prefix);
		return reply(body, 404, err, NULL, 0);
	}
	pg_info("admin: %s %s in etcd (revision %lld)", name, add ? "added" : "deleted",
	        (long long)rev);
	return reply(body, 202, "written to etcd; every gateway applies it from its watch", key,
	             rev);
fail:
	status = er.code ? 502 : 503;
	pg_etcd_resp_free(&er);
	pg_buf_free(&b);
	pg_buf_free(&v);
	return reply(body, status, err, NULL, 0);
}

/* ---- /health and /metrics ------------------------------------------------- */

static double since_ok_s(void)
{
	uint64_t ok = __atomic_load_n(&pg_etcd.last_ok_atomic, __ATOMIC_RELAXED);

	return ok ? (double)(pg_now_ms() - ok) / 1000.0 : -1.0;
}

void pg_etcd_health_json(struct pg_buf *o)
{
	if (!pg_etcd.on)
		return;
	pg_buf_printf(
	    o, ",\"etcd\":{\"stale\":%s,\"revision\":%lld,\"seconds_since_contact\":%.1f}",
	    __atomic_load_n(&pg_etcd.stale, __ATOMIC_RELAXED) ? "true" : "false",
	    (long long)__atomic_load_n(&pg_etcd.applied_rev, __ATOMIC_RELAXED), since_ok_s());
}

void pg_etcd_metrics(const struct pg_gateway *gw, struct pg_buf *o)
{
	pg_buf_printf(o,
	              "# HELP prefixgate_ring_digest_info The digest of the live ring (equal on "
	              "gateways that route alike), as a label; with model pools, every pool's "
	              "folded, and each pool's own labelled pool (as the log shows them).\n"
	              "# TYPE prefixgate_ring_digest_info gauge\n"
	              "prefixgate_ring_digest_info{digest=\"%016" PRIx64 "\"} 1\n",
	              __atomic_load_n(&gw->ring_digest, __ATOMIC_RELAXED));
	for (unsigned p = 0; gw->pools && p < gw->maps.npools; p++)
		pg_buf_printf(
		    o, "prefixgate_ring_digest_info{pool=\"%s\",digest=\"%016" PRIx64 "\"} 1\n",
		    pg_pool_name(gw, p), __atomic_load_n(&gw->pool_digest[p], __ATOMIC_RELAXED));
	if (!pg_etcd.on)
		return;
	pg_buf_printf(
	    o,
	    "# HELP prefixgate_etcd_stale 1 while etcd does not answer: routing on the last "
	    "state read.\n# TYPE prefixgate_etcd_stale gauge\nprefixgate_etcd_stale %d\n"
	    "# HELP prefixgate_etcd_seconds_since_contact Seconds since etcd last answered a "
	    "check (-1: never).\n# TYPE prefixgate_etcd_seconds_since_contact gauge\n"
	    "prefixgate_etcd_seconds_since_contact %.3f\n"
	    "# HELP prefixgate_etcd_revision The etcd revision of the membership and config in "
	    "force.\n# TYPE prefixgate_etcd_revision gauge\nprefixgate_etcd_revision %lld\n"
	    "# HELP prefixgate_etcd_lists_total Full reads of the prefix (start, reconnects, "
	    "re-lists).\n# TYPE prefixgate_etcd_lists_total counter\n"
	    "prefixgate_etcd_lists_total %llu\n"
	    "# HELP prefixgate_etcd_relists_total Watches ended by compaction or a revision "
	    "going back.\n# TYPE prefixgate_etcd_relists_total counter\n"
	    "prefixgate_etcd_relists_total %llu\n",
	    __atomic_load_n(&pg_etcd.stale, __ATOMIC_RELAXED) ? 1 : 0, since_ok_s(),
	    (long long)__atomic_load_n(&pg_etcd.applied_rev, __ATOMIC_RELAXED),
	    (unsigned long long)__atomic_load_n(&pg_etcd.lists, __ATOMIC_RELAXED),
	    (unsigned long long)__atomic_load_n(&pg_etcd.relists, __ATOMIC_RELAXED));
}
