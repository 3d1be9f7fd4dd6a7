// SPDX-License-Identifier: MIT
/*
 * BPF tests of response framing in the in-kernel paths (scan() in
 * bpf/splice.bpf.c, struct pg_frame in include/pg_frame.h): the program
 * must find a response's end exactly where the proxy's own decoder
 * (pg_chunked_feed, user/lib/http_chunked.c) finds it, hand back the same
 * decoder state, and pass to the proxy whatever it cannot account for.
 * Loopback sockets inside this process; needs root, bpffs (mounted here if
 * missing) and, for the msg path, cgroup v2. Prints TAP; exit 0 if nothing
 * failed.
 *
 * The writer waits for each write to reach its destination before the next
 * one, so that no skb holds bytes of two writes (TCP_NODELAY, nothing left
 * to coalesce; a write over the MSS is several skbs) and no msg either: the
 * tests then know which bytes each verdict saw. Seeds are fixed; every wait
 * has a deadline.
 */
#include <netinet/tcp.h>
#include "frame_fixture.h"

static char pin[128];

/* --- skb path --------------------------------------------------------- */

static const struct pg_frame chunked0 = {.kind = PG_FRAME_CHUNKED, .state = PG_CH_SIZE_START};

/* Open the skb path and pair a fresh backend / client couple with frame. */
static int skb_setup(struct pg_splice **sp, struct conn *c, const struct pg_frame *frame)
{
	char err[256];
	int one = 1;

	if (pg_splice_open(sp, pin, PG_SPLICE_SKB, NULL, err, sizeof(err))) {
		printf("# open: %s\n", err);
		return -1;
	}
	if (conn_client(c, 0) || conn_backend(c))
		return -1;
	/* one write, one skb: no Nagle holding small writes back */
	if (setsockopt(c->srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return -1;
	/* A budget far above the bodies: these tests are about framing alone. */
	return pg_splice_pair(*sp, c->bfd, c->cfd, 64 * MiB, frame);
}

static void t_skb_chunked(void)
{
	const char *name = "skb: chunked body redirected, DONE at its end, frame = decoder";
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct pg_splice_peer pr;
	struct pg_frame dec = chunked0;
	static const char next[] = "HTTP/1.1 200 OK\r\n";
	size_t sizes[48], pos = 0;
	int ok = 0, n, rc;

	if (skip_all)
		return report(name, 0, skip_all);
	n = chunk_sizes(sizes, 48, 11);
	chunked_body(&body, sizes, n, 12);
	plan_writes(&plan, &body, 13, 0);
	printf("# body %zu bytes, %d chunks, %d writes (%d of 1 byte in a chunk-size line)\n",
	       body.len, n, plan.n, plan.ones);
	CHECK(plan.ones >= 8, "too few 1-byte writes in chunk-size lines");
	CHECK(skb_setup(&sp, &c, &chunked0) == 0, "setup");
	for (int w = 0; w < plan.n; w++) {
		size_t len = plan.end[w] - pos;
		int last = w == plan.n - 1;

		CHECK(send_all(c.srv, body.buf + pos, len, WAIT_MS) == 0, "write %d", w);
		CHECK(recv_exact(c.cli, rx + pos, len, WAIT_MS) == 0,
		      "client: write %d (%zu B at %zu)", w, len, pos);
		CHECK(!memcmp(rx + pos, body.buf + pos, len), "client bytes differ at write %d", w);
		rc = decode(&dec, body.buf + pos, len);
		CHECK(rc != PG_CHUNKED_ERROR && (rc == PG_CHUNKED_DONE) == last,
		      "decoder: %d at write %d of the test's own body", rc, w);
		pos += len;
		CHECK(pg_splice_peer_get(sp, c.bfd, &pr) == 0, "peer");
		CHECK(frame_eq("skb", &pr.frame, &dec), "frame after write %d (%zu B)", w, pos);
		CHECK(!(pr.flags & PG_SPLICE_F_FALLBACK), "fell back at write %d: reason %u", w,
		      pr.reason);
		CHECK(!(pr.flags & PG_SPLICE_F_DONE) == !last, "DONE %s write %d",
		      last ? "not set after the last" : "set at", w);
	}
	CHECK(pr.reason == PG_SPLICE_WHY_END && pr.frame.state == PG_CH_DONE, "reason %u state %u",
	      pr.reason, pr.frame.state);
	CHECK(pr.redirected == body.len && pr.passed == 0, "redirected %llu passed %llu",
	      (unsigned long long)pr.redirected, (unsigned long long)pr.passed);
	count_events(sp);
	CHECK(events_end == 1 && events_framing == 0, "events: end %d framing %d", events_end,
	      events_framing);
	CHECK(stray(c.bfd, 20) == 0, "bytes reached the proxy");
	/* Bytes after the end (the next response on a reused connection) are
	 * the proxy's: they are passed, the client gets none of them. */
	CHECK(send_all(c.srv, (const unsigned char *)next, sizeof(next) - 1, WAIT_MS) == 0, "next");
	CHECK(recv_exact(c.bfd, rx, sizeof(next) - 1, WAIT_MS) == 0 &&
	          !memcmp(rx, next, sizeof(next) - 1),
	      "next response not passed to the proxy");
	CHECK(stray(c.cli, 50) == 0, "client got bytes past the end");
	CHECK(pg_splice_peer_get(sp, c.bfd, &pr) == 0 && pr.passed == sizeof(next) - 1 &&
	          pr.redirected == body.len,
	      "after the end: redirected %llu passed %llu", (unsigned long long)pr.redirected,
	      (unsigned long long)pr.passed);
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report(name, ok, NULL);
}

static void t_skb_length(void)
{
	const char *name = "skb: Content-Length body redirected, DONE at its end";
	const size_t total = 300000;
	struct pg_frame frame = {.kind = PG_FRAME_LENGTH, .remaining = total};
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct pg_splice_peer pr;
	size_t pos = 0, len;
	__u64 r = 21;
	int ok = 0, w = 0;

	if (skip_all)
		return report(name, 0, skip_all);
	for (size_t i = 0; i < total; i++)
		body.buf[i] = (unsigned char)splitmix(i);
	CHECK(skb_setup(&sp, &c, &frame) == 0, "setup");
	for (; pos < total; w++) {
		r = splitmix(r);
		len = 1 + (r >> 8) % (r % 2 ? 70000 : 100);
		if (len > total - pos)
			len = total - pos;
		CHECK(send_all(c.srv, body.buf + pos, len, WAIT_MS) == 0, "write %d", w);
		CHECK(recv_exact(c.cli, rx + pos, len, WAIT_MS) == 0, "client: write %d", w);
		CHECK(!memcmp(rx + pos, body.buf + pos, len), "client bytes differ at write %d", w);
		pos += len;
		CHECK(pg_splice_peer_get(sp, c.bfd, &pr) == 0, "peer");
		CHECK(pr.frame.kind == PG_FRAME_LENGTH && pr.frame.remaining == total - pos,
		      "write %d: kind %u remaining %llu, want %zu", w, pr.frame.kind,
		      (unsigned long long)pr.frame.remaining, total - pos);
		CHECK(!(pr.flags & PG_SPLICE_F_FALLBACK), "fell back: reason %u", pr.reason);
		CHECK(!(pr.flags & PG_SPLICE_F_DONE) == (pos < total), "DONE flag at %zu", pos);
	}
	CHECK(pr.reason == PG_SPLICE_WHY_END && pr.redirected == total && pr.passed == 0,
	      "reason %u redirected %llu passed %llu", pr.reason, (unsigned long long)pr.redirected,
	      (unsigned long long)pr.passed);
	CHECK(stray(c.bfd, 20) == 0, "bytes reached the proxy");
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report(name, ok, NULL);
}

/*
 * Pair with framing `start`; write `head` (redirected: the client gets it),
 * then `tail` in one write, which the program must pass whole (FALLBACK,
 * reason FRAMING) leaving its frame at the state after head, for the proxy
 * to decode the tail from. The proxy must read exactly tail, the client
 * nothing more, and a later write must be passed too (sticky).
 */
static void t_skb_fallback(const char *name, const struct pg_frame *start, const void *head,
                           size_t hlen, const void *tail, size_t tlen)
{
	static const unsigned char more[] = "more";
	struct conn c = {-1, -1, -1, -1};
	struct pg_frame want = *start;
	struct pg_splice *sp = NULL;
	struct pg_splice_peer pr;
	int ok = 0;

	if (skip_all)
		return report(name, 0, skip_all);
	if (start->kind == PG_FRAME_LENGTH)
		want.remaining -= hlen;
	else
		CHECK(decode(&want, head, hlen) != PG_CHUNKED_ERROR, "head");
	CHECK(skb_setup(&sp, &c, start) == 0, "setup");
	CHECK(send_all(c.srv, head, hlen, WAIT_MS) == 0, "head");
	CHECK(recv_exact(c.cli, rx, hlen, WAIT_MS) == 0 && !memcmp(rx, head, hlen), "client head");
	CHECK(pg_splice_peer_get(sp, c.bfd, &pr) == 0 && pr.redirected == hlen &&
	          !(pr.flags & (PG_SPLICE_F_FALLBACK | PG_SPLICE_F_DONE)),
	      "head not redirected: %llu flags %u", (unsigned long long)pr.redirected, pr.flags);
	CHECK(send_all(c.srv, tail, tlen, WAIT_MS) == 0, "tail");
	CHECK(recv_exact(c.bfd, rx, tlen, WAIT_MS) == 0, "proxy did not get the tail");
	CHECK(!memcmp(rx, tail, tlen), "passed bytes differ");
	CHECK(pg_splice_peer_get(sp, c.bfd, &pr) == 0, "peer");
	printf("# redirected %llu passed %llu flags %u reason %u\n",
	       (unsigned long long)pr.redirected, (unsigned long long)pr.passed, pr.flags,
	       pr.reason);
	CHECK((pr.flags & (PG_SPLICE_F_FALLBACK | PG_SPLICE_F_DONE | PG_SPLICE_F_BROKEN)) ==
	              PG_SPLICE_F_FALLBACK &&
	          pr.reason == PG_SPLICE_WHY_FRAMING,
	      "flags %u reason %u", pr.flags, pr.reason);
	CHECK(pr.redirected == hlen && pr.passed == tlen, "accounting");
	CHECK(frame_eq("fall-back", &pr.frame, &want), "frame not left at the head's end");
	count_events(sp);
	CHECK(events_framing == 1 && events_end == 0, "events: framing %d end %d", events_framing,
	      events_end);
	CHECK(send_all(c.srv, more, 4, WAIT_MS) == 0, "more");
	CHECK(recv_exact(c.bfd, rx, 4, WAIT_MS) == 0 && !memcmp(rx, more, 4), "more not passed");
	CHECK(stray(c.cli, 50) == 0, "client got bytes after the fall-back");
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report(name, ok, NULL);
}

#define STR(s) s, sizeof(s) - 1

static void t_skb_fallbacks(void)
{
	const size_t total = 100000, head = 60000, over = 10;
	struct pg_frame length = {.kind = PG_FRAME_LENGTH, .remaining = total}, all;
	const char *many = "skb: more chunks in one skb than the scan reads fall back";
	enum { CHUNKS = 200 };
	size_t tlen = 0;

	/* The last skb holds the body's last 40,000 bytes and 10 more. */
	for (size_t i = 0; i < total + over; i++)
		body.buf[i] = (unsigned char)splitmix(i + 7);
	t_skb_fallback("skb: skb past Content-Length falls back whole, nothing lost", &length,
	               body.buf, head, body.buf + head, total - head + over);
	t_skb_fallback("skb: skb past a chunked body's end falls back whole", &chunked0,
	               STR("5;x=\"y\"\r\nhello\r\n"),
	               STR("0\r\nX-T: 1\r\n\r\nHTTP/1.1 200 OK\r\n"));
	t_skb_fallback("skb: malformed chunk-size falls back, bytes go to the proxy", &chunked0,
	               STR("5\r\nhello\r\na;x=1\r\n0123456789\r\n"), STR("zz\r\nabc\r\n0\r\n\r\n"));

	/* 200 one-byte chunks in one skb: about 400 spans for a scan of
	 * PG_SPLICE_SCAN_STEPS. Valid framing (checked with the proxy's decoder),
	 * so the fall-back is the bound, not a parse error. */
	_Static_assert(CHUNKS > PG_SPLICE_SCAN_STEPS / 2, "not over the scan bound");
	for (int i = 0; i < CHUNKS; i++) {
		memcpy(body.buf + tlen, "1\r\nX\r\n", 6);
		body.buf[tlen + 3] = (unsigned char)('a' + i % 26);
		tlen += 6;
	}
	memcpy(body.buf + tlen, "0\r\n\r\n", 5);
	tlen += 5;
	all = chunked0;
	if (decode(&all, body.buf, tlen) != PG_CHUNKED_DONE) {
		printf("# the test's many-chunks body is not a valid chunked body\n");
		return report(many, 0, skip_all);
	}
	t_skb_fallback(many, &chunked0, STR("3\r\nabc\r\n"), body.buf, tlen);
}

/* --- msg path --------------------------------------------------------- */

/*
 * Same-host backend: the backend's writes are redirected inside its send()
 * (synchronous), so the route's frame can be read as soon as send returns.
 * gated: the route has a gate open at 0 (PG_SPLICE_GATE(0, 1)), as the
 * gateway uses it: the write that ends the body is passed instead.
 */
static void t_msg_chunked(int gated)
{
	const char *name = gated ? "msg: gated route passes the write that ends the body"
	                         : "msg: chunked body redirected, DONE at its end, frame = decoder";
	union pg_sockaddr be;
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct pg_splice_peer rt;
	struct pg_frame dec = chunked0, fin;
	size_t sizes[32], pos = 0, len = 0;
	char err[256];
	int ok = 0, lfd = -1, n, w;

	if (skip_all || skip_msg)
		return report(name, 0, skip_all ? skip_all : skip_msg);
	n = chunk_sizes(sizes, 32, 31 + (__u64)gated);
	chunked_body(&body, sizes, n, 32 + (__u64)gated);
	plan_writes(&plan, &body, 33 + (__u64)gated, gated);
	printf("# body %zu bytes, %d chunks, %d writes\n", body.len, n, plan.n);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_MSG, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 0) == 0, "client sockets");
	CHECK(conn_msg(sp, &c, LO4, &be, &lfd, 64 * MiB, &chunked0) == 0, "backend sockets");
	if (gated)
		CHECK(pg_splice_route_gate(sp, c.bfd, &be, PG_SPLICE_GATE(0, 1), &chunked0, 0) == 0,
		      "gate");
	short_writes = 0;
	for (w = 0; w < plan.n; w++) {
		int last = w == plan.n - 1;

		len = plan.end[w] - pos;
		if (gated && last)
			break;
		CHECK(send_all(c.srv, body.buf + pos, len, WAIT_MS) == 0, "write %d", w);
		CHECK(recv_exact(c.cli, rx + pos, len, WAIT_MS) == 0, "client: write %d (%zu B)", w,
		      len);
		CHECK(!memcmp(rx + pos, body.buf + pos, len), "client bytes differ at write %d", w);
		decode(&dec, body.buf + pos, len);
		pos += len;
		CHECK(pg_splice_route_get(sp, c.bfd, &be, &rt) == 0, "route");
		CHECK(frame_eq("msg", &rt.frame, &dec), "frame after write %d (%zu B)", w, pos);
		CHECK(!(rt.flags & PG_SPLICE_F_FALLBACK), "fell back at write %d: reason %u", w,
		      rt.reason);
		CHECK(!(rt.flags & PG_SPLICE_F_DONE) == !last, "DONE flag at write %d", w);
	}
	CHECK(short_writes == 0, "%d short writes: the test assumes whole writes", short_writes);
	if (!gated) {
		CHECK(rt.reason == PG_SPLICE_WHY_END && rt.frame.state == PG_CH_DONE,
		      "reason %u state %u", rt.reason, rt.frame.state);
		CHECK(rt.redirected == body.len && rt.passed == 0, "redirected %llu passed %llu",
		      (unsigned long long)rt.redirected, (unsigned long long)rt.passed);
		CHECK(stray(c.bfd, 20) == 0, "bytes reached the proxy");
	} else {
		/* The final write goes to the proxy whole, and the route's frame
		 * lets the proxy's decoder end exactly at its last byte. */
		CHECK(send_all(c.srv, body.buf + pos, len, WAIT_MS) == 0, "final write");
		CHECK(recv_exact(c.bfd, rx, len, WAIT_MS) == 0, "proxy did not get the final %zu B",
		      len);
		CHECK(!memcmp(rx, body.buf + pos, len), "passed bytes differ");
		CHECK(stray(c.cli, 50) == 0, "client got the final write");
		CHECK(pg_splice_route_get(sp, c.bfd, &be, &rt) == 0, "route");
		printf("# final write %zu B: redirected %llu passed %llu flags %u reason %u\n", len,
		       (unsigned long long)rt.redirected, (unsigned long long)rt.passed, rt.flags,
		       rt.reason);
		CHECK(rt.reason == PG_SPLICE_WHY_END && !(rt.flags & PG_SPLICE_F_DONE),
		      "flags %u reason %u", rt.flags, rt.reason);
		CHECK(rt.redirected == pos && rt.passed == len, "accounting");
		CHECK(frame_eq("gated", &rt.frame, &dec),
		      "frame not the state before the final write");
		fin = rt.frame;
		CHECK(decode(&fin, rx, len) == PG_CHUNKED_DONE,
		      "proxy's decoder does not end there");
	}
	/* The state read above is the test: the msg path emits no event. */
	count_events(sp);
	CHECK(events_end == 0 && events_framing == 0, "msg events: end %d framing %d", events_end,
	      events_framing);
	CHECK(pg_splice_route_del(sp, c.bfd, &be) == 0, "route del");
	ok = 1;
out:
	if (lfd >= 0)
		close(lfd);
	conn_close(&c);
	pg_splice_close(sp);
	report(name, ok, NULL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	probe_env();
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/pg-test-frame-%d", (int)getpid());
	t_skb_chunked();
	t_skb_length();
	t_skb_fallbacks();
	t_msg_chunked(0);
	t_msg_chunked(1);
	rmdir(pin);
	printf("1..%d\n", n_test);
	printf("bpf: %d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
	return n_fail ? 1 : 0;
}
