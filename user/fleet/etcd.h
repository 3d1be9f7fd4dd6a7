/* SPDX-License-Identifier: MIT */
/*
 * etcd as the source of membership and routing config (--etcd-endpoints;
 * doc/fleets.md "Running a fleet" has the key layout).
 *
 * An etcd thread reads every key under the prefix at one revision, then
 * watches from revision + 1. Each batch of watch events read together
 * makes one new view, handed to the control thread (eventfd), which
 * applies it with the member functions of members/members.h: so a burst of
 * changes costs one ring rebuild. A watch that breaks (etcd restarted, a
 * failed liveness check) resumes from the view's revision + 1; one
 * cancelled for compaction, or a revision that goes back (etcd restored),
 * drops the view and everything is read again at one revision. Until a
 * read succeeds, the last view applied stays in force (never an empty or
 * partial one).
 *
 * etcd is checked every PG_ETCD_CHECK_MS with a linearizable range bounded
 * by --etcd-timeout: a member that lost quorum keeps a watch open and
 * silent, so silence alone says nothing. While checks fail the gateway is
 * stale: it routes on the last view, /health and /metrics say so.
 *
 * --etcd-state-file keeps the last view (written by rename), so a gateway
 * started while etcd is down routes on it. The gateway's own record,
 * P/gateways/<id>, is bound to a lease of PG_ETCD_GATEWAY_TTL_S and holds
 * the revision it applied and the digest of its ring.
 */
#ifndef PG_CONTROL_ETCD_H
#define PG_CONTROL_ETCD_H

#include <stdbool.h>
#include "gateway.h"
#include "lib/buf.h"

#define PG_ETCD_CHECK_MS      1000 /* liveness check period */
#define PG_ETCD_RETRY_MS      1000 /* after a failed read, the next attempt */
#define PG_ETCD_GATEWAY_TTL_S 5    /* lease of P/gateways/<id> */

/* Whether --etcd-endpoints is on (after pg_etcd_init). */
bool pg_etcd_enabled(void);

/* From pg_control_init, before any worker starts: set up the clients, read
 * etcd once (bounded by --etcd-timeout per endpoint; if that fails, the
 * state file) and apply it. etcd being down is not an error; a bad flag or
 * state file is (-1, err set). */
int pg_etcd_init(struct pg_gateway *gw, char *err, size_t errlen);

/* Start / stop the etcd thread (stop revokes the gateway's lease). */
int pg_etcd_start(struct pg_gateway *gw, char *err, size_t errlen);
void pg_etcd_stop(void);

/* Control thread: the eventfd that says a new view waits, and applying
 * it (members, routing config). -1 when off. */
int pg_etcd_event_fd(void);
void pg_etcd_apply(struct pg_gateway *gw);
/* etcd's quotas (P/config/quota, P/tenants/NAME) laid over the
 * configuration's (state/quotas.h): at each apply, and once at start-up
 * when the quotas' state is made, after the first view was applied.
 * Control thread. */
void pg_etcd_quotas(struct pg_gateway *gw);

/* /health's "etcd" member (",\"etcd\":{...}"), and the prefixgate_etcd_*
 * metric families; nothing when off. */
void pg_etcd_health_json(struct pg_buf *o);
void pg_etcd_metrics(const struct pg_gateway *gw, struct pg_buf *o);

/* POST /backends (add, into pool: NULL for the default one) and DELETE
 * /backends/ADDR with etcd the source: the change is written to etcd (it
 * arrives back through the watch) and the answer is 202; 503 if etcd does
 * not answer. Returns the HTTP status, its JSON body in body (emptied
 * first). Control thread only: the call blocks it for at most
 * --etcd-timeout per endpoint. */
int pg_etcd_admin_backend(struct pg_gateway *gw, const char *addr, const char *pool, bool add,
                          struct pg_buf *body);

#endif /* PG_CONTROL_ETCD_H */
