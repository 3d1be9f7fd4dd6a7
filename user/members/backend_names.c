// SPDX-License-Identifier: MIT
/*
 * Backends given by DNS name (members_internal.h): a name stands for every
 * address its last applied answer held, each a member with origin
 * PG_ORIGIN_NAME whose ring identity is its own address:port. An answer is
 * diffed against the name's set (lib/addrset.h): new addresses are added,
 * vanished ones drained; a failed lookup keeps the set. Control thread
 * only, like members.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "members/members.h"
#include "members/members_internal.h"
#include "state/pools.h"
#include "lib/addrset.h"
#include "sys/log.h"

static const char *label(const struct pg_name *nm, char *buf)
{
	snprintf(buf, PG_HOSTPORT_STRLEN, "%s%s:%u", nm->tls ? PG_TLS_SCHEME : "", nm->host,
	         nm->port);
	return buf;
}

/* How name nm's members are spoken to (pg_ctl_add_one's hp). */
static struct pg_hostport spoken(const struct pg_name *nm)
{
	struct pg_hostport hp = {.port = nm->port, .tls = nm->tls};

	snprintf(hp.name, sizeof(hp.name), "%s", nm->host);
	return hp;
}

int pg_ctl_name_find(const struct pg_hostport *hp)
{
	for (int k = 0; k < PG_MAX_NAMES; k++) {
		const struct pg_name *nm = &pg_ctl.names[k];

		if (nm->host[0] && nm->port == hp->port && nm->tls == hp->tls &&
		    !strcmp(nm->host, hp->name))
			return k;
	}
	return -1;
}

int pg_ctl_name_add(struct pg_gateway *gw, const struct pg_hostport *hp, unsigned pool,
                    uint8_t origin, bool dup_ok, char *err, size_t errlen)
{
	char l[PG_HOSTPORT_STRLEN];
	int k = pg_ctl_name_find(hp);

	if (k >= 0) {
		if (pg_ctl.names[k].pool != pool) {
			snprintf(err, errlen, "%s is already a backend of pool %s",
			         pg_hostport_format(hp, l), pg_pool_name(gw, pg_ctl.names[k].pool));
			return -EEXIST;
		}
		if (!dup_ok && (pg_ctl.names[k].origin & origin)) {
			snprintf(err, errlen, "%s is already a backend", pg_hostport_format(hp, l));
			return -EEXIST;
		}
		pg_ctl.names[k].origin |= origin;
		return k;
	}
	for (k = 0; k < PG_MAX_NAMES && pg_ctl.names[k].host[0]; k++)
		;
	if (k == PG_MAX_NAMES) {
		snprintf(err, errlen, "cannot add %s: %d names already", pg_hostport_format(hp, l),
		         PG_MAX_NAMES);
		return -ENOSPC;
	}
	struct pg_name *nm = &pg_ctl.names[k];
	uint32_t gen = nm->gen;

	*nm = (struct pg_name){
	    .port = hp->port, .tls = hp->tls, .origin = origin, .pool = (uint8_t)pool, .gen = gen};
	snprintf(nm->host, sizeof(nm->host), "%s", hp->name);
	pg_info("backend name %s added: its addresses follow DNS", label(nm, l));
	return k;
}

/* Another name whose set holds sa (so member id stays, now its), or -1. */
static int other_holder(int k, const union pg_sockaddr *sa)
{
	for (int j = 0; j < PG_MAX_NAMES; j++) {
		const struct pg_name *o = &pg_ctl.names[j];

		if (j == k || !o->host[0] || o->tls != pg_ctl.names[k].tls)
			continue;
		for (size_t i = 0; i < o->naddrs; i++)
			if (pg_sockaddr_equal(&o->addrs[i], sa))
				return j;
	}
	return -1;
}

/* Name k no longer stands for sa: drain its member unless another origin
 * or another name holds it. */
static void release(struct pg_gateway *gw, int k, const union pg_sockaddr *sa, bool *changed)
{
	int id = pg_ctl_find_member(gw, sa, pg_ctl.names[k].tls), j;

	if (!id || pg_ctl.name_of[id] != k + 1)
		return;
	if ((j = other_holder(k, sa)) >= 0) {
		pg_ctl.name_of[id] = (uint16_t)(j + 1);
		return;
	}
	pg_ctl.name_of[id] = 0;
	pg_ctl.origin[id] &= (uint8_t)~PG_ORIGIN_NAME;
	if (!pg_ctl.origin[id] &&
	    !(__atomic_load_n(&gw->maps.backends[id].flags, __ATOMIC_ACQUIRE) &
	      PG_BACKEND_DRAINING)) {
		pg_ctl_drain(gw, id);
		*changed = true;
	}
}

void pg_ctl_name_drop(struct pg_gateway *gw, int k, uint8_t origin, bool *changed)
{
	struct pg_name *nm = &pg_ctl.names[k];
	char l[PG_HOSTPORT_STRLEN];
	union pg_sockaddr *addrs = nm->addrs;
	size_t n = nm->naddrs;

	nm->origin &= (uint8_t)~origin;
	if (nm->origin)
		return;
	pg_info("backend name %s removed: draining its %zu address%s", label(nm, l), n,
	        n == 1 ? "" : "es");
	/* Forget it first, so other_holder does not find it. */
	nm->host[0] = 0;
	nm->addrs = NULL;
	nm->naddrs = 0;
	nm->gen++;
	for (size_t i = 0; i < n; i++)
		release(gw, k, &addrs[i], changed);
	free(addrs);
}

/* A failed lookup (or an answer without addresses) of name nm: its state
 * and reason for GET /backends, and a log line at the first failure of a
 * run, then at most every PG_NAME_LOG_MS while it lasts, so that a name
 * that never resolves is not forgotten after one line. */
static void lookup_failed(struct pg_name *nm, const char *why, bool kept, uint64_t now)
{
	char l[PG_HOSTPORT_STRLEN];

	nm->state = PG_NAME_UNRESOLVED;
	snprintf(nm->error, sizeof(nm->error), "%s", why);
	nm->failures++;
	if (!nm->failing_since) {
		nm->failing_since = now ? now : 1;
		nm->logged_ms = now;
		if (nm->naddrs && kept)
			pg_warn("backend name %s: %s; keeping its last answer (%zu address%s)",
			        label(nm, l), why, nm->naddrs, nm->naddrs == 1 ? "" : "es");
		else if (!nm->naddrs)
			pg_warn("backend name %s: %s; it stands for no address (looked up again "
			        "every --resolve-interval)",
			        label(nm, l), why);
		return;
	}
	if (now - nm->logged_ms < PG_NAME_LOG_MS)
		return;
	nm->logged_ms = now;
	pg_warn("backend name %s: still failing after %.0f s: %s; %zu address%s", label(nm, l),
	        (double)(now - nm->failing_since) / 1000, why, nm->naddrs,
	        nm->naddrs == 1 ? "" : "es");
}

void pg_ctl_name_answer(struct pg_gateway *gw, int k, enum pg_dns_status st,
                        union pg_sockaddr *addrs, size_t n, const char *why)
{
	struct pg_name *nm = &pg_ctl.names[k];
	char l[PG_HOSTPORT_STRLEN], a[PG_ADDR_STRLEN], err[256];
	size_t *add = NULL, *drain = NULL, nadd, ndrain, nkept = 0;
	union pg_sockaddr *set = NULL;
	bool changed = false, keep;
	uint64_t now = pg_now_ms();

	for (size_t i = 0; i < n; i++) {
		if (addrs[i].sa.sa_family == AF_INET6)
			addrs[i].in6.sin6_port = htons(nm->port);
		else
			addrs[i].in.sin_port = htons(nm->port);
	}
	n = pg_addrset_normalize(addrs, n);
	keep = pg_dns_verdict(st, n, nm->naddrs, now, &nm->nx_since_ms) == PG_DNS_KEEP;
	if (st != PG_DNS_OK || !n) {
		lookup_failed(nm, st == PG_DNS_OK ? "the answer has no address" : why, keep, now);
	} else {
		if (nm->failing_since)
			pg_info("backend name %s resolves again (%zu address%s)", label(nm, l), n,
			        n == 1 ? "" : "es");
		nm->state = PG_NAME_RESOLVED;
		nm->error[0] = 0;
		nm->failing_since = 0;
	}
	if (keep)
		return;
	if (st != PG_DNS_OK)
		n = 0; /* "no such name" held long enough: the name is empty */
	add = malloc((n + 1) * sizeof(*add));
	drain = malloc((nm->naddrs + 1) * sizeof(*drain));
	set = malloc((n + 1) * sizeof(*set));
	if (!add || !drain || !set) {
		pg_error("backend name %s: out of memory; keeping its last answer", label(nm, l));
		goto out;
	}
	pg_addrset_diff(nm->addrs, nm->naddrs, addrs, n, add, &nadd, drain, &ndrain);
	if (!nadd && !ndrain)
		goto out;
	pg_info("backend name %s: %zu address%s (%zu new, %zu gone)", label(nm, l), n,
	        n == 1 ? "" : "es", nadd, ndrain);
	/* The new set: the kept addresses, and the new ones that could be
	 * added (one that could not is retried by the next answer). */
	for (size_t i = 0, d = 0; i < nm->naddrs; i++) {
		if (d < ndrain && drain[d] == i) {
			d++;
			continue;
		}
		set[nkept++] = nm->addrs[i];
	}
	for (size_t i = 0; i < nadd; i++) {
		struct pg_hostport hp = spoken(nm);
		int id = pg_ctl_add_one(gw, &addrs[add[i]], &hp, nm->pool, PG_ORIGIN_NAME, true,
		                        &changed, err, sizeof(err));

		if (id < 0) {
			pg_error("backend name %s: %s", label(nm, l), err);
			continue;
		}
		if (!pg_ctl.name_of[id])
			pg_ctl.name_of[id] = (uint16_t)(k + 1);
		set[nkept++] = addrs[add[i]];
	}
	nkept = pg_addrset_normalize(set, nkept);
	for (size_t i = 0; i < ndrain; i++) {
		const union pg_sockaddr *gone = &nm->addrs[drain[i]];

		pg_info("backend name %s: %s no longer in the answer", label(nm, l),
		        pg_addr_format(gone, a));
	}
	/* Swap the sets before releasing, so other_holder sees the new one. */
	union pg_sockaddr *old = nm->addrs;

	nm->addrs = set;
	nm->naddrs = nkept;
	set = old;
	for (size_t i = 0; i < ndrain; i++)
		release(gw, k, &old[drain[i]], &changed);
	if (changed)
		pg_control_rebuild_ring(gw);
out:
	free(add);
	free(drain);
	free(set);
}

bool pg_backend_name_info(int k, struct pg_name_info *out)
{
	const struct pg_name *nm = k >= 0 && k < PG_MAX_NAMES ? &pg_ctl.names[k] : NULL;

	if (!nm || !nm->host[0])
		return false;
	label(nm, out->name);
	out->state = (enum pg_name_state)nm->state;
	snprintf(out->error, sizeof(out->error), "%s", nm->error);
	out->pool = nm->pool;
	out->naddrs = nm->naddrs;
	out->failures = nm->failures;
	out->failing_ms = nm->failing_since ? pg_now_ms() - nm->failing_since : 0;
	return true;
}

int pg_member_name_slot(int id)
{
	unsigned k = id > 0 && id < PG_MAX_BACKENDS ? pg_ctl.name_of[id] : 0;

	return k && pg_ctl.names[k - 1].host[0] ? (int)k - 1 : -1;
}

const char *pg_member_name(int id, char *buf)
{
	unsigned k = id > 0 && id < PG_MAX_BACKENDS ? pg_ctl.name_of[id] : 0;

	if (!k || !pg_ctl.names[k - 1].host[0])
		return NULL;
	return label(&pg_ctl.names[k - 1], buf);
}
