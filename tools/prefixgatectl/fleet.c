// SPDX-License-Identifier: MIT
/*
 * prefixgatectl register and fleet: a backend's lease-bound key in etcd,
 * and the gateways' records under P/gateways/ (doc/fleets.md "Running a fleet").
 * Both speak etcd's JSON gateway through fleet/etcd_client.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "config/config.h"
#include "fleet/etcd_client.h"
#include "ctl.h"

/* P with exactly one trailing '/' into buf. */
static const char *prefix_dir(const struct ctl_opts *o, char *buf, size_t cap)
{
	size_t n = strlen(o->prefix);

	while (n > 1 && o->prefix[n - 1] == '/')
		n--;
	snprintf(buf, cap, "%.*s/", (int)n, o->prefix);
	return buf;
}

static int client(const struct ctl_opts *o, struct pg_etcd_client *cl)
{
	char err[512];
	unsigned ms = (unsigned)(ctl_timeout(o, 2.0) * 1000);

	if (pg_etcd_client_init(cl, o->etcd, ms, o->etcd_user, o->etcd_password_file, err,
	                        sizeof(err))) {
		ctl_err("%s", err);
		return -1;
	}
	return 0;
}

/* Grant a lease and put the backend's key bound to it: the lease, or 0. */
static int64_t grant_and_put(struct pg_etcd_client *cl, const struct ctl_opts *o, const char *key,
                             const char *addr)
{
	struct pg_buf b = {0}, v = {0};
	struct pg_etcd_resp r;
	char err[512];
	int64_t lease = 0;

	pg_etcd_body_lease_grant(&b, o->ttl);
	if (pg_etcd_call(cl, "/v3/lease/grant", &b, &r, err, sizeof(err)) || !r.lease_id) {
		ctl_err("lease grant: %s", err[0] ? err : "no lease ID in the answer");
		goto out;
	}
	lease = r.lease_id;
	pg_etcd_resp_free(&r);
	b.len = 0;
	pg_etcd_backend_json(&v, addr, o->pool, true);
	pg_etcd_body_put(&b, key, v.p, v.len, lease);
	if (pg_etcd_call(cl, "/v3/kv/put", &b, &r, err, sizeof(err))) {
		ctl_err("put %s: %s", key, err);
		lease = 0;
	}
out:
	pg_etcd_resp_free(&r);
	pg_buf_free(&b);
	pg_buf_free(&v);
	return lease;
}

int ctl_cmd_register(const struct ctl_opts *o)
{
	struct pg_etcd_client cl;
	struct pg_hostport hp;
	struct pg_etcd_resp r = {0};
	struct pg_buf b = {0};
	char addr[PG_HOSTPORT_STRLEN], key[1024], dir[512], err[512];
	sigset_t sigs;
	int64_t lease;
	int sig = 0;

	if (pg_hostport_parse(o->address, &hp, false, err, sizeof(err))) {
		ctl_err("--address: %s", err);
		return CTL_USAGE;
	}
	pg_hostport_format(&hp, addr);
	if (client(o, &cl))
		return CTL_USAGE;
	snprintf(key, sizeof(key), "%s" PG_ETCD_BACKENDS_DIR "%s", prefix_dir(o, dir, sizeof(dir)),
	         o->id ? o->id : addr);
	/* SIGTERM and SIGINT are taken with sigtimedwait between keep-alives. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);
	lease = grant_and_put(&cl, o, key, addr);
	if (!lease) {
		pg_etcd_client_free(&cl);
		return CTL_ERR;
	}
	printf("registered %s as %s, lease %" PRId64 " (TTL %u s)\n", addr, key, lease, o->ttl);
	fflush(stdout);
	while (sig <= 0) {
		/* A third of the TTL: two keep-alives may fail before it lapses. */
		struct timespec ts = {.tv_sec = o->ttl / 3,
		                      .tv_nsec = (long)(o->ttl % 3) * 333333333};

		sig = sigtimedwait(&sigs, NULL, &ts);
		if (sig > 0)
			break;
		b.len = 0;
		pg_etcd_body_lease_id(&b, lease);
		if (pg_etcd_call(&cl, "/v3/lease/keepalive", &b, &r, err, sizeof(err))) {
			ctl_err("keep-alive: %s (retrying)", err);
		} else if (r.ttl <= 0) {
			/* Expired (etcd unreachable longer than the TTL): register again. */
			ctl_err("lease %" PRId64 " expired: registering again", lease);
			int64_t l = grant_and_put(&cl, o, key, addr);

			lease = l ? l : lease;
		}
		pg_etcd_resp_free(&r);
	}
	b.len = 0;
	pg_etcd_body_lease_id(&b, lease);
	if (pg_etcd_call(&cl, "/v3/lease/revoke", &b, &r, err, sizeof(err)))
		ctl_err("revoke: %s (the key expires after the TTL)", err);
	else
		printf("signal %d: lease revoked, %s removed\n", sig, key);
	pg_etcd_resp_free(&r);
	pg_buf_free(&b);
	pg_etcd_client_free(&cl);
	return CTL_OK;
}

int ctl_cmd_fleet(const struct ctl_opts *o)
{
	struct pg_etcd_client cl;
	struct pg_etcd_resp r;
	struct pg_buf b = {0};
	struct pg_etcd_gateway g, first = {0};
	char dir[512], gdir[600], err[512];
	size_t n = 0;
	bool digests_differ = false, revs_differ = false;
	int rc = CTL_ERR;

	if (client(o, &cl))
		return CTL_USAGE;
	snprintf(gdir, sizeof(gdir), "%s" PG_ETCD_GATEWAYS_DIR, prefix_dir(o, dir, sizeof(dir)));
	pg_etcd_body_range(&b, gdir, true, false, false);
	if (pg_etcd_call(&cl, "/v3/kv/range", &b, &r, err, sizeof(err))) {
		ctl_err("%s", err);
		goto out;
	}
	if (o->json)
		printf("{\"revision\":%" PRId64 ",\"gateways\":[", r.revision);
	else
		printf("%-24s %-21s %-8s %10s %8s %-16s\n", "ID", "ADDRESS", "VERSION", "REVISION",
		       "BACKENDS", "RING DIGEST");
	for (size_t i = 0; i < r.nkv; i++) {
		if (pg_etcd_gateway_parse(r.kv[i].val, r.kv[i].vlen, &g, err, sizeof(err))) {
			ctl_err("%s: %s", r.kv[i].key, err);
			continue;
		}
		if (!n)
			first = g;
		digests_differ |= g.digest != first.digest;
		revs_differ |= g.revision != first.revision;
		if (o->json) {
			printf("%s{\"id\":", n ? "," : "");
			ctl_json_str(stdout, g.id, strlen(g.id));
			printf(",\"address\":");
			ctl_json_str(stdout, g.address, strlen(g.address));
			printf(",\"version\":");
			ctl_json_str(stdout, g.version, strlen(g.version));
			printf(",\"revision\":%" PRId64 ",\"backends\":%u,\"digest\":\"%016" PRIx64
			       "\"}",
			       g.revision, g.backends, g.digest);
		} else {
			printf("%-24s %-21s %-8s %10" PRId64 " %8u %016" PRIx64 "\n", g.id,
			       g.address, g.version, g.revision, g.backends, g.digest);
		}
		n++;
	}
	if (o->json)
		printf("],\"agree\":%s}\n", n && !digests_differ ? "true" : "false");
	else if (!n)
		printf("no gateway registered under %s\n", gdir);
	else if (digests_differ)
		printf("DISAGREE: the gateways' rings differ (some keys route differently)\n");
	else
		printf("%zu %s on the ring%s\n", n, n == 1 ? "gateway agrees" : "gateways agree",
		       revs_differ ? " (revisions differ: a change that moved no key, or one "
		                     "still arriving)"
		                   : "");
	rc = n && !digests_differ ? CTL_OK : CTL_ERR;
out:
	pg_etcd_resp_free(&r);
	pg_buf_free(&b);
	pg_etcd_client_free(&cl);
	return rc;
}
