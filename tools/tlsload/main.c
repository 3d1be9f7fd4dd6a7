// SPDX-License-Identifier: MIT
/*
 * tlsload: new TLS connections as fast as a server takes them, for make
 * bench's tls part (tools/bench/tls.py). --conns slots each open a TCP
 * connection, make a TLS handshake (with --resume, resuming the session
 * the slot's previous connection got: a ticket), send one request
 * ("GET PATH HTTP/1.1", Connection: close), read the answer to its end
 * and start again; for --seconds. The client checks no certificate (its
 * own cost stays the handshake's least), but TLS 1.3 still has it check
 * the server's signature.
 *
 * Prints one JSON line: connections completed, how many resumed, errors,
 * per second, latency of a whole connection (p50, p99, ms) and the CPU
 * seconds this process used (to tell whether the client was the limit).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include "lib/addr.h"

#define MAX_CONNS   1024
#define MAX_SAMPLES (1 << 20)

enum state { S_CONNECT, S_HANDSHAKE, S_WRITE, S_READ };

struct slot {
	int fd;
	SSL *ssl;
	SSL_SESSION *sess; /* the last connection's, for --resume */
	enum state st;
	size_t sent, got;
	double t0;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct {
	union pg_sockaddr sa;
	SSL_CTX *ctx;
	int ep;
	bool resume;
	char req[512];
	size_t req_len;
	long done, resumed, errors;
	double *lat;
	size_t nlat;
} g;

static void watch(struct slot *s, uint32_t ev, int op)
{
	struct epoll_event e = {.events = ev, .data.ptr = s};

	epoll_ctl(g.ep, op, s->fd, &e);
}

static void start(struct slot *s)
{
	int one = 1;

	s->fd = socket(g.sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->t0 = now_s();
	s->sent = s->got = 0;
	s->st = S_CONNECT;
	if (connect(s->fd, &g.sa.sa, pg_sockaddr_len(&g.sa)) == -1 && errno != EINPROGRESS) {
		g.errors++;
		close(s->fd);
		s->fd = -1;
		return;
	}
	watch(s, EPOLLOUT, EPOLL_CTL_ADD);
}

/* The connection ended (ok: its answer came whole): its session kept, a
 * new one started. */
static void finish(struct slot *s, bool ok)
{
	if (ok) {
		g.done++;
		g.resumed += SSL_session_reused(s->ssl);
		if (g.nlat < MAX_SAMPLES)
			g.lat[g.nlat++] = (now_s() - s->t0) * 1e3;
		if (g.resume) {
			SSL_SESSION *n = SSL_get1_session(s->ssl);

			if (n && SSL_SESSION_is_resumable(n)) {
				SSL_SESSION_free(s->sess);
				s->sess = n;
			} else {
				SSL_SESSION_free(n);
			}
		}
		/* a clean end: freeing it must not drop its session from being
		 * resumed (OpenSSL does for a connection not shut down) */
		SSL_set_shutdown(s->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
	} else {
		g.errors++;
	}
	ERR_clear_error();
	SSL_free(s->ssl);
	s->ssl = NULL;
	close(s->fd); /* also leaves the epoll set */
	start(s);
}

/* One step of slot s's state machine on an event. */
static void step(struct slot *s)
{
	char buf[16384];
	int r = 0, e;

	for (;;) {
		switch (s->st) {
		case S_CONNECT: {
			int err = 0;
			socklen_t l = sizeof(err);

			getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &l);
			if (err) {
				finish(s, false);
				return;
			}
			s->ssl = SSL_new(g.ctx);
			SSL_set_fd(s->ssl, s->fd);
			SSL_set_connect_state(s->ssl);
			if (g.resume && s->sess)
				SSL_set_session(s->ssl, s->sess);
			s->st = S_HANDSHAKE;
			continue;
		}
		case S_HANDSHAKE:
			r = SSL_do_handshake(s->ssl);
			if (r == 1) {
				s->st = S_WRITE;
				continue;
			}
			break;
		case S_WRITE: {
			size_t n = 0;

			r = SSL_write_ex(s->ssl, g.req + s->sent, g.req_len - s->sent, &n);
			if (r) {
				s->sent += n;
				if (s->sent == g.req_len)
					s->st = S_READ;
				continue;
			}
			break;
		}
		case S_READ: {
			size_t n = 0;

			r = SSL_read_ex(s->ssl, buf, sizeof(buf), &n);
			if (r) {
				if (!s->got && (n < 12 || memcmp(buf + 9, "200", 3))) {
					finish(s, false);
					return;
				}
				s->got += n;
				continue;
			}
			e = SSL_get_error(s->ssl, 0);
			if (e == SSL_ERROR_ZERO_RETURN ||
			    (e == SSL_ERROR_SYSCALL &&
			     s->got)) { /* the answer ended with the connection */
				finish(s, s->got > 0);
				return;
			}
			break;
		}
		}
		e = SSL_get_error(s->ssl, r);
		if (e == SSL_ERROR_WANT_READ) {
			watch(s, EPOLLIN, EPOLL_CTL_MOD);
			return;
		}
		if (e == SSL_ERROR_WANT_WRITE) {
			watch(s, EPOLLOUT, EPOLL_CTL_MOD);
			return;
		}
		finish(s, false);
		return;
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: tlsload --connect ADDR:PORT [--conns N] [--seconds S] [--resume] "
	                "[--path /P] [--tls12]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *addr = NULL, *path = "/health";
	int conns = 16;
	double secs = 5, t_end, t0;
	bool tls12 = false;
	static struct slot slots[MAX_CONNS];
	struct epoll_event ev[256];
	struct rusage ru;
	char err[200];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--connect") && i + 1 < argc)
			addr = argv[++i];
		else if (!strcmp(argv[i], "--conns") && i + 1 < argc)
			conns = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			secs = atof(argv[++i]);
		else if (!strcmp(argv[i], "--path") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--resume"))
			g.resume = true;
		else if (!strcmp(argv[i], "--tls12"))
			tls12 = true;
		else
			usage();
	}
	if (!addr || conns < 1 || conns > MAX_CONNS || secs <= 0)
		usage();
	if (pg_addr_parse(addr, &g.sa, err, sizeof(err))) {
		fprintf(stderr, "tlsload: --connect %s\n", err);
		return 2;
	}
	g.ctx = SSL_CTX_new(TLS_client_method());
	g.lat = malloc(MAX_SAMPLES * sizeof(*g.lat));
	if (!g.ctx || !g.lat)
		return 1;
	SSL_CTX_set_verify(g.ctx, SSL_VERIFY_NONE, NULL);
	SSL_CTX_set_min_proto_version(g.ctx, TLS1_2_VERSION);
	if (tls12)
		SSL_CTX_set_max_proto_version(g.ctx, TLS1_2_VERSION);
	SSL_CTX_set_alpn_protos(g.ctx, (const unsigned char *)"\x08http/1.1", 9);
	SSL_CTX_set_session_cache_mode(g.ctx,
	                               SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	g.req_len =
	    (size_t)snprintf(g.req, sizeof(g.req),
	                     "GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n", path);
	g.ep = epoll_create1(EPOLL_CLOEXEC);
	t0 = now_s();
	t_end = t0 + secs;
	for (int i = 0; i < conns; i++)
		start(&slots[i]);
	while (now_s() < t_end) {
		int n = epoll_wait(g.ep, ev, 256, 50);

		for (int i = 0; i < n; i++)
			step(ev[i].data.ptr);
	}
	t_end = now_s();
	qsort(g.lat, g.nlat, sizeof(*g.lat), cmp_double);
	getrusage(RUSAGE_SELF, &ru);
	printf("{\"conns\":%ld,\"resumed\":%ld,\"errors\":%ld,\"seconds\":%.3f,\"per_s\":%.1f,"
	       "\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"cpu_s\":%.3f}\n",
	       g.done, g.resumed, g.errors, t_end - t0, (double)g.done / (t_end - t0),
	       g.nlat ? g.lat[g.nlat / 2] : 0.0, g.nlat ? g.lat[g.nlat * 99 / 100] : 0.0,
	       (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	return 0;
}
