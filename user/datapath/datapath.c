// SPDX-License-Identifier: MIT
/*
 * Response data paths: which one carries a response body, and the hand-offs
 * between the proxy and the kernel (overview and contracts in datapath.h;
 * the programs and their ordering proofs in bpf/splice_skb.bpf.h and
 * bpf/splice_msg.bpf.h, parts of bpf/splice.bpf.c).
 *
 * The two kernel paths, each in its file: datapath_msg.c (sockmsg) and
 * datapath_skb.c (sockmap); their shared state is datapath_internal.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include "datapath/datapath_internal.h"
#include "proxy/sock.h"
#include "sys/log.h"

static void local_addrs(struct pg_datapath *dp)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa) == -1)
		return;
	for (i = ifa; i && dp->nlocal < DP_LOCAL_MAX; i = i->ifa_next) {
		if (!i->ifa_addr)
			continue;
		if (i->ifa_addr->sa_family == AF_INET)
			memcpy(&dp->local[dp->nlocal++].in, i->ifa_addr,
			       sizeof(struct sockaddr_in));
		else if (i->ifa_addr->sa_family == AF_INET6)
			memcpy(&dp->local[dp->nlocal++].in6, i->ifa_addr,
			       sizeof(struct sockaddr_in6));
	}
	freeifaddrs(ifa);
}

/* An address of this host: loopback (127/8, ::1) or an interface's
 * (IPv4 or IPv6; the port is not compared). */
static bool is_local(const struct pg_datapath *dp, const union pg_sockaddr *a)
{
	if (pg_sockaddr_loopback(a))
		return true;
	for (unsigned i = 0; i < dp->nlocal; i++) {
		const union pg_sockaddr *l = &dp->local[i];

		if (l->sa.sa_family != a->sa.sa_family)
			continue;
		if (a->sa.sa_family == AF_INET ? l->in.sin_addr.s_addr == a->in.sin_addr.s_addr
		                               : !memcmp(&l->in6.sin6_addr, &a->in6.sin6_addr, 16))
			return true;
	}
	return false;
}

/* Rate-limited: a per-request failure must not flood the log. */
const char *pg_dp_state_str(enum pg_dp_state s)
{
	switch (s) {
	case PG_SP_NONE:
		return "none";
	case PG_SP_MSG:
		return "msg";
	case PG_SP_STOPPING:
		return "stopping";
	case PG_SP_DRAIN:
		return "drain";
	case PG_SP_PAIRED:
		return "paired";
	case PG_SP_WAIT:
		return "wait";
	case PG_SP_COPY:
		return "copy";
	}
	return "?";
}

void pg_dp_warn(struct pg_worker *w, const char *what, int rc)
{
	struct pg_datapath *dp = w->gw->dp;

	if (w->now_ms - __atomic_load_n(&dp->err_logged_ms, __ATOMIC_RELAXED) < 1000)
		return;
	__atomic_store_n(&dp->err_logged_ms, w->now_ms, __ATOMIC_RELAXED);
	pg_warn("data path %s: %s: %s; this response is copied", pg_datapath_name(w->gw), what,
	        strerror(-rc));
}

int pg_datapath_init(struct pg_gateway *gw, uint64_t budget, char *err, size_t errlen)
{
	const struct pg_config *cfg = gw->cfg;
	struct pg_splice_config sc = {0};
	struct pg_datapath *dp;
	const char *name;
	unsigned modes;
	char why[512];
	int rc;

	gw->dp = NULL;
	if (cfg->no_bpf || cfg->data_path == PG_DATA_COPY)
		return 0;
	dp = calloc(1, sizeof(*dp));
	if (!dp) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	dp->budget = budget ? budget : PG_SPLICE_BUDGET_DEFAULT;
	/* auto: sockmsg, the path that measured better than copy (doc/datapaths.md). */
	modes = cfg->data_path == PG_DATA_SOCKMAP ? PG_SPLICE_SKB : PG_SPLICE_MSG;
	name = modes == PG_SPLICE_SKB ? "sockmap" : "sockmsg";
	sc.skb_budget = sc.msg_budget = dp->budget;
	sc.event_rings = gw->nworkers; /* one per worker: each drains its own */
	sc.cgroup = cfg->bpf_cgroup;   /* NULL: the loader probes the usual mounts */
	rc = pg_splice_open(&dp->sp, cfg->pin_path, modes, &sc, why, sizeof(why));
	if (rc) {
		free(dp);
		if (cfg->data_path == PG_DATA_AUTO) {
			pg_warn("--data-path auto: sockmsg unavailable (%s); using copy", why);
			return 0;
		}
		snprintf(err, errlen, "--data-path %s: %s", name, why);
		return -1;
	}
	dp->mode = modes == PG_SPLICE_SKB ? PG_DP_SKB : PG_DP_MSG;
	dp->auto_mode = cfg->data_path == PG_DATA_AUTO;
	if (dp->mode == PG_DP_MSG)
		local_addrs(dp);
	gw->dp = dp;
	return 0;
}

void pg_datapath_fini(struct pg_gateway *gw)
{
	if (!gw->dp)
		return;
	pg_splice_close(gw->dp->sp);
	free(gw->dp);
	gw->dp = NULL;
}

enum pg_dp_path pg_datapath_mode(const struct pg_gateway *gw)
{
	return gw->dp ? gw->dp->mode : PG_DP_COPY;
}

const char *pg_datapath_name(const struct pg_gateway *gw)
{
	switch (pg_datapath_mode(gw)) {
	case PG_DP_SKB:
		return "sockmap";
	case PG_DP_MSG:
		return "sockmsg (same-host backends; copy for others)";
	default:
		return "copy";
	}
}

enum pg_dp_path pg_dp_choose(struct pg_worker *w, uint16_t id, bool head_method, bool stream)
{
	struct pg_datapath *dp = w->gw->dp;
	const struct pg_backend *b = &w->gw->maps.backends[id];
	uint32_t port1 = (uint32_t)b->port + 1;
	union pg_sockaddr sa;
	char name[PG_ADDR_STRLEN];
	int rc;

	/* No body to splice: keep the pooled keep-alive connection. An
	 * https:// backend's bytes are encrypted: only the proxy reads them. */
	if (!dp || head_method || (__atomic_load_n(&b->flags, __ATOMIC_RELAXED) & PG_BACKEND_TLS))
		return PG_DP_COPY;
	/* auto: only streamed responses pay for a fresh backend connection;
	 * short answers measured faster on pooled connections (doc/datapaths.md). */
	if (dp->auto_mode && !stream)
		return PG_DP_COPY;
	if (dp->mode == PG_DP_SKB)
		return PG_DP_SKB;
	pg_backend_addr_get(b, &sa);
	if (!is_local(dp, &sa)) {
		if (!__atomic_exchange_n(&dp->logged[id], 1, __ATOMIC_RELAXED))
			pg_info("backend %s is not on this host: its responses take the copy path "
			        "(sockmsg needs a same-host backend)",
			        pg_backend_name(b, name, sizeof(name)));
		return PG_DP_COPY;
	}
	if (__atomic_load_n(&dp->port_added[id], __ATOMIC_RELAXED) != port1) {
		rc = pg_splice_port_add(dp->sp, b->port);
		if (rc) {
			pg_dp_warn(w, "watch backend port", rc);
			return PG_DP_COPY;
		}
		__atomic_store_n(&dp->port_added[id], port1, __ATOMIC_RELAXED);
	}
	return PG_DP_MSG;
}

int pg_dp_upstream_setup(struct pg_worker *w, struct pg_upstream *u, struct pg_client *c,
                         const union pg_sockaddr *sa, enum pg_dp_path path)
{
	struct pg_datapath *dp = w->gw->dp;
	union pg_sockaddr local = *sa;
	struct pg_dp_conn *d;
	int rc = 0;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->u = u;
	d->path = path;
	d->sa = *sa;
	d->gate_at = PG_SPLICE_GATE_CLOSED;
	if (path == PG_DP_MSG) {
		/* The route is keyed by our port, so bind before connect(); a
		 * same-host backend's address is one of ours (127.0.0.1, ::1, an
		 * interface's), so bind to it with port 0.
		 * The route exists before the backend accepts, so the sockops
		 * program inserts its socket. */
		if (local.sa.sa_family == AF_INET6) {
			local.in6.sin6_port = 0;
			local.in6.sin6_flowinfo = 0;
		} else {
			local.in.sin_port = 0;
		}
		if (bind(u->s.fd, &local.sa, pg_sockaddr_len(&local)) == -1)
			rc = -errno;
		else
			rc = pg_splice_route_add(dp->sp, u->s.fd, sa, c->s.fd, dp->budget, NULL);
		if (!rc) {
			rc = pg_splice_route_gate(dp->sp, u->s.fd, sa, PG_SPLICE_GATE_CLOSED, NULL,
			                          0);
			if (rc)
				pg_splice_route_del(dp->sp, u->s.fd, sa);
		}
		if (rc) {
			pg_dp_warn(w, "install route", rc);
			free(d);
			return rc;
		}
		d->sstate = PG_SP_MSG;
	}
	u->dp = d;
	return 0;
}

bool pg_dp_spliced(const struct pg_upstream *u)
{
	return u->dp && u->dp->spliced;
}

void pg_dp_received(struct pg_upstream *u, size_t len)
{
	if (u->dp)
		u->dp->rx += len;
}

int pg_dp_carried(int fd, uint64_t *carried)
{
	__u64 v = 0;
	int rc = pg_splice_carried(fd, &v);

	*carried = v;
	return rc;
}

void pg_dp_body_start(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_dp_conn *d = u->dp;

	if (!d)
		return;
	d->spliced = true;
	u->keep_alive = false;
	__atomic_fetch_add(&w->stats->spliced, 1, __ATOMIC_RELAXED);
	if (d->path == PG_DP_MSG) {
		pg_dp_msg_gate(w, u);
	} else if (d->path == PG_DP_SKB) {
		/* Called from a recv completion: pg_dp_recv_ended follows once the
		 * multishot recv is over (now, or after the cancel). */
		d->sstate = PG_SP_STOPPING;
		pg_sock_pause(w, &u->s);
	}
}

void pg_dp_recv_ended(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_dp_conn *d = u->dp;

	if (!d || d->sstate != PG_SP_STOPPING || !u->c || u->state != PG_U_BODY)
		return;
	d->sstate = PG_SP_DRAIN;
	pg_dp_skb_drain(w, u);
}

bool pg_dp_client_sent(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_dp_conn *d = u->dp;

	if (!d || u->state != PG_U_BODY)
		return false;
	switch (d->sstate) {
	case PG_SP_MSG:
		pg_dp_msg_gate(w, u);
		return false; /* bytes that fell back are copied as usual */
	case PG_SP_DRAIN:
		if (u->c->s.qbytes <= PG_RESP_QUEUE_MAX / 2)
			pg_dp_skb_drain(w, u);
		return true;
	case PG_SP_STOPPING:
	case PG_SP_PAIRED:
	case PG_SP_WAIT:
		return true;
	default:
		return false;
	}
}

void pg_dp_upstream_closing(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;

	if (!d || u->s.closed)
		return;
	pg_dp_wait_remove(w, d);
	if (d->path == PG_DP_SKB && d->sstate >= PG_SP_PAIRED) {
		struct pg_splice_peer peer;

		if (!pg_splice_peer_get(dp->sp, u->s.fd, &peer) && peer.repeated)
			pg_info("sockmap: cut %llu repeated bytes (TCP retransmission overlap) "
			        "from a spliced response",
			        (unsigned long long)peer.repeated);
		pg_debug("sockmap: unpairing in state %s", pg_dp_state_str(d->sstate));
		pg_splice_unpair(dp->sp, u->s.fd); /* fd still open: its cookie still reads */
	} else if (d->path == PG_DP_MSG && d->sstate == PG_SP_MSG) {
		pg_splice_route_del(dp->sp, u->s.fd, &d->sa);
	}
	d->sstate = PG_SP_NONE;
}

void pg_dp_free(struct pg_upstream *u)
{
	free(u->dp);
	u->dp = NULL;
}
