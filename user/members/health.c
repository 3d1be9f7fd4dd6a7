// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/err.h>
#include "router/view.h"
#include "members/health.h"
#include "router/index.h"
#include "sys/log.h"
#include "lib/scrape.h"
#include "tls/tls.h"

/* The settings a reload may change (control_reload.c), read as they are
 * now: each load atomic, the path's with acquire order (the string is
 * written before it is published). */
#define LOAD(p)  __atomic_load_n((p), __ATOMIC_RELAXED)
#define PATH(gw) __atomic_load_n(&(gw)->cfg->health.path, __ATOMIC_ACQUIRE)

/* The two kinds of probe, each on its own schedule. */
enum kind { K_HEALTH = 0, K_SCRAPE = 1, K_N = 2 };

struct probe {
	int fd; /* -1: idle */
	uint32_t epoch;
	bool sent;
	SSL *ssl;   /* an https:// backend's (over fd); NULL: plain */
	short want; /* TLS: what the handshake waits for (POLLIN, POLLOUT); 0: done */
	uint64_t deadline_ms;
	size_t len;
	char buf[256]; /* health: the status line is all we need */
};

/* The checker thread's state (gw->health), its own alone once started. */
struct pg_health {
	struct pg_gateway *gw;
	pthread_t thread;
	struct pg_health_state st[PG_MAX_BACKENDS];
	struct probe pr[K_N][PG_MAX_BACKENDS];
	struct pg_scrape sc[PG_MAX_BACKENDS];
	uint32_t no_series_epoch[PG_MAX_BACKENDS]; /* member told to have no vllm:* series */
	uint32_t takes[PG_MAX_BACKENDS];           /* pg_backend.takes when its scrape began */
	uint64_t scrape_ms[PG_MAX_BACKENDS];       /* when its last scrape began */
};

int pg_health_result(struct pg_health_state *st, bool ok, unsigned rise, unsigned fall)
{
	if (ok) {
		st->fail_run = 0;
		if (st->ok_run < UINT16_MAX)
			st->ok_run++;
		if (st->unhealthy && st->ok_run >= rise) {
			st->unhealthy = false;
			return 1;
		}
	} else {
		st->ok_run = 0;
		if (st->fail_run < UINT16_MAX)
			st->fail_run++;
		if (!st->unhealthy && st->fail_run >= fall) {
			st->unhealthy = true;
			return -1;
		}
	}
	return 0;
}

void pg_health_store_scrape(struct pg_backend *b, const struct pg_scrape *s, uint32_t takes,
                            uint64_t now_ms, uint64_t valid_until_ms)
{
	const uint64_t hits = (uint64_t)s->value[PG_SCRAPE_HITS];
	const uint64_t queries = (uint64_t)s->value[PG_SCRAPE_QUERIES];
	const double w = s->value[PG_SCRAPE_WAITING], r = s->value[PG_SCRAPE_RUNNING];

	__atomic_store_n(&b->waiting, w > UINT32_MAX ? UINT32_MAX : (uint32_t)w, __ATOMIC_RELAXED);
	__atomic_store_n(&b->running, r > UINT32_MAX ? UINT32_MAX : (uint32_t)r, __ATOMIC_RELAXED);
	__atomic_store_n(&b->kv_hit_tokens, hits, __ATOMIC_RELAXED);
	__atomic_store_n(&b->kv_query_tokens, queries, __ATOMIC_RELAXED);
	/* its real KV capacity sizes what the index believes it holds */
	if (s->seen & 1u << PG_SCRAPE_KV_TOKENS)
		__atomic_store_n(&b->ca_capacity_blocks,
		                 pg_ca_capacity_blocks((uint64_t)s->value[PG_SCRAPE_KV_TOKENS]),
		                 __ATOMIC_RELAXED);
	__atomic_store_n(&b->firsts_at_scrape, __atomic_load_n(&b->firsts, __ATOMIC_RELAXED),
	                 __ATOMIC_RELAXED);
	__atomic_store_n(&b->takes_at_scrape, takes, __ATOMIC_RELAXED);
	__atomic_store_n(&b->scraped_ms, now_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&b->metrics_until_ms, valid_until_ms, __ATOMIC_RELEASE);
}

/* A health check ended: feed the rise/fall state, flag the member. */
static void health_done(struct pg_gateway *gw, unsigned id, bool ok, const char *why)
{
	struct pg_health *hc = gw->health;
	const struct pg_health_cfg *cfg = &gw->cfg->health;
	const unsigned rise = LOAD(&cfg->rise), fall = LOAD(&cfg->fall);
	const char *path = PATH(gw);
	struct pg_backend *b = &gw->maps.backends[id];
	char name[PG_ADDR_STRLEN];
	int change;

	change = pg_health_result(&hc->st[id], ok, rise, fall);
	if (change < 0) {
		__atomic_fetch_or(&b->flags, PG_BACKEND_UNHEALTHY, __ATOMIC_RELEASE);
		pg_warn("backend %s unhealthy after %u failed checks of %s: %s",
		        pg_backend_name(b, name, sizeof(name)), fall, path ? path : "-", why);
	} else if (change > 0) {
		__atomic_fetch_and(&b->flags, (uint16_t)~PG_BACKEND_UNHEALTHY, __ATOMIC_RELEASE);
		pg_info("backend %s healthy again after %u passed checks",
		        pg_backend_name(b, name, sizeof(name)), rise);
	}
}

/* A metrics scrape ended: store what it found. A failed one stores
 * nothing: the previous values expire at metrics_until_ms. */
static void scrape_done(struct pg_gateway *gw, unsigned id, bool ok)
{
	struct pg_health *hc = gw->health;
	struct pg_backend *b = &gw->maps.backends[id];
	const struct pg_scrape *s = &hc->sc[id];
	char name[PG_ADDR_STRLEN];

	if (!ok)
		return;
	if (!s->seen) {
		if (hc->no_series_epoch[id] != b->epoch)
			pg_warn("backend %s: GET /metrics has no vllm:* series: no delivered hit "
			        "rate or backend load for it",
			        pg_backend_name(b, name, sizeof(name)));
		hc->no_series_epoch[id] = b->epoch;
		return;
	}
	/* Valid for three intervals: one missed scrape does not drop them. */
	pg_health_store_scrape(b, s, hc->takes[id], pg_now_ms(),
	                       pg_now_ms() + 3ull * LOAD(&gw->cfg->metrics_scrape_ms));
	if (pg_work_blind(b))
		__atomic_fetch_add(&gw->reports, 1, __ATOMIC_RELAXED);
}

static void finish(struct pg_gateway *gw, enum kind k, unsigned id, bool ok, const char *why)
{
	struct pg_health *hc = gw->health;
	struct probe *p = &hc->pr[k][id];

	SSL_free(p->ssl);
	p->ssl = NULL;
	close(p->fd);
	p->fd = -1;
	if (p->epoch != __atomic_load_n(&gw->maps.backends[id].epoch, __ATOMIC_RELAXED))
		return; /* the slot changed hands meanwhile */
	if (k == K_HEALTH)
		health_done(gw, id, ok, why);
	else
		scrape_done(gw, id, ok);
}

static void start(struct pg_gateway *gw, enum kind k, unsigned id, uint64_t now)
{
	struct pg_health *hc = gw->health;
	const struct pg_backend *b = &gw->maps.backends[id];
	union pg_sockaddr sa;
	struct probe *p = &hc->pr[k][id];
	uint32_t epoch = __atomic_load_n(&b->epoch, __ATOMIC_RELAXED);
	uint64_t timeout = LOAD(&gw->cfg->health.timeout_ms);
	const unsigned scrape_ms = LOAD(&gw->cfg->metrics_scrape_ms);

	if (k == K_HEALTH && hc->st[id].epoch != epoch) /* a new member in this slot */
		hc->st[id] = (struct pg_health_state){.epoch = epoch};
	if (k == K_SCRAPE) {
		pg_scrape_init(&hc->sc[id]);
		hc->takes[id] = __atomic_load_n(&b->takes, __ATOMIC_RELAXED);
		hc->scrape_ms[id] = now;
		/* A scrape may take up to its interval (at most 10 s). */
		timeout = scrape_ms < 10000 ? scrape_ms : 10000;
	}
	pg_backend_addr_get(b, &sa);
	p->fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd == -1)
		return;
	p->epoch = epoch;
	p->sent = false;
	p->len = 0;
	p->deadline_ms = now + timeout;
	p->want = 0;
	/* an https:// backend: checked over TLS, as requests reach it */
	if ((__atomic_load_n(&b->flags, __ATOMIC_RELAXED) & PG_BACKEND_TLS) && gw->tls) {
		struct pg_tls_set *set = pg_tls_set_get(gw->tls);

		p->ssl = set ? pg_tls_backend_ssl(gw->tls, set, id) : NULL;
		pg_tls_set_put(set); /* the SSL holds its context */
		if (!p->ssl || !SSL_set_fd(p->ssl, p->fd)) {
			finish(gw, k, id, false, "TLS: out of memory");
			return;
		}
		p->want = POLLOUT; /* connected first */
	}
	if (connect(p->fd, &sa.sa, pg_sockaddr_len(&sa)) == -1 && errno != EINPROGRESS)
		finish(gw, k, id, false, strerror(errno));
}

/* recv() or, over TLS, SSL_read(): bytes, 0 at the end, -1 with errno
 * (EAGAIN: nothing yet). */
static ssize_t probe_recv(struct probe *p, char *buf, size_t len)
{
	size_t got = 0;

	if (!p->ssl)
		return recv(p->fd, buf, len, 0);
	if (SSL_read_ex(p->ssl, buf, len, &got))
		return (ssize_t)got;
	switch (SSL_get_error(p->ssl, 0)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	default:
		ERR_clear_error();
		errno = EPROTO;
		return -1;
	}
}

/* The TLS handshake of probe p, one step: 1 done, 0 waiting (p->want
 * says for what), -1 failed (why set). */
static int probe_handshake(struct probe *p, const char **why)
{
	int r = SSL_do_handshake(p->ssl), e;

	if (r == 1) {
		p->want = 0;
		return 1;
	}
	e = SSL_get_error(p->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		p->want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return 0;
	}
	*why = SSL_get_verify_result(p->ssl) != X509_V_OK
	           ? X509_verify_cert_error_string(SSL_get_verify_result(p->ssl))
	           : "TLS handshake failed";
	ERR_clear_error();
	return -1;
}

/* Read what a scrape's socket holds into the parser. */
static void scrape_read(struct pg_gateway *gw, unsigned id)
{
	struct pg_health *hc = gw->health;
	struct probe *p = &hc->pr[K_SCRAPE][id];
	char buf[16384];
	ssize_t r;

	for (;;) {
		r = probe_recv(p, buf, sizeof(buf));
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r <= 0) {
			finish(gw, K_SCRAPE, id, r == 0 && !pg_scrape_finish(&hc->sc[id]), "");
			return;
		}
		if (pg_scrape_feed(&hc->sc[id], buf, (size_t)r)) {
			finish(gw, K_SCRAPE, id, false, "");
			return;
		}
	}
}

static void step(struct pg_gateway *gw, enum kind k, unsigned id, short revents)
{
	struct pg_health *hc = gw->health;
	const struct pg_backend *b = &gw->maps.backends[id];
	struct probe *p = &hc->pr[k][id];
	char req[512], name[PG_ADDR_STRLEN];
	int err = 0, n;
	socklen_t el = sizeof(err);
	ssize_t r;

	if (!p->sent) {
		const char *why = NULL;

		getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			finish(gw, k, id, false, strerror(err));
			return;
		}
		if (p->ssl && p->want && (n = probe_handshake(p, &why)) <= 0) {
			if (n < 0)
				finish(gw, k, id, false, why);
			return;
		}
		/* The scrape is HTTP/1.0 so the body comes unchunked, ending at EOF. */
		if (k == K_HEALTH)
			n = snprintf(
			    req, sizeof(req),
			    "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: prefixgate-health\r\n"
			    "Connection: close\r\n\r\n",
			    PATH(gw) ? PATH(gw) : "/", pg_backend_name(b, name, sizeof(name)));
		else
			n = snprintf(req, sizeof(req),
			             "GET /metrics HTTP/1.0\r\nHost: %s\r\n"
			             "User-Agent: prefixgate-metrics\r\nAccept: text/plain\r\n\r\n",
			             pg_backend_name(b, name, sizeof(name)));
		if (p->ssl ? SSL_write(p->ssl, req, n) != n
		           : send(p->fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
			ERR_clear_error();
			finish(gw, k, id, false, "send failed");
			return;
		}
		p->sent = true;
		return;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	if (k == K_SCRAPE) {
		scrape_read(gw, id);
		return;
	}
	r = probe_recv(p, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
	if (r == -1 && errno == EAGAIN)
		return; /* a TLS record not yet whole */
	if (r <= 0) {
		finish(gw, k, id, false, r == 0 ? "closed before a status line" : strerror(errno));
		return;
	}
	p->len += (size_t)r;
	p->buf[p->len] = '\0';
	if (strchr(p->buf, '\n') || p->len == sizeof(p->buf) - 1) {
		int status = 0;

		if (sscanf(p->buf, "HTTP/1.%*d %d", &status) != 1)
			finish(gw, k, id, false, "not an HTTP response");
		else if (status < 200 || status > 299)
			finish(gw, k, id, false, status >= 500 ? "status 5xx" : "status not 2xx");
		else
			finish(gw, k, id, true, "");
	}
}

/* Between rounds: backend id's next scrape comes sooner while its queue
 * is blind (health.h PG_SCRAPE_BLIND_DIV); wake: the loop's next wake-up,
 * brought forward to it. */
static void scrape_blind(struct pg_gateway *gw, unsigned id, unsigned interval, uint64_t now,
                         uint64_t *wake)
{
	const struct pg_backend *b = &gw->maps.backends[id];
	uint64_t next;

	if (!(__atomic_load_n(&b->flags, __ATOMIC_RELAXED) & PG_BACKEND_ACTIVE) ||
	    !pg_work_blind(b))
		return;
	next = gw->health->scrape_ms[id] + pg_scrape_blind_ms(interval);
	if (now >= next)
		start(gw, K_SCRAPE, id, now);
	else if (next < *wake)
		*wake = next;
}

static void *health_main(void *arg)
{
	struct pg_health *hc = arg;
	struct pg_gateway *gw = hc->gw;
	struct pollfd pfd[K_N * PG_MAX_BACKENDS + 1]; /* and gw->stop_fd, last */
	unsigned ids[K_N * PG_MAX_BACKENDS];
	enum kind kinds[K_N * PG_MAX_BACKENDS];
	uint64_t next_round[K_N] = {pg_now_ms(), pg_now_ms()};

	while (!__atomic_load_n(&gw->stop, __ATOMIC_RELAXED)) {
		uint64_t now = pg_now_ms(), wake = now + 100;     /* gw->stop, without stop_fd */
		unsigned n = 0, hwm = pg_router_hwm(&gw->router); /* no probe above it */
		/* as they are now: a reload may change them */
		const unsigned interval[K_N] = {PATH(gw) ? LOAD(&gw->cfg->health.interval_ms) : 0,
		                                LOAD(&gw->cfg->metrics_scrape_ms)};

		for (int k = 0; k < K_N; k++) {
			if (!interval[k])
				continue;
			if (next_round[k] > now + interval[k]) /* shortened by a reload */
				next_round[k] = now + interval[k];
			if (now >= next_round[k]) {
				for (unsigned id = 1; id <= hwm; id++)
					if (hc->pr[k][id].fd == -1 &&
					    (__atomic_load_n(&gw->maps.backends[id].flags,
					                     __ATOMIC_RELAXED) &
					     PG_BACKEND_ACTIVE))
						start(gw, (enum kind)k, id, now);
				next_round[k] = now + interval[k];
			}
			if (next_round[k] < wake)
				wake = next_round[k];
			for (unsigned id = 1; id <= hwm; id++) {
				struct probe *p = &hc->pr[k][id];

				if (p->fd == -1 && k == K_SCRAPE)
					scrape_blind(gw, id, interval[k], now, &wake);
				if (p->fd == -1)
					continue;
				if (now >= p->deadline_ms) {
					finish(gw, (enum kind)k, id, false, "timed out");
					continue;
				}
				if (p->deadline_ms < wake)
					wake = p->deadline_ms;
				ids[n] = id;
				kinds[n] = (enum kind)k;
				pfd[n++] = (struct pollfd){.fd = p->fd,
				                           .events = p->want   ? p->want
				                                     : p->sent ? POLLIN
				                                               : POLLOUT};
			}
		}
		/* the stop eventfd wakes the poll at once (lifecycle.h) */
		pfd[n] = (struct pollfd){.fd = gw->stop_fd, .events = POLLIN}; /* -1: ignored */
		if (poll(pfd, n + 1, (int)(wake > now ? wake - now : 0)) > 0)
			for (unsigned i = 0; i < n; i++)
				if (pfd[i].revents && hc->pr[kinds[i]][ids[i]].fd != -1)
					step(gw, kinds[i], ids[i], pfd[i].revents);
	}
	for (int k = 0; k < K_N; k++)
		for (unsigned id = 1; id < PG_MAX_BACKENDS; id++)
			if (hc->pr[k][id].fd != -1) {
				SSL_free(hc->pr[k][id].ssl);
				close(hc->pr[k][id].fd);
				hc->pr[k][id].fd = -1;
			}
	return NULL;
}

int pg_health_start(struct pg_gateway *gw, char *err, size_t errlen)
{
	struct pg_health *hc;
	int rc;

	gw->health = NULL;
	if (!gw->cfg->health.path && !gw->cfg->metrics_scrape_ms)
		return 0;
	hc = calloc(1, sizeof(*hc));
	if (!hc) {
		snprintf(err, errlen, "starting the health-check thread: out of memory");
		return -1;
	}
	hc->gw = gw;
	for (int k = 0; k < K_N; k++)
		for (unsigned id = 0; id < PG_MAX_BACKENDS; id++)
			hc->pr[k][id].fd = -1;
	gw->health = hc;
	rc = pthread_create(&hc->thread, NULL, health_main, hc);
	if (rc) {
		snprintf(err, errlen, "starting the health-check thread: %s", strerror(rc));
		gw->health = NULL;
		free(hc);
		return -1;
	}
	if (gw->cfg->health.path)
		pg_info("health checks: GET %s every %u ms, timeout %u ms, %u to fail, %u to "
		        "recover",
		        gw->cfg->health.path, gw->cfg->health.interval_ms,
		        gw->cfg->health.timeout_ms, gw->cfg->health.fall, gw->cfg->health.rise);
	if (gw->cfg->metrics_scrape_ms)
		pg_info("backend metrics: GET /metrics every %u ms (vLLM prefix-cache hits, "
		        "queue)",
		        gw->cfg->metrics_scrape_ms);
	return 0;
}

void pg_health_stop(struct pg_gateway *gw)
{
	if (!gw->health)
		return;
	pthread_join(gw->health->thread, NULL);
	free(gw->health);
	gw->health = NULL;
}
