// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "balancer.h"
#include "health.h"
#include "log.h"

struct probe {
	int fd;           /* -1: idle */
	uint32_t epoch;
	bool sent;
	uint64_t deadline_ms;
	size_t len;
	char buf[256];    /* the status line is all we need */
};

static struct {
	pthread_t thread;
	bool running;
	struct pg_health_state st[PG_MAX_BACKENDS];
	struct probe pr[PG_MAX_BACKENDS];
} hc;

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

static void finish(struct pg_gateway *gw, unsigned id, bool ok, const char *why)
{
	const struct pg_health_cfg *cfg = &gw->cfg->health;
	struct pg_backend *b = &gw->maps.backends[id];
	struct probe *p = &hc.pr[id];
	char name[32];
	int change;

	close(p->fd);
	p->fd = -1;
	if (p->epoch != __atomic_load_n(&b->epoch, __ATOMIC_RELAXED))
		return; /* the slot changed hands meanwhile */
	change = pg_health_result(&hc.st[id], ok, cfg->rise, cfg->fall);
	if (change < 0) {
		__atomic_fetch_or(&b->flags, PG_BACKEND_UNHEALTHY, __ATOMIC_RELEASE);
		pg_warn("backend %s unhealthy after %u failed checks of %s: %s",
			pg_backend_name(b, name, sizeof(name)), cfg->fall, cfg->path, why);
	} else if (change > 0) {
		__atomic_fetch_and(&b->flags, (uint16_t)~PG_BACKEND_UNHEALTHY, __ATOMIC_RELEASE);
		pg_info("backend %s healthy again after %u passed checks",
			pg_backend_name(b, name, sizeof(name)), cfg->rise);
	}
}

static void start(struct pg_gateway *gw, unsigned id, uint64_t now)
{
	const struct pg_backend *b = &gw->maps.backends[id];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct probe *p = &hc.pr[id];
	uint32_t epoch = __atomic_load_n(&b->epoch, __ATOMIC_RELAXED);

	if (hc.st[id].epoch != epoch) /* a new member in this slot */
		hc.st[id] = (struct pg_health_state){.epoch = epoch};
	p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd == -1)
		return;
	p->epoch = epoch;
	p->sent = false;
	p->len = 0;
	p->deadline_ms = now + gw->cfg->health.timeout_ms;
	sa.sin_addr.s_addr = b->ipv4;
	sa.sin_port = htons(b->port);
	if (connect(p->fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 && errno != EINPROGRESS)
		finish(gw, id, false, strerror(errno));
}

static void step(struct pg_gateway *gw, unsigned id, short revents)
{
	const struct pg_backend *b = &gw->maps.backends[id];
	struct probe *p = &hc.pr[id];
	char req[512], name[32];
	int err = 0, n;
	socklen_t el = sizeof(err);
	ssize_t r;

	if (!p->sent) {
		getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			finish(gw, id, false, strerror(err));
			return;
		}
		n = snprintf(req, sizeof(req),
			     "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: prefixgate-health\r\n"
			     "Connection: close\r\n\r\n",
			     gw->cfg->health.path, pg_backend_name(b, name, sizeof(name)));
		if (send(p->fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
			finish(gw, id, false, "send failed");
			return;
		}
		p->sent = true;
		return;
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	r = recv(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len, 0);
	if (r <= 0) {
		finish(gw, id, false, r == 0 ? "closed before a status line" : strerror(errno));
		return;
	}
	p->len += (size_t)r;
	p->buf[p->len] = '\0';
	if (strchr(p->buf, '\n') || p->len == sizeof(p->buf) - 1) {
		int status = 0;

		if (sscanf(p->buf, "HTTP/1.%*d %d", &status) != 1)
			finish(gw, id, false, "not an HTTP response");
		else if (status < 200 || status > 299)
			finish(gw, id, false, status >= 500 ? "status 5xx" : "status not 2xx");
		else
			finish(gw, id, true, "");
	}
}

static void *health_main(void *arg)
{
	struct pg_gateway *gw = arg;
	const struct pg_health_cfg *cfg = &gw->cfg->health;
	struct pollfd pfd[PG_MAX_BACKENDS];
	unsigned ids[PG_MAX_BACKENDS];
	uint64_t next_round = pg_now_ms();

	while (!__atomic_load_n(&gw->stop, __ATOMIC_RELAXED)) {
		uint64_t now = pg_now_ms(), wake = next_round;
		unsigned n = 0;

		if (now >= next_round) {
			for (unsigned id = 1; id < PG_MAX_BACKENDS; id++)
				if (hc.pr[id].fd == -1 &&
				    (__atomic_load_n(&gw->maps.backends[id].flags, __ATOMIC_RELAXED) &
				     PG_BACKEND_ACTIVE))
					start(gw, id, now);
			next_round = now + cfg->interval_ms;
			wake = next_round;
		}
		for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
			struct probe *p = &hc.pr[id];

			if (p->fd == -1)
				continue;
			if (now >= p->deadline_ms) {
				finish(gw, id, false, "timed out");
				continue;
			}
			if (p->deadline_ms < wake)
				wake = p->deadline_ms;
			ids[n] = id;
			pfd[n++] = (struct pollfd){.fd = p->fd, .events = p->sent ? POLLIN : POLLOUT};
		}
		/* Wake at least every 100 ms to notice gw->stop. */
		if (wake > now + 100)
			wake = now + 100;
		if (poll(pfd, n, (int)(wake > now ? wake - now : 0)) > 0)
			for (unsigned i = 0; i < n; i++)
				if (pfd[i].revents && hc.pr[ids[i]].fd != -1)
					step(gw, ids[i], pfd[i].revents);
	}
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++)
		if (hc.pr[id].fd != -1) {
			close(hc.pr[id].fd);
			hc.pr[id].fd = -1;
		}
	return NULL;
}

int pg_health_start(struct pg_gateway *gw, char *err, size_t errlen)
{
	int rc;

	for (unsigned id = 0; id < PG_MAX_BACKENDS; id++)
		hc.pr[id].fd = -1;
	if (!gw->cfg->health.path)
		return 0;
	rc = pthread_create(&hc.thread, NULL, health_main, gw);
	if (rc) {
		snprintf(err, errlen, "starting the health-check thread: %s", strerror(rc));
		return -1;
	}
	hc.running = true;
	pg_info("health checks: GET %s every %u ms, timeout %u ms, %u to fail, %u to recover",
		gw->cfg->health.path, gw->cfg->health.interval_ms, gw->cfg->health.timeout_ms,
		gw->cfg->health.fall, gw->cfg->health.rise);
	return 0;
}

void pg_health_stop(struct pg_gateway *gw)
{
	(void)gw;
	if (hc.running)
		pthread_join(hc.thread, NULL);
	hc.running = false;
}
