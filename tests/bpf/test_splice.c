// SPDX-License-Identifier: MIT
/*
 * BPF tests of the in-kernel response paths (bpf/splice.bpf.c through
 * user/datapath/splice.h), on loopback sockets inside this process. Needs root,
 * bpffs (mounted here if missing) and, for the msg path, cgroup v2 at
 * /sys/fs/cgroup/unified. Prints TAP; exit 0 if nothing failed.
 *
 * Every stream carries a position-dependent pattern, so loss, duplication
 * and reordering are caught at the first wrong byte, not only by the
 * checksum. Every wait is a poll() with a deadline: no test can hang.
 */
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/tcp.h>
#include "sockpair.h"

#define DEADLINE_MS 20000

static char pin[128];

/* Byte at stream offset i. */
static unsigned char pat(__u64 i)
{
	return (unsigned char)(splitmix(i >> 3) >> ((i & 7) * 8));
}

static void fill(unsigned char *buf, __u64 off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		buf[i] = pat(off + i);
}

/* --- pumping ---------------------------------------------------------- */

/*
 * One single-threaded event loop standing in for backend, proxy and client:
 * the backend writes `total` pattern bytes in random sizes from srv; the
 * client reads and checks them on cli; the proxy copies whatever reaches bfd
 * to cfd, holding it until `gate` says the redirected bytes are drained.
 */
struct pump {
	struct conn *c;
	struct pg_splice *sp;
	__u64 total, sent, got, from_proxy, sum_tx, sum_rx, rng;
	int client_reads, proxy_copies, gate_skb, close_when_done, bad, eof;
	unsigned char hold[256 * KiB];
	size_t held, held_off;
};

static __u64 fnv(__u64 h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static void pump_write(struct pump *p)
{
	static unsigned char buf[64 * KiB];
	size_t n;
	ssize_t w;

	while (p->sent < p->total) {
		p->rng = splitmix(p->rng);
		n = 1 + p->rng % sizeof(buf);
		if (n > p->total - p->sent)
			n = p->total - p->sent;
		fill(buf, p->sent, n);
		w = send(p->c->srv, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w <= 0)
			return;
		p->sum_tx = fnv(p->sum_tx, buf, (size_t)w);
		p->sent += (__u64)w;
	}
	if (p->close_when_done && p->c->srv >= 0) {
		close(p->c->srv);
		p->c->srv = -1;
	}
}

static void pump_read(struct pump *p)
{
	static unsigned char buf[64 * KiB];
	ssize_t r;

	while ((r = recv(p->c->cli, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		for (ssize_t i = 0; i < r && !p->bad; i++) {
			if (buf[i] != pat(p->got + (__u64)i)) {
				printf("# byte %llu: got %02x want %02x\n",
				       (unsigned long long)(p->got + (__u64)i), buf[i],
				       pat(p->got + (__u64)i));
				p->bad = 1;
			}
		}
		p->sum_rx = fnv(p->sum_rx, buf, (size_t)r);
		p->got += (__u64)r;
	}
}

static void pump_proxy(struct pump *p)
{
	struct pg_splice_progress pr;
	ssize_t r, w;

	for (;;) {
		if (!p->held && !p->eof) {
			r = recv(p->c->bfd, p->hold, sizeof(p->hold), MSG_DONTWAIT);
			if (r == 0)
				p->eof = 1;
			if (r <= 0)
				return;
			p->held = (size_t)r;
			p->held_off = 0;
		}
		if (!p->held)
			return;
		if (p->gate_skb) {
			if (pg_splice_progress(p->sp, p->c->bfd, p->c->cfd, &pr) || !pr.drained)
				return;
			p->gate_skb = 0; /* redirected is final after FALLBACK */
		}
		w = send(p->c->cfd, p->hold + p->held_off, p->held, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w <= 0)
			return;
		p->from_proxy += (__u64)w;
		p->held -= (size_t)w;
		p->held_off += (size_t)w;
	}
}

/* Run until the client has `until` bytes (or a mismatch); 0 on success. */
static int pump_run(struct pump *p, __u64 until, int ms)
{
	__u64 end = now_ms() + (__u64)ms;
	struct pollfd pf[3];

	while (p->got < until && !p->bad) {
		if (now_ms() > end) {
			printf("# timeout: sent %llu got %llu via proxy %llu\n",
			       (unsigned long long)p->sent, (unsigned long long)p->got,
			       (unsigned long long)p->from_proxy);
			return -1;
		}
		pump_write(p);
		if (p->client_reads)
			pump_read(p);
		if (p->proxy_copies)
			pump_proxy(p);
		pf[0] = (struct pollfd){.fd = p->c->srv, .events = POLLOUT};
		pf[1] = (struct pollfd){.fd = p->client_reads ? p->c->cli : -1, .events = POLLIN};
		pf[2] = (struct pollfd){.fd = p->proxy_copies ? p->c->bfd : -1, .events = POLLIN};
		if (p->sent >= p->total)
			pf[0].fd = -1;
		/* Short timeout: spliced fds can poll readable with nothing to read,
		 * and the drained gate changes without any fd event. */
		poll(pf, 3, 5);
	}
	return p->bad ? -1 : 0;
}

/* --- tests ------------------------------------------------------------ */

static void t_load(void)
{
	struct pg_splice *sp = NULL;
	char err[256], path[256];
	struct stat st;
	int ok = 0, rc;

	if (skip_all)
		return report("load: every program loads and verifies", 0, skip_all);
	rc = pg_splice_open(&sp, pin, PG_SPLICE_SKB | (skip_msg ? 0 : PG_SPLICE_MSG), NULL, err,
	                    sizeof(err));
	CHECK(rc == 0, "%s", err);
	snprintf(path, sizeof(path), "%s/splice_peers", pin);
	CHECK(stat(path, &st) == 0, "pin %s", path);
	pg_splice_close(sp);
	sp = NULL;
	CHECK(stat(path, &st) == -1, "pin %s left after close", path);
	rc = pg_splice_open(&sp, "/proc/pg-no-bpffs", PG_SPLICE_SKB, NULL, err, sizeof(err));
	CHECK(rc == -ENOENT && strstr(err, "no bpffs"), "no-bpffs cause: %d %s", rc, err);
	ok = 1;
out:
	pg_splice_close(sp);
	report("load: every program loads and verifies", ok, NULL);
}

static void t_skb_intact(void)
{
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct pg_splice_progress pr;
	static struct pump p;
	char err[256];
	int ok = 0;

	if (skip_all)
		return report("skb: 16 MiB in random sizes arrive intact", 0, skip_all);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 0) == 0 && conn_backend(&c) == 0, "sockets");
	/* A budget above the total: this test is about the redirect alone (a
	 * single-threaded reader lets a burst go past the 4 MiB default). */
	CHECK(pg_splice_pair(sp, c.bfd, c.cfd, 64 * MiB, 0) == 0, "pair");
	memset(&p, 0, sizeof(p));
	p = (struct pump){.c = &c,
	                  .sp = sp,
	                  .total = 16 * MiB,
	                  .rng = 1,
	                  .client_reads = 1,
	                  .proxy_copies = 1,
	                  .gate_skb = 1};
	CHECK(pump_run(&p, p.total, DEADLINE_MS) == 0, "pump");
	CHECK(p.sum_rx == p.sum_tx, "checksum %llx != %llx", (unsigned long long)p.sum_rx,
	      (unsigned long long)p.sum_tx);
	CHECK(pg_splice_progress(sp, c.bfd, c.cfd, &pr) == 0, "progress");
	printf("# redirected %llu passed %llu via proxy %llu flags %u\n",
	       (unsigned long long)pr.peer.redirected, (unsigned long long)pr.peer.passed,
	       (unsigned long long)p.from_proxy, pr.peer.flags);
	CHECK(pr.peer.redirected + p.from_proxy == p.total, "accounting");
	CHECK(pr.peer.redirected == p.total && pr.peer.passed == 0, "not all redirected");
	CHECK(pg_splice_unpair(sp, c.bfd) == 0, "unpair");
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report("skb: 16 MiB in random sizes arrive intact", ok, NULL);
}

static void t_skb_fin(void)
{
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct pg_splice_progress pr;
	char err[256], buf[64];
	__u64 end;
	ssize_t r;
	int ok = 0;

	if (skip_all)
		return report("skb: backend FIN is passed, client stays usable", 0, skip_all);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 0) == 0 && conn_backend(&c) == 0, "sockets");
	CHECK(pg_splice_pair(sp, c.bfd, c.cfd, 0, 0) == 0, "pair");
	CHECK(send(c.srv, "hello", 5, 0) == 5, "backend send");
	close(c.srv);
	c.srv = -1;
	/* The proxy waits for RDHUP on the backend, then for the drain. */
	CHECK(wait_readable(c.bfd, 2000) & POLLRDHUP, "no RDHUP on the backend fd");
	CHECK(recv(c.bfd, buf, sizeof(buf), MSG_DONTWAIT) == 0, "backend fd not at EOF");
	for (end = now_ms() + 2000;; usleep(1000)) {
		CHECK(pg_splice_progress(sp, c.bfd, c.cfd, &pr) == 0, "progress");
		if (pr.drained)
			break;
		CHECK(now_ms() < end, "never drained");
	}
	CHECK(pr.peer.redirected == 5 && !(pr.peer.flags & PG_SPLICE_F_FALLBACK), "peer");
	CHECK(wait_readable(c.cli, 2000), "client got nothing");
	CHECK(recv(c.cli, buf, sizeof(buf), MSG_DONTWAIT) == 5 && !memcmp(buf, "hello", 5),
	      "client data");
	CHECK(pg_splice_unpair(sp, c.bfd) == 0, "unpair");
	/* The client connection carries on both ways with plain writes. */
	CHECK(send(c.cfd, "world", 5, 0) == 5, "proxy write after splice");
	CHECK(wait_readable(c.cli, 2000) && recv(c.cli, buf, sizeof(buf), 0) == 5 &&
	          !memcmp(buf, "world", 5),
	      "client after splice");
	CHECK(send(c.cli, "GET", 3, 0) == 3, "client request");
	CHECK(wait_readable(c.cfd, 2000), "proxy got no request");
	r = recv(c.cfd, buf, sizeof(buf), MSG_DONTWAIT);
	CHECK(r == 3 && !memcmp(buf, "GET", 3), "next request: %zd", r);
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report("skb: backend FIN is passed, client stays usable", ok, NULL);
}

static void t_skb_queued(void)
{
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	static struct pump p;
	char err[256], b;
	int ok = 0, q = 0;
	__u64 end;

	if (skip_all)
		return report("skb: bytes queued before pairing neither lost nor duplicated", 0,
		              skip_all);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 0) == 0 && conn_backend(&c) == 0, "sockets");
	memset(&p, 0, sizeof(p));
	p = (struct pump){
	    .c = &c, .sp = sp, .total = 100000, .rng = 7, .client_reads = 1, .proxy_copies = 0};
	pump_write(&p); /* all of it sits in bfd's receive queue, unread */
	for (end = now_ms() + 2000; q < (int)p.total && now_ms() < end; usleep(1000))
		ioctl(c.bfd, FIONREAD, &q);
	CHECK(q == (int)p.total, "queued %d of %llu", q, (unsigned long long)p.total);
	CHECK(pg_splice_pair(sp, c.bfd, c.cfd, 0, 0) == 0, "pair");
	/* With no packet after pairing, only the pairing's nudge moves them. */
	CHECK(pump_run(&p, p.total, 2000) == 0, "queued bytes not moved by pairing alone");
	p.total = 4 * MiB; /* and more after pairing */
	CHECK(pump_run(&p, p.total, DEADLINE_MS) == 0, "pump");
	CHECK(recv(c.bfd, &b, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN, "bytes left on bfd");
	CHECK(p.sum_rx == p.sum_tx, "checksum");
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report("skb: bytes queued before pairing neither lost nor duplicated", ok, NULL);
}

/*
 * Stall the client (small window, not reading) and let the backend write
 * until it is held back. Returns 0 when writes have stopped for 300 ms.
 */
static int stall(struct pump *p, int ms)
{
	__u64 last = p->sent, quiet = now_ms(), end = now_ms() + (__u64)ms;

	while (now_ms() < end) {
		pump_write(p);
		if (p->sent != last) {
			last = p->sent;
			quiet = now_ms();
		} else if (now_ms() - quiet > 300) {
			return 0;
		}
		usleep(2000);
	}
	return -1;
}

static void t_skb_bound(void)
{
	const __u64 budget = 256 * KiB;
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct pg_splice_progress pr;
	static struct pump p;
	char err[256];
	__u64 unacked;
	int ok = 0;

	if (skip_all)
		return report("skb: redirected-unacked bytes bounded, then in order", 0, skip_all);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 64 * KiB) == 0 && conn_backend(&c) == 0, "sockets");
	CHECK(pg_splice_pair(sp, c.bfd, c.cfd, budget, 0) == 0, "pair");
	memset(&p, 0, sizeof(p));
	p = (struct pump){
	    .c = &c, .sp = sp, .total = 64 * MiB, .rng = 3, .gate_skb = 1, .close_when_done = 1};
	CHECK(stall(&p, 10000) == 0, "backend never held back (sent %llu)",
	      (unsigned long long)p.sent);
	CHECK(pg_splice_progress(sp, c.bfd, c.cfd, &pr) == 0, "progress");
	unacked = pr.peer.redirected - pr.acked;
	printf("# stalled: backend sent %llu, redirected %llu, unacked %llu, passed %llu\n",
	       (unsigned long long)p.sent, (unsigned long long)pr.peer.redirected,
	       (unsigned long long)unacked, (unsigned long long)pr.peer.passed);
	CHECK(p.sent < p.total, "backend was not held back");
	CHECK(pr.peer.flags & PG_SPLICE_F_FALLBACK && pr.peer.reason == PG_SPLICE_WHY_BUDGET,
	      "flags %u reason %u", pr.peer.flags, pr.peer.reason);
	CHECK(unacked <= budget + 512 * KiB, "unacked %llu over the bound",
	      (unsigned long long)unacked);
	/* The client resumes; the proxy copies the passed tail after the drain. */
	p.client_reads = p.proxy_copies = 1;
	CHECK(pump_run(&p, p.total, 60000) == 0, "pump");
	CHECK(p.sum_rx == p.sum_tx, "checksum");
	printf("# then: redirected %llu, via proxy %llu\n", (unsigned long long)pr.peer.redirected,
	       (unsigned long long)p.from_proxy);
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report("skb: redirected-unacked bytes bounded, then in order", ok, NULL);
}

static int events_seen;

static void on_ev(void *ctx, const struct pg_splice_event *ev)
{
	(void)ctx;
	(void)ev;
	events_seen++;
}

/*
 * lo: the backend's loopback (sockpair.h): IPv4, IPv6 (::1), or IPv4 to a
 * dual-stack backend socket, whose addresses the kernel shows IPv4-mapped.
 */
static void t_msg(int bound, enum lo lo)
{
	static const char *const names[] = {
	    [LO4] = "msg: same-host route found, 8 MiB arrive intact",
	    [LO6] = "msg: IPv6 (::1) route found, 8 MiB arrive intact",
	    [LO4_DUAL] = "msg: IPv4 to a dual-stack backend socket, 8 MiB arrive intact",
	};
	const char *name =
	    bound ? "msg: offered bytes bounded, backend not spinning, in order" : names[lo];
	const char *skip = skip_all ? skip_all : skip_msg;
	const __u64 budget = 256 * KiB;
	struct conn c = {-1, -1, -1, -1};
	union pg_sockaddr be;
	struct pg_splice *sp = NULL;
	struct pg_splice_peer rt;
	static struct pump p;
	char err[256], b;
	int ok = 0, lfd = -1;

	if (!skip && lo == LO6)
		skip = no_ip6_loopback();
	if (skip)
		return report(name, 0, skip);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_MSG, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, bound ? 64 * KiB : 0) == 0, "client sockets");
	CHECK(conn_msg(sp, &c, lo, &be, &lfd, bound ? budget : 64 * MiB, NULL) == 0,
	      "backend sockets");
	memset(&p, 0, sizeof(p));
	p = (struct pump){.c = &c,
	                  .sp = sp,
	                  .total = 8 * MiB,
	                  .rng = 5,
	                  .client_reads = !bound,
	                  .proxy_copies = !bound,
	                  .close_when_done = 1};
	if (bound) {
		p.total = 64 * MiB;
		CHECK(stall(&p, 10000) == 0, "backend kept writing (sent %llu)",
		      (unsigned long long)p.sent);
		CHECK(pg_splice_route_get(sp, c.bfd, &be, &rt) == 0, "route");
		printf("# stalled: backend sent %llu, offered %llu, passed %llu\n",
		       (unsigned long long)p.sent, (unsigned long long)rt.redirected,
		       (unsigned long long)rt.passed);
		CHECK(rt.flags & PG_SPLICE_F_FALLBACK && rt.reason == PG_SPLICE_WHY_BUDGET,
		      "flags %u reason %u", rt.flags, rt.reason);
		CHECK(rt.redirected <= budget + 64 * KiB, "offered over the bound");
		/* Not spinning: after the fall-back TCP flow control holds the
		 * backend, so its socket does not poll writable. */
		struct pollfd pf = {.fd = c.srv, .events = POLLOUT};
		CHECK(poll(&pf, 1, 200) == 0, "backend socket still writable: would spin");
		/* No event: the passed write is what tells the proxy. */
		events_seen = 0;
		CHECK(pg_splice_events_consume(sp, on_ev, NULL) == 0 && events_seen == 0,
		      "the msg path emitted %d events", events_seen);
		p.client_reads = p.proxy_copies = 1;
	}
	CHECK(pump_run(&p, p.total, 60000) == 0, "pump");
	CHECK(p.sum_rx == p.sum_tx, "checksum");
	CHECK(pg_splice_route_get(sp, c.bfd, &be, &rt) == 0, "route");
	printf("# offered %llu passed %llu via proxy %llu\n", (unsigned long long)rt.redirected,
	       (unsigned long long)rt.passed, (unsigned long long)p.from_proxy);
	if (!bound) {
		/* offered >= total: a non-blocking backend re-offers what a full
		 * client refused (short counts); nothing may reach the proxy. */
		CHECK(rt.redirected >= p.total && rt.passed == 0 && p.from_proxy == 0,
		      "not all redirected");
		CHECK(recv(c.bfd, &b, 1, MSG_DONTWAIT) <= 0, "bytes reached the proxy");
	}
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
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/pg-test-%d", (int)getpid());
	t_load();
	t_skb_intact();
	t_skb_fin();
	t_skb_queued();
	t_skb_bound();
	t_msg(0, LO4);
	t_msg(1, LO4);
	t_msg(0, LO6);
	t_msg(0, LO4_DUAL);
	rmdir(pin);
	printf("1..%d\n", n_test);
	printf("bpf: %d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
	return n_fail ? 1 : 0;
}
