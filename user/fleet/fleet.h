/* SPDX-License-Identifier: MIT */
/*
 * A fleet of gateways (--nats, --fleet-size): the fleet thread shares this
 * gateway's per-backend in-flight counts and cache_aware decisions with its
 * peers over NATS, applies theirs, and decides the load mode
 * (lib/fleet.h) when NATS is absent or lost.
 *
 * Subjects: prefixgate.CLUSTER.load carries each gateway's in-flight vector
 * (lib/fleet_msg.h), published every --fleet-interval and as soon as it
 * changes (at most every PG_FLEET_POLL_MS); prefixgate.CLUSTER.cache
 * carries batches of cache_aware decisions (state/fleetq.h), at most one
 * batch of PG_FLEET_CACHE_BATCH bytes every PG_FLEET_CACHE_GAP_MS; what does
 * not fit is dropped and counted. Core NATS, no persistence: a gateway that
 * (re)starts knows the others' load after one interval, and their cache
 * from the decisions made after it joined.
 *
 * Ownership: the fleet thread and the NATS subscription callbacks (libnats'
 * own threads) write a backend's peer_in_flight and peer_gateways, always
 * under the fleet's mutex; nothing else writes them. Received cache
 * decisions go into the block index with pg_ca_record, which every writer
 * uses without a lock (router/index.h). Nothing here ever takes a lock a
 * worker holds, and workers never wait on NATS (state/fleetq.h).
 */
#ifndef PG_FLEET_CONTROL_H
#define PG_FLEET_CONTROL_H

#include <stddef.h>
#include "gateway.h"
#include "lib/buf.h"
#include "lib/fleet.h"

/* The fleet thread's period: what it waits between two looks at the
 * in-flight counts. */
#define PG_FLEET_POLL_MS 2
/* Cache decisions: one batch at most this often, of at most this size. */
#define PG_FLEET_CACHE_GAP_MS 20
#define PG_FLEET_CACHE_BATCH  (64 * 1024)

/* Before the workers start: gw->fleetq when --nats is given. 0, or -1
 * with err set (out of memory). Nothing to do without --nats and
 * --fleet-size. */
int pg_fleet_init(struct pg_gateway *gw, char *err, size_t errlen);

/* After the admin listener is bound (the default --gateway-id names its
 * port): connect to NATS (in the background, retried forever: a gateway
 * starts without NATS) and start the fleet thread. 0, or -1 with err. */
int pg_fleet_start(struct pg_gateway *gw, char *err, size_t errlen);

/* Stop the thread, close NATS, free everything (also after a failed init
 * or start). */
void pg_fleet_stop(struct pg_gateway *gw);

/* The load mode in use and the live peers ("local", 0 without a fleet). */
enum pg_fleet_mode pg_fleet_mode(const struct pg_gateway *gw, unsigned *peers);

/* GET /fleet: {"gateway_id","load_mode","share","nats_connected",
 * "peers":[{"id","age_ms","seq"}]} (a lone gateway: load_mode "local", no
 * peers). */
void pg_fleet_json(const struct pg_gateway *gw, struct pg_buf *o);

/* prefixgate_fleet_* families and prefixgate_backend_peer_in_flight. */
void pg_fleet_metrics_render(const struct pg_gateway *gw, struct pg_buf *o);

#endif /* PG_FLEET_CONTROL_H */
