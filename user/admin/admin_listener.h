/* SPDX-License-Identifier: MIT */
/*
 * The admin listener and its connections (admin_listener.c, where the
 * policy is stated), on the control thread: it polls their sockets with
 * its own (control/control.c) and hands them here. Requests are answered
 * by admin.h. Control thread only (or before it starts).
 */
#ifndef PG_ADMIN_LISTENER_H
#define PG_ADMIN_LISTENER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include "gateway.h"

/* Admin connections: closed if the whole exchange, from accept to the
 * client's EOF after the reply, takes longer than PG_ADMIN_TIMEOUT_MS; ... */
#define PG_ADMIN_TIMEOUT_MS 10000
/* ... closed if the request head is not complete this long after accept ... */
#define PG_ADMIN_HEADER_TIMEOUT_MS 2500
/* ... and if the client has not closed this long after the whole reply was
 * sent (our side shut). */
#define PG_ADMIN_LINGER_MS 1000
/* Admin connections served at once; with all taken, a new one replaces the
 * oldest idle one (no complete request yet, or lingering after its reply). */
#define PG_ADMIN_MAX_CONNS 64
/* Sockets pg_admin_pollfds fills at most: the listener and each connection. */
#define PG_ADMIN_POLL_FDS (1 + PG_ADMIN_MAX_CONNS)

/* Listen on addr (--admin); *bound gets the address bound (its port when
 * addr's is 0). 0, or -1 with err set (e.g. "--admin 127.0.0.1:9090:
 * bind: Address already in use"). */
int pg_admin_listen(const union pg_sockaddr *addr, union pg_sockaddr *bound, char *err,
                    size_t errlen);

/* Fill pfd[0..max) with the listener (always first) and the open
 * connections, each polled for what it waits for; returns how many. */
int pg_admin_pollfds(struct pollfd *pfd, int max);

/* After poll: serve the connections of pfd[0..n) (as pg_admin_pollfds
 * filled them) that are ready, then accept what the listener's backlog
 * holds (at most PG_ADMIN_MAX_CONNS per call), evicting the oldest idle
 * connection or answering 503 when no slot is free. */
void pg_admin_process(struct pg_gateway *gw, const struct pollfd *pfd, int n);

/* Once per control tick: close the connections past their timeouts, and
 * log evictions and refusals (at most one line per 10 s). */
void pg_admin_timeouts(uint64_t now);

/* Close the listener and every connection. */
void pg_admin_close(void);

#endif /* PG_ADMIN_LISTENER_H */
