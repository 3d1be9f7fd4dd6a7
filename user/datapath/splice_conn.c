// SPDX-License-Identifier: MIT
/*
 * Per-connection calls of the in-kernel response paths: pairing a backend
 * socket with its client (skb path), routes and gates of same-host backend
 * connections (msg path), and the TCP counters of a client socket that tell
 * the proxy when every redirected byte is queued. Each is a few map
 * operations or socket queries, none blocks. Contracts in splice.h; the
 * programs reading these maps in bpf/splice.bpf.c.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "datapath/splice_internal.h"

int pg_splice_cookie(int fd, __u64 *cookie)
{
	socklen_t len = sizeof(*cookie);

	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, cookie, &len) == -1)
		return -errno;
	return 0;
}

/* Put a client socket in splice_clients (already there is fine). */
static int add_client(struct pg_splice *sp, int client_fd, __u64 *key)
{
	__u64 v = (__u64)client_fd;
	int rc;

	rc = pg_splice_cookie(client_fd, key);
	if (rc)
		return rc;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_clients), key, &v, BPF_NOEXIST) &&
	    errno != EEXIST)
		return -errno;
	return 0;
}

/* Bytes ever queued on a TCP socket (acked + still queued), and acked alone. */
static int tcp_acked(int fd, __u64 *acked)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1)
		return -errno;
	if (len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return -ENOTSUP;
	*acked = ti.tcpi_bytes_acked;
	return 0;
}

/*
 * Bytes the socket has carried (acknowledged + still queued) and, of those,
 * acknowledged. The two come from two calls; an ACK between them would
 * make the sum short by what it acknowledged, so the acknowledged count is
 * read on both sides of SIOCOUTQ until it did not move (loopback ACKs
 * arrive all the time while data flows).
 */
static int tcp_carried(int fd, __u64 *queued, __u64 *acked)
{
	__u64 a0, a1;
	int outq, rc, i;

	rc = tcp_acked(fd, &a1);
	for (i = 0; !rc && i < 8; i++) {
		a0 = a1;
		if (ioctl(fd, SIOCOUTQ, &outq) == -1)
			return -errno;
		rc = tcp_acked(fd, &a1);
		if (!rc && a1 == a0) {
			*acked = a1;
			*queued = a1 + (__u64)outq;
			return 0;
		}
	}
	return rc ? rc : -EAGAIN;
}

int pg_splice_carried(int fd, __u64 *carried)
{
	__u64 acked;

	return tcp_carried(fd, carried, &acked);
}

int pg_splice_send_room(int fd, __u64 *room)
{
	__u32 mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) == -1)
		return -errno;
	if (len < sizeof(__u32) * (SK_MEMINFO_WMEM_QUEUED + 1))
		return -ENOTSUP;
	*room = mem[SK_MEMINFO_SNDBUF] > mem[SK_MEMINFO_WMEM_QUEUED]
	            ? mem[SK_MEMINFO_SNDBUF] - mem[SK_MEMINFO_WMEM_QUEUED]
	            : 0;
	return 0;
}

int pg_splice_pair(struct pg_splice *sp, int backend_fd, int client_fd, __u64 budget,
                   const struct pg_frame *frame)
{
	return pg_splice_pair_ring(sp, backend_fd, client_fd, budget, frame, 0, NULL);
}

int pg_splice_pair_ring(struct pg_splice *sp, int backend_fd, int client_fd, __u64 budget,
                        const struct pg_frame *frame, unsigned int ring, __u64 *key)
{
	struct pg_splice_peer peer = {.budget = budget, .ring = ring};
	int peers = bpf_map__fd(sp->skel->maps.splice_peers);
	__u64 bkey, v = (__u64)backend_fd, acked;
	char c;
	int rc;

	if (!(sp->modes & PG_SPLICE_SKB))
		return -EOPNOTSUPP;
	if (ring >= sp->nrings)
		return -EINVAL;
	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	if (key)
		*key = bkey;
	if (frame)
		peer.frame = *frame;
	rc = add_client(sp, client_fd, &peer.client_key);
	if (rc)
		return rc;
	rc = tcp_carried(client_fd, &peer.base, &acked);
	if (rc)
		return rc;
	if (bpf_map_update_elem(peers, &bkey, &peer, BPF_NOEXIST))
		return -errno;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_backends), &bkey, &v,
	                        BPF_NOEXIST)) {
		rc = -errno;
		bpf_map_delete_elem(peers, &bkey);
		return rc;
	}
	/* Bytes queued before insertion wait for the next packet unless a read
	 * runs the verdict over them; MSG_PEEK so that nothing is consumed. */
	if (recv(backend_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == -1 && errno != EAGAIN &&
	    errno != EWOULDBLOCK)
		return 0; /* the fd's own error is for the proxy's next read to see */
	return 0;
}

int pg_splice_unpair(struct pg_splice *sp, int backend_fd)
{
	__u64 bkey;
	int rc, gone;

	if (!(sp->modes & PG_SPLICE_SKB))
		return -EOPNOTSUPP;
	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	/* The socket first, so the program no longer runs, then its state. */
	gone = bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_backends), &bkey) == 0;
	if (bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_peers), &bkey) == 0)
		gone = 1;
	return gone ? 0 : -ENOENT;
}

int pg_splice_progress(struct pg_splice *sp, int backend_fd, int client_fd,
                       struct pg_splice_progress *out)
{
	__u64 bkey, queued, acked;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	/* Counters first, client second: a byte counted as redirected is then
	 * either queued already or not, never missed by the comparison. */
	if (bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_peers), &bkey, &out->peer))
		return -errno;
	rc = tcp_carried(client_fd, &queued, &acked);
	if (rc)
		return rc;
	out->queued = queued > out->peer.base ? queued - out->peer.base : 0;
	out->acked = acked > out->peer.base ? acked - out->peer.base : 0;
	out->drained = out->queued >= out->peer.redirected;
	return 0;
}

int pg_splice_port_add(struct pg_splice *sp, __u16 port)
{
	__u32 k = port, v = 1;

	if (!(sp->modes & PG_SPLICE_MSG))
		return -EOPNOTSUPP;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_ports), &k, &v, BPF_ANY))
		return -errno;
	return 0;
}

int pg_splice_port_del(struct pg_splice *sp, __u16 port)
{
	__u32 k = port;

	if (!(sp->modes & PG_SPLICE_MSG))
		return -EOPNOTSUPP;
	if (bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_ports), &k))
		return -errno;
	return 0;
}

/* The route key of proxy_fd -> backend, from proxy_fd's bound address. */
static int route_key(int proxy_fd, const union pg_sockaddr *backend, struct pg_splice_tuple *t)
{
	const struct in6_addr *proxy = (const struct in6_addr *)t->proxy_ip6;
	union pg_sockaddr local;
	socklen_t len = sizeof(local);

	memset(t, 0, sizeof(*t));
	memset(&local, 0, sizeof(local));
	if (getsockname(proxy_fd, &local.sa, &len) == -1)
		return -errno;
	/* pg_splice_tuple's spelling: IPv4 as IPv4-mapped, either end. */
	if (!pg_sockaddr_ip6(&local, (uint8_t *)t->proxy_ip6) ||
	    !pg_sockaddr_ip6(backend, (uint8_t *)t->backend_ip6))
		return -EAFNOSUPPORT;
	/* Not bound: bind to the backend's address with port 0 first. */
	if (!pg_sockaddr_port(&local) || IN6_IS_ADDR_UNSPECIFIED(proxy) ||
	    (IN6_IS_ADDR_V4MAPPED(proxy) && !t->proxy_ip6[3]))
		return -EDESTADDRREQ;
	t->backend_port = pg_sockaddr_port(backend);
	t->proxy_port = pg_sockaddr_port(&local);
	return 0;
}

/* The msg path's route key of a proxy-side socket, or why there is none. */
static int msg_route_key(const struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend,
                         struct pg_splice_tuple *t)
{
	if (!(sp->modes & PG_SPLICE_MSG))
		return -EOPNOTSUPP;
	return route_key(proxy_fd, backend, t);
}

int pg_splice_route_add(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend,
                        int client_fd, __u64 budget, const struct pg_frame *frame)
{
	struct pg_splice_peer route = {.budget = budget}, old;
	struct pg_splice_tuple t;
	int rc;

	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	if (frame)
		route.frame = *frame;
	rc = add_client(sp, client_fd, &route.client_key);
	if (rc)
		return rc;
	/* A connected, idle connection keeps the base its sockops entry recorded:
	 * the gate counts the backend's bytes from there. */
	if (!bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t, &old))
		route.base = old.base;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t, &route, BPF_ANY))
		return -errno;
	return 0;
}

int pg_splice_route_get(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend,
                        struct pg_splice_peer *out)
{
	struct pg_splice_tuple t;
	int rc;

	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	if (bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t, out))
		return -errno;
	return 0;
}

int pg_splice_route_del(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend)
{
	struct pg_splice_tuple t;
	int rc;

	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_gates), &t);
	if (bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t))
		return -errno;
	return 0;
}

int pg_splice_route_gate(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend,
                         __u64 gate, const struct pg_frame *frame, __u64 budget)
{
	struct pg_splice_gate g = {.gate = gate, .budget = budget};
	struct pg_splice_tuple t;
	int rc;

	if (frame)
		g.frame = *frame;
	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_gates), &t, &g, BPF_ANY))
		return -errno;
	return 0;
}

int pg_splice_peer_get(struct pg_splice *sp, int backend_fd, struct pg_splice_peer *out)
{
	__u64 bkey;
	int rc;

	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	if (bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_peers), &bkey, out))
		return -errno;
	return 0;
}
