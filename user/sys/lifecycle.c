// SPDX-License-Identifier: MIT
/* Admission limits and the drain at shutdown (lifecycle.h). */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "sys/lifecycle.h"
#include "sys/log.h"

bool pg_admit(struct pg_gateway *gw)
{
	uint32_t cap = gw->cfg->max_in_flight;

	if (!cap)
		return true;
	/* Add first, then look: two workers racing for the last slot cannot
	 * both get it, and the cap is never exceeded even briefly. */
	if (__atomic_add_fetch(&gw->admitted, 1, __ATOMIC_RELAXED) <= (int64_t)cap)
		return true;
	__atomic_sub_fetch(&gw->admitted, 1, __ATOMIC_RELAXED);
	return false;
}

void pg_admit_release(struct pg_gateway *gw)
{
	if (gw->cfg->max_in_flight)
		__atomic_sub_fetch(&gw->admitted, 1, __ATOMIC_RELAXED);
}

bool pg_overloaded(const struct pg_gateway *gw)
{
	uint32_t cap = gw->cfg->max_in_flight;

	return cap && __atomic_load_n(&gw->admitted, __ATOMIC_RELAXED) >= (int64_t)cap;
}

bool pg_conn_over_cap(const struct pg_gateway *gw, unsigned nconns)
{
	return gw->cfg->max_connections && nconns >= gw->cfg->max_connections;
}

int64_t pg_inflight_total(const struct pg_gateway *gw)
{
	int64_t n = 0;

	/* Every slot that ever held a member, not only members: a request still
	 * held by a member that was removed meanwhile is in flight too. */
	for (unsigned id = 1, hwm = pg_router_hwm(&gw->router); id <= hwm; id++)
		n += __atomic_load_n(&gw->maps.backends[id].in_flight, __ATOMIC_RELAXED);
	return n;
}

static int64_t busy(const struct pg_gateway *gw)
{
	int64_t a = __atomic_load_n(&gw->admitted, __ATOMIC_RELAXED), f = pg_inflight_total(gw);

	return a > f ? a : f;
}

int64_t pg_drain(struct pg_gateway *gw, unsigned timeout_s, const sigset_t *sigs)
{
	const struct timespec tick = {0, 50 * 1000000};
	uint64_t deadline = pg_now_ms() + (uint64_t)timeout_s * 1000;
	int64_t left = busy(gw);
	int sig;

	__atomic_store_n(&gw->draining, 1, __ATOMIC_RELEASE);
	pg_info("draining: %lld request(s) in flight, waiting up to %u s for them "
	        "(another SIGTERM/SIGINT stops at once)",
	        (long long)left, timeout_s);
	while (left > 0) {
		if (pg_now_ms() >= deadline) {
			pg_warn(
			    "drain deadline (--shutdown-timeout %u) passed with %lld request(s) "
			    "in flight: closing them",
			    timeout_s, (long long)left);
			return left;
		}
		sig = sigtimedwait(sigs, NULL, &tick);
		if (sig == SIGTERM || sig == SIGINT) {
			pg_warn(
			    "signal %d during drain: stopping now with %lld request(s) in flight",
			    sig, (long long)left);
			return left;
		}
		left = busy(gw);
	}
	pg_info("drained: no request in flight");
	return 0;
}

void pg_gateway_stop(struct pg_gateway *gw)
{
	uint64_t one = 1;

	__atomic_store_n(&gw->stop, 1, __ATOMIC_RELAXED);
	if (gw->stop_fd != -1 && write(gw->stop_fd, &one, sizeof(one)) == -1)
		pg_warn("waking the threads to stop: %s", strerror(errno));
}
