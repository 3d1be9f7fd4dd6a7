// SPDX-License-Identifier: MIT
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "sys/otel.h"
#include "config/config.h"
#include "lib/buf.h"
#include "lib/otlp.h"
#include "sys/log.h"

struct pg_otel {
	struct pg_gateway *gw;
	struct pg_trace_ring *rings; /* one per worker */
	unsigned nrings;
	uint64_t threshold;
	unsigned timeout_ms;
	struct pg_otlp_url url;
	struct pg_otlp_resource res;
	pthread_t thread;
	int stop;
	uint64_t exported, dropped, errors; /* the exporter's (rings count their own drops) */
	/* the exporter thread's alone */
	struct pg_buf body;
	struct pg_otlp_span spans[PG_TRACE_SPANS];
	struct pg_trace_text text;
	uint64_t logged_ms; /* an export error last logged (at most one every 10 s) */
};

struct pg_trace_ring *pg_otel_ring(struct pg_otel *o, unsigned worker)
{
	return o && worker < o->nrings ? &o->rings[worker] : NULL;
}

uint64_t pg_otel_threshold(const struct pg_otel *o)
{
	return o ? o->threshold : 0;
}

void pg_otel_counts(const struct pg_otel *o, struct pg_otel_counts *c)
{
	*c = (struct pg_otel_counts){0};
	if (!o)
		return;
	c->exported = __atomic_load_n(&o->exported, __ATOMIC_RELAXED);
	c->errors = __atomic_load_n(&o->errors, __ATOMIC_RELAXED);
	c->dropped = __atomic_load_n(&o->dropped, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < o->nrings; i++)
		c->dropped += __atomic_load_n(&o->rings[i].dropped, __ATOMIC_RELAXED);
}

static void backend_name(void *arg, uint16_t id, char *buf, size_t cap)
{
	const struct pg_otel *o = arg;

	buf[0] = '\0';
	if (id && id < PG_MAX_BACKENDS)
		pg_backend_name(&o->gw->maps.backends[id], buf, cap);
}

static uint64_t ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)(t.tv_sec - t0->tv_sec) * 1000 + (uint64_t)(t.tv_nsec / 1000000) -
	       (uint64_t)(t0->tv_nsec / 1000000);
}

/* Wait for fd to be ready for ev until the deadline: 0, or -1 (errno). */
static int wait_fd(int fd, short ev, const struct timespec *t0, unsigned timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	uint64_t spent = ms_since(t0);
	int rc;

	if (spent >= timeout_ms) {
		errno = ETIMEDOUT;
		return -1;
	}
	do
		rc = poll(&p, 1, (int)(timeout_ms - spent));
	while (rc == -1 && errno == EINTR);
	if (rc == 0)
		errno = ETIMEDOUT;
	return rc == 1 ? 0 : -1;
}

/* A connected socket to the collector, within the deadline, or -1. */
static int dial(const struct pg_otel *o, const struct timespec *t0)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai;
	int fd = -1, soerr = 0;
	socklen_t sl = sizeof(soerr);

	/* a name is looked up here, on the exporter's thread, each time */
	if (getaddrinfo(o->url.host, o->url.port, &hints, &ai)) {
		errno = EHOSTUNREACH;
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd != -1 && connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 &&
	    (errno != EINPROGRESS || wait_fd(fd, POLLOUT, t0, o->timeout_ms) ||
	     getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) || (errno = soerr))) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

/* POST body to the collector: true when it answered 2xx in time. */
static bool post(struct pg_otel *o, char *why, size_t whylen)
{
	struct timespec t0;
	char head[PG_OTLP_PATH_MAX + PG_OTLP_HOST_MAX + 160], ans[512];
	size_t hl, got = 0, off = 0;
	int fd;
	bool ok = false;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = dial(o, &t0);
	if (fd == -1) {
		snprintf(why, whylen, "connect: %s", strerror(errno));
		return false;
	}
	hl = (size_t)snprintf(head, sizeof(head),
	                      "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
	                      "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	                      o->url.path, o->url.hostport, o->body.len);
	while (off < hl + o->body.len) {
		const char *p = off < hl ? head + off : o->body.p + (off - hl);
		size_t n = off < hl ? hl - off : o->body.len - (off - hl);
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k > 0) {
			off += (size_t)k;
			continue;
		}
		if (k == -1 && errno == EAGAIN && !wait_fd(fd, POLLOUT, &t0, o->timeout_ms))
			continue;
		snprintf(why, whylen, "send: %s", strerror(errno));
		goto out;
	}
	/* the status line is all that is read of the answer */
	while (got < sizeof(ans) - 1 && !memchr(ans, '\n', got)) {
		ssize_t k = recv(fd, ans + got, sizeof(ans) - 1 - got, 0);

		if (k > 0) {
			got += (size_t)k;
			continue;
		}
		if (k == -1 && errno == EAGAIN && !wait_fd(fd, POLLIN, &t0, o->timeout_ms))
			continue;
		snprintf(why, whylen, "no answer: %s", k ? strerror(errno) : "connection closed");
		goto out;
	}
	ans[got] = '\0';
	ok = got > 12 && !strncmp(ans, "HTTP/1.", 7) && ans[9] == '2';
	if (!ok)
		snprintf(why, whylen, "answered \"%.*s\"", (int)strcspn(ans, "\r\n"), ans);
out:
	close(fd);
	return ok;
}

/* The realtime clock less the monotonic one, ns: a record's times (on the
 * monotonic clock) moved to Unix time. */
static uint64_t wall_offset(void)
{
	struct timespec r, m;

	clock_gettime(CLOCK_REALTIME, &r);
	clock_gettime(CLOCK_MONOTONIC, &m);
	return ((uint64_t)r.tv_sec - (uint64_t)m.tv_sec) * 1000000000ull + (uint64_t)r.tv_nsec -
	       (uint64_t)m.tv_nsec;
}

/* One batch from the rings, POSTed (or, when drop, dropped): 1 when it
 * was a full one and went through (more may be waiting), -1 when it
 * failed, 0 when the rings are now empty. */
static int export_batch(struct pg_otel *o, bool drop)
{
	const uint64_t off = wall_offset();
	unsigned recs = 0;
	uint64_t nspans = 0;
	char why[160];

	pg_buf_reset(&o->body);
	pg_otlp_open(&o->body, &o->res);
	for (unsigned i = 0; i < o->nrings && recs < PG_OTEL_BATCH; i++) {
		const struct pg_trace_rec *r;

		while (recs < PG_OTEL_BATCH && (r = pg_trace_ring_peek(&o->rings[i]))) {
			size_t n = pg_trace_spans(r, off, backend_name, o, &o->text, o->spans);

			for (size_t k = 0; k < n; k++)
				pg_otlp_add(&o->body, &o->spans[k], nspans + k == 0);
			pg_trace_ring_pop(&o->rings[i]); /* its text is in the body now */
			nspans += n;
			recs++;
		}
	}
	pg_otlp_close(&o->body);
	if (!recs)
		return 0;
	if (drop) {
		__atomic_fetch_add(&o->dropped, nspans, __ATOMIC_RELAXED);
		return 1;
	}
	if (!o->body.oom && post(o, why, sizeof(why))) {
		__atomic_fetch_add(&o->exported, nspans, __ATOMIC_RELAXED);
		return recs == PG_OTEL_BATCH;
	} else {
		uint64_t now = pg_now_ms();

		__atomic_fetch_add(&o->errors, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&o->dropped, nspans, __ATOMIC_RELAXED);
		if (!o->logged_ms || now - o->logged_ms >= 10000) {
			o->logged_ms = now;
			pg_warn("otlp: export to http://%s%s failed (%s); %llu spans dropped",
			        o->url.hostport, o->url.path, o->body.oom ? "out of memory" : why,
			        (unsigned long long)nspans);
		}
	}
	return -1;
}

static void *exporter_main(void *arg)
{
	const struct timespec tick = {.tv_nsec = PG_OTEL_TICK_MS * 1000000L};
	struct pg_otel *o = arg;

	while (!__atomic_load_n(&o->stop, __ATOMIC_RELAXED)) {
		nanosleep(&tick, NULL);
		/* full batches go at once; what is left waits for the next tick */
		while (export_batch(o, false) == 1 && !__atomic_load_n(&o->stop, __ATOMIC_RELAXED))
			;
	}
	/* stopping: what is left gets one try, not one timeout per batch */
	while (export_batch(o, false) == 1)
		;
	while (export_batch(o, true) == 1)
		;
	return NULL;
}

static void otel_free(struct pg_otel *o)
{
	pg_buf_free(&o->body);
	free(o->rings);
	free(o);
}

int pg_otel_start(struct pg_gateway *gw, char *err, size_t errlen)
{
	const struct pg_otlp_cfg *c = &gw->cfg->otlp;
	struct pg_otel *o;
	char e[256];
	int rc;

	gw->otel = NULL;
	if (!c->endpoint)
		return 0;
	o = calloc(1, sizeof(*o));
	if (!o || !(o->rings = aligned_alloc(64, sizeof(*o->rings) * (gw->nworkers + 1)))) {
		snprintf(err, errlen, "--otlp-endpoint: out of memory");
		free(o);
		return -1;
	}
	memset(o->rings, 0, sizeof(*o->rings) * gw->nworkers);
	o->gw = gw;
	o->nrings = gw->nworkers;
	o->threshold = c->threshold;
	o->timeout_ms = c->timeout_ms;
	o->res = (struct pg_otlp_resource){
	    .service = "prefixgate", .instance = gw->cfg->gateway_id, .version = PG_VERSION};
	if (pg_otlp_url_parse(c->endpoint, &o->url, e, sizeof(e))) {
		snprintf(err, errlen, "--otlp-endpoint %s", e);
		otel_free(o);
		return -1;
	}
	rc = pthread_create(&o->thread, NULL, exporter_main, o);
	if (rc) {
		snprintf(err, errlen, "--otlp-endpoint: starting the exporter thread: %s",
		         strerror(rc));
		otel_free(o);
		return -1;
	}
	gw->otel = o;
	pg_info("traces: OTLP/HTTP to http://%s%s, sampling %s (parent-based)", o->url.hostport,
	        o->url.path, c->sample);
	return 0;
}

void pg_otel_stop(struct pg_gateway *gw)
{
	struct pg_otel *o = gw->otel;

	if (!o)
		return;
	__atomic_store_n(&o->stop, 1, __ATOMIC_RELAXED);
	pthread_join(o->thread, NULL);
	otel_free(o);
	gw->otel = NULL;
}
