/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The sk_skb path of the in-kernel response paths: the verdict program on
 * the proxy's backend-side sockets (--data-path sockmap). Included by
 * bpf/splice.bpf.c only, after its maps and shared helpers (one BPF object,
 * one skeleton); the invariants both paths rely on are stated there.
 */
#ifndef PG_SPLICE_SKB_BPF_H
#define PG_SPLICE_SKB_BPF_H

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

/* skb path: fall back, and wake the proxy (the passed bytes cannot). */
static __always_inline int skb_fall_back(struct pg_splice_peer *p, __u64 cookie, __u32 reason,
                                         __u64 len)
{
	fall_back(p, reason, len);
	emit(p, cookie, BPF_RB_FORCE_WAKEUP);
	return SK_PASS;
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

#endif /* PG_SPLICE_SKB_BPF_H */
