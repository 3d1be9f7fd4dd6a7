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

static inline int listener(__u16 *port)
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

static inline void nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Connect fd (optionally pre-bound) to 127.0.0.1:port and accept the peer. */
static inline int connect_accept(int fd, int lfd, __u16 port, int *peer)
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

/*
 * msg path: the proxy binds, adds the route (with the response's framing,
 * NULL: not tracked), then connects to the backend.
 */
static inline int conn_msg(struct pg_splice *sp, struct conn *c, __u16 *port, int *lfd,
                           __u64 budget, const struct pg_frame *frame)
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
	if (pg_splice_route_add(sp, c->bfd, &be, c->cfd, budget, frame))
		return -1;
	return connect_accept(c->bfd, *lfd, *port, &c->srv);
}

static inline int wait_readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};

	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

#endif /* PG_TEST_SOCKPAIR_H */
