// SPDX-License-Identifier: MIT
/*
 * backends add / remove / drain: membership changes go through the admin
 * API only (the control thread owns the backend table; the maps are never
 * written by this tool). drain is remove, then waiting for the member to
 * leave GET /backends, bounded by --timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "config/config.h"
#include "ctl.h"
#include "lib/json.h"

#define DRAIN_POLL_S   0.1 /* GET /backends this often while draining */
#define DRAIN_REPORT_S 1.0 /* progress at least this often, and on every change */

/* Canonical spelling of a command-line backend (an address or NAME:PORT),
 * or a usage error. out: PG_HOSTPORT_STRLEN bytes. */
static int canon_addr(const char *cmd, const char *addr, char *out)
{
	struct pg_hostport hp;
	char e[PG_HOSTPORT_STRLEN + 100];

	if (pg_hostport_parse(addr, &hp, false, e, sizeof(e))) {
		ctl_err("backends %s: %s", cmd, e);
		return -1;
	}
	pg_hostport_format(&hp, out);
	return 0;
}

int ctl_cmd_backends_add(const struct ctl_opts *o, const char *addr)
{
	struct ctl_http_resp r;
	struct pg_json js = {0};
	char a[PG_HOSTPORT_STRLEN], body[PG_HOSTPORT_STRLEN + PG_POOL_NAME_MAX + 32], err[1024],
	    msg[256], to[PG_POOL_NAME_MAX + 16] = "";
	int64_t id, n;
	int rc = CTL_ERR;

	if (canon_addr("add", addr, a))
		return CTL_USAGE;
	/* a and the pool name need no JSON escaping: canonical, and checked */
	if (o->pool) {
		snprintf(body, sizeof(body), "{\"address\":\"%s\",\"pool\":\"%s\"}", a, o->pool);
		snprintf(to, sizeof(to), " to pool %s", o->pool);
	} else {
		snprintf(body, sizeof(body), "{\"address\":\"%s\"}", a);
	}
	if (ctl_http(o, "POST", "/backends", "application/json", body, strlen(body),
	             ctl_timeout(o, CTL_TIMEOUT_DEFAULT), &r, err, sizeof(err))) {
		ctl_err("backends add %s: %s", a, err);
		return CTL_ERR;
	}
	if (r.status == 202) { /* a name: its addresses join as they resolve */
		rc = CTL_OK;
		if (o->json)
			fwrite(r.body, 1, r.len, stdout);
		else
			printf("added %s%s: its addresses join as the name resolves\n", a, to);
		goto out;
	}
	if (r.status != 201) {
		ctl_err("backends add %s: HTTP %d: %s", a, r.status,
		        ctl_api_error(&r, msg, sizeof(msg)));
		goto out;
	}
	rc = CTL_OK;
	if (o->json) {
		fwrite(r.body, 1, r.len, stdout);
		goto out;
	}
	/* the reply is the new member, as in GET /backends */
	if (!pg_json_parse(&js, r.body, r.len) && (id = pg_json_find(&js, 0, "id", 2)) >= 0 &&
	    !pg_json_get_i64(&js, (uint32_t)id, &n))
		printf("added %s as backend %lld%s\n", a, (long long)n, to);
	else
		printf("added %s%s\n", a, to);
	pg_json_free(&js);
out:
	ctl_http_resp_free(&r);
	return rc;
}

/* The member with address a in GET /backends: 1 found (copied to *out),
 * 0 absent, -1 error (err set). */
static int find_member(const struct ctl_opts *o, const char *a, double timeout,
                       struct ctl_snapshot *s, struct ctl_backend *out, char *err, size_t errlen)
{
	struct ctl_http_resp r;
	char msg[256];
	int rc = -1;

	s->npools = 0; /* members only: their pools are not looked up */
	if (ctl_http(o, "GET", "/backends", NULL, NULL, 0, timeout, &r, err, errlen))
		return -1;
	if (r.status != 200) {
		snprintf(err, errlen, "GET /backends: HTTP %d: %s", r.status,
		         ctl_api_error(&r, msg, sizeof(msg)));
	} else if (!ctl_parse_backends_json(r.body, r.len, s, err, errlen)) {
		rc = 0;
		for (size_t i = 0; i < s->n; i++) {
			if (!strcmp(s->b[i].addr, a)) {
				*out = s->b[i];
				rc = 1;
			}
		}
	}
	ctl_http_resp_free(&r);
	return rc;
}

static void drain_json(const char *a, bool removed, int in_flight, double secs)
{
	printf("{\"address\":\"%s\",\"removed\":%s,\"in_flight\":%d,\"seconds\":%.3f}\n", a,
	       removed ? "true" : "false", in_flight, secs);
}

int ctl_cmd_backends_remove(const struct ctl_opts *o, const char *addr, bool wait)
{
	const char *cmd = wait ? "drain" : "remove";
	double limit = ctl_timeout(o, wait ? CTL_DRAIN_TIMEOUT_DEFAULT : CTL_TIMEOUT_DEFAULT);
	double t0 = ctl_now(), last_report = t0, left;
	struct ctl_snapshot *s = NULL;
	struct ctl_http_resp r;
	struct ctl_backend b = {0};
	char a[PG_HOSTPORT_STRLEN], target[3 * PG_HOSTPORT_STRLEN + 16], err[1024], msg[256];
	int rc = CTL_ERR, found, last_inflight = -1;
	size_t n;

	if (canon_addr(cmd, addr, a))
		return CTL_USAGE;
	/* encoded: an IPv6 address's brackets are not path characters
	 * (RFC 3986), and older gateways refused them raw */
	snprintf(target, sizeof(target), "/backends/");
	n = strlen(target);
	if (!ctl_url_encode(a, target, sizeof(target), &n)) {
		ctl_err("backends %s %s: address too long", cmd, a);
		return CTL_USAGE;
	}
	if (ctl_http(o, "DELETE", target, NULL, NULL, 0, limit, &r, err, sizeof(err))) {
		ctl_err("backends %s %s: %s", cmd, a, err);
		return CTL_ERR;
	}
	if (r.status != 202) {
		ctl_err("backends %s %s: HTTP %d: %s", cmd, a, r.status,
		        ctl_api_error(&r, msg, sizeof(msg)));
		ctl_http_resp_free(&r);
		return CTL_ERR;
	}
	if (!wait) {
		if (o->json)
			fwrite(r.body, 1, r.len, stdout);
		else
			printf("draining %s: it takes no new requests and is removed once its "
			       "in-flight requests finish\n",
			       a);
		ctl_http_resp_free(&r);
		return CTL_OK;
	}
	ctl_http_resp_free(&r);
	s = malloc(sizeof(*s));
	if (!s) {
		ctl_err("out of memory");
		return CTL_ERR;
	}
	for (;;) {
		double now = ctl_now();

		left = t0 + limit - now;
		if (left <= 0)
			break;
		found = find_member(o, a, left < CTL_TIMEOUT_DEFAULT ? left : CTL_TIMEOUT_DEFAULT,
		                    s, &b, err, sizeof(err));
		if (found < 0) {
			ctl_err("backends drain %s: %s", a, err);
			goto out;
		}
		now = ctl_now();
		if (!found) {
			if (o->json)
				drain_json(a, true, 0, now - t0);
			else
				printf("%s removed after %.1fs\n", a, now - t0);
			rc = CTL_OK;
			goto out;
		}
		if (!ctl_draining(&b)) {
			ctl_err("backends drain %s: it was added again while draining", a);
			goto out;
		}
		if (!o->json &&
		    (b.in_flight != last_inflight || now - last_report >= DRAIN_REPORT_S)) {
			printf("%s draining: %d in flight (%.1fs)\n", a, b.in_flight, now - t0);
			fflush(stdout);
			last_inflight = b.in_flight;
			last_report = now;
		}
		usleep((useconds_t)(DRAIN_POLL_S * 1e6));
	}
	if (o->json)
		drain_json(a, false, b.in_flight, ctl_now() - t0);
	ctl_err("backends drain %s: still draining after %.1fs with %d in flight (--timeout); it "
	        "stays draining and is removed once idle",
	        a, limit, b.in_flight);
out:
	free(s);
	return rc;
}
