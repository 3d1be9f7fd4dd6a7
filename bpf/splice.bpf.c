// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * prefixgate in-kernel response paths: sockmap programs that carry a
 * backend's response to its client without the proxy copying it. Structs and
 * the design overview are in include/pg_splice.h; the loader and the
 * per-connection API the proxy calls are in user/datapath/splice_load.c and
 * splice_conn.c. This file holds the maps and the helpers both paths share;
 * the programs, each with its ordering proof, are in splice_skb.bpf.h
 * (sk_skb) and splice_msg.bpf.h (sk_msg and its sockops), included at the
 * end: one object, one skeleton.
 *
 * Invariants both paths rely on:
 *  - Never SK_DROP new bytes: they are already acknowledged to the backend,
 *    so a drop loses them, and on the msg path a drop is sticky (later writes
 *    fail EACCES without the program running). Every failure is SK_PASS: the
 *    bytes take the normal TCP path to the proxy. The one drop is an skb
 *    (sk_skb path) that only repeats bytes already handed on.
 *  - Falling back is sticky per pairing (PG_SPLICE_F_FALLBACK): once one byte
 *    was passed, nothing after it is redirected. That is what keeps the order
 *    (proofs at each program).
 *  - Verdict programs for one socket never run concurrently (skb: under the
 *    receiving socket's lock; msg: under the sending socket's lock), so the
 *    per-connection flags and `remaining` need no atomics. Counters are added
 *    atomically only because userspace reads them at any time.
 *  - Userspace writes a pg_splice_peer only before the socket it describes can
 *    run the program (pairing), never during.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "pg_splice.h"

#define PG_AF_INET  2  /* AF_INET, without pulling in libc headers */
#define PG_AF_INET6 10 /* AF_INET6 */

/*
 * The two fields read from the client's tcp_sock, relocated against the
 * running kernel's BTF (CO-RE): no vmlinux.h needed.
 */
struct tcp_sock {
	__u64 bytes_acked;
	__u32 write_seq;
	__u32 copied_seq;
} __attribute__((preserve_access_index));

/* Loader knobs (set through the skeleton's rodata before load). */
const volatile __u64 skb_budget = PG_SPLICE_BUDGET_DEFAULT;
const volatile __u64 msg_budget = PG_SPLICE_BUDGET_DEFAULT;

/*
 * Client sockets, key: client socket cookie. No programs: only a redirect
 * target, so the client's own receive path (requests, io_uring recv) is
 * untouched. Shared by both paths.
 */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, PG_SPLICE_MAX_CONNS);
	__type(key, __u64);
	__type(value, __u64);
} splice_clients SEC(".maps");

/* skb path: the proxy's backend-side sockets, key: their cookie. Verdict: splice_skb. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, PG_SPLICE_MAX_CONNS);
	__type(key, __u64);
	__type(value, __u64);
} splice_backends SEC(".maps");

/* skb path: backend-side socket cookie -> peer state. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PG_SPLICE_MAX_CONNS);
	__type(key, __u64);
	__type(value, struct pg_splice_peer);
} splice_peers SEC(".maps");

/* msg path: backend's server-side sockets, key: 4-tuple. Verdict: splice_msg. */
struct {
	__uint(type, BPF_MAP_TYPE_SOCKHASH);
	__uint(max_entries, PG_SPLICE_MAX_CONNS);
	__type(key, struct pg_splice_tuple);
	__type(value, __u64);
} splice_msgsocks SEC(".maps");

/* msg path: 4-tuple -> route (peer state). Written by the proxy before connect(). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PG_SPLICE_MAX_CONNS);
	__type(key, struct pg_splice_tuple);
	__type(value, struct pg_splice_peer);
} splice_routes SEC(".maps");

/* msg path: 4-tuple -> gate (see pg_splice.h), written by the proxy only.
 * Not preallocated: a replaced value is freed after an RCU grace period, so
 * a program holding the old one never reads a recycled element. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PG_SPLICE_MAX_CONNS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct pg_splice_tuple);
	__type(value, struct pg_splice_gate);
} splice_gates SEC(".maps");

/* msg path: same-host backend listening ports (host byte order) -> 1. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PG_SPLICE_MAX_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} splice_ports SEC(".maps");

/*
 * skb path events (struct pg_splice_event; who gets them and when in
 * include/pg_splice.h). Passed bytes sit in the backend socket's receive
 * queue with nothing else to tell the proxy, hence the event. The msg path
 * emits none: what it passes is a write the proxy receives over TCP at once,
 * and that write is the proxy's signal (the one that ends a gated response
 * too).
 *
 * One ring per consumer: the loader creates the rings (their size chosen
 * then) and puts them in splice_events; a pairing's events go to the ring
 * its peer names, so a worker thread drains only its own.
 */
struct pg_splice_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, PG_SPLICE_EVENTS_BYTES);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, PG_SPLICE_MAX_RINGS);
	__type(key, __u32);
	__array(values, struct pg_splice_ring);
} splice_events SEC(".maps");

/* Per ring, the events it could not take (full); userspace reads them through
 * the skeleton's mmapped .bss and then looks at every pairing of that ring. */
__u64 splice_events_lost[PG_SPLICE_MAX_RINGS];
_Static_assert(!(PG_SPLICE_MAX_RINGS & (PG_SPLICE_MAX_RINGS - 1)), "a power of two: see emit()");

/*
 * skb path: tell the pairing's consumer what was just set, keyed by the
 * backend socket's cookie. wake: BPF_RB_FORCE_WAKEUP wakes its poller now
 * (even if older records are still unread), BPF_RB_NO_WAKEUP leaves the
 * record for its next drain.
 */
static __always_inline void emit(struct pg_splice_peer *p, __u64 cookie, __u64 wake)
{
	struct pg_splice_event ev = {
	    .key = cookie,
	    .client_key = p->client_key,
	    .redirected = p->redirected,
	    .flags = p->flags,
	    .reason = p->reason,
	};
	__u32 ring = p->ring;
	void *rb;

	if (ring >= PG_SPLICE_MAX_RINGS)
		return;
	rb = bpf_map_lookup_elem(&splice_events, &ring);
	/* A full ring loses the event, not the bytes: the flag stays readable. */
	if (!rb || bpf_ringbuf_output(rb, &ev, sizeof(ev), wake))
		/* The mask changes nothing (ring is below the bound) but gives the
		 * verifier a bound: clang reloads ring from the stack, unchecked. */
		__sync_fetch_and_add(&splice_events_lost[ring & (PG_SPLICE_MAX_RINGS - 1)], 1);
}

/* Sticky fall-back: this and every later byte of the pairing go to the proxy. */
static __always_inline int fall_back(struct pg_splice_peer *p, __u32 reason, __u64 len)
{
	p->reason = reason;
	p->flags |= PG_SPLICE_F_FALLBACK;
	__sync_fetch_and_add(&p->passed, len);
	return SK_PASS;
}

/* scan() results: where the bytes of one skb/msg stand in the response. */
enum {
	SCAN_BODY = 0, /* all inside the body; the end not reached */
	SCAN_END = 1,  /* the response ends exactly at the last byte */
	SCAN_FAIL = 2, /* bytes past the end, malformed framing, or more framing
	                * than the bounded scan reads: the proxy must decode them */
};

/*
 * Feed up to PG_SPLICE_SCAN_WIN framing bytes to the decoder; stops after
 * the byte that starts chunk data, ends the body or is malformed. Returns
 * the bytes used.
 */
static __always_inline __u32 step_window(struct pg_frame *f, const __u8 *buf, __u32 n)
{
	__u32 j;

	for (j = 0; j < PG_SPLICE_SCAN_WIN && j < n;) {
		__u32 st = pg_chunk_step(f, buf[j++]);

		if (st == PG_CH_DATA || st == PG_CH_DONE || st == PG_CH_ERROR)
			break;
	}
	return j;
}

/*
 * One window of framing bytes at off (n of them, 1..PG_SPLICE_SCAN_WIN) of
 * an skb / a msg. Global functions: the verifier checks each once, not once
 * per iteration of the scan loop that calls it. Return the bytes used, or
 * -1 if they could not be read.
 */
__noinline int scan_skb_window(struct __sk_buff *skb, struct pg_frame *f, __u32 off, __u32 len)
{
	__u8 buf[PG_SPLICE_SCAN_WIN];
	__u64 n = len;

	/* Bound the very register the helper gets (clang may test a copy). */
	asm volatile("" : "+r"(n));
	if (!skb || !f || n == 0 || n > PG_SPLICE_SCAN_WIN)
		return -1;
	if (bpf_skb_load_bytes(skb, off, buf, n))
		return -1;
	return (int)step_window(f, buf, n);
}

__noinline int scan_msg_window(struct sk_msg_md *msg, struct pg_frame *f, __u32 off, __u32 len)
{
	__u8 buf[PG_SPLICE_SCAN_WIN];
	__u64 n = len;

	asm volatile("" : "+r"(n));
	if (!msg || !f || n == 0 || n > PG_SPLICE_SCAN_WIN)
		return -1;
	/* Linear bytes at msg->data (copied only if they span pages). */
	if (bpf_msg_pull_data(msg, off, off + n, 0))
		return -1;
	if ((__u64)msg->data_end - (__u64)msg->data < n ||
	    bpf_probe_read_kernel(buf, n, (void *)(long)msg->data))
		return -1;
	return (int)step_window(f, buf, n);
}

/*
 * Advance f over the len bytes of an skb (msg = 0) or a msg (msg = 1) with
 * the rules the proxy's own decoder uses (pg_chunk_step, include/pg_frame.h).
 * Chunk data and Content-Length bodies are skipped by count; only framing
 * bytes are read, a window at a time. f is the caller's copy: it commits it
 * only if it redirects the bytes.
 */
static __always_inline int scan(void *ctx, const int msg, struct pg_frame *f, __u32 len)
{
	__u32 off = 0, n;
	int i, used;

	if (f->kind == PG_FRAME_NONE)
		return SCAN_BODY;
	if (f->kind == PG_FRAME_LENGTH) {
		if (len > f->remaining)
			return SCAN_FAIL;
		f->remaining -= len;
		return f->remaining ? SCAN_BODY : SCAN_END;
	}
	for (i = 0; i < PG_SPLICE_SCAN_STEPS; i++) {
		if (off >= len)
			break;
		if (f->state == PG_CH_DONE || f->state == PG_CH_ERROR)
			return SCAN_FAIL; /* bytes past the end, or malformed */
		if (f->state == PG_CH_DATA) {
			__u64 skip = len - off;

			if (skip > f->remaining)
				skip = f->remaining;
			f->remaining -= skip;
			off += (__u32)skip;
			if (!f->remaining)
				f->state = PG_CH_DATA_CR;
			continue;
		}
		n = len - off;
		if (n > PG_SPLICE_SCAN_WIN)
			n = PG_SPLICE_SCAN_WIN;
		used = msg ? scan_msg_window(ctx, f, off, n) : scan_skb_window(ctx, f, off, n);
		if (used <= 0)
			return SCAN_FAIL;
		off += (__u32)used;
	}
	if (off < len || f->state == PG_CH_ERROR)
		return SCAN_FAIL;
	return f->state == PG_CH_DONE ? SCAN_END : SCAN_BODY;
}

/* After a successful redirect of len bytes that ended at framing f. */
static __always_inline void redirected(struct pg_splice_peer *p, __u64 len,
                                       const struct pg_frame *f, int rc)
{
	__sync_fetch_and_add(&p->redirected, len);
	p->frame = *f;
	if (rc == SCAN_END) {
		p->reason = PG_SPLICE_WHY_END;
		p->flags |= PG_SPLICE_F_DONE;
	}
}

/* The programs: one file per path, sharing the maps and helpers above. */
#include "splice_skb.bpf.h"
#include "splice_msg.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";
