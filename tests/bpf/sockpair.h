/* SPDX-License-Identifier: MIT */
/*
 * Shared by the BPF tests (tests/bpf/test_*.c): TAP reporting, the CHECK
 * macro, the environment probe, and loopback socket pairs standing in for
 * backend, proxy and client. Header-only (static functions) because each
 * test binary is built from its one source file.
 *
 * Every wait is a poll() with a deadline: no test can hang.
 */
#ifndef PG_TEST_SOCKPAIR_H
#define PG_TEST_SOCKPAIR_H

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <netinet/in.h>
#include "datapath/splice.h"

#define MiB (1u << 20)
#define KiB (1u << 10)

static int n_test, n_pass, n_fail, n_skip;
static const char *skip_all, *skip_msg;

/* On failure print where and why, then jump to the test's `out:` cleanup. */
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("# %s:%d: check failed: %s: ", __func__, __LINE__, #cond);          \
			printf(__VA_ARGS__);                                                       \
			printf(" (errno %s)\n", strerror(errno));                                  \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

static inline void report(const char *name, int ok, const char *skip)
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

static inline __u64 now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000 + (__u64)ts.tv_nsec / 1000000;
}

static inline __u64 splitmix(__u64 x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Decide what can run: root, bpffs (mounted here if missing), cgroup v2. */
static inline void probe_env(void)
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

/* --- sockets ---------------------------------------------------------- */

/* The loopback address of family (127.0.0.1 or ::1), port 0. */
static inline union pg_sockaddr loopback(int family)
{
	union pg_sockaddr a;

	memset(&a, 0, sizeof(a));
	if (family == AF_INET6) {
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_addr = in6addr_loopback;
	} else {
		a.in.sin_family = AF_INET;
		a.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
	return a;
}

/* A listener on family's loopback address; *a: its address and port. */
static inline int listener_at(int family, union pg_sockaddr *a)
{
	socklen_t len = sizeof(*a);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*a = loopback(family);
	if (fd == -1)
		return -1;
	if (bind(fd, &a->sa, pg_sockaddr_len(a)) == -1 || listen(fd, 16) == -1 ||
	    getsockname(fd, &a->sa, &len) == -1) {
		close(fd);
		return -1;
	}
	return fd;
}

static inline int listener(__u16 *port)
{
	union pg_sockaddr a;
	int fd = listener_at(AF_INET, &a);

	*port = pg_sockaddr_port(&a);
	return fd;
}

/*
 * A dual-stack backend: an AF_INET6 listener bound to ::ffff:127.0.0.1, so
 * its sockets are AF_INET6 with IPv4-mapped addresses; *a: the IPv4 address
 * (127.0.0.1:port) a proxy connects to.
 */
static inline int listener_mapped(union pg_sockaddr *a)
{
	union pg_sockaddr m = loopback(AF_INET6);
	socklen_t len = sizeof(m);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), off = 0;

	*a = loopback(AF_INET);
	if (fd == -1)
		return -1;
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &m.in6.sin6_addr);
	if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) == -1 ||
	    bind(fd, &m.sa, sizeof(m.in6)) == -1 || listen(fd, 16) == -1 ||
	    getsockname(fd, &m.sa, &len) == -1) {
		close(fd);
		return -1;
	}
	a->in.sin_port = m.in6.sin6_port;
	return fd;
}

/* Why IPv6 loopback tests cannot run (no IPv6, or no ::1), or NULL. */
static inline const char *no_ip6_loopback(void)
{
	union pg_sockaddr a;
	int fd = listener_at(AF_INET6, &a);

	if (fd < 0)
		return "::1 unavailable (IPv6 disabled or no loopback address)";
	close(fd);
	return NULL;
}

static inline void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Connect fd (optionally pre-bound) to a and accept the peer on lfd. */
static inline int connect_accept_at(int fd, int lfd, const union pg_sockaddr *a, int *peer)
{
	struct pollfd p = {.fd = lfd, .events = POLLIN};

	if (connect(fd, &a->sa, pg_sockaddr_len(a)) == -1)
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

/* Connect fd (optionally pre-bound) to 127.0.0.1:port and accept the peer. */
static inline int connect_accept(int fd, int lfd, __u16 port, int *peer)
{
	union pg_sockaddr a = loopback(AF_INET);

	a.in.sin_port = htons(port);
	return connect_accept_at(fd, lfd, &a, peer);
}

/*
 * The four ends of one proxied exchange: srv (backend's server side),
 * bfd (proxy's backend side), cfd (proxy's client side), cli (the client).
 */
struct conn {
	int srv, bfd, cfd, cli;
};

static inline void conn_close(struct conn *c)
{
	int *fds[] = {&c->srv, &c->bfd, &c->cfd, &c->cli};

	for (size_t i = 0; i < 4; i++) {
		if (*fds[i] >= 0)
			close(*fds[i]);
		*fds[i] = -1;
	}
}

/* Client side pair; cli_rcvbuf > 0 shrinks the client's window first. */
static inline int conn_client(struct conn *c, int cli_rcvbuf)
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

/* Backend-side pair for the skb path: proxy connects to a backend listener. */
static inline int conn_backend(struct conn *c)
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

/* Where conn_msg's backend listens. */
enum lo {
	LO4,      /* 127.0.0.1, AF_INET sockets */
	LO6,      /* ::1 */
	LO4_DUAL, /* 127.0.0.1 through a dual-stack backend (listener_mapped) */
};

/*
 * msg path over loopback (see enum lo): the proxy binds, adds the route
 * (with the response's framing, NULL: not tracked), then connects to the
 * backend. *be: the backend's address (the route's key with c->bfd).
 */
static inline int conn_msg(struct pg_splice *sp, struct conn *c, enum lo lo, union pg_sockaddr *be,
                           int *lfd, __u64 budget, const struct pg_frame *frame)
{
	int family = lo == LO6 ? AF_INET6 : AF_INET;
	union pg_sockaddr bind_a = loopback(family);

	*lfd = lo == LO4_DUAL ? listener_mapped(be) : listener_at(family, be);
	if (*lfd < 0 || pg_splice_port_add(sp, pg_sockaddr_port(be)))
		return -1;
	c->bfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->bfd < 0 || bind(c->bfd, &bind_a.sa, pg_sockaddr_len(&bind_a)) == -1)
		return -1;
	if (pg_splice_route_add(sp, c->bfd, be, c->cfd, budget, frame))
		return -1;
	return connect_accept_at(c->bfd, *lfd, be, &c->srv);
}

static inline int wait_readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

#endif /* PG_TEST_SOCKPAIR_H */
