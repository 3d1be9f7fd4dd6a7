/* SPDX-License-Identifier: MIT */
/*
 * DNS lookups of the backends given by name (members_internal.h's names):
 * c-ares, non-blocking, on the control thread, which polls the resolver's
 * sockets with its own (control/control.c).
 */
#ifndef PG_RESOLVE_H
#define PG_RESOLVE_H

#include <poll.h>
#include "gateway.h"

/* Resolver sockets polled at once (c-ares' ARES_GETSOCK_MAXNUM). */
#define PG_RESOLVE_MAX_FDS 16
/* At start-up, the names' first answers are awaited this long at most. */
#define PG_RESOLVE_SETTLE_MS 3000

/*
 * The resolver:
 * pg_resolve_init: a channel using --resolver's servers (NULL: the
 * system's /etc/resolv.conf), names looked up in /etc/hosts first; 0 or -1
 * with err set. pg_resolve_due: start the queries that are due (each name
 * every --resolve-interval). pg_resolve_pollfds: fill pfd[0..max) with the
 * resolver's sockets, returns how many. pg_resolve_process: after poll,
 * handle those sockets and expired timeouts. pg_resolve_settle: at start-up
 * only, wait up to ms for the outstanding queries. pg_resolve_fini: cancel
 * everything (answers dropped), free the channel.
 */
int pg_resolve_init(const struct pg_config *cfg, char *err, size_t errlen);
void pg_resolve_due(struct pg_gateway *gw, uint64_t now_ms);
int pg_resolve_pollfds(struct pollfd *pfd, int max);
void pg_resolve_process(struct pg_gateway *gw, const struct pollfd *pfd, int n);
void pg_resolve_settle(struct pg_gateway *gw, unsigned ms);
void pg_resolve_fini(void);

#endif /* PG_RESOLVE_H */
