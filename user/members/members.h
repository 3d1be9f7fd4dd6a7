/* SPDX-License-Identifier: MIT */
/*
 * Membership of the backend table: who the members are, from which source
 * (--backend, the admin API, --backends-file, the configuration file, DNS
 * names, etcd), ring rebuilds, drain and DOWN expiry (pg_control_tick),
 * and each pool's routing config. The control thread (control/control.h)
 * calls these; so do the sources that learn members (fleet/etcd.h,
 * resolve.c) and the admin API.
 *
 * Ownership of gw->maps.backends: the control thread alone writes a slot's
 * address, port, epoch and flags (flags with atomics, since workers may OR in
 * PG_BACKEND_DOWN and set down_until_ms for passive failure detection);
 * workers only add to in_flight, requests[], recent and failures. All functions
 * below run on the control thread, or before it starts (pg_control_init),
 * never concurrently with each other.
 *
 * Member origins: a member added by --backend or by the admin API stays
 * until DELETE /backends removes it; a member that came only from
 * --backends-file is drained when a re-read file no longer lists it. A
 * DELETEd member still listed in the file comes back on the next SIGHUP.
 *
 * One gateway per process: the membership state is process-wide.
 */
#ifndef PG_MEMBERS_H
#define PG_MEMBERS_H

#include <stddef.h>
#include <stdint.h>
#include "gateway.h"

/* A draining member's slot is cleared once its in_flight has been 0 and it
 * has been draining at least this long: a worker that chose it just before
 * it started draining has then long taken its in-flight slot. */
#define PG_DRAIN_GRACE_MS 200

/* pg_hostport_parse for the member functions and the sources that name
 * members: 0, or -EINVAL with err set to "address <why>". */
int pg_ctl_parse_addr(const char *addr, struct pg_hostport *hp, char *err, size_t errlen);

/*
 * Add addr (any backend form of lib/addr.h: "A.B.C.D:PORT", "[IPV6]:PORT",
 * "NAME:PORT") as a backend added by the admin API or the command line.
 * An address: re-activates a DRAINING member with that address; otherwise
 * takes the lowest free id (epoch bumped, ACTIVE, counters cleared);
 * rebuilds and publishes the ring; returns the id. A DNS name: remembered
 * and looked up at once (asynchronously, on the control thread); its
 * addresses become members as answers come; returns 0. Errors: -EINVAL
 * (bad address), -EEXIST (already a member / backend name), -ENOSPC (table
 * or name table full), with err naming the cause.
 */
int pg_member_add(struct pg_gateway *gw, const char *addr, char *err, size_t errlen);

/* pg_member_add into model pool pool (index in gw->cfg->pools); an
 * address or name already in another pool is -EEXIST. */
int pg_member_add_pool(struct pg_gateway *gw, const char *addr, unsigned pool, char *err,
                       size_t errlen);

/* "NAME:PORT" of the DNS name member id is one of the addresses of (buf:
 * PG_HOSTPORT_STRLEN bytes), or NULL (given as an address). */
const char *pg_member_name(int id, char *buf);

/* How a backend given by DNS name stands (GET /backends, /metrics). */
enum pg_name_state {
	PG_NAME_RESOLVING = 0,  /* no answer yet */
	PG_NAME_RESOLVED = 1,   /* the last lookup gave addresses */
	PG_NAME_UNRESOLVED = 2, /* the last lookup failed or gave none */
};
struct pg_name_info {
	char name[PG_HOSTPORT_STRLEN]; /* NAME:PORT */
	enum pg_name_state state;
	char error[96];      /* the last failed lookup's reason ("" none) */
	unsigned pool;       /* the model pool its addresses join */
	size_t naddrs;       /* addresses it stands for now (last applied answer) */
	uint64_t failures;   /* failed lookups since it was added */
	uint64_t failing_ms; /* how long its lookups have been failing (0: not) */
};
/* Name slot k (0 .. PG_BACKEND_NAMES_MAX - 1) into *out; false when free.
 * Control thread only. */
#define PG_BACKEND_NAMES_MAX 256
bool pg_backend_name_info(int k, struct pg_name_info *out);
/* The name slot member id came from, or -1. */
int pg_member_name_slot(int id);

/* Start draining member addr: no new requests, ring rebuilt without it; its
 * slot is cleared by pg_control_tick once its in_flight is 0. Returns the id
 * (also if it was already draining), or -EINVAL / -ENOENT with err set.
 * A DNS name (whatever added it: API, command line or file) is forgotten
 * and all its addresses drained; returns 0. */
int pg_member_remove(struct pg_gateway *gw, const char *addr, char *err, size_t errlen);

/* Make the file-origin members exactly list[0..n) (canonical addresses or
 * NAME:PORT, as pg_backends_parse returns): add the new ones, drain those
 * no longer listed unless they also have another origin (a name no longer
 * listed is forgotten, its addresses drained). One ring rebuild; a new
 * name's addresses join when it answers. Returns the number of members and
 * names added or drained, or -1 with err set (table full). Any membership
 * source (the file, etcd) calls this with its whole list. */
int pg_members_sync(struct pg_gateway *gw, char *const *list, size_t n, char *err, size_t errlen);

/* Store a routing config into gw->maps.state (each field atomically:
 * workers read them one by one) and log it before -> after; why names the
 * source ("PUT /routing"). The values must be valid (pg_routing_config_parse). */
void pg_control_set_routing(struct pg_gateway *gw, const struct pg_route_cfg *rc, const char *why);

/* The same for one model pool (pg_control_set_routing is pool 0's). */
void pg_control_set_routing_pool(struct pg_gateway *gw, unsigned pool,
                                 const struct pg_route_cfg *rc, const char *why);

/* Members in the rings of all pools (active, not draining). */
unsigned pg_members_count(const struct pg_gateway *gw);

/* Periodic work (each PG_CONTROL_TICK_MS): clear the slots of drained
 * members, clear DOWN flags whose down_until_ms has passed. now_ms:
 * pg_now_ms(), passed in so tests can drive time. */
void pg_control_tick(struct pg_gateway *gw, uint64_t now_ms);

/* Rebuild the ring from the current members and publish it (also done by
 * every membership change). */
void pg_control_rebuild_ring(struct pg_gateway *gw);

#endif /* PG_MEMBERS_H */
