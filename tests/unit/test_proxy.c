// SPDX-License-Identifier: MIT
/*
 * The proxy's state machine (user/proxy/) without sockets: a worker whose
 * I/O actions (struct pg_io) are a fake that records what was asked, and
 * events delivered by hand, as the io_uring loop would deliver them. Each
 * test ends with every in-flight slot and admission given back exactly
 * once (a double release shows as a wrapped counter).
 */
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
#include "proxy/worker.h"
#include "state/maps.h"
#include "sys/log.h"

/* --- the fake I/O ---------------------------------------------------------------- */

#define NFD 4096
#define CLIENT_FD0 100
#define UP_FD0 1000

struct fsock {
	struct pg_sock *s;
	bool used, armed, closed, shut, connecting;
	uint16_t port;      /* upstream: the backend port it connects to */
	char out[1 << 16];  /* bytes whose send completed */
	size_t out_len;
	const struct msghdr *pending; /* an outstanding send */
};

static struct fsock fs[NFD];
static int next_up_fd, socket_errno;
static size_t send_chunk; /* 0: sends complete whole; else at most this many bytes */
static unsigned buf_returns;
static struct pg_sock *closed_sends[64]; /* closed sockets whose send was cancelled */
static unsigned nclosed_sends;

static struct fsock *F(int fd)
{
	assert_true(fd > 0 && fd < NFD);
	return &fs[fd];
}

static int f_socket(struct pg_worker *w)
{
	(void)w;
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

static void f_connect(struct pg_worker *w, struct pg_sock *s, const struct sockaddr_in *sa)
{
	struct fsock *f = F(s->fd);

	(void)w;
	f->s = s;
	f->connecting = true;
	f->port = ntohs(sa->sin_port);
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

static void f_buf_return(struct pg_worker *w, int bid)
{
	(void)w;
	(void)bid;
	buf_returns++;
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

static int setup(void **state)
{
	char *argv[] = {"prefixgate", "--no-bpf", "--backend", "127.0.0.1:9001", "--backend",
			"127.0.0.1:9002", "--max-in-flight", "100", "--header-timeout", "1000",
			"--body-timeout", "1000", "--idle-timeout", "5000", "--first-byte-timeout",
			"3000", "--max-body-size", "1000000", "--health-check-path", "none"};
	char err[256];
	FILE *null = fopen("/dev/null", "w");

	(void)state;
	pg_log_level = PG_LOG_ERROR;
	memset(fs, 0, sizeof(fs));
	next_up_fd = UP_FD0;
	socket_errno = 0;
	send_chunk = 0;
	nclosed_sends = 0;
	memset(&cfg, 0, sizeof(cfg));
	memset(&gw, 0, sizeof(gw));
	if (pg_config_parse(&cfg, (int)(sizeof(argv) / sizeof(argv[0])), argv, null, err,
			    sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	fclose(null);
	gw.cfg = &cfg;
	gw.nworkers = 1;
	gw.stats = calloc(1, sizeof(*gw.stats));
	if (!gw.stats || pg_maps_open(&gw.maps, false, "", 0, err, sizeof(err)) ||
	    pg_control_init(&gw, err, sizeof(err))) {
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
	assert_quiet();
	free(w);
	pg_control_stop(&gw);
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

			if (!f->pending)
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

/* Bytes arriving on fd, in receive-buffer-sized pieces. */
static void deliver(int fd, const char *data, size_t len)
{
	char buf[PG_BUFSZ];

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
static char outbuf[1 << 16];
static const char *took(int fd)
{
	struct fsock *f = F(fd);

	memcpy(outbuf, f->out, f->out_len);
	outbuf[f->out_len] = 0;
	f->out_len = 0;
	return outbuf;
}

static void tick(uint64_t advance_ms)
{
	w->now_ms += advance_ms;
	pg_proxy_tick(w);
	pump();
}

static struct pg_client *client_of(int fd)
{
	return (struct pg_client *)F(fd)->s;
}

#define REQ(path, body)                                                                      \
	"POST " path " HTTP/1.1\r\nHost: x\r\nContent-Length: " #body "\r\n\r\n"
static const char req1[] = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
static const char req2[] = "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nworld";
static const char resp_ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
static const char resp_two[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo";

/* --- tests --------------------------------------------------------------------------- */

static void test_exchange_and_pool(void **state)
{
	int c = accept_client(), u;

	(void)state;
	say(c, req1);
	u = UP_FD0;
	assert_true(F(u)->connecting);
	assert_int_equal(F(u)->out_len, 0); /* nothing sent before the connect */
	connected(u, 0);
	assert_non_null(strstr(took(u), "hello"));
	assert_int_equal(client_of(c)->state, PG_C_WAIT);
	say(u, resp_ok);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	/* Kept alive both ways: the backend connection went to the pool. */
	assert_false(F(u)->closed);
	assert_false(F(c)->closed);
	assert_int_equal(client_of(c)->state, PG_C_HEAD);
	assert_int_equal(w->pool_len[1] + w->pool_len[2], 1);
	/* The next request on it reuses the pooled connection. */
	say(c, req2);
	assert_int_equal(next_up_fd, UP_FD0 + 1); /* no new socket */
	assert_non_null(strstr(took(u), "world"));
	say(u, resp_two);
	assert_non_null(strstr(took(c), "two"));
	assert_quiet();
}

static void test_pipelining_in_order(void **state)
{
	char both[256];
	int c = accept_client(), u = UP_FD0;
	const char *out;

	(void)state;
	snprintf(both, sizeof(both), "%s%s", req1, req2);
	say(c, both);
	connected(u, 0);
	out = took(u);
	assert_non_null(strstr(out, "hello"));
	assert_null(strstr(out, "world")); /* the second waits for the first's response */
	/* The first response, with the second request's dispatch right after
	 * it, from the run list: on the same (pooled) connection, in order. */
	say(u, resp_ok);
	assert_non_null(strstr(took(u), "world"));
	say(u, resp_two);
	out = took(c);
	assert_non_null(strstr(out, "ok"));
	assert_non_null(strstr(out, "two"));
	assert_true(strstr(out, "ok") < strstr(out, "two"));
	assert_int_equal(next_up_fd, UP_FD0 + 1);
	assert_quiet();
}

static void test_retry_before_first_byte(void **state)
{
	int c = accept_client(), u1 = UP_FD0, u2 = UP_FD0 + 1;

	(void)state;
	say(c, req1);
	connected(u1, -ECONNREFUSED);
	assert_true(F(u1)->closed);
	/* Retried on the other backend, on a fresh connection. */
	assert_true(F(u2)->connecting);
	assert_int_not_equal(F(u2)->port, F(u1)->port);
	connected(u2, 0);
	assert_non_null(strstr(took(u2), "hello"));
	say(u2, resp_ok);
	assert_non_null(strstr(took(c), "ok"));
	assert_false(F(c)->closed);
	/* The refused backend is skipped for a while. */
	bool down = false;
	for (unsigned id = 1; id <= 2; id++)
		if (port_of((uint16_t)id) == F(u1)->port)
			down = gw.maps.backends[id].flags & PG_BACKEND_DOWN;
	assert_true(down);
	assert_quiet();
}

static void test_retry_on_stale_pooled_connection(void **state)
{
	int c = accept_client(), u = UP_FD0;

	(void)state;
	say(c, req1);
	connected(u, 0);
	say(u, resp_ok);
	took(c);
	/* The pooled connection was closed by the backend meanwhile: the send
	 * fails; the same backend is tried again on a fresh connection. */
	say(c, req2);
	hangup(u, 0);
	assert_true(F(u)->closed);
	assert_true(F(UP_FD0 + 1)->connecting);
	assert_int_equal(F(UP_FD0 + 1)->port, F(u)->port);
	connected(UP_FD0 + 1, 0);
	say(UP_FD0 + 1, resp_two);
	assert_non_null(strstr(took(c), "two"));
	assert_quiet();
}

static void test_no_retry_after_first_byte(void **state)
{
	int c = accept_client(), u = UP_FD0;
	const char *out;

	(void)state;
	say(c, req1);
	connected(u, 0);
	say(u, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
	hangup(u, -ECONNRESET);
	assert_int_equal(next_up_fd, UP_FD0 + 1); /* no second attempt */
	out = took(c);
	assert_non_null(strstr(out, "partial"));
	assert_null(strstr(out, "502"));
	/* Short of its length, then the connection ends. */
	assert_int_equal(client_of(c)->state, PG_C_LINGER);
	assert_true(F(c)->shut);
	assert_true(F(u)->closed);
	assert_quiet();
}

static void test_backend_death_mid_chunked_body(void **state)
{
	int c = accept_client(), u = UP_FD0;

	(void)state;
	say(c, req1);
	connected(u, 0);
	say(u, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
	hangup(u, 0);
	assert_non_null(strstr(took(c), "hel"));
	assert_int_equal(client_of(c)->state, PG_C_LINGER);
	assert_true(F(u)->closed);
	assert_int_equal(w->pool_len[1] + w->pool_len[2], 0);
	assert_int_equal(gw.stats[0].backend_errors, 1);
	assert_quiet();
}

/* Drive a new client into each state, then have it hang up. */
static int into_state(enum pg_client_state st)
{
	int c = accept_client(), u = next_up_fd;

	switch (st) {
	case PG_C_HEAD:
		say(c, "POST /a HTTP/1.1\r\nHost:");
		break;
	case PG_C_KEY:
		say(c, REQ("/a", 100000) "0123456789");
		break;
	case PG_C_STREAM: {
		static char big[8192];
		size_t n = strlen(REQ("/a", 100000));

		memcpy(big, REQ("/a", 100000), n);
		memset(big + n, 'b', sizeof(big) - n);
		deliver(c, big, sizeof(big));
		connected(u, 0);
		break;
	}
	case PG_C_WAIT:
		say(c, req1);
		connected(u, 0);
		break;
	case PG_C_DISCARD: {
		static char big[8192];
		size_t n = strlen(REQ("/a", 100000));

		memcpy(big, REQ("/a", 100000), n);
		memset(big + n, 'b', sizeof(big) - n);
		deliver(c, big, sizeof(big));
		connected(u, 0);
		say(u, "HTTP/1.1 413 Too Big\r\nContent-Length: 0\r\n\r\n");
		break;
	}
	case PG_C_LINGER:
		say(c, "BAD\r\n\r\n");
		break;
	}
	assert_int_equal(client_of(c)->state, st);
	return c;
}

static void test_client_abort_in_every_state(void **state)
{
	static const enum pg_client_state states[] = {PG_C_HEAD, PG_C_KEY,     PG_C_STREAM,
						      PG_C_WAIT, PG_C_DISCARD, PG_C_LINGER};

	(void)state;
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		int first_up = next_up_fd;
		int c = into_state(states[i]);

		hangup(c, i % 2 ? 0 : -ECONNRESET);
		assert_true(F(c)->closed);
		/* Its backend connection goes with it (the server stops
		 * generating for nobody); a pooled one may stay. */
		for (int u = first_up; u < next_up_fd; u++)
			if (!F(u)->closed)
				assert_int_equal(((struct pg_upstream *)F(u)->s)->state, PG_U_IDLE);
		assert_quiet();
		pg_sock_reap(w, false);
	}
	assert_int_equal(w->nclients, 0);
}

static void test_early_answer_discard_keeps_client(void **state)
{
	int c = into_state(PG_C_DISCARD), u = UP_FD0;
	static char rest[100000];
	size_t left = 100000 - (8192 - strlen(REQ("/a", 100000)));

	(void)state;
	assert_non_null(strstr(took(c), "413"));
	/* Answered before the whole request: never pooled. */
	assert_true(F(u)->closed);
	assert_quiet();
	/* The rest of the body is dropped, then the next request is served. */
	memset(rest, 'b', left);
	deliver(c, rest, left);
	assert_int_equal(client_of(c)->state, PG_C_HEAD);
	say(c, req2);
	connected(UP_FD0 + 1, 0);
	assert_non_null(strstr(took(UP_FD0 + 1), "world"));
	assert_null(strstr(F(UP_FD0 + 1)->out, "bbbb"));
	say(UP_FD0 + 1, resp_two);
	assert_non_null(strstr(took(c), "two"));
	assert_quiet();
}

static void test_linger_after_error(void **state)
{
	int c = accept_client();
	const char *out;

	(void)state;
	say(c, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
	out = took(c);
	assert_non_null(strstr(out, "HTTP/1.1 400 "));
	assert_non_null(strstr(out, "Connection: close"));
	assert_int_equal(client_of(c)->state, PG_C_LINGER);
	assert_true(F(c)->shut);   /* our side shut once the answer is out */
	assert_true(F(c)->armed);  /* its input drained meanwhile */
	say(c, "more bytes, ignored");
	assert_int_equal(F(c)->out_len, 0);
	tick(1000);
	assert_false(F(c)->closed);
	tick(1100);
	assert_true(F(c)->closed);
	assert_quiet();
}

static void test_timeouts(void **state)
{
	int c1, c2, c3, u;

	(void)state;
	/* A head not complete in --header-timeout: 408. */
	c1 = accept_client();
	say(c1, "POST /a HTTP/1.1\r\n");
	/* Sent, no response byte in --first-byte-timeout: 504. */
	c2 = accept_client();
	u = next_up_fd;
	say(c2, req1);
	connected(u, 0);
	/* An idle keep-alive connection: closed after --idle-timeout. */
	c3 = accept_client();
	tick(1001);
	assert_non_null(strstr(took(c1), "408"));
	assert_false(F(c2)->closed);
	assert_int_equal(F(c2)->out_len, 0);
	tick(2000);
	assert_non_null(strstr(took(c2), "504"));
	assert_true(F(u)->closed);
	assert_false(F(c3)->closed);
	tick(2000);
	assert_true(F(c3)->closed);
	assert_quiet();
}

static void test_every_attempt_fails(void **state)
{
	int c, u1 = UP_FD0;

	(void)state;
	/* Every attempt refused: PG_MAX_ATTEMPTS at most, then 502. */
	c = accept_client();
	say(c, req1);
	for (int i = 0; i < PG_MAX_ATTEMPTS && F(u1 + i)->connecting; i++)
		connected(u1 + i, -ECONNREFUSED);
	assert_non_null(strstr(took(c), "502"));
	assert_true(next_up_fd - u1 <= PG_MAX_ATTEMPTS);
	assert_quiet();
	/* No socket at all: also a 502, nothing held. */
	c = accept_client();
	socket_errno = EMFILE;
	say(c, req2);
	assert_non_null(strstr(took(c), "502"));
	socket_errno = 0;
	assert_quiet();
}

/* Idle keep-alive clients close in the order they went idle; a request
 * moves a client to the back; draining closes the idle ones at once. */
static void test_idle_order_and_drain(void **state)
{
	int a, b, c, d, u;

	(void)state;
	a = accept_client();
	tick(1000);
	b = accept_client();
	tick(1000);
	c = accept_client();
	tick(500);
	say(a, req1);
	u = next_up_fd - 1;
	connected(u, 0);
	say(u, resp_ok); /* a is idle again from now (T+2500) */
	tick(3400);       /* T+5900 */
	assert_false(F(a)->closed || F(b)->closed || F(c)->closed);
	tick(100); /* T+6000: b's idle timeout */
	assert_true(F(b)->closed);
	assert_false(F(a)->closed || F(c)->closed);
	tick(1000); /* T+7000: c's */
	assert_true(F(c)->closed);
	assert_false(F(a)->closed);
	/* Draining: the idle ones go at once, a request in progress finishes. */
	d = accept_client();
	say(d, req2);
	__atomic_store_n(&gw.draining, 1, __ATOMIC_RELAXED);
	tick(1);
	assert_true(F(a)->closed);
	assert_false(F(d)->closed);
	assert_non_null(strstr(took(u), "world")); /* on the pooled connection */
	say(u, resp_two);
	assert_non_null(strstr(took(d), "Connection: close"));
	assert_quiet();
}

/* Sends the kernel takes only part of: every byte still goes, once, in order. */
static void test_short_sends(void **state)
{
	char both[256];
	int c = accept_client(), u = UP_FD0;
	const char *out;

	(void)state;
	send_chunk = 3;
	snprintf(both, sizeof(both), "%s%s", req1, req2);
	say(c, both);
	connected(u, 0);
	out = took(u);
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
	/* An error answer (head and body, one send) in pieces too. */
	say(c, "BAD\r\n\r\n");
	out = took(c);
	assert_non_null(strstr(out, "HTTP/1.1 400 "));
	assert_non_null(strstr(out, "\"code\":400}}\n"));
	assert_true(F(c)->shut);
	assert_quiet();
}

static void test_enum_names(void **state)
{
	(void)state;
	assert_string_equal(pg_client_state_str(PG_C_DISCARD), "discard");
	assert_string_equal(pg_up_state_str(PG_U_IDLE), "idle");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_exchange_and_pool, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pipelining_in_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retry_before_first_byte, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retry_on_stale_pooled_connection, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_retry_after_first_byte, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backend_death_mid_chunked_body, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_client_abort_in_every_state, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_early_answer_discard_keeps_client, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_linger_after_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeouts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_every_attempt_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_short_sends, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_order_and_drain, setup, teardown),
	    cmocka_unit_test(test_enum_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
