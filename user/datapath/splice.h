/* SPDX-License-Identifier: MIT */
/*
 * Loader and per-connection API of the in-kernel response paths
 * (bpf/splice.bpf.c; structs and design in include/pg_splice.h). The loader
 * is in splice_load.c, the per-connection calls in splice_conn.c, the event
 * rings in splice_events.c.
 *
 * Every call is non-blocking (bpf(2) map operations, getsockopt, ioctl, one
 * MSG_DONTWAIT recv): safe from an io_uring event loop, and from several
 * worker threads at once on one struct pg_splice (one event ring is drained
 * by one thread at a time). Calls return 0 (or the documented positive
 * value) on success and -errno on failure.
 *
 * skb path (any backend), per request, on a fresh backend connection with the
 * request rewritten to "Connection: close":
 *   connect -> pg_splice_pair_ring(backend, client, the thread's ring) ->
 *   send the request -> wait for POLLRDHUP on the backend fd or the
 *   pairing's event on the ring (FALLBACK, BROKEN; DONE is found at the
 *   wake-up the FIN brings) -> read the backend fd to EAGAIN or
 *   EOF, holding any bytes read (they were passed: fall-back) ->
 *   poll pg_splice_progress() until drained -> write the held bytes, then
 *   keep copying -> pg_splice_unpair -> close the backend fd.
 * msg path (same-host backend), per request:
 *   socket, bind 127.0.0.1:0 (IPv6: [::1]:0) -> pg_splice_route_add -> connect -> send the
 *   request -> any byte read from the backend fd is passed (fall-back) and
 *   may be written to the client at once -> on EOF the response is complete
 *   on the client socket -> pg_splice_route_del -> close.
 */
#ifndef PG_USER_SPLICE_H
#define PG_USER_SPLICE_H

#include <stddef.h>
#include <netinet/in.h>
#include <linux/types.h>
#include "pg_splice.h"
#include "lib/addr.h"

struct pg_splice;

/* Loader options; a NULL pointer or 0 field means the default. */
struct pg_splice_config {
	__u64 skb_budget;              /* PG_SPLICE_BUDGET_DEFAULT: unacked redirected bytes */
	__u64 msg_budget;              /* PG_SPLICE_BUDGET_DEFAULT: bytes offered per route */
	const char *cgroup;            /* cgroup v2 for sockops; NULL: the first cgroup2 mount
	                                * of /sys/fs/cgroup/unified and /sys/fs/cgroup */
	unsigned int event_rings;      /* 1: event rings, one per thread that pairs
	                                * sockets; at most PG_SPLICE_MAX_RINGS */
	unsigned int event_ring_bytes; /* PG_SPLICE_EVENTS_BYTES: bytes of each ring,
	                                * a power of two pages */
};

/*
 * Load the programs for `modes` (PG_SPLICE_SKB | PG_SPLICE_MSG), attach them
 * (sk_skb verdict to splice_backends, sk_msg verdict to splice_msgsocks,
 * sockops to the cgroup), create the event rings, and pin every map as
 * <pin_path>/<map name> (pin_path is created; stale pins of a previous run
 * are replaced).
 * On failure returns -errno, *out = NULL, and err holds one line naming the
 * cause (no privilege, no bpffs, no cgroup v2, missing kernel feature) for
 * `--data-path auto` to log before falling back to the copy path.
 */
int pg_splice_open(struct pg_splice **out, const char *pin_path, unsigned int modes,
                   const struct pg_splice_config *cfg, char *err, size_t errlen);

/* Detach everything, remove our pins, free. Spliced sockets keep working as
 * plain TCP sockets. NULL is a no-op. */
void pg_splice_close(struct pg_splice *sp);

/* Modes loaded. */
unsigned int pg_splice_modes(const struct pg_splice *sp);

/*
 * skb path events (struct pg_splice_event; when each is written in
 * include/pg_splice.h): how the proxy learns at once that a pairing fell
 * back (a slow client: the passed bytes wait in the backend socket) or broke,
 * or that its response ended, without looking at every pairing. A pairing's
 * events go to the ring named at pairing (pg_splice_pair_ring); give each
 * thread that pairs sockets a ring of its own and drain it from that thread
 * only. The msg path writes no event.
 *
 * pg_splice_events_ring_fd: polls POLLIN while the ring holds records (poll,
 * epoll or io_uring POLL_ADD); -EINVAL if ring >= event_rings. FALLBACK and
 * BROKEN records wake a poller at once; DONE records do not (the backend's
 * FIN follows and wakes the proxy): drain the ring at every wake-up of the
 * thread's loop, not only when this fd polls readable.
 *
 * pg_splice_events_drain: call fn for each record in the ring, without
 * waiting; returns their count or -errno. *lost (if not NULL): records the
 * ring could not take since the previous drain (it was full); if not 0, look
 * at every pairing of the ring (pg_splice_peer_get): their flags are set all
 * the same. A record can name a pairing that has since been unpaired, or a
 * closed socket (cookies are never reused): match ev->key against the
 * pairings the thread holds.
 */
int pg_splice_events_ring_fd(const struct pg_splice *sp, unsigned int ring);
int pg_splice_events_drain(struct pg_splice *sp, unsigned int ring,
                           void (*fn)(void *ctx, const struct pg_splice_event *ev), void *ctx,
                           __u64 *lost);
/* Ring 0: pg_splice_events_ring_fd(sp, 0), pg_splice_events_drain(sp, 0, fn, ctx, NULL). */
int pg_splice_events_fd(const struct pg_splice *sp);
int pg_splice_events_consume(struct pg_splice *sp,
                             void (*fn)(void *ctx, const struct pg_splice_event *ev), void *ctx);

/*
 * skb path: splice backend_fd's received bytes to client_fd's egress.
 * Both must be established TCP sockets. Order inside: client into
 * splice_clients, peer state, then the backend socket into splice_backends,
 * then one MSG_PEEK|MSG_DONTWAIT recv that makes the kernel run the verdict
 * over bytes already queued. Call it before sending the request, or after
 * reading the backend fd to EAGAIN (a partly read queue breaks the stream).
 * budget: 0 = loaded default. frame: the response's framing after the bytes
 * the proxy read itself (its decoder's state), so that the program finds the
 * end (PG_SPLICE_F_DONE) and hands its state back in the peer; NULL = not
 * tracked (the response ends with the backend's FIN).
 * -EEXIST if backend_fd is already paired.
 * pg_splice_pair_ring: the same, with the pairing's events going to ring
 * `ring` (< event_rings, else -EINVAL) and, if key is not NULL, the
 * pairing's key (pg_splice_event.key: backend_fd's cookie) stored in *key.
 * pg_splice_pair uses ring 0.
 */
int pg_splice_pair(struct pg_splice *sp, int backend_fd, int client_fd, __u64 budget,
                   const struct pg_frame *frame);
int pg_splice_pair_ring(struct pg_splice *sp, int backend_fd, int client_fd, __u64 budget,
                        const struct pg_frame *frame, unsigned int ring, __u64 *key);

/*
 * Stop splicing backend_fd (the client stays in splice_clients until it is
 * closed). Call while backend_fd is still open, after reading it to EAGAIN or
 * EOF: bytes passed but not yet read are dropped with the socket's sockmap
 * state. -ENOENT if it was not paired.
 */
int pg_splice_unpair(struct pg_splice *sp, int backend_fd);

/* Where a spliced response stands. */
struct pg_splice_progress {
	struct pg_splice_peer peer; /* program's counters and flags */
	__u64 queued;               /* bytes put on the client socket since pairing */
	__u64 acked;                /* of those, acknowledged by the client */
	int drained;                /* queued >= peer.redirected: may write/close */
};

/*
 * skb path: read the peer state and the client's TCP counters
 * (tcpi_bytes_acked + SIOCOUTQ). drained = 1 means every redirected byte is in
 * the client's write queue: the proxy may now write (passed bytes, an error
 * page) or close. Counts nothing the proxy wrote to client_fd itself after
 * pairing, so it must write nothing while paired and not drained.
 */
int pg_splice_progress(struct pg_splice *sp, int backend_fd, int client_fd,
                       struct pg_splice_progress *out);

/* msg path: watch connections to this same-host backend port (host order). */
int pg_splice_port_add(struct pg_splice *sp, __u16 port);
int pg_splice_port_del(struct pg_splice *sp, __u16 port);

/*
 * msg path: route the response of the connection proxy_fd -> backend to
 * client_fd. backend: IPv4 or IPv6. proxy_fd must be bound to a local address
 * and port (bind to the backend's address with port 0: 127.0.0.1:0,
 * [::1]:0) and not yet connected, or connected and idle (reused
 * connection: the new route replaces the previous one). Call before connect()
 * / before sending the request. The backend's port must have been added.
 */
int pg_splice_route_add(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend,
                        int client_fd, __u64 budget, const struct pg_frame *frame);
int pg_splice_route_get(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend,
                        struct pg_splice_peer *out);
/* Removes the route and its gate. */
int pg_splice_route_del(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend);

/*
 * msg path: set the route's gate (PG_SPLICE_GATE(open_at, generation), or
 * PG_SPLICE_GATE_CLOSED; see pg_splice.h). Set it closed before connect()
 * when the proxy reads the response head itself; open it at the count of
 * backend bytes received once all of them are in the client's write queue,
 * with frame = the proxy's decoder state at that count (NULL: not tracked)
 * and budget = the bytes this opening may redirect (0: the route's budget;
 * keep it within the room of the client's send buffer, see pg_splice.h).
 */
int pg_splice_route_gate(struct pg_splice *sp, int proxy_fd, const union pg_sockaddr *backend,
                         __u64 gate, const struct pg_frame *frame, __u64 budget);

/* skb path: the program's counters and flags of a paired backend socket
 * (cheaper than pg_splice_progress: no TCP counters of the client). */
int pg_splice_peer_get(struct pg_splice *sp, int backend_fd, struct pg_splice_peer *out);

/* Bytes a TCP socket has carried: every byte written to it that is in its
 * write queue or acknowledged (tcpi_bytes_acked + SIOCOUTQ). Redirected
 * bytes count as they are queued. */
int pg_splice_carried(int fd, __u64 *carried);

/* Room left in a socket's send buffer, in the kernel's accounting
 * (SO_MEMINFO: sndbuf - wmem_queued, which counts buffer overhead too). */
int pg_splice_send_room(int fd, __u64 *room);

/* The cookie that keys a socket in the splice maps (SO_COOKIE). */
int pg_splice_cookie(int fd, __u64 *cookie);

#endif /* PG_USER_SPLICE_H */
