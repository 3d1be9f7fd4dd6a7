/* SPDX-License-Identifier: MIT */
/*
 * cache_aware decisions on their way to the other gateways of a fleet: each
 * worker appends what it recorded in the block index (route.c) to its own
 * buffer, and the fleet thread (fleet/fleet.h) takes the buffers, a batch
 * per interval, and publishes them. (A second queue carries the first
 * tokens the workers learned speeds from, router/load.h: two words each.) A worker never waits: it
 * takes its buffer's lock with trylock only, and when that fails (the fleet thread is swapping the
 * buffer at that instant) or the buffer is full, the decision is dropped and counted
 * (prefixgate_fleet_cache_dropped_total). The fleet thread swaps a full buffer for an empty one
 * under the lock (a pointer swap) and reads it after unlocking.
 */
#ifndef PG_FLEETQ_H
#define PG_FLEETQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of decisions one worker holds between two batches: 16 decisions of
 * the longest chain (PG_CA_MAX_BLOCKS hashes), hundreds of short ones. */
#define PG_FLEETQ_BYTES (64 * 1024)

struct pg_fleetq;

/* For nworkers workers; NULL if out of memory. */
struct pg_fleetq *pg_fleetq_create(unsigned nworkers);
void pg_fleetq_free(struct pg_fleetq *q);

/* Worker w: chain[0..n) was sent to backend id (its slot epoch epoch);
 * request: the first of a request's records (it counts one request more
 * on the receivers' index clock, pg_ca_tick). */
void pg_fleetq_push(struct pg_fleetq *q, unsigned w, uint16_t id, uint32_t epoch,
                    const uint64_t *chain, uint32_t n, bool request);

/* Fleet thread: call fn for each decision worker w queued since the last
 * take, oldest first. */
typedef void (*pg_fleetq_fn)(uint16_t id, uint32_t epoch, const uint64_t *chain, uint16_t n,
                             bool request, void *arg);
void pg_fleetq_take(struct pg_fleetq *q, unsigned w, pg_fleetq_fn fn, void *arg);

/* Decisions dropped so far (lock busy, buffer full). */
uint64_t pg_fleetq_dropped(const struct pg_fleetq *q);

#endif /* PG_FLEETQ_H */
