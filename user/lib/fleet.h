/* SPDX-License-Identifier: MIT */
/*
 * A fleet of gateways sharing load, pure: the peers' in-flight vectors with
 * expiry, their sum per local backend, and which load mode applies. No I/O,
 * no allocation, no clock (the caller passes now_ms); user/fleet/fleet.h
 * does the NATS side and writes the results into the backend table.
 *
 * Backends cross gateways by address; on arrival each address is mapped to
 * this gateway's slot (pg_fleet_addrmap) and the slot's epoch is kept with
 * the count, so a count for a slot that got another member since is
 * ignored rather than charged to the newcomer.
 */
#ifndef PG_FLEET_H
#define PG_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/fleet_msg.h"
#include "prefixgate.h"

/* Peers remembered at once; more are ignored (and counted) until one
 * expires. */
#define PG_FLEET_MAX_PEERS 64
/* A peer silent for this many of its own publish intervals is dropped. */
#define PG_FLEET_PEER_TTL_INTERVALS 3
/* ... but never sooner than this (a very short interval on a busy host). */
#define PG_FLEET_PEER_TTL_MIN_MS 300

/* Address -> local slot, rebuilt from the backend table by its caller. */
struct pg_fleet_addr {
	char addr[PG_FLEET_ADDR_MAX + 1];
	uint16_t id;
	uint32_t epoch;
};
struct pg_fleet_addrmap {
	size_t n;
	struct pg_fleet_addr e[PG_MAX_BACKENDS]; /* sorted by addr after _seal */
};

void pg_fleet_addrmap_reset(struct pg_fleet_addrmap *m);
/* false if the map is full or addr too long. */
bool pg_fleet_addrmap_add(struct pg_fleet_addrmap *m, const char *addr, uint16_t id,
                          uint32_t epoch);
void pg_fleet_addrmap_seal(struct pg_fleet_addrmap *m);
/* The slot of addr, or NULL: not a member here. */
const struct pg_fleet_addr *pg_fleet_addrmap_find(const struct pg_fleet_addrmap *m,
                                                  const char *addr);

struct pg_fleet_peer {
	char id[PG_FLEET_ID_MAX + 1]; /* "" : free entry */
	uint64_t boot, seq;
	uint64_t last_ms;     /* receiver's clock at the last accepted vector */
	uint32_t interval_ms; /* the peer's publish interval */
	struct pg_fleet_load load[PG_MAX_BACKENDS]; /* by local slot id */
	uint32_t epoch[PG_MAX_BACKENDS];
};

struct pg_fleet_peers {
	struct pg_fleet_peer p[PG_FLEET_MAX_PEERS];
	unsigned n; /* live entries */
};

void pg_fleet_peers_init(struct pg_fleet_peers *t);

/* What pg_fleet_peers_update did with a vector. */
enum pg_fleet_update {
	PG_FLEET_APPLIED = 0, /* from a known peer */
	PG_FLEET_NEW_PEER,    /* the first from this peer (or its restart) */
	PG_FLEET_STALE,       /* seq not newer than the last from this boot: ignored */
	PG_FLEET_FULL,        /* PG_FLEET_MAX_PEERS others live: ignored */
};

/*
 * A peer's LOAD vector (its header, and its entries already mapped to local
 * slots: id[i], epoch[i], load[i] for i < n; id 0 entries are skipped).
 * Replaces everything the peer said before. A different boot is a restart:
 * accepted whatever its seq.
 */
enum pg_fleet_update pg_fleet_peers_update(struct pg_fleet_peers *t, const struct pg_fleet_hdr *h,
                                           const uint16_t *id, const uint32_t *epoch,
                                           const struct pg_fleet_load *load, size_t n,
                                           uint64_t now_ms);

/* Drop peers silent past their TTL (above); returns how many, and the id
 * of the first one into dropped (may be NULL; PG_FLEET_ID_MAX + 1 bytes). */
unsigned pg_fleet_peers_expire(struct pg_fleet_peers *t, uint64_t now_ms, char *dropped);

/* Drop every peer (the connection to them is gone). */
void pg_fleet_peers_clear(struct pg_fleet_peers *t);

/* sum[id] = the live peers' load on slot id (in flight, prefill requests
 * and work), counting a peer's only if its epoch is cur_epoch[id];
 * npeers[id] = peers with a count for it (both PG_MAX_BACKENDS entries).
 * Negative counts (a peer's transient) count as 0; sums saturate. */
void pg_fleet_peers_sum(const struct pg_fleet_peers *t, const uint32_t *cur_epoch,
                        struct pg_fleet_load *sum, uint32_t *npeers);

/* ---- load modes ------------------------------------------------------------ */

enum pg_fleet_mode {
	PG_FLEET_LOCAL = 0,   /* a lone gateway: its own counts only */
	PG_FLEET_NATS = 1,    /* peers' published counts added */
	PG_FLEET_BACKEND = 2, /* the backends' reported running + waiting */
	PG_FLEET_SHARE = 3,   /* ConcurrencyThreshold / N for each of N gateways */
	PG_FLEET_MODES = 4,
};

const char *pg_fleet_mode_name(enum pg_fleet_mode m);

struct pg_fleet_inputs {
	bool nats_configured; /* --nats given */
	bool nats_connected;
	unsigned fleet_size;     /* --fleet-size; 0: not given */
	unsigned peers_seen;     /* peers live when NATS was last connected */
	bool backends_reporting; /* every usable member has fresh scraped load */
};

struct pg_fleet_decision {
	enum pg_fleet_mode mode;
	unsigned share; /* SHARE: the N dividing the threshold (>= 2); else 1 */
};

/*
 * No --nats and no --fleet-size: LOCAL. Connected to NATS: NATS. Otherwise
 * (NATS not configured, or lost): BACKEND when every usable member reports
 * its load, else SHARE with N = --fleet-size, or the peers last seen + 1;
 * N <= 1 is LOCAL (nothing to divide).
 */
struct pg_fleet_decision pg_fleet_decide(const struct pg_fleet_inputs *in);

/* ConcurrencyThreshold per gateway under SHARE: t / share, at least 1. */
uint32_t pg_fleet_threshold(uint32_t t, unsigned share);

/* BACKEND: what others have in flight to a backend that reports reported
 * (running + waiting) while we have local in flight: reported - local, at
 * least 0. */
int32_t pg_fleet_backend_peers(uint32_t reported, int32_t local);

#endif /* PG_FLEET_H */
