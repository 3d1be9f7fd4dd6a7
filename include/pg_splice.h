/* SPDX-License-Identifier: MIT */
/*
 * prefixgate in-kernel response paths — the structs and constants that
 * bpf/splice.bpf.c and user/datapath/splice_*.c share. Included by the BPF program
 * (with only <linux/types.h> before it) and by userspace.
 *
 * Two paths carry a response from a backend to the client without the proxy
 * copying it:
 *  - sk_skb ("skb"): any backend. The proxy's backend-side socket sits in
 *    splice_backends; its verdict program redirects each received skb to the
 *    paired client socket's egress. Keyed by the backend socket's cookie.
 *  - sk_msg ("msg"): same-host backends. The backend's own server-side socket
 *    (inserted by a sockops program) sits in splice_msgsocks; its verdict
 *    program sends the backend's writes straight out of the client socket.
 *    Keyed by the connection's 4-tuple (struct pg_splice_tuple).
 * Both use struct pg_splice_peer as the per-connection state.
 */
#ifndef PG_SPLICE_H
#define PG_SPLICE_H

#include <linux/types.h>
#include "pg_frame.h"

/* Paths, as a bit mask of modes (pg_splice_open). */
#define PG_SPLICE_SKB 0x1 /* sk_skb verdict on the proxy's backend socket: any backend */
#define PG_SPLICE_MSG 0x2 /* sk_msg verdict on the backend's own socket: same host */

/* Entries in each splice map: concurrent spliced connections per gateway. */
#ifndef PG_SPLICE_MAX_CONNS
#define PG_SPLICE_MAX_CONNS 65536
#endif
/* Backend ports watched by the sockops program (same-host backends). */
#define PG_SPLICE_MAX_PORTS 256
/* Event rings (pg_splice_config.event_rings): one per consumer thread. */
#define PG_SPLICE_MAX_RINGS 64
/* Bytes of one event ring by default (a power of two pages): 6,553 events. */
#define PG_SPLICE_EVENTS_BYTES (256 * 1024)

/*
 * Default bound, per connection, on redirected bytes not yet acknowledged by
 * the client (skb path) or offered to the redirect in one response (msg path).
 * Above it the program stops redirecting for that connection (see
 * PG_SPLICE_F_FALLBACK). A plain copy proxy holds ~10 MiB for a stalled
 * client; without a bound sockmap buffered a whole 1 GiB response.
 */
#define PG_SPLICE_BUDGET_DEFAULT (4ull << 20)

/* pg_splice_peer.flags */
#define PG_SPLICE_F_FALLBACK 0x1 /* sticky: every later byte is SK_PASSed to the proxy */
#define PG_SPLICE_F_DONE     0x2 /* the response ended exactly at a redirected byte */
#define PG_SPLICE_F_SEQ      0x4 /* skb: next_seq is valid */
/* skb: a repeated head could not be cut off: the stream is damaged, the
 * proxy must abort it */
#define PG_SPLICE_F_BROKEN 0x8

/* pg_splice_peer.reason / pg_splice_event.reason: why FALLBACK or DONE was set. */
enum pg_splice_reason {
	PG_SPLICE_WHY_NONE = 0,
	PG_SPLICE_WHY_BUDGET = 1,    /* bound on unacknowledged / offered bytes reached */
	PG_SPLICE_WHY_NO_CLIENT = 2, /* client socket no longer in splice_clients */
	PG_SPLICE_WHY_REDIRECT = 3,  /* the redirect helper failed */
	PG_SPLICE_WHY_FRAMING = 4,   /* bytes past the response's end, malformed framing,
	                              * or more framing in one skb/msg than the program
	                              * reads (PG_SPLICE_SCAN_*): the proxy decodes them */
	PG_SPLICE_WHY_END = 5,       /* the response ended: DONE (skb, msg without a
	                              * gate), or its last bytes passed (msg with a gate) */
	PG_SPLICE_WHY_NO_TCP = 6,    /* client's TCP state unreadable */
};

/*
 * One spliced connection. Hash map "splice_peers" (skb path, key: the
 * proxy's backend-side socket cookie, __u64) and "splice_routes" (msg path,
 * key: struct pg_splice_tuple). Userspace writes client_key, base, budget,
 * frame and ring at pairing; the program alone updates the rest, with atomics.
 */
struct pg_splice_peer {
	__u64 client_key; /* client socket cookie: its key in splice_clients */
	/*
	 * skb path: bytes the proxy had queued on the client socket when pairing
	 * (tcpi_bytes_acked + SIOCOUTQ), so that base + redirected is the total
	 * the client socket will have carried once every redirect is queued.
	 * msg path: the backend socket's snd_nxt when it was established
	 * (written by the sockops program): the gate counts from it.
	 */
	__u64 base;
	__u64 budget; /* bound (see PG_SPLICE_BUDGET_DEFAULT); 0: the loaded default */
	/*
	 * The response's framing after the bytes handed on so far, so that its
	 * end is found without the proxy reading the body: the proxy sets it at
	 * pairing (skb) or at each gate opening (msg, through the gate value)
	 * from its own decoder, the program advances it over each skb/msg it
	 * redirects (not over passed bytes), and the proxy takes it back before
	 * decoding bytes that follow redirected ones. PG_FRAME_NONE: not
	 * tracked, the response ends with the backend's FIN.
	 */
	struct pg_frame frame;
	__u64 redirected; /* skb: bytes redirected; msg: bytes offered to the redirect */
	__u64 passed;     /* bytes SK_PASSed to the proxy's normal receive path */
	__u32 flags;      /* PG_SPLICE_F_* */
	__u32 reason;     /* enum pg_splice_reason */
	/* msg path with a gate (splice_gates): the gate generation last seen and
	 * bytes offered to the redirect since that gate opened. Program-owned. */
	__u64 gate_gen;
	__u64 since;
	/*
	 * skb path, program-owned: TCP sequence number of the next byte not yet
	 * handed on (redirected or passed), valid once PG_SPLICE_F_SEQ is set,
	 * and the bytes cut off because they repeated bytes already handed on.
	 * TCP can queue a retransmitted segment that overlaps what it already
	 * received (the reader is expected to skip up to copied_seq); the
	 * verdict path hands over whole skbs, so without the cut the overlap
	 * reaches the client twice.
	 */
	__u32 next_seq;
	__u32 ring; /* skb path: the event ring of the pairing (pg_splice_pair_ring) */
	__u64 repeated;
};
_Static_assert(sizeof(struct pg_splice_peer) == 104, "pg_splice_peer layout");

/*
 * msg path gate, hash map "splice_gates" (key: struct pg_splice_tuple, value:
 * struct pg_splice_gate, written by userspace only; replaced whole, never
 * changed in place, so the program reads one consistent value):
 *   gate bits 0-47  open_at: the program redirects a backend write only when
 *              the bytes the backend's socket has queued on its own TCP path
 *              (write_seq - peer.base, mod 2^32) equal open_at, i.e. when the
 *              proxy has received and forwarded every byte the backend sent
 *              through TCP. PG_SPLICE_GATE_CLOSED never matches.
 *   gate bits 48-63 generation: bumped at each (re)opening; a new generation
 *              restarts the per-opening count (peer.since) and loads `frame`
 *              (the proxy's decoder state at open_at) into peer.frame. A write
 *              that would take `since` past the opening's budget is passed.
 * Without a gate entry a route redirects from its first byte (sticky
 * fall-back, as the selftests use it).
 */
struct pg_splice_gate {
	__u64 gate;
	struct pg_frame frame;
	/* Bytes this opening may redirect (0: the route's budget). The proxy
	 * sizes it to the room left in the client's send buffer: a redirect
	 * into a full buffer gives a non-blocking backend a short count, and
	 * the bytes it sends again would be counted twice by `frame`. */
	__u64 budget;
};
_Static_assert(sizeof(struct pg_splice_gate) == 40, "pg_splice_gate layout");

#define PG_SPLICE_GATE_CLOSED        ((1ull << 48) - 1)
#define PG_SPLICE_GATE(open_at, gen) (((__u64)(gen) << 48) | ((open_at)&PG_SPLICE_GATE_CLOSED))

/*
 * msg path key: the gateway→backend TCP connection as the backend's
 * server-side socket sees it. Addresses are IPv6, in network byte order, an
 * IPv4 one as IPv4-mapped (::ffff:a.b.c.d): one spelling of each
 * connection whether the backend's socket is AF_INET or a dual-stack
 * AF_INET6 one that accepted an IPv4 peer (the kernel shows that peer as
 * mapped). Ports in host byte order. Filled by tuple_fill
 * (bpf/splice_msg.bpf.h) and route_key (user/datapath/splice_conn.c, with
 * pg_sockaddr_ip6).
 */
struct pg_splice_tuple {
	__u32 backend_ip6[4];
	__u32 proxy_ip6[4];
	__u16 backend_port;
	__u16 proxy_port;
};
_Static_assert(sizeof(struct pg_splice_tuple) == 36, "pg_splice_tuple layout");

/*
 * Bounds on the framing the program reads in one skb/msg (chunk-size lines
 * and CRLFs; chunk data is skipped, not read): PG_SPLICE_SCAN_STEPS spans
 * (a framing window or a data skip), each window up to PG_SPLICE_SCAN_WIN
 * bytes. About STEPS/2 chunks per skb/msg; more is handed to the proxy.
 */
#define PG_SPLICE_SCAN_STEPS 64
#define PG_SPLICE_SCAN_WIN   16

/*
 * Event rings "splice_events" (an array of ring buffers, one per consumer),
 * skb path only: one record in the pairing's ring (peer.ring) when the first
 * of FALLBACK and DONE is set, and one when BROKEN is. FALLBACK and BROKEN
 * wake the ring's poller at once: nothing else would (the passed bytes wait
 * in the backend socket for the proxy). DONE does not: the backend's FIN
 * follows it (the request said Connection: close) and wakes the proxy, which
 * then finds the record. A record that does not fit a full ring is counted
 * instead (splice_events_lost, per ring). The msg path emits none: its passed
 * write reaches the proxy over TCP, and tells it.
 */
struct pg_splice_event {
	__u64 key;        /* the pairing: the backend socket's cookie (pg_splice_cookie) */
	__u64 client_key; /* the client socket's cookie */
	__u64 redirected; /* peer.redirected at the event (final once FALLBACK is set) */
	__u32 flags;      /* peer.flags at the event (PG_SPLICE_F_*) */
	__u32 reason;     /* peer.reason at the event (enum pg_splice_reason) */
};
_Static_assert(sizeof(struct pg_splice_event) == 32, "pg_splice_event layout");

#endif /* PG_SPLICE_H */
