/* SPDX-License-Identifier: MIT */
/*
 * Admission and shutdown: the gateway-wide limits on what is taken in
 * (--max-in-flight, --max-connections) and the drain at exit
 * (--shutdown-timeout).
 *
 * Overload. With --max-in-flight N (0: off), at most N requests are being
 * served at once across all workers: a worker calls pg_admit() when a
 * request is about to be dispatched (head parsed, before the first attempt)
 * and answers PG_OVERLOAD_REPLY if it returns false; an admitted request
 * calls pg_admit_release() exactly once when it ends (response delivered,
 * client gone, or answered with an error), however many attempts it made.
 * The count is one gateway-wide atomic (gw->admitted, its own cache line),
 * cheaper than summing the backends' in-flight counts per request; it is
 * not touched at all when the cap is off. --max-connections N bounds each
 * worker's open client connections: pg_conn_over_cap() at accept time.
 *
 * Shutdown. SIGTERM/SIGINT: main sets gw->draining; each worker then stops
 * accepting (closes its listener) and closes idle keep-alive clients after
 * their current response, while in-flight requests finish. pg_drain() waits
 * until no request is in flight or the deadline passes; then gw->stop ends
 * every thread.
 */
#ifndef PG_LIFECYCLE_H
#define PG_LIFECYCLE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include "gateway.h"

/* The answer to a request refused by --max-in-flight (the connection is
 * closed after it, as for the gateway's other error answers). */
#define PG_OVERLOAD_BODY                                                                           \
	"{\"error\":{\"message\":\"gateway overloaded: too many requests in flight, retry "        \
	"later\",\"type\":\"prefixgate_overloaded\",\"code\":503}}\n"
#define PG_OVERLOAD_REPLY                                                                          \
	"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"                   \
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 127\r\n\r\n" PG_OVERLOAD_BODY
/* The answer to a connection beyond --max-connections (sent, then closed). */
#define PG_CONN_CAP_BODY                                                                           \
	"{\"error\":{\"message\":\"gateway overloaded: too many connections, retry "               \
	"later\",\"type\":\"prefixgate_overloaded\",\"code\":503}}\n"
#define PG_CONN_CAP_REPLY                                                                          \
	"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"                   \
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: 120\r\n\r\n" PG_CONN_CAP_BODY

/* Take a gateway-wide in-flight slot: true (go ahead; release it later), or
 * false when --max-in-flight is reached (answer PG_OVERLOAD_REPLY; nothing
 * to release). Always true, and nothing counted, with the cap off. */
bool pg_admit(struct pg_gateway *gw);
/* Give back a slot pg_admit() granted (no-op with the cap off). */
void pg_admit_release(struct pg_gateway *gw);
/* Read-only: is the gateway at its --max-in-flight cap right now? */
bool pg_overloaded(const struct pg_gateway *gw);

/* Would one more client connection put a worker now holding nconns over
 * --max-connections? */
bool pg_conn_over_cap(const struct pg_gateway *gw, unsigned nconns);

/* Sum of the backends' in-flight counts (the shared maps). */
int64_t pg_inflight_total(const struct pg_gateway *gw);

/* Is the gateway draining (stop accepting, finish what is in flight)? */
static inline bool pg_draining(const struct pg_gateway *gw)
{
	return __atomic_load_n(&gw->draining, __ATOMIC_RELAXED) != 0;
}

/*
 * Shutdown, on the main thread, after the first SIGTERM/SIGINT: set
 * gw->draining, then wait (polling every 50 ms) until pg_inflight_total()
 * and the admitted count are 0, timeout_s seconds pass, or another signal of
 * sigs arrives (the caller blocked them). Logs what it waited for and how it
 * ended. Returns the requests still in flight when it stopped waiting
 * (0: drained).
 */
int64_t pg_drain(struct pg_gateway *gw, unsigned timeout_s, const sigset_t *sigs);

/* Stop every thread: set gw->stop, then make gw->stop_fd readable so the
 * threads that poll it wake now, not at their next turn. */
void pg_gateway_stop(struct pg_gateway *gw);

#endif /* PG_LIFECYCLE_H */
