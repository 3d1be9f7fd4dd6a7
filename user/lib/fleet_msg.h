/* SPDX-License-Identifier: MIT */
/*
 * The messages gateways of one fleet exchange (user/fleet/fleet.h sends
 * them over NATS), pure: encode and decode, no I/O, no allocation.
 *
 * Binary, little-endian, every length bounded:
 *   header  "PG" | version u8 (1) | type u8 | id_len u8 | id bytes
 *           | boot u64 | seq u64 | wall_ms u64 | interval_ms u32 | count u16
 *   LOAD    count x { addr_len u8 | addr | in_flight s32 | prefill_reqs u32
 *                     | prefill_tokens u64 | head_age_us u32 | first_age_us u32 }
 *   CACHE   count x { addr_len u8 | addr | flags u8 | n u16 | n x chain hash u64 }
 *   FIT     count x { addr_len u8 | addr | whole u8 | tokens u32
 *                     | decoding u32 | y_us u32 }
 *   FLOW    count x { label_len u8 | label | key u64 | served u64 | queued u32 }
 *   QUOTA   count x { label_len u8 | label | key u64 | sec u64 | requests s32
 *                     | tokens s32 }
 * Backends are named by address ("host:port", as pg_backend_name spells it),
 * never by slot id: each gateway numbers its slots in its own order.
 * boot tells a restarted gateway (same id, seq from 1 again) from a replay;
 * wall_ms is the sender's clock, for logs only (expiry uses the receiver's).
 * Version 2 added the LOAD entries' prefill work (cache_aware's load
 * model, router/load.h); version 3 the ages of the sender's head and latest
 * first token on each backend (router/work.h pg_work_ages) and FIT, the first
 * tokens a gateway learned its backends' speeds from, so that every
 * gateway learns from all of the fleet's; version 4 the CACHE entries'
 * flags (PG_FLEET_CACHE_*); version 5 FLOW, flow control's tenants (lib/flow.h):
 * the work each was served since the last one, and its requests queued; version 6
 * QUOTA, quotas' counts (lib/quota.h): the requests a tenant was let through
 * and the tokens it was charged in one wall-clock second, since the last
 * message. Gateways of one fleet must
 * speak the same version (another's messages are counted as undecodable and ignored).
 */
#ifndef PG_FLEET_MSG_H
#define PG_FLEET_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "router/work.h"

#define PG_FLEET_MSG_VERSION 6
#define PG_FLEET_ID_MAX      64 /* gateway id, bytes */
#define PG_FLEET_ADDR_MAX    63 /* backend address, bytes */

enum pg_fleet_msg_type {
	PG_FLEET_MSG_LOAD = 1,  /* per-backend in-flight vector */
	PG_FLEET_MSG_CACHE = 2, /* cache_aware decisions: block chain -> backend */
	PG_FLEET_MSG_FIT = 3,   /* first tokens learned from: backend -> observation */
	PG_FLEET_MSG_FLOW = 4,  /* flow control: tenant -> work served, requests queued */
	PG_FLEET_MSG_QUOTA = 5, /* quotas: tenant, second -> requests let through, tokens */
	PG_FLEET_MSG_TYPES,
};

struct pg_fleet_hdr {
	uint8_t type; /* enum pg_fleet_msg_type */
	uint8_t id_len;
	char id[PG_FLEET_ID_MAX + 1]; /* NUL-terminated */
	uint64_t boot, seq, wall_ms;
	uint32_t interval_ms;
	uint16_t count; /* entries that follow */
};

/* An encoder over a caller's buffer. Once an entry does not fit, full is
 * set and that entry (and any later one) is left out; the message so far
 * stays valid. */
struct pg_fleet_enc {
	uint8_t *p;
	size_t cap, len;
	size_t count_off;
	uint16_t count;
	bool full;
};

/* Start a message with h's fields (h->count is ignored; entries count). 0,
 * or -1 if even the header does not fit or h->id is too long. */
int pg_fleet_enc_begin(struct pg_fleet_enc *e, void *buf, size_t cap, const struct pg_fleet_hdr *h);
/* One backend's load as a gateway has it: in flight, and of those the
 * requests before their first token with their prefill work. */
struct pg_fleet_load {
	int32_t in_flight;
	uint32_t prefill_reqs;
	uint64_t prefill_tokens;
};

/* The ages a LOAD entry carries besides (pg_work_ages). */
struct pg_fleet_ages {
	uint32_t head_us, first_us; /* PG_WORK_AGE_NONE: none */
};

/* Append one entry; false (and full set) if it does not fit. */
bool pg_fleet_enc_load(struct pg_fleet_enc *e, const char *addr, const struct pg_fleet_load *l,
                       const struct pg_fleet_ages *ages);
/* A CACHE entry's flags: the first of a request's entries (the receiver
 * counts the request on its index clock, pg_ca_tick, as the sender did:
 * the shares that make a prefix shared are the fleet's). */
#define PG_FLEET_CACHE_REQUEST 1
bool pg_fleet_enc_cache(struct pg_fleet_enc *e, const char *addr, uint8_t flags,
                        const uint64_t *chain, uint16_t n);
bool pg_fleet_enc_fit(struct pg_fleet_enc *e, const char *addr, const struct pg_fit_obs *o);
/* A FLOW entry: a tenant's label (in the address's place), key, the work
 * units served since the last message, its requests queued now. */
struct pg_fleet_flow {
	uint64_t key, served;
	uint32_t queued;
};
bool pg_fleet_enc_flow(struct pg_fleet_enc *e, const char *label, const struct pg_fleet_flow *t);
/* A QUOTA entry: a tenant's label (in the address's place), key, a
 * wall-clock second and what was counted in it since the last message
 * (negative: a count taken back, lib/quota.h pg_quota_take). */
struct pg_fleet_quota {
	uint64_t key, sec;
	int32_t requests, tokens;
};
bool pg_fleet_enc_quota(struct pg_fleet_enc *e, const char *label, const struct pg_fleet_quota *q);
/* Bytes of one CACHE entry, to size a batch. */
size_t pg_fleet_cache_entry_size(size_t addr_len, uint16_t n);

/* A decoder: pg_fleet_dec_begin checks the header, then each next call
 * yields one entry of the header's type. Entries are checked as they are
 * read: a malformed message yields the entries before the fault, then
 * false with bad set. */
struct pg_fleet_dec {
	const uint8_t *p;
	size_t len, off;
	uint16_t left;
	bool bad;
};

/* 0, or -1: not a message of this version (too short, bad magic, unknown
 * type, id too long). */
int pg_fleet_dec_begin(struct pg_fleet_dec *d, const void *buf, size_t len, struct pg_fleet_hdr *h);

struct pg_fleet_entry {
	char addr[PG_FLEET_ADDR_MAX + 1]; /* NUL-terminated */
	struct pg_fleet_load load;        /* LOAD */
	struct pg_fleet_ages ages;        /* LOAD */
	struct pg_fit_obs obs;            /* FIT */
	struct pg_fleet_flow flow;        /* FLOW (addr: the tenant's label) */
	struct pg_fleet_quota quota;      /* QUOTA (addr: the tenant's label) */
	uint8_t flags;                    /* CACHE: PG_FLEET_CACHE_* */
	uint16_t n;                       /* CACHE: hashes in chain */
	const uint8_t *chain;             /* CACHE: n x u64 LE, unaligned: pg_fleet_hash() */
};

bool pg_fleet_dec_next(struct pg_fleet_dec *d, uint8_t type, struct pg_fleet_entry *out);

/* Hash i of a decoded CACHE entry. */
uint64_t pg_fleet_hash(const struct pg_fleet_entry *e, uint16_t i);

#endif /* PG_FLEET_MSG_H */
