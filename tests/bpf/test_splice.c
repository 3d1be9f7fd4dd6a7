// SPDX-License-Identifier: MIT
/*
 * BPF tests of the in-kernel response paths (bpf/splice.bpf.c through
 * user/splice.c), on loopback sockets inside this process. Needs root,
 * bpffs (mounted here if missing) and, for the msg path, cgroup v2 at
 * /sys/fs/cgroup/unified. Prints TAP; exit 0 if nothing failed.
 *
 * Every stream carries a position-dependent pattern, so loss, duplication
 * and reordering are caught at the first wrong byte, not only by the
 * checksum. Every wait is a poll() with a deadline: no test can hang.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include "splice.h"

#define MiB         (1u << 20)
#define KiB         (1u << 10)
#define DEADLINE_MS 20000

static int n_test, n_pass, n_fail, n_skip;
static char pin[128];
static const char *skip_all, *skip_msg;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("# %s:%d: check failed: %s: ", __func__, __LINE__, #cond);          \
			printf(__VA_ARGS__);                                                       \
			printf(" (errno %s)\n", strerror(errno));                                  \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

static void report(const char *name, int ok, const char *skip)
{
	n_test++;
	if (skip) {
		n_skip++;
		printf("ok %d - %s # SKIP %s\n", n_test, name, skip);
	} else if (ok) {
		n_pass++;
		printf("ok %d - %s\n", n_test, name);
	} else {
		n_fail++;
		printf("not ok %d - %s\n", n_test, name);
	}
	fflush(stdout);
}

static __u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000 + (__u64)ts.tv_nsec / 1000000;
}

static __u64 splitmix(__u64 x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

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

/* --- sockets ---------------------------------------------------------- */

static int listener(__u16 *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd == -1)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == -1 || listen(fd, 16) == -1 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) == -1) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Connect fd (optionally pre-bound) to 127.0.0.1:port and accept the peer. */
static int connect_accept(int fd, int lfd, __u16 port, int *peer)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons(port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct pollfd p = {.fd = lfd, .events = POLLIN};

	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == -1)
		return -1;
	if (poll(&p, 1, 2000) != 1)
		return -1;
	*peer = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (*peer == -1)
		return -1;
	nonblock(fd);
	nonblock(*peer);
	return 0;
}

/*
 * The four ends of one proxied exchange: srv (backend's server side),
 * bfd (proxy's backend side), cfd (proxy's client side), cli (the client).
 */
struct conn {
	int srv, bfd, cfd, cli;
};

static void conn_close(struct conn *c)
{
	int *fds[] = {&c->srv, &c->bfd, &c->cfd, &c->cli};

	for (size_t i = 0; i < 4; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

/* Client side pair; cli_rcvbuf > 0 shrinks the client's window first. */
static int conn_client(struct conn *c, int cli_rcvbuf)
{
	__u16 port;
	int lfd = listener(&port), rc = -1;

	c->cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd >= 0 && c->cli >= 0) {
		if (cli_rcvbuf > 0)
			setsockopt(c->cli, SOL_SOCKET, SO_RCVBUF, &cli_rcvbuf, sizeof(cli_rcvbuf));
		rc = connect_accept(c->cli, lfd, port, &c->cfd);
	}
	if (lfd >= 0)
		close(lfd);
	return rc;
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

/* Backend-side pair for the skb path: proxy connects to a backend listener. */
static int conn_backend(struct conn *c)
{
	__u16 port;
	int lfd = listener(&port), rc = -1;

	c->bfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd >= 0 && c->bfd >= 0)
		rc = connect_accept(c->bfd, lfd, port, &c->srv);
	if (lfd >= 0)
		close(lfd);
	return rc;
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

static int wait_readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

	return poll(&p, 1, ms) == 1 ? p.revents : 0;
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

static int events_seen, events_budget;

static void on_ev(void *ctx, const struct pg_splice_event *ev)
{
	(void)ctx;
	events_seen++;
	if (ev->reason == PG_SPLICE_WHY_BUDGET && ev->path == PG_SPLICE_MSG)
		events_budget++;
}

/* msg path: the proxy binds, adds the route, then connects to the backend. */
static int conn_msg(struct pg_splice *sp, struct conn *c, __u16 *port, int *lfd, __u64 budget)
{
	struct sockaddr_in bind_a = {.sin_family = AF_INET,
	                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockaddr_in be = bind_a;

	*lfd = listener(port);
	if (*lfd < 0 || pg_splice_port_add(sp, *port))
		return -1;
	be.sin_port = htons(*port);
	c->bfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->bfd < 0 || bind(c->bfd, (struct sockaddr *)&bind_a, sizeof(bind_a)) == -1)
		return -1;
	if (pg_splice_route_add(sp, c->bfd, &be, c->cfd, budget, 0))
		return -1;
	return connect_accept(c->bfd, *lfd, *port, &c->srv);
}

static void t_msg(int bound)
{
	const char *name = bound ? "msg: offered bytes bounded, backend not spinning, in order"
	                         : "msg: same-host route found, 8 MiB arrive intact";
	const __u64 budget = 256 * KiB;
	struct conn c = {-1, -1, -1, -1};
	struct sockaddr_in be = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct pg_splice *sp = NULL;
	struct pg_splice_peer rt;
	static struct pump p;
	char err[256], b;
	int ok = 0, lfd = -1;
	__u16 port = 0;

	if (skip_all || skip_msg)
		return report(name, 0, skip_all ? skip_all : skip_msg);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_MSG, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, bound ? 64 * KiB : 0) == 0, "client sockets");
	CHECK(conn_msg(sp, &c, &port, &lfd, bound ? budget : 64 * MiB) == 0, "backend sockets");
	be.sin_port = htons(port);
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
		events_seen = events_budget = 0;
		pg_splice_events_consume(sp, on_ev, NULL);
		CHECK(events_budget == 1, "fall-back events %d of %d", events_budget, events_seen);
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

/* Decide what can run: root, bpffs (mounted here if missing), cgroup v2. */
static void probe_env(void)
{
	struct statfs st;

	if (geteuid() != 0) {
		skip_all = "not root (loading sockmap programs needs CAP_BPF and CAP_NET_ADMIN)";
		return;
	}
	if (statfs("/sys/fs/bpf", &st) == -1 || st.f_type != 0xcafe4a11) {
		if (mount("bpf", "/sys/fs/bpf", "bpf", 0, NULL) == -1) {
			skip_all = "no bpffs at /sys/fs/bpf and mounting it failed";
			return;
		}
	}
	if (statfs("/sys/fs/cgroup/unified", &st) == -1 || st.f_type != 0x63677270)
		skip_msg = "no cgroup v2 at /sys/fs/cgroup/unified (sockops needs it)";
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
	t_msg(0);
	t_msg(1);
	rmdir(pin);
	printf("1..%d\n", n_test);
	printf("bpf: %d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
	return n_fail ? 1 : 0;
}
