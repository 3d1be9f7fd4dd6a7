/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the proxy state machine tests (test_proxy.c,
 * test_proxy_body.c): a fake of the I/O actions (struct pg_io,
 * user/proxy/sock.h) that records what was asked (sockets armed, sends
 * outstanding, bytes sent, closes, provided buffers lent), a gateway with two
 * backends and one worker using it, and helpers that deliver events by hand
 * as the io_uring loop would (accept, data, EOF, connect, sends completed,
 * the run list drained, time). Header-only (static functions).
 */
#ifndef PG_TEST_FAKE_IO_H
#define PG_TEST_FAKE_IO_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <cmocka.h>
#include "control/control.h"
#include "members/members.h"
#include "proxy/queue.h"
#include "proxy/worker.h"
#include "state/flowctl.h"
#include "state/maps.h"
#include "state/pools.h"
#include "sys/log.h"
#include "proxy/sock.h"

/* Each test program uses a part of the helpers below. */
#pragma GCC diagnostic ignored "-Wunused-function"

/* --- the fake I/O ---------------------------------------------------------------- */

#define NFD        4096
#define CLIENT_FD0 100
#define UP_FD0     1000

struct fsock {
	struct pg_sock *s;
	bool used, armed, closed, shut, connecting;
	uint16_t port;     /* upstream: the backend port it connects to */
	char out[1 << 16]; /* bytes whose send completed */
	size_t out_len;
	const struct msghdr *pending; /* an outstanding send */
};

static struct fsock fs[NFD];
static int next_up_fd, socket_errno;
static size_t send_chunk;                /* 0: sends complete whole; else at most this many bytes */
static int stall_fd;                     /* its send stays in flight (0: none) */
static struct pg_sock *closed_sends[64]; /* closed sockets whose send was cancelled */
static unsigned nclosed_sends;

static struct fsock *F(int fd)
{
	assert_true(fd > 0 && fd < NFD);
	return &fs[fd];
}

static int f_socket(struct pg_worker *w, int family)
{
	(void)w;
	(void)family;
	if (socket_errno)
		return -socket_errno;
	fs[next_up_fd].used = true;
	return next_up_fd++;
}

static void f_recv(struct pg_worker *w, struct pg_sock *s)
{
	(void)w;
	F(s->fd)->s = s;
	F(s->fd)->armed = true;
}

static void f_pause(struct pg_worker *w, struct pg_sock *s)
{
	(void)w;
	F(s->fd)->armed = false;
}

static void f_send(struct pg_worker *w, struct pg_sock *s, const struct msghdr *msg)
{
	struct fsock *f = F(s->fd);

	(void)w;
	assert_null(f->pending); /* one send at a time */
	assert_true(msg->msg_iovlen >= 1 && msg->msg_iovlen <= PG_SOCK_IOV);
	f->s = s;
	f->pending = msg;
}

static void f_connect(struct pg_worker *w, struct pg_sock *s, const union pg_sockaddr *sa)
{
	struct fsock *f = F(s->fd);

	(void)w;
	f->s = s;
	f->connecting = true;
	f->port = pg_sockaddr_port(sa);
}

static void f_shutdown(struct pg_worker *w, struct pg_sock *s)
{
	(void)w;
	F(s->fd)->shut = true;
}

static void f_close(struct pg_worker *w, struct pg_sock *s)
{
	struct fsock *f = F(s->fd);

	(void)w;
	f->closed = true;
	f->armed = false;
	f->pending = NULL;
	f->s = NULL;
	if (s->send_busy) {
		/* Cancelled: its completion is still to come (pump delivers it),
		 * and until then pg_sock keeps the segment it names. */
		s->refs++;
		assert_true(nclosed_sends < sizeof(closed_sends) / sizeof(closed_sends[0]));
		closed_sends[nclosed_sends++] = s;
	}
}

static void f_poll(struct pg_worker *w, struct pg_sock *s)
{
	(void)w;
	(void)s;
	fail_msg("no poll on the copy path");
}

/* Provided buffers lent by lend() (bid 0..NLENT-1), and whether each is
 * still out. */
#define NLENT 4
static char lent_buf[NLENT][PG_BUFSZ];
static bool lent_out[NLENT];

static void f_buf_return(struct pg_worker *w, int bid)
{
	if (bid >= 0 && bid < NLENT) {
		assert_true(lent_out[bid]); /* given back once */
		lent_out[bid] = false;
		memset(lent_buf[bid], 'X', PG_BUFSZ); /* refilled by the next receive */
		w->bufs_out--;
	}
}

static const struct pg_io fake_io = {
    .socket = f_socket,
    .recv = f_recv,
    .pause = f_pause,
    .send = f_send,
    .connect = f_connect,
    .shutdown = f_shutdown,
    .close = f_close,
    .poll_rdhup = f_poll,
    .buf_return = f_buf_return,
};

/* --- a gateway with two backends and one worker ------------------------------------ */

static struct pg_config cfg;
static struct pg_gateway gw;
static struct pg_worker *w;

static void pump(void);

/* Flags a test program adds to the fixture's (before setup runs), at most. */
#define SETUP_EXTRA 16
static char *setup_extra[SETUP_EXTRA];

static int setup(void **state)
{
	char *argv[20 + SETUP_EXTRA] = {"prefixgate",
	                                "--no-bpf",
	                                "--backend",
	                                "127.0.0.1:9001",
	                                "--backend",
	                                "127.0.0.1:9002",
	                                "--max-in-flight",
	                                "100",
	                                "--header-timeout",
	                                "1000",
	                                "--body-timeout",
	                                "1000",
	                                "--idle-timeout",
	                                "5000",
	                                "--first-byte-timeout",
	                                "3000",
	                                "--max-body-size",
	                                "1000000",
	                                "--health-check-path",
	                                "none"};
	int argc = 20;
	char err[256];
	FILE *null = fopen("/dev/null", "w");

	for (size_t i = 0; i < sizeof(setup_extra) / sizeof(setup_extra[0]) && setup_extra[i]; i++)
		argv[argc++] = setup_extra[i];

	(void)state;
	pg_log_level = PG_LOG_ERROR;
	memset(fs, 0, sizeof(fs));
	memset(lent_out, 0, sizeof(lent_out));
	next_up_fd = UP_FD0;
	socket_errno = 0;
	send_chunk = 0;
	stall_fd = 0;
	nclosed_sends = 0;
	memset(&cfg, 0, sizeof(cfg));
	memset(&gw, 0, sizeof(gw));
	if (pg_config_parse(&cfg, argc, argv, null, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	fclose(null);
	gw.cfg = &cfg;
	gw.nworkers = 1;
	gw.stats = calloc(1, sizeof(*gw.stats));
	if (!gw.stats ||
	    pg_maps_open_pools(&gw.maps, false, "", 0, pg_pools_count(&cfg), err, sizeof(err)) ||
	    pg_control_init(&gw, err, sizeof(err)) ||
	    !(gw.flow = pg_flowctl_new(&cfg, 1, err, sizeof(err)))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	w = calloc(1, sizeof(*w));
	w->gw = &gw;
	w->io = &fake_io;
	w->stats = &gw.stats[0];
	w->rng = 1;
	w->now_ms = pg_now_ms(); /* request start times are real monotonic ones */
	return 0;
}

static uint16_t port_of(uint16_t id)
{
	return gw.maps.backends[id].port;
}

/* Every slot given back exactly once: nothing held, nothing wrapped. */
static void assert_quiet(void)
{
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++)
		if (gw.maps.backends[id].flags & PG_BACKEND_ACTIVE)
			assert_int_equal(gw.maps.backends[id].in_flight, 0);
	assert_int_equal(gw.admitted, 0);
}

static int teardown(void **state)
{
	(void)state;
	pg_proxy_shutdown(w);
	pump(); /* cancelled sends complete, as the kernel reports them */
	pg_sock_reap(w, false);
	assert_null(w->graveyard); /* nothing left that I/O still names */
	for (int bid = 0; bid < NLENT; bid++)
		assert_false(lent_out[bid]); /* every lent buffer given back */
	assert_quiet();
	pg_worker_spares_free(w);
	pg_queue_free(w);
	free(w);
	pg_flowctl_free(gw.flow);
	pg_control_stop(&gw);
	pg_pools_free(&gw);
	pg_maps_close(&gw.maps);
	free(gw.stats);
	pg_config_free(&cfg);
	return 0;
}

/* Complete every outstanding send and drain the run list, until still. */
static void pump(void)
{
	bool moved = true;

	while (moved) {
		moved = false;
		while (nclosed_sends) {
			struct pg_sock *s = closed_sends[--nclosed_sends];

			pg_sock_on_sent(w, s, -ECANCELED);
			pg_sock_put(w, s);
		}
		for (int fd = 1; fd < NFD; fd++) {
			struct fsock *f = &fs[fd];

			size_t n = 0;

			if (!f->pending || fd == stall_fd)
				continue;
			/* What the kernel would take of it: all, or send_chunk bytes. */
			for (size_t i = 0; i < f->pending->msg_iovlen; i++) {
				const struct iovec *v = &f->pending->msg_iov[i];
				size_t k = v->iov_len;

				if (send_chunk && n + k > send_chunk)
					k = send_chunk - n;
				assert_true(f->out_len + k <= sizeof(f->out));
				memcpy(f->out + f->out_len, v->iov_base, k);
				f->out_len += k;
				n += k;
				if (send_chunk && n == send_chunk)
					break;
			}
			f->pending = NULL;
			pg_sock_on_sent(w, f->s, (int)n);
			moved = true;
		}
		if (w->flow_run || w->flow_kicked) { /* as the loop does, each turn */
			pg_queue_run(w);
			moved = true;
		}
		if (w->run_head) {
			pg_worker_run(w);
			moved = true;
		}
		if (w->flush_head) {
			pg_sock_flush_all(w); /* the end of a loop turn */
			moved = true;
		}
	}
}

static int client_fd_next = CLIENT_FD0;

static int accept_client(void)
{
	int fd = client_fd_next++;
	struct pg_client *c;

	if (client_fd_next >= UP_FD0)
		client_fd_next = CLIENT_FD0;
	memset(&fs[fd], 0, sizeof(fs[fd]));
	fs[fd].used = true;
	c = pg_client_new(w, fd);
	assert_non_null(c);
	fs[fd].s = &c->s;
	assert_true(fs[fd].armed);
	return fd;
}

/* Bytes arriving on fd, in pieces of RECV_PIECE (a receive takes what has
 * arrived, up to PG_BUFSZ), in a buffer of no provided buffer's (bid -1). */
#define RECV_PIECE (16 * 1024)

static void deliver(int fd, const char *data, size_t len)
{
	char buf[RECV_PIECE];

	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		assert_non_null(F(fd)->s);
		memcpy(buf, data, n);
		pg_sock_on_data(w, F(fd)->s, buf, n, -1);
		memset(buf, 'X', n); /* a provided buffer is reused after the call */
		pump();
		data += n;
		len -= n;
	}
}

/* One receive of data[0, len) on fd in provided buffer bid, as the loop
 * delivers it (w->bufs_out counts it until it is given back). */
static void lend(int fd, int bid, const char *data, size_t len)
{
	assert_true(bid >= 0 && bid < NLENT && len <= PG_BUFSZ && !lent_out[bid]);
	memcpy(lent_buf[bid], data, len);
	lent_out[bid] = true;
	w->bufs_out++;
	pg_sock_on_data(w, F(fd)->s, lent_buf[bid], len, bid);
	pump();
}

static void say(int fd, const char *s)
{
	deliver(fd, s, strlen(s));
}

static void hangup(int fd, int err)
{
	assert_non_null(F(fd)->s);
	pg_sock_on_eof(w, F(fd)->s, err);
	pump();
}

static void connected(int fd, int res)
{
	assert_true(F(fd)->connecting);
	F(fd)->connecting = false;
	pg_sock_on_connected(w, F(fd)->s, res);
	pump();
}

/* The output of fd so far, as a string (and forget it). */
static char outbuf[(1 << 16) + 1]; /* an fsock out, and its NUL */
static const char *took(int fd)
{
	struct fsock *f = F(fd);

	memcpy(outbuf, f->out, f->out_len);
	outbuf[f->out_len] = 0;
	f->out_len = 0;
	return outbuf;
}

/* The body fd sent after a head, so far (and forget it). */
static const char *took_body(int fd)
{
	const char *end = strstr(took(fd), "\r\n\r\n");

	assert_non_null(end);
	return end + 4;
}

static void tick(uint64_t advance_ms)
{
	w->now_ms += advance_ms;
	pg_proxy_tick(w);
	w->flow_run = true; /* as the loop's tick */
	pump();
}

static struct pg_client *client_of(int fd)
{
	return (struct pg_client *)F(fd)->s;
}

#define REQ(path, body) "POST " path " HTTP/1.1\r\nHost: x\r\nContent-Length: " #body "\r\n\r\n"
static const char req1[] = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
static const char req2[] = "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nworld";
static const char resp_ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
static const char resp_two[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo";

/* req1 with req2 pipelined behind it, sent on connection u (out: what u
 * has taken so far): the first went, the second waits for its response;
 * then, on the same (pooled) connection, the second goes right after the
 * first response, and client c gets both responses in order. */
static void answer_pipelined_pair(int c, int u, const char *out)
{
	assert_non_null(strstr(out, "\r\n\r\nhello"));
	assert_null(strstr(out, "world"));
	say(u, resp_ok);
	assert_non_null(strstr(took(u), "\r\n\r\nworld"));
	say(u, resp_two);
	out = took(c);
	assert_non_null(strstr(out, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(out, "\r\n\r\nok"));
	assert_non_null(strstr(out, "\r\n\r\ntwo"));
	assert_true(strstr(out, "ok") < strstr(out, "two"));
}

#endif /* PG_TEST_FAKE_IO_H */
