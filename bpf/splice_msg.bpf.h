/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * The sk_msg path of the in-kernel response paths: the verdict program on a
 * same-host backend's own sockets (--data-path sockmsg), and the sockops
 * program that puts those sockets in its map. Included by bpf/splice.bpf.c
 * only, after its maps and shared helpers (one BPF object, one skeleton);
 * the invariants both paths rely on are stated there.
 */
#ifndef PG_SPLICE_MSG_BPF_H
#define PG_SPLICE_MSG_BPF_H

/* sk_msg and sockops put remote_port's network-order value in the upper 16
 * bits on little-endian kernels; older kernels put it in the lower 16. */
static __always_inline __u16 remote_port_host(__u32 raw)
{
	return raw > 0xffff ? (__u16)bpf_ntohl(raw) : bpf_ntohs((__u16)raw);
}

/*
 * The route key of the connection a context's socket belongs to (the
 * backend's server-side socket: local is the backend, remote the proxy).
 * ctx is a struct sk_msg_md or a struct bpf_sock_ops: both name the fields
 * alike. An AF_INET6 socket's addresses are taken as they are (a dual-stack
 * socket's IPv4 peer is already IPv4-mapped there); an AF_INET socket's are
 * mapped. The context's address fields are read one __u32 at a time, the
 * only access the verifier allows; a macro, not a function, because a
 * context pointer cannot be passed on to a subprogram. The IPv4 fields are
 * read before the branch, held there by barrier_var: with a load into the
 * same slot on both sides, clang sinks the two into one load through a
 * computed context pointer, which the verifier rejects ("dereference of
 * modified ctx ptr").
 */
#define tuple_fill(t, ctx)                                                                         \
	do {                                                                                       \
		__u32 l4_ = (ctx)->local_ip4, r4_ = (ctx)->remote_ip4;                             \
                                                                                                   \
		barrier_var(l4_);                                                                  \
		barrier_var(r4_);                                                                  \
		if ((ctx)->family == PG_AF_INET6) {                                                \
			(t)->backend_ip6[0] = (ctx)->local_ip6[0];                                 \
			(t)->backend_ip6[1] = (ctx)->local_ip6[1];                                 \
			(t)->backend_ip6[2] = (ctx)->local_ip6[2];                                 \
			(t)->backend_ip6[3] = (ctx)->local_ip6[3];                                 \
			(t)->proxy_ip6[0] = (ctx)->remote_ip6[0];                                  \
			(t)->proxy_ip6[1] = (ctx)->remote_ip6[1];                                  \
			(t)->proxy_ip6[2] = (ctx)->remote_ip6[2];                                  \
			(t)->proxy_ip6[3] = (ctx)->remote_ip6[3];                                  \
		} else {                                                                           \
			(t)->backend_ip6[2] = (t)->proxy_ip6[2] = bpf_htonl(0xffff);               \
			(t)->backend_ip6[3] = l4_;                                                 \
			(t)->proxy_ip6[3] = r4_;                                                   \
		}                                                                                  \
		(t)->backend_port = (__u16)(ctx)->local_port;                                      \
		(t)->proxy_port = remote_port_host((ctx)->remote_port);                            \
	} while (0)

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
	tuple_fill(&t, msg);
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
			return fall_back(
			    p, rc == SCAN_END ? PG_SPLICE_WHY_END : PG_SPLICE_WHY_FRAMING, len);
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
 * can read the request, so before any response byte is written. IPv4 and
 * IPv6 sockets alike (tuple_fill). Always returns 1 (sockops return values
 * are not verdicts here).
 */
SEC("sockops")
int splice_sockops(struct bpf_sock_ops *skops)
{
	struct pg_splice_tuple t = {};
	struct pg_splice_peer *r;
	__u32 port;

	if (skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB ||
	    (skops->family != PG_AF_INET && skops->family != PG_AF_INET6))
		return 1;
	port = skops->local_port;
	if (!bpf_map_lookup_elem(&splice_ports, &port))
		return 1;
	tuple_fill(&t, skops);
	r = bpf_map_lookup_elem(&splice_routes, &t);
	if (!r)
		return 1;
	/* Nothing sent yet: the gate counts this socket's bytes from here. */
	r->base = skops->snd_nxt;
	bpf_sock_hash_update(skops, &splice_msgsocks, &t, BPF_ANY);
	return 1;
}

#endif /* PG_SPLICE_MSG_BPF_H */
