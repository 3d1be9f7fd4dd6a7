// SPDX-License-Identifier: MIT
/*
 * Response data paths: which one carries a response body, and the hand-offs
 * between the proxy and the kernel (overview and contracts in datapath.h;
 * the programs and their ordering proofs in bpf/splice.bpf.c).
 *
 * sockmsg (same-host backend), per request:
 *   socket -> bind(backend address, port 0) -> route with its gate closed ->
 *   connect (the sockops program puts the backend's socket in the sockmap) ->
 *   request -> every backend write is passed to the proxy while the gate is
 *   closed: the proxy reads the head, rewrites it, forwards it and whatever
 *   body came with it -> once the client's send queue is empty (every byte
 *   the proxy read is in the client's kernel queue) it opens the gate at the
 *   count of bytes it received -> later writes go straight to the client
 *   socket inside the backend's send(). A write over the budget of an
 *   opening (slow client) is passed instead: the proxy forwards it and
 *   reopens when its queue is empty again. Each opening hands the program
 *   the decoder's state; the write that ends the body is passed, so the
 *   proxy decodes it (from the state the program hands back, pg_dp_sync)
 *   and ends the response, keeping the client connection.
 *
 * sockmap (any backend), per request:
 *   fresh connection, request with "Connection: close" -> the proxy reads the
 *   head -> STOPPING: cancel the multishot recv, wait for its last CQE ->
 *   DRAIN: read the socket to EAGAIN (a partly read queue breaks the
 *   stream), forward it, wait until the client's send queue is empty ->
 *   PAIRED: pg_splice_pair with the decoder's state, one POLLRDHUP poll ->
 *   WAIT: FIN seen (or the 100 ms tick found a fall-back or the body's end)
 *   -> poll pg_splice_progress with back-off until drained -> the program's
 *   state says the body is complete: the response ends (client kept), or
 *   COPY: multishot recv again for passed bytes and the EOF, decoded from
 *   that state -> unpair while the fd is open -> close.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include "datapath/datapath.h"
#include "datapath/splice.h"
#include "sys/log.h"

#define DP_READ_MAX (64 * 1024)
#define DP_LOCAL_MAX 64
#define DP_WAIT_MAX_MS 64
#define DP_OPEN_MIN (8 * 1024) /* msg: least budget worth opening the gate for */

/* Where a spliced response stands (the transitions are below). */
enum pg_dp_state {
	PG_SP_NONE = 0, /* copying (or head not read yet) */
	PG_SP_MSG,      /* msg route in place; gate at gate_at */
	PG_SP_STOPPING, /* skb: multishot recv cancelled, waiting for its last CQE */
	PG_SP_DRAIN,    /* skb: reading the socket to EAGAIN, then waiting for the
	                 * client's queue to empty before pairing */
	PG_SP_PAIRED,   /* skb: kernel redirects; POLLRDHUP armed */
	PG_SP_WAIT,     /* skb: FIN or fall-back seen; waiting until drained */
	PG_SP_COPY,     /* skb: drained; passed bytes and EOF read by the proxy */
};

/* One backend connection's kernel path (u->dp). */
struct pg_dp_conn {
	struct pg_upstream *u;
	enum pg_dp_path path;
	enum pg_dp_state sstate;
	bool spliced;        /* the body goes through the kernel */
	bool polling;        /* POLLRDHUP outstanding */
	bool on_wait;        /* on the worker's dp_wait list */
	uint16_t synced_gen; /* msg: gate generation whose frame was taken back */
	uint16_t gate_gen;   /* msg: generation of the last gate opening */
	uint64_t rx;         /* bytes received from the backend by the proxy */
	uint64_t gate_at;    /* msg: open_at last published, or PG_SPLICE_GATE_CLOSED */
	__u64 carried_at;    /* msg: the client socket's carried bytes at that opening */
	uint64_t wait_at_ms; /* skb WAIT: next drained check */
	uint32_t wait_ms;    /* skb WAIT: current back-off */
	struct sockaddr_in sa; /* backend address (msg route key) */
	struct pg_dp_conn *wait_next;
};

struct pg_datapath {
	struct pg_splice *sp;
	enum pg_dp_path mode;
	bool auto_mode; /* --data-path auto: splice streamed responses only */
	uint64_t budget;
	uint32_t local[DP_LOCAL_MAX]; /* this host's IPv4 addresses */
	unsigned nlocal;
	uint32_t port_added[PG_MAX_BACKENDS]; /* msg: backend port + 1 registered */
	uint8_t logged[PG_MAX_BACKENDS];      /* "not on this host" said once */
	uint64_t err_logged_ms;
};

static void local_addrs(struct pg_datapath *dp)
{
	struct ifaddrs *ifa, *i;

	if (getifaddrs(&ifa) == -1)
		return;
	for (i = ifa; i && dp->nlocal < DP_LOCAL_MAX; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
			dp->local[dp->nlocal++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
	freeifaddrs(ifa);
}

static bool is_local(const struct pg_datapath *dp, uint32_t ip)
{
	if ((ntohl(ip) >> 24) == 127)
		return true;
	for (unsigned i = 0; i < dp->nlocal; i++)
		if (dp->local[i] == ip)
			return true;
	return false;
}

/* Rate-limited: a per-request failure must not flood the log. */
static void dp_warn(struct pg_worker *w, const char *what, int rc)
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
	/* auto: sockmsg, the path that measured better than copy (README). */
	modes = cfg->data_path == PG_DATA_SOCKMAP ? PG_SPLICE_SKB : PG_SPLICE_MSG;
	name = modes == PG_SPLICE_SKB ? "sockmap" : "sockmsg";
	sc.skb_budget = sc.msg_budget = dp->budget;
	sc.cgroup = cfg->bpf_cgroup; /* NULL: the loader probes the usual mounts */
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
	case PG_DP_SKB: return "sockmap";
	case PG_DP_MSG: return "sockmsg (same-host backends; copy for others)";
	default: return "copy";
	}
}

enum pg_dp_path pg_dp_choose(struct pg_worker *w, uint16_t id, bool head_method, bool stream)
{
	struct pg_datapath *dp = w->gw->dp;
	const struct pg_backend *b = &w->gw->maps.backends[id];
	uint32_t port1 = (uint32_t)b->port + 1;
	char name[32];
	int rc;

	/* No body to splice: keep the pooled keep-alive connection. */
	if (!dp || head_method)
		return PG_DP_COPY;
	/* auto: only streamed responses pay for a fresh backend connection;
	 * short answers measured faster on pooled connections (README). */
	if (dp->auto_mode && !stream)
		return PG_DP_COPY;
	if (dp->mode == PG_DP_SKB)
		return PG_DP_SKB;
	if (!is_local(dp, b->ipv4)) {
		if (!__atomic_exchange_n(&dp->logged[id], 1, __ATOMIC_RELAXED))
			pg_info("backend %s is not on this host: its responses take the copy path "
				"(sockmsg needs a same-host backend)",
				pg_backend_name(b, name, sizeof(name)));
		return PG_DP_COPY;
	}
	if (__atomic_load_n(&dp->port_added[id], __ATOMIC_RELAXED) != port1) {
		rc = pg_splice_port_add(dp->sp, b->port);
		if (rc) {
			dp_warn(w, "watch backend port", rc);
			return PG_DP_COPY;
		}
		__atomic_store_n(&dp->port_added[id], port1, __ATOMIC_RELAXED);
	}
	return PG_DP_MSG;
}

int pg_dp_upstream_setup(struct pg_worker *w, struct pg_upstream *u, struct pg_client *c,
			 const struct sockaddr_in *sa, enum pg_dp_path path)
{
	struct pg_datapath *dp = w->gw->dp;
	struct sockaddr_in local = {.sin_family = AF_INET, .sin_addr = sa->sin_addr};
	struct pg_dp_conn *d = calloc(1, sizeof(*d));
	int rc = 0;

	if (!d)
		return -ENOMEM;
	d->u = u;
	d->path = path;
	d->sa = *sa;
	d->gate_at = PG_SPLICE_GATE_CLOSED;
	if (path == PG_DP_MSG) {
		/* The route is keyed by our port, so bind before connect(); a
		 * same-host backend's address is one of ours. The route exists
		 * before the backend accepts, so the sockops program inserts its
		 * socket. */
		if (bind(u->s.fd, (const struct sockaddr *)&local, sizeof(local)) == -1)
			rc = -errno;
		else
			rc = pg_splice_route_add(dp->sp, u->s.fd, sa, c->s.fd, dp->budget, NULL);
		if (!rc) {
			rc = pg_splice_route_gate(dp->sp, u->s.fd, sa, PG_SPLICE_GATE_CLOSED, NULL, 0);
			if (rc)
				pg_splice_route_del(dp->sp, u->s.fd, sa);
		}
		if (rc) {
			dp_warn(w, "install route", rc);
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

/* msg: open the gate at the bytes received, once all are in the client's
 * kernel queue (nothing queued or being sent by the proxy), handing the
 * program the decoder's state at that count. */
static void msg_gate(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;
	struct pg_client *c = u->c;
	__u64 room = 0;
	uint16_t gen;
	int rc;

	if (d->sstate != PG_SP_MSG || !d->spliced || !c || u->state != PG_U_BODY || c->s.qbytes ||
	    c->s.send_busy || d->gate_at == d->rx || u->s.closed)
		return;
	gen = (uint16_t)(d->gate_gen + 1);
	if (!gen)
		gen = 1; /* the program starts at generation 0: never reuse it */
	/* Redirect no more than half the room left in the client's send
	 * buffer (the rest covers buffer overhead): a redirect into a full
	 * buffer is a short write for a non-blocking backend, after which the
	 * program's framing state cannot be trusted (pg_dp_sync). With less
	 * room the gate stays closed and the backend's writes come to us;
	 * each one we forward brings us back here. */
	rc = pg_splice_send_room(c->s.fd, &room);
	if (!rc && room < 2 * DP_OPEN_MIN)
		return;
	if (!rc)
		rc = pg_splice_carried(c->s.fd, &d->carried_at);
	if (!rc)
		rc = pg_splice_route_gate(dp->sp, u->s.fd, &d->sa, PG_SPLICE_GATE(d->rx, gen),
					  &u->frame, room / 2 < dp->budget ? room / 2 : dp->budget);
	if (rc) {
		dp_warn(w, "open gate", rc);
		d->sstate = PG_SP_NONE; /* closed for good: the proxy copies the rest */
		pg_splice_route_del(dp->sp, u->s.fd, &d->sa);
		return;
	}
	d->gate_gen = gen;
	d->gate_at = d->rx;
}

void pg_dp_forwarded(struct pg_worker *w, struct pg_upstream *u)
{
	if (u->dp)
		msg_gate(w, u);
}

void pg_dp_sync(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;
	struct pg_splice_peer r;
	__u64 carried = 0;
	int rc;

	/* Only what arrives while the gate is open at our count can follow
	 * redirected bytes (anything else was passed before it opened), and
	 * the program takes the gate's state at the first write it sees of a
	 * generation: no write seen, no bytes redirected, our state stands.
	 * The backend's writes are serialised by its socket lock and each
	 * reaches us only after its verdict, so the state read here is final
	 * for this opening. */
	if (!d || d->sstate != PG_SP_MSG || d->gate_at != d->rx || d->synced_gen == d->gate_gen)
		return;
	d->synced_gen = d->gate_gen;
	rc = pg_splice_route_get(dp->sp, u->s.fd, &d->sa, &r);
	if (!rc && r.gate_gen != d->gate_gen)
		return; /* no write seen since the opening: nothing redirected */
	if (!rc && u->c)
		rc = pg_splice_carried(u->c->s.fd, &carried);
	/*
	 * The program advances its state over each write it redirects, but a
	 * non-blocking backend facing a full client socket gets a short count:
	 * only part of that write reached the client, and the backend sends the
	 * rest again. The client socket carried exactly the redirected bytes
	 * since the opening (the proxy wrote nothing meanwhile); if that is not
	 * what the program offered, its state is off by the bytes sent twice.
	 */
	if (!rc && carried - d->carried_at == r.since) {
		pg_upstream_take_frame(w, u, &r.frame);
		return;
	}
	/* Where the body stands is unknown: it ends with the backend's close,
	 * and so does the client's connection (a body cut short shows as one). */
	if (rc)
		dp_warn(w, "read route", rc);
	memset(&u->frame, 0, sizeof(u->frame)); /* PG_FRAME_NONE */
	if (u->c)
		u->c->x.keep_alive = false;
	/* Nothing more to track: the proxy copies the rest. */
	d->sstate = PG_SP_NONE;
	pg_splice_route_del(dp->sp, u->s.fd, &d->sa);
	__atomic_fetch_add(&w->stats->splice_unframed, 1, __ATOMIC_RELAXED);
}

static void skb_try_pair(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;
	struct pg_client *c = u->c;
	int rc;

	/* Redirected bytes join the client's queue behind what it holds: the
	 * proxy's own bytes must all be there first. */
	if (c->s.qbytes || c->s.send_busy)
		return; /* pg_dp_client_sent comes back */
	rc = pg_splice_pair(dp->sp, u->s.fd, c->s.fd, dp->budget, &u->frame);
	if (rc) {
		dp_warn(w, "pair sockets", rc);
		d->sstate = PG_SP_COPY;
		pg_sock_recv(w, &u->s);
		return;
	}
	d->sstate = PG_SP_PAIRED;
	d->polling = true;
	pg_sock_poll_rdhup(w, &u->s);
}

/* skb DRAIN: read to EAGAIN (bounded by the client's queue), then pair. */
static void skb_drain(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_client *c = u->c;
	char buf[DP_READ_MAX];

	while (c->s.qbytes <= PG_RESP_QUEUE_MAX) {
		ssize_t n = recv(u->s.fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0) {
			pg_upstream_input(w, u, buf, (size_t)n, -1);
			if (u->s.closed || u->state != PG_U_BODY)
				return; /* failed, or the body is complete */
			continue;
		}
		if (n == 0) {
			pg_upstream_ended(w, u, 0);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			skb_try_pair(w, u);
		else
			pg_upstream_ended(w, u, -errno);
		return;
	}
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
		msg_gate(w, u);
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
	skb_drain(w, u);
}

bool pg_dp_client_sent(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_dp_conn *d = u->dp;

	if (!d || u->state != PG_U_BODY)
		return false;
	switch (d->sstate) {
	case PG_SP_MSG:
		msg_gate(w, u);
		return false; /* bytes that fell back are copied as usual */
	case PG_SP_DRAIN:
		if (u->c->s.qbytes <= PG_RESP_QUEUE_MAX / 2)
			skb_drain(w, u);
		return true;
	case PG_SP_STOPPING:
	case PG_SP_PAIRED:
	case PG_SP_WAIT:
		return true;
	default:
		return false;
	}
}

static void wait_add(struct pg_worker *w, struct pg_dp_conn *d)
{
	d->sstate = PG_SP_WAIT;
	d->wait_ms = 1;
	d->wait_at_ms = w->now_ms;
	if (!d->on_wait) {
		d->on_wait = true;
		d->wait_next = w->dp_wait;
		w->dp_wait = d;
	}
}

static void wait_remove(struct pg_worker *w, struct pg_dp_conn *d)
{
	struct pg_dp_conn **pp = &w->dp_wait;

	if (!d->on_wait)
		return;
	while (*pp && *pp != d)
		pp = &(*pp)->wait_next;
	if (*pp)
		*pp = d->wait_next;
	d->on_wait = false;
}

void pg_dp_polled(struct pg_worker *w, struct pg_upstream *u, int res)
{
	struct pg_dp_conn *d = u->dp;

	if (!d)
		return;
	d->polling = false;
	if (d->sstate != PG_SP_PAIRED || res == -ECANCELED || !u->c)
		return;
	/* FIN or error: redirects may still be on their way to the client. */
	wait_add(w, d);
}

unsigned pg_dp_next_ms(struct pg_worker *w)
{
	uint64_t next = w->now_ms + 100;

	for (struct pg_dp_conn *d = w->dp_wait; d; d = d->wait_next)
		if (d->wait_at_ms < next)
			next = d->wait_at_ms;
	return next <= w->now_ms ? 0 : (unsigned)(next - w->now_ms);
}

void pg_dp_run(struct pg_worker *w)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn **pp = &w->dp_wait;

	while (*pp) {
		struct pg_dp_conn *d = *pp;
		struct pg_upstream *u = d->u;
		struct pg_splice_progress pr;

		if (w->now_ms < d->wait_at_ms) {
			pp = &d->wait_next;
			continue;
		}
		if (!pg_splice_progress(dp->sp, u->s.fd, u->c->s.fd, &pr) && !pr.drained) {
			/* A stalled client: back off up to DP_WAIT_MAX_MS. */
			d->wait_at_ms = w->now_ms + d->wait_ms;
			if (d->wait_ms < DP_WAIT_MAX_MS)
				d->wait_ms *= 2;
			pp = &d->wait_next;
			continue;
		}
		/* Every redirected byte is in the client's queue: what the program
		 * passed, and the EOF, are the proxy's to read and forward now. */
		*pp = d->wait_next;
		d->on_wait = false;
		if (pr.peer.flags & PG_SPLICE_F_BROKEN) {
			/* The program could not keep the stream intact (see
			 * skb_cut_repeat): the client must not take it as whole. */
			dp_warn(w, "repeated bytes could not be cut", -EIO);
			pg_upstream_ended(w, u, -EIO);
			continue;
		}
		/* Where the body stands after the redirected bytes: complete
		 * (the program saw its end), or the proxy decodes the rest. */
		if (pg_upstream_take_frame(w, u, &pr.peer.frame))
			continue;
		d->sstate = PG_SP_COPY;
		pg_sock_recv(w, &u->s);
	}
}

void pg_dp_tick(struct pg_worker *w)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_splice_peer peer;

	if (!dp || dp->mode != PG_DP_SKB)
		return;
	/* A fall-back (budget reached: a slow client) leaves bytes for the
	 * proxy without a wake-up it can wait for; 100 ms is soon enough for a
	 * client that slow. A response whose end was redirected is normally
	 * closed by the backend's FIN at once; the tick covers one that is not. */
	for (struct pg_client *c = w->clients; c; c = c->next) {
		struct pg_upstream *u = c->x.up;

		if (u && u->dp && u->dp->sstate == PG_SP_PAIRED &&
		    !pg_splice_peer_get(dp->sp, u->s.fd, &peer) &&
		    (peer.flags & (PG_SPLICE_F_FALLBACK | PG_SPLICE_F_BROKEN | PG_SPLICE_F_DONE)))
			wait_add(w, u->dp);
	}
}

void pg_dp_upstream_closing(struct pg_worker *w, struct pg_upstream *u)
{
	struct pg_datapath *dp = w->gw->dp;
	struct pg_dp_conn *d = u->dp;

	if (!d || u->s.closed)
		return;
	wait_remove(w, d);
	if (d->path == PG_DP_SKB && d->sstate >= PG_SP_PAIRED) {
		struct pg_splice_peer peer;

		if (!pg_splice_peer_get(dp->sp, u->s.fd, &peer) && peer.repeated)
			pg_info("sockmap: cut %llu repeated bytes (TCP retransmission overlap) "
				"from a spliced response",
				(unsigned long long)peer.repeated);
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
