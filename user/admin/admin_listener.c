// SPDX-License-Identifier: MIT
/*
 * The admin listener and its connections, on the control thread: accept,
 * read a request into admin.c (pg_admin_input) and write its reply, linger,
 * evict, refuse with 503, time out. The control thread (control/control.c)
 * polls the listener and the connections and calls these
 * (admin_listener.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "admin/admin.h"
#include "admin/admin_listener.h"
#include "lib/addr.h"
#include "lib/http.h"
#include "sys/log.h"

/*
 * Admin connection policy: a local process must not be able to lock out
 * the admin API by opening connections and sending nothing (or a trickle),
 * neither with PG_ADMIN_MAX_CONNS at once nor by reconnecting forever.
 *
 * - A connection is "idle" until its request head is complete
 *   (pg_admin_head_complete, or answered at the head with an error), and
 *   again once its reply is sent and it lingers, waiting for the client's
 *   EOF. Between the two it is "busy": its body is being received or its
 *   reply written.
 * - Timeouts, from accept: the head must be complete within
 *   PG_ADMIN_HEADER_TIMEOUT_MS, the whole exchange within
 *   PG_ADMIN_TIMEOUT_MS; a lingering connection is closed
 *   PG_ADMIN_LINGER_MS after its reply went out. The control tick
 *   (PG_CONTROL_TICK_MS, 100 ms) enforces them: each is late by at most
 *   one tick.
 * - The listener is always polled. A new connection takes a free slot;
 *   with none free, the oldest idle connection is closed to make room
 *   (after reading what it has sent: a request that has arrived is served,
 *   not dropped). A flood of idle connections therefore only ever
 *   evicts itself: a real client, which sends its head right after
 *   connecting, is read as soon as it is accepted and is then busy.
 * - With every slot busy, the new connection is accepted, answered 503
 *   and closed at once, rather than left in the backlog: leaving it there
 *   would make the polled listener spin, and the backlog would keep
 *   connections whose clients may long have given up. Busy slots are held
 *   only by clients that have sent a whole (authorized) request head, each
 *   for at most PG_ADMIN_TIMEOUT_MS, so an idle flood never causes a 503.
 * - A connection closed by us is drained first: closing with unread client
 *   bytes would send a reset, which can destroy a reply still in flight.
 */

/* One admin client connection. */
struct admin_conn {
	int fd;                   /* -1: free */
	uint64_t since_ms;        /* accepted at */
	struct pg_admin_conn req; /* the request being received */
	bool done;                /* the whole reply is in out */
	bool lingering;           /* reply sent, write side shut: wait for EOF */
	uint64_t linger_ms;       /* lingering since */
	struct pg_buf out;        /* bytes to send */
	size_t out_off;           /* of which sent */
};

/* The listener and its connections (control thread). */
static struct {
	int lfd; /* -1: not listening */
	struct admin_conn conns[PG_ADMIN_MAX_CONNS];
	struct admin_conn *polled[PG_ADMIN_MAX_CONNS]; /* pg_admin_pollfds' pfd[1..] */
} al = {.lfd = -1, .conns = {[0 ... PG_ADMIN_MAX_CONNS - 1] = {.fd = -1}}};

/* Events worth a log line, summed between lines (at most one per
 * ADMIN_LOG_MS: a flood must not flood the log too). */
#define ADMIN_LOG_MS 10000
static struct {
	uint64_t evicted, refused, timed_out, since_ms;
} admin_events;

static bool conn_idle(const struct admin_conn *c)
{
	return c->lingering || (!c->done && !pg_admin_head_complete(&c->req));
}

/* Read and discard what the client has sent and we have not read (a few
 * buffers at most), so that close() sends a FIN rather than a reset. */
static void drain_input(int fd)
{
	char buf[16384];
	ssize_t n;

	for (int i = 0; i < 16; i++) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
	}
}

static void conn_close(struct admin_conn *c)
{
	close(c->fd);
	pg_admin_conn_free(&c->req);
	pg_buf_free(&c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* Close a connection the client still holds open (timeout, eviction). */
static void conn_drop(struct admin_conn *c)
{
	drain_input(c->fd);
	conn_close(c);
}

/* Send what out holds; once the whole reply is sent, shut our side. */
static void conn_write(struct admin_conn *c)
{
	ssize_t n;

	while (c->out_off < c->out.len) {
		n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n == -1) {
			conn_close(c);
			return;
		}
		c->out_off += (size_t)n;
	}
	if (!c->done || c->lingering)
		return;
	/* Closing now with unread client bytes would reset the connection
	 * and could destroy the reply in flight: shut our side and wait for
	 * the client's EOF instead (bounded by PG_ADMIN_LINGER_MS). */
	shutdown(c->fd, SHUT_WR);
	c->lingering = true;
	c->linger_ms = pg_now_ms();
}

static void conn_read(struct pg_gateway *gw, struct admin_conn *c)
{
	char buf[65536];
	ssize_t n;

	for (;;) {
		n = recv(c->fd, buf, sizeof(buf), 0);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n == 0 && c->done && c->out_off < c->out.len)
			return; /* client half-closed after its request: still send */
		if (n <= 0) {   /* peer closed (or failed) */
			conn_close(c);
			return;
		}
		if (c->done)
			continue; /* after the request: discard until the client closes */
		pg_buf_append(&c->req.in, buf, (size_t)n);
		if (c->req.in.oom) {
			conn_close(c);
			return;
		}
		c->done = pg_admin_input(gw, &c->req, &c->out);
		if (c->out.len > c->out_off)
			conn_write(c);
		if (c->fd == -1)
			return;
	}
}

/* A slot for a connection just accepted: a free one, else the oldest idle
 * connection's, closed for it; NULL if every connection is busy. */
static struct admin_conn *conn_slot(struct pg_gateway *gw)
{
	for (int tries = 0; tries <= PG_ADMIN_MAX_CONNS; tries++) {
		struct admin_conn *victim = NULL;

		for (int i = 0; i < PG_ADMIN_MAX_CONNS; i++) {
			struct admin_conn *c = &al.conns[i];

			if (c->fd == -1)
				return c;
			if (conn_idle(c) && (!victim || c->since_ms < victim->since_ms))
				victim = c;
		}
		if (!victim)
			return NULL;
		/* Its request may be waiting unread: if it is complete, the
		 * connection is busy now and keeps its slot (or has closed). */
		if (!victim->lingering) {
			conn_read(gw, victim);
			if (victim->fd == -1)
				return victim;
			if (!conn_idle(victim))
				continue;
		}
		conn_drop(victim);
		admin_events.evicted++;
		return victim;
	}
	return NULL; /* not reached: each retry leaves one fewer idle connection */
}

/* Every connection is busy: answer fd 503 and close it. */
static void refuse(int fd)
{
	static const char body[] =
	    "{\"error\":\"admin API busy: every connection is serving a request; retry\"}\n";
	char head[512];
	int n;

	drain_input(fd);
	n = snprintf(head, sizeof(head),
	             "HTTP/1.1 503 %s\r\nContent-Type: application/json\r\n"
	             "Content-Length: %zu\r\nRetry-After: 1\r\nCache-Control: no-store\r\n"
	             "Connection: close\r\n\r\n%s",
	             pg_http_reason(503), sizeof(body) - 1, body);
	if (n > 0 && (size_t)n < sizeof(head))
		send(fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT); /* best effort */
	close(fd);
	admin_events.refused++;
}

/* Accept what the backlog holds (at most a table's worth per call, so the
 * open connections get their turn in between). */
static void admin_accept(struct pg_gateway *gw)
{
	for (int k = 0; k < PG_ADMIN_MAX_CONNS; k++) {
		struct admin_conn *c;
		int fd = accept4(al.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd == -1) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				pg_warn("admin: accept: %s", strerror(errno));
			return;
		}
		c = conn_slot(gw);
		if (!c) {
			refuse(fd);
			continue;
		}
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->since_ms = pg_now_ms();
		conn_read(gw, c); /* a client's request has often arrived already */
	}
}

/* Close the connections past their timeout (the policy above). */
void pg_admin_timeouts(uint64_t now)
{
	for (int i = 0; i < PG_ADMIN_MAX_CONNS; i++) {
		struct admin_conn *c = &al.conns[i];
		uint64_t age = now - c->since_ms;

		if (c->fd == -1)
			continue;
		if (age >= PG_ADMIN_TIMEOUT_MS ||
		    (c->lingering && now - c->linger_ms >= PG_ADMIN_LINGER_MS) ||
		    (!c->done && !pg_admin_head_complete(&c->req) &&
		     age >= PG_ADMIN_HEADER_TIMEOUT_MS)) {
			if (!c->lingering)
				admin_events.timed_out++;
			conn_drop(c);
		}
	}
	if ((admin_events.evicted || admin_events.refused) &&
	    now - admin_events.since_ms >= ADMIN_LOG_MS) {
		pg_warn("admin: %llu idle connections closed to make room for new ones, %llu "
		        "refused with 503 (all %d busy), %llu timed out, since the last report",
		        (unsigned long long)admin_events.evicted,
		        (unsigned long long)admin_events.refused, PG_ADMIN_MAX_CONNS,
		        (unsigned long long)admin_events.timed_out);
		admin_events.evicted = admin_events.refused = admin_events.timed_out = 0;
		admin_events.since_ms = now;
	}
}

int pg_admin_listen(const union pg_sockaddr *addr, union pg_sockaddr *bound, char *err,
                    size_t errlen)
{
	union pg_sockaddr sa = *addr;
	socklen_t sl = sizeof(sa);
	char name[PG_ADDR_STRLEN];
	const char *what;
	int one = 1;

	for (int i = 0; i < PG_ADMIN_MAX_CONNS; i++)
		al.conns[i].fd = -1;
	what = "socket";
	al.lfd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (al.lfd == -1)
		goto fail;
	what = "SO_REUSEADDR";
	if (setsockopt(al.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1)
		goto fail;
	what = "bind";
	if (bind(al.lfd, &sa.sa, pg_sockaddr_len(&sa)) == -1)
		goto fail;
	what = "listen";
	if (listen(al.lfd, 128) == -1)
		goto fail;
	what = "getsockname";
	if (getsockname(al.lfd, &sa.sa, &sl) == -1)
		goto fail;
	*bound = sa;
	return 0;
fail:
	snprintf(err, errlen, "--admin %s: %s: %s", pg_addr_format(addr, name), what,
	         strerror(errno));
	pg_admin_close();
	return -1;
}

int pg_admin_pollfds(struct pollfd *pfd, int max)
{
	int n = 0;

	if (max < 1)
		return 0;
	pfd[n++] = (struct pollfd){.fd = al.lfd, .events = POLLIN}; /* always */
	for (int i = 0; i < PG_ADMIN_MAX_CONNS && n < max; i++) {
		struct admin_conn *c = &al.conns[i];

		if (c->fd == -1)
			continue;
		al.polled[n - 1] = c;
		pfd[n++] = (struct pollfd){.fd = c->fd,
		                           .events = c->out_off < c->out.len ? POLLOUT : POLLIN};
	}
	return n;
}

void pg_admin_process(struct pg_gateway *gw, const struct pollfd *pfd, int n)
{
	for (int i = 1; i < n; i++) {
		struct admin_conn *c = al.polled[i - 1];

		if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL) && !(pfd[i].revents & POLLIN))
			conn_close(c);
		else if (pfd[i].revents & POLLOUT)
			conn_write(c);
		else if (pfd[i].revents & POLLIN)
			conn_read(gw, c);
	}
	if (n > 0 && pfd[0].revents)
		admin_accept(gw);
}

void pg_admin_close(void)
{
	for (int i = 0; i < PG_ADMIN_MAX_CONNS; i++)
		if (al.conns[i].fd != -1)
			conn_close(&al.conns[i]);
	if (al.lfd != -1)
		close(al.lfd);
	al.lfd = -1;
}
