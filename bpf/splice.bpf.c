// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * prefixgate in-kernel response paths: sockmap programs that carry a
 * backend's response to its client without the proxy copying it. Structs and
 * the design overview are in include/pg_splice.h; the loader and the
 * per-connection API the proxy calls are in user/datapath/splice_load.c and
 * splice_conn.c.
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

#define PG_AF_INET 2 /* AF_INET, without pulling in libc headers */

/*
 * The two fields read from the client's tcp_sock, relocated against the
 * running kernel's BTF (CO-RE): no vmlinux.h needed.
 */
struct tcp_sock {
	__u64 bytes_acked;
	__u32 write_seq;
	__u32 copied_seq;
} __attribute__((preserve_access_index));

/*
 * The start of skb->cb holds TCP's control block for a received skb; its
 * first field is the sequence number of the skb's first byte. The verdict
 * context is the sk_buff itself; bpf_probe_read_kernel reads the field
 * (root / CAP_PERFMON, as loading these programs needs anyway).
 */
struct sk_buff {
	char cb[48];
} __attribute__((preserve_access_index));

/* bpf_skb_adjust_room pops at most this many bytes per call in sk_skb. */
#define PG_TRIM_STEP 4095
/* Bound on the cut, in steps: 64 * 4095 bytes, well over one loopback skb. */
#define PG_TRIM_STEPS 64

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

/* skb path: fall back, and wake the proxy (the passed bytes cannot). */
static __always_inline int skb_fall_back(struct pg_splice_peer *p, __u64 cookie, __u32 reason,
					 __u64 len)
{
	fall_back(p, reason, len);
	emit(p, cookie, BPF_RB_FORCE_WAKEUP);
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

/*
 * skb path: cut off the head of an skb that repeats bytes already handed
 * on. TCP queues a retransmitted segment that overlaps data it already
 * received as it came (seq < rcv_nxt < end_seq: recvmsg skips the overlap
 * by its copied_seq offset), but the verdict path hands over whole skbs,
 * so the overlap would be redirected or passed a second time. Measured:
 * a stalled reader on loopback, one 65,483-byte segment repeated about
 * once per three 1 GiB transfers.
 *
 * Returns the skb's length after the cut, 0 if every byte was a repeat (the
 * caller drops it: nothing in it is new), or -1 if the cut failed (the
 * stream cannot be kept intact: PG_SPLICE_F_BROKEN, with a wake-up, the
 * caller passes it and the proxy aborts the response).
 */
static __always_inline long skb_cut_repeat(struct __sk_buff *skb, struct pg_splice_peer *p,
					   __u64 cookie)
{
	__u32 seq, over, len = skb->len;
	int i;

	if (bpf_probe_read_kernel(&seq, sizeof(seq), &((struct sk_buff *)skb)->cb[0]))
		return len; /* cannot tell: unchanged, as without the check */
	if (!(p->flags & PG_SPLICE_F_SEQ)) {
		/* First skb since pairing: nothing was handed on before
		 * copied_seq (the proxy read the socket to EAGAIN first). */
		struct bpf_sock *sk = skb->sk;
		struct tcp_sock *tp;
		__u32 first = seq;

		if (sk) {
			tp = bpf_skc_to_tcp_sock(sk);
			if (tp) {
				first = tp->copied_seq;
				/* keep the two loads apart: the verifier rejects one
				 * load insn shared by a stack and a socket pointer */
				asm volatile("" : "+r"(first));
			}
		}
		p->next_seq = first;
		p->flags |= PG_SPLICE_F_SEQ;
	}
	over = p->next_seq - seq;
	if ((__s32)over <= 0 || !len) {
		/* In order (or a gap TCP would never leave): all new. */
		p->next_seq = seq + len;
		return len;
	}
	if (over >= len) {
		__sync_fetch_and_add(&p->repeated, len);
		return 0;
	}
	__sync_fetch_and_add(&p->repeated, over);
	for (i = 0; i < PG_TRIM_STEPS && over; i++) {
		__u32 step = over > PG_TRIM_STEP ? PG_TRIM_STEP : over;

		if (bpf_skb_adjust_room(skb, -(__s32)step, 0, 0))
			break;
		over -= step;
	}
	if (over) {
		if (!(p->flags & PG_SPLICE_F_BROKEN)) {
			p->flags |= PG_SPLICE_F_BROKEN;
			emit(p, cookie, BPF_RB_FORCE_WAKEUP);
		}
		return -1;
	}
	len = skb->len;
	p->next_seq += len;
	return len;
}

/*
 * skb path verdict, on the proxy's backend-side socket: redirect each
 * received skb to the paired client socket's egress.
 *
 * Bound (no backpressure otherwise): in flight = base + redirected -
 * client's bytes_acked counts every redirected byte not yet acknowledged by
 * the client, including those still waiting in the psock backlog. Once it is
 * at or above the budget the pairing falls back; so at most budget plus one
 * skb is ever held for a stalled client. After the fall-back, passed skbs are
 * charged to the backend socket's receive buffer, so TCP flow control towards
 * the backend applies again as soon as the proxy stops reading.
 *
 * Order after a fall-back: skbs of one socket run this program in order, and
 * after the first pass none is redirected, so the stream is "R redirected
 * bytes, then passed bytes". `redirected` is final once FALLBACK is set. The
 * proxy writes passed bytes to the client only when pg_splice_progress()
 * says drained: the client socket has carried base + redirected bytes
 * (tcpi_bytes_acked + SIOCOUTQ), i.e. every redirected byte is already in the
 * client's write queue; TCP keeps that queue in order, so the passed bytes
 * follow them.
 */
SEC("sk_skb")
int splice_skb(struct __sk_buff *skb)
{
	struct pg_splice_peer *p;
	struct pg_frame f;
	struct bpf_sock *sk;
	struct tcp_sock *tp;
	__u64 cookie, key, len = skb->len, total, acked, budget;
	long cut;
	int rc;

	/* The backend's FIN arrives as a zero-length skb: redirecting it would
	 * put EPIPE on the client and silently drop later redirects. */
	if (len == 0)
		return SK_PASS;
	cookie = bpf_get_socket_cookie(skb);
	p = bpf_map_lookup_elem(&splice_peers, &cookie);
	if (!p)
		return SK_PASS;
	cut = skb_cut_repeat(skb, p, cookie);
	if (cut == 0)
		return SK_DROP; /* a repeat of bytes already handed on: nothing lost */
	if (cut > 0)
		len = (__u64)cut;
	if (p->flags & (PG_SPLICE_F_FALLBACK | PG_SPLICE_F_DONE | PG_SPLICE_F_BROKEN)) {
		__sync_fetch_and_add(&p->passed, len);
		return SK_PASS;
	}
	f = p->frame;
	rc = scan(skb, 0, &f, (__u32)len);
	if (rc == SCAN_FAIL)
		return skb_fall_back(p, cookie, PG_SPLICE_WHY_FRAMING, len);

	key = p->client_key;
	sk = bpf_map_lookup_elem(&splice_clients, &key);
	if (!sk)
		return skb_fall_back(p, cookie, PG_SPLICE_WHY_NO_CLIENT, len);
	tp = bpf_skc_to_tcp_sock(sk);
	acked = tp ? tp->bytes_acked : 0;
	bpf_sk_release(sk);
	if (!tp)
		return skb_fall_back(p, cookie, PG_SPLICE_WHY_NO_TCP, len);

	budget = p->budget ? p->budget : skb_budget;
	total = p->base + p->redirected;
	if (total > acked && total - acked >= budget)
		return skb_fall_back(p, cookie, PG_SPLICE_WHY_BUDGET, len);

	/* 0: egress of the client socket. On failure nothing is set on the skb,
	 * so returning SK_PASS passes it to this socket. */
	if (bpf_sk_redirect_hash(skb, &splice_clients, &key, 0) != SK_PASS)
		return skb_fall_back(p, cookie, PG_SPLICE_WHY_REDIRECT, len);
	redirected(p, len, &f, rc);
	/* No wake-up: the backend's FIN follows the end (the request said
	 * Connection: close) and wakes the proxy; the record waits for it. */
	if (rc == SCAN_END)
		emit(p, cookie, BPF_RB_NO_WAKEUP);
	return SK_PASS;
}

/* sk_msg and sockops put remote_port's network-order value in the upper 16
 * bits on little-endian kernels; older kernels put it in the lower 16. */
static __always_inline __u16 remote_port_host(__u32 raw)
{
	return raw > 0xffff ? (__u16)bpf_ntohl(raw) : bpf_ntohs((__u16)raw);
}

/*
 * msg path verdict, on the backend's own server-side socket: send the
 * backend's write straight out of the client socket, inside its send().
 *
 * Bound: the client socket's queue cannot be read from here (no sk_release
 * in sk_msg programs), so the budget is on bytes offered to the redirect
 * during one route (one response). A blocking backend is held back by the
 * client's send buffer anyway. A non-blocking backend facing a full client
 * gets short counts / EAGAIN while its own socket stays writable, so it
 * retries at once; every retry offers its bytes again and counts them again,
 * so the spin ends after at most budget / (bytes per retry) attempts, when the
 * route falls back and the backend's bytes go to the proxy over TCP, where
 * normal flow control makes it wait. A response longer than the budget takes
 * the proxy path for its tail even with a fast client.
 *
 * Order after a fall-back: the redirect is synchronous (the bytes are in the
 * client's write queue when the helper's caller returns to the backend) and a
 * short count means the unsent rest was not queued. Msgs of one socket run in
 * order and nothing is redirected after the first pass, so every byte the
 * proxy receives was written by the backend after all redirected bytes were
 * queued on the client: the proxy may write it to the client as it arrives.
 * The same holds for the backend's FIN: when the proxy sees EOF, every
 * redirected byte is already queued on the client.
 *
 * With a gate (splice_gates, used by the gateway): the proxy reads the
 * response head itself, so the route starts closed and every write is
 * passed. The proxy opens the gate at the count of backend bytes it has
 * received once all of them are in the client's write queue; a write is
 * redirected only while passed == open_at, so it always follows everything
 * the proxy forwarded, and a write arriving while passed bytes are still in
 * flight to the proxy is passed too. A fall-back (budget reached) passes
 * bytes, which closes the gate implicitly until the proxy reopens it; each
 * opening gets a fresh budget of offered bytes, so a non-blocking backend
 * facing a full client spins at most budget / write size times before its
 * bytes go to the proxy, whose TCP window then blocks it.
 */
SEC("sk_msg")
int splice_msg(struct sk_msg_md *msg)
{
	struct pg_splice_tuple t = {};
	struct pg_splice_peer *p;
	struct pg_splice_gate *gate;
	struct pg_frame f;
	__u64 key, len = msg->size, budget;
	int rc;

	if (len == 0)
		return SK_PASS;
	t.backend_ip4 = msg->local_ip4;
	t.proxy_ip4 = msg->remote_ip4;
	t.backend_port = (__u16)msg->local_port;
	t.proxy_port = remote_port_host(msg->remote_port);
	p = bpf_map_lookup_elem(&splice_routes, &t);
	if (!p)
		return SK_PASS;
	gate = bpf_map_lookup_elem(&splice_gates, &t);
	if (gate) {
		__u64 g = gate->gate;
		struct bpf_sock *sk = msg->sk;
		struct tcp_sock *tp;
		__u32 written;

		/* Bytes this socket ever queued on its own TCP path: write_seq
		 * from the base the sockops program recorded. Not p->passed: a
		 * send after one that hit a full buffer reuses the cached PASS
		 * verdict without running this program, so a counter kept here
		 * can fall short of what went through TCP. */
		if (!sk)
			goto pass;
		tp = bpf_skc_to_tcp_sock(sk);
		if (!tp)
			goto pass;
		written = tp->write_seq - (__u32)p->base;
		/* Closed, or bytes passed earlier are still on their way to the
		 * proxy: this write must follow them through TCP. */
		if ((__u32)(g & PG_SPLICE_GATE_CLOSED) != written ||
		    (g & PG_SPLICE_GATE_CLOSED) == PG_SPLICE_GATE_CLOSED)
			goto pass;
		if ((g >> 48) != p->gate_gen) {
			/* Reopened by the proxy: a fresh budget, and its decoder's
			 * state at open_at. */
			p->gate_gen = g >> 48;
			p->since = 0;
			p->flags &= ~(PG_SPLICE_F_FALLBACK | PG_SPLICE_F_DONE);
			p->frame = gate->frame;
		}
		budget = gate->budget ? gate->budget : p->budget ? p->budget : msg_budget;
		if (p->since + len > budget)
			return fall_back(p, PG_SPLICE_WHY_BUDGET, len);
		/* The write that ends the response is passed: the proxy decodes
		 * it (from the frame left here), which tells it the response is
		 * over without waiting for the backend's FIN. */
		f = p->frame;
		rc = scan(msg, 1, &f, (__u32)len);
		if (rc != SCAN_BODY)
			return fall_back(p, rc == SCAN_END ? PG_SPLICE_WHY_END : PG_SPLICE_WHY_FRAMING,
					 len);
		key = p->client_key;
		if (bpf_msg_redirect_hash(msg, &splice_clients, &key, 0) != SK_PASS)
			return fall_back(p, PG_SPLICE_WHY_NO_CLIENT, len);
		p->since += len;
		redirected(p, len, &f, rc);
		return SK_PASS;
	}
	if (p->flags & (PG_SPLICE_F_FALLBACK | PG_SPLICE_F_DONE)) {
pass:
		__sync_fetch_and_add(&p->passed, len);
		return SK_PASS;
	}
	f = p->frame;
	rc = scan(msg, 1, &f, (__u32)len);
	if (rc == SCAN_FAIL)
		return fall_back(p, PG_SPLICE_WHY_FRAMING, len);
	budget = p->budget ? p->budget : msg_budget;
	if (p->redirected >= budget)
		return fall_back(p, PG_SPLICE_WHY_BUDGET, len);
	key = p->client_key;
	if (bpf_msg_redirect_hash(msg, &splice_clients, &key, 0) != SK_PASS)
		return fall_back(p, PG_SPLICE_WHY_NO_CLIENT, len);
	redirected(p, len, &f, rc);
	return SK_PASS;
}

/*
 * sockops, attached to a cgroup v2 holding the same-host backends: when a
 * backend accepts a connection that the proxy has a route for (the route is
 * written before the proxy connects), put the backend's server-side socket
 * in splice_msgsocks so splice_msg sees its writes. Runs before the backend
 * can read the request, so before any response byte is written. Always
 * returns 1 (sockops return values are not verdicts here).
 */
SEC("sockops")
int splice_sockops(struct bpf_sock_ops *skops)
{
	struct pg_splice_tuple t = {};
	struct pg_splice_peer *r;
	__u32 port;

	if (skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB || skops->family != PG_AF_INET)
		return 1;
	port = skops->local_port;
	if (!bpf_map_lookup_elem(&splice_ports, &port))
		return 1;
	t.backend_ip4 = skops->local_ip4;
	t.proxy_ip4 = skops->remote_ip4;
	t.backend_port = (__u16)port;
	t.proxy_port = remote_port_host(skops->remote_port);
	r = bpf_map_lookup_elem(&splice_routes, &t);
	if (!r)
		return 1;
	/* Nothing sent yet: the gate counts this socket's bytes from here. */
	r->base = skops->snd_nxt;
	bpf_sock_hash_update(skops, &splice_msgsocks, &t, BPF_ANY);
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
