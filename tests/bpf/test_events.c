// SPDX-License-Identifier: MIT
/*
 * BPF tests of the skb path's event rings (bpf/splice.bpf.c emit(), read
 * through user/datapath/splice.h): each pairing's events reach the ring named
 * at pairing and no other, FALLBACK wakes a poller at once, DONE does not,
 * a full ring counts what it could not take. Loopback sockets inside this
 * process; needs root and bpffs (mounted here if missing). Prints TAP; exit 0
 * if nothing failed.
 *
 * The two wake-up checks are timed: a thread blocked in poll() on a ring
 * either returns when woken or at its own timeout. Every wait has a deadline.
 */
#include <pthread.h>
#include <stdlib.h>
#include <netinet/tcp.h>
#include "sockpair.h"

#define WAIT_MS 5000
#define ENDS    (PG_SPLICE_F_FALLBACK | PG_SPLICE_F_DONE | PG_SPLICE_F_BROKEN)

static char pin[128];

struct seen {
	int n;
	struct pg_splice_event last;
};

static void on_ev(void *ctx, const struct pg_splice_event *ev)
{
	struct seen *s = ctx;

	s->n++;
	s->last = *ev;
}

static int drain(struct pg_splice *sp, unsigned int ring, struct seen *s, __u64 *lost)
{
	memset(s, 0, sizeof(*s));
	return pg_splice_events_drain(sp, ring, on_ev, s, lost);
}

/* A thread blocked in poll(POLLIN) on fd for up to ms: when did it return? */
struct waiter {
	pthread_t t;
	int fd, ms, revents, ready;
	__u64 took_ms;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;
	struct pollfd p = {.fd = w->fd, .events = POLLIN};
	__u64 t0 = now_ms();

	__atomic_store_n(&w->ready, 1, __ATOMIC_RELEASE);
	if (poll(&p, 1, w->ms) == 1)
		w->revents = p.revents;
	w->took_ms = now_ms() - t0;
	return NULL;
}

/* Start w and give it 100 ms to block in poll() before the caller acts. */
static int wait_start(struct waiter *w, int fd, int ms)
{
	*w = (struct waiter){.fd = fd, .ms = ms};
	if (pthread_create(&w->t, NULL, wait_main, w))
		return -1;
	while (!__atomic_load_n(&w->ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(100 * 1000);
	return 0;
}

/* Write from srv until the backend is held back (the client reads nothing). */
static int stall(struct conn *c, int ms)
{
	static unsigned char buf[16 * KiB];
	__u64 end = now_ms() + (__u64)ms, quiet = now_ms();

	while (now_ms() < end) {
		if (send(c->srv, buf, sizeof(buf), MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
			quiet = now_ms();
		else if (now_ms() - quiet > 300)
			return 0;
		else
			usleep(2000);
	}
	return -1;
}

/* Send n bytes from srv and wait until the client has read them. */
static int one_response(struct conn *c, const char *bytes, size_t n)
{
	char buf[64];
	size_t got = 0;
	ssize_t r;

	if (send(c->srv, bytes, n, MSG_NOSIGNAL) != (ssize_t)n)
		return -1;
	while (got < n) {
		if (!wait_readable(c->cli, WAIT_MS))
			return -1;
		r = recv(c->cli, buf, sizeof(buf), MSG_DONTWAIT);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return got == n ? 0 : -1;
}

static void t_config(void)
{
	const char *name = "events: ring count and size checked at open";
	struct pg_splice_config cfg = {.event_rings = PG_SPLICE_MAX_RINGS + 1};
	struct pg_splice *sp = NULL;
	char err[256];
	int ok = 0, rc;

	if (skip_all)
		return report(name, 0, skip_all);
	rc = pg_splice_open(&sp, pin, PG_SPLICE_SKB, &cfg, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "event rings"), "%d rings: %d %s", cfg.event_rings, rc,
	      err);
	cfg = (struct pg_splice_config){.event_ring_bytes = 5000};
	rc = pg_splice_open(&sp, pin, PG_SPLICE_SKB, &cfg, err, sizeof(err));
	CHECK(rc == -EINVAL && strstr(err, "event rings"), "5000 bytes: %d %s", rc, err);
	cfg = (struct pg_splice_config){.event_rings = 3};
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, &cfg, err, sizeof(err)) == 0, "%s", err);
	CHECK(pg_splice_events_ring_fd(sp, 2) >= 0 && pg_splice_events_ring_fd(sp, 3) == -EINVAL,
	      "ring fds");
	CHECK(pg_splice_events_drain(sp, 3, on_ev, NULL, NULL) == -EINVAL, "drain ring 3");
	ok = 1;
out:
	pg_splice_close(sp);
	report(name, ok, NULL);
}

static void t_fallback(void)
{
	const char *name = "events: FALLBACK on the pairing's own ring, its poller woken at once";
	struct pg_splice_config cfg = {.event_rings = 2};
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct pg_splice_peer pr;
	struct waiter w = {.t = 0};
	struct seen s;
	__u64 key = 0, ck, lost = 1;
	char err[256];
	int ok = 0, waiting = 0, fd1;

	if (skip_all)
		return report(name, 0, skip_all);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, &cfg, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 64 * KiB) == 0 && conn_backend(&c) == 0, "sockets");
	CHECK(pg_splice_pair_ring(sp, c.bfd, c.cfd, 256 * KiB, NULL, 2, NULL) == -EINVAL,
	      "ring 2 of 2 accepted");
	CHECK(pg_splice_pair_ring(sp, c.bfd, c.cfd, 256 * KiB, NULL, 1, &key) == 0, "pair");
	CHECK(pg_splice_cookie(c.bfd, &ck) == 0 && key == ck, "key %llx, cookie %llx",
	      (unsigned long long)key, (unsigned long long)ck);
	fd1 = pg_splice_events_ring_fd(sp, 1);
	CHECK(wait_start(&w, fd1, 10000) == 0, "waiter");
	waiting = 1;
	/* The client stalls: the budget is reached, the pairing falls back. */
	CHECK(stall(&c, 10000) == 0, "backend never held back");
	pthread_join(w.t, NULL);
	waiting = 0;
	printf("# ring 1 poller returned after %llu ms (revents %x)\n",
	       (unsigned long long)w.took_ms, w.revents);
	CHECK(w.revents & POLLIN, "ring 1 not readable");
	CHECK(w.took_ms < 5000, "poller not woken by the fall-back");
	CHECK(pg_splice_peer_get(sp, c.bfd, &pr) == 0 && pr.flags & PG_SPLICE_F_FALLBACK, "peer");
	CHECK(drain(sp, 0, &s, &lost) == 0 && s.n == 0 && lost == 0, "ring 0 got %d", s.n);
	CHECK(drain(sp, 1, &s, &lost) == 1 && s.n == 1 && lost == 0, "ring 1: %d events, lost %llu",
	      s.n, (unsigned long long)lost);
	CHECK(s.last.key == key && (s.last.flags & ENDS) == PG_SPLICE_F_FALLBACK &&
	          s.last.reason == PG_SPLICE_WHY_BUDGET,
	      "event key %llx flags %u reason %u", (unsigned long long)s.last.key, s.last.flags,
	      s.last.reason);
	CHECK(pg_splice_cookie(c.cfd, &ck) == 0 && s.last.client_key == ck, "client key");
	CHECK(s.last.redirected == pr.redirected, "redirected %llu, peer %llu",
	      (unsigned long long)s.last.redirected, (unsigned long long)pr.redirected);
	/* Sticky: what follows is passed without another event. */
	CHECK(drain(sp, 1, &s, &lost) == 0 && lost == 0, "second drain: %d", s.n);
	ok = 1;
out:
	if (waiting)
		pthread_join(w.t, NULL);
	conn_close(&c);
	pg_splice_close(sp);
	report(name, ok, NULL);
}

static void t_done(void)
{
	const char *name = "events: DONE recorded without waking the poller";
	struct pg_frame five = {.kind = PG_FRAME_LENGTH, .remaining = 5};
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct waiter w = {.t = 0};
	struct pollfd p;
	struct seen s;
	__u64 key = 0, lost = 1;
	char err[256];
	int ok = 0, waiting = 0, one = 1;

	if (skip_all)
		return report(name, 0, skip_all);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, NULL, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 0) == 0 && conn_backend(&c) == 0, "sockets");
	CHECK(setsockopt(c.srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0, "nodelay");
	CHECK(pg_splice_pair_ring(sp, c.bfd, c.cfd, 0, &five, 0, &key) == 0, "pair");
	CHECK(wait_start(&w, pg_splice_events_fd(sp), 1000) == 0, "waiter");
	waiting = 1;
	CHECK(one_response(&c, "hello", 5) == 0, "response");
	pthread_join(w.t, NULL);
	waiting = 0;
	printf("# ring 0 poller returned after %llu ms\n", (unsigned long long)w.took_ms);
	CHECK(w.took_ms >= 900, "poller woken by DONE after %llu ms",
	      (unsigned long long)w.took_ms);
	p = (struct pollfd){.fd = pg_splice_events_fd(sp), .events = POLLIN};
	CHECK(poll(&p, 1, 0) == 1, "the record does not poll readable");
	CHECK(drain(sp, 0, &s, &lost) == 1 && lost == 0, "%d events, lost %llu", s.n,
	      (unsigned long long)lost);
	CHECK(s.last.key == key && (s.last.flags & ENDS) == PG_SPLICE_F_DONE &&
	          s.last.reason == PG_SPLICE_WHY_END && s.last.redirected == 5,
	      "event flags %u reason %u redirected %llu", s.last.flags, s.last.reason,
	      (unsigned long long)s.last.redirected);
	ok = 1;
out:
	if (waiting)
		pthread_join(w.t, NULL);
	conn_close(&c);
	pg_splice_close(sp);
	report(name, ok, NULL);
}

static void t_lost(void)
{
	const char *name = "events: a full ring counts the events it could not take";
	const int rounds = 150; /* a 4 KiB ring holds 102 records of 40 bytes */
	struct pg_splice_config cfg = {.event_ring_bytes = 4096};
	struct pg_frame one_byte = {.kind = PG_FRAME_LENGTH, .remaining = 1};
	struct conn c = {-1, -1, -1, -1};
	struct pg_splice *sp = NULL;
	struct seen s;
	__u64 lost = 0;
	char err[256];
	int ok = 0, n, i, nodelay = 1;

	if (skip_all)
		return report(name, 0, skip_all);
	CHECK(pg_splice_open(&sp, pin, PG_SPLICE_SKB, &cfg, err, sizeof(err)) == 0, "%s", err);
	CHECK(conn_client(&c, 0) == 0 && conn_backend(&c) == 0, "sockets");
	CHECK(setsockopt(c.srv, IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof(nodelay)) == 0,
	      "nodelay");
	/* One pairing per one-byte response on the same sockets: one DONE each. */
	for (i = 0; i < rounds; i++) {
		CHECK(pg_splice_pair(sp, c.bfd, c.cfd, 0, &one_byte) == 0, "pair %d", i);
		CHECK(one_response(&c, "x", 1) == 0, "response %d", i);
		CHECK(pg_splice_unpair(sp, c.bfd) == 0, "unpair %d", i);
	}
	n = drain(sp, 0, &s, &lost);
	printf("# %d responses: %d events read, %llu lost\n", rounds, n, (unsigned long long)lost);
	CHECK(n > 0 && n < rounds && n + (int)lost == rounds, "read %d lost %llu", n,
	      (unsigned long long)lost);
	CHECK(drain(sp, 0, &s, &lost) == 0 && lost == 0, "again: %d, lost %llu", s.n,
	      (unsigned long long)lost);
	ok = 1;
out:
	conn_close(&c);
	pg_splice_close(sp);
	report(name, ok, NULL);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	probe_env();
	snprintf(pin, sizeof(pin), "/sys/fs/bpf/pg-test-events-%d", (int)getpid());
	t_config();
	t_fallback();
	t_done();
	t_lost();
	rmdir(pin);
	printf("1..%d\n", n_test);
	printf("bpf: %d passed, %d failed, %d skipped\n", n_pass, n_fail, n_skip);
	return n_fail ? 1 : 0;
}
