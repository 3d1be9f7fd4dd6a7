/* SPDX-License-Identifier: MIT */
/*
 * The membership's state and helpers, shared by members.c, the DNS names
 * (backend_names.c, resolve.c) and the control thread that drives them
 * (control/control.c, control_reload.c). Not part of the public API
 * (members.h). Everything here is used on the control thread only, or
 * before it starts.
 */
#ifndef PG_MEMBERS_INTERNAL_H
#define PG_MEMBERS_INTERNAL_H

#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "members/members.h"
#include "lib/addrset.h"
#include "lib/ring.h"

/* Why a member is in the table (pg_ctl.origin[id]); 0 once draining. */
#define PG_ORIGIN_STATIC 0x1 /* --backend or POST /backends */
#define PG_ORIGIN_FILE   0x2 /* --backends-file */
#define PG_ORIGIN_NAME   0x4 /* a DNS name's answer (pg_ctl.name_of[id]) */
#define PG_ORIGIN_CONF   0x8 /* the configuration file, or a flag over it (-c) */

/* DNS names given as backends (backend_names.c), at most this many at once. */
#define PG_MAX_NAMES PG_BACKEND_NAMES_MAX
/* A name whose lookups keep failing is logged again at most this often. */
#define PG_NAME_LOG_MS 60000

/* One backend given by DNS name: it stands for every address it resolves
 * to (A and AAAA), re-resolved every --resolve-interval (resolve.c). */
struct pg_name {
	char host[PG_HOST_MAX];   /* lower case; "": the slot is free */
	uint16_t port;            /* of every address */
	bool tls;                 /* https://NAME:PORT: its addresses are spoken to over TLS */
	uint8_t origin;           /* PG_ORIGIN_STATIC | PG_ORIGIN_FILE | PG_ORIGIN_CONF */
	uint8_t pool;             /* the model pool its addresses join (state/pools.h) */
	bool querying;            /* a query is outstanding */
	uint8_t state;            /* enum pg_name_state */
	char error[96];           /* the last failed lookup's reason */
	uint64_t failures;        /* failed lookups since it was added */
	uint64_t failing_since;   /* pg_now_ms of the first failure of this run; 0: none */
	uint64_t logged_ms;       /* the last log line of this run of failures */
	uint32_t gen;             /* bumped when the slot is freed: late answers dropped */
	union pg_sockaddr *addrs; /* the members it added, normalized (addrset.h) */
	size_t naddrs;
	uint64_t next_ms;     /* next query due (pg_now_ms); 0: at once */
	uint64_t nx_since_ms; /* pg_dns_verdict's */
};

/* The membership's state: process-wide (one gateway per process).
 * Defined in members.c. */
struct pg_ctl_state {
	struct pg_gateway *gw;
	uint8_t origin[PG_MAX_BACKENDS];                     /* PG_ORIGIN_* */
	uint64_t drain_since[PG_MAX_BACKENDS];               /* ms when draining began */
	struct pg_ring_member ring_members[PG_MAX_BACKENDS]; /* members.c's scratch */
	struct pg_ring_last ring_last; /* the previous ring build (pg_ring_update) */
	struct pg_name names[PG_MAX_NAMES];
	uint16_t name_of[PG_MAX_BACKENDS]; /* the name (index + 1) a member came from */
};

extern struct pg_ctl_state pg_ctl;

/* Forget every member and name (a new gateway: pg_control_init). */
void pg_members_reset(struct pg_gateway *gw);

/* The member (ACTIVE slot, draining or not) with address sa and scheme
 * tls (1: https://, 0: plain, -1: either), or 0. */
int pg_ctl_find_member(const struct pg_gateway *gw, const union pg_sockaddr *sa, int tls);

/* Start draining member id (its origins cleared); no ring rebuild. */
void pg_ctl_drain(struct pg_gateway *gw, int id);

/*
 * Make sa a member of model pool pool (0: the default) with origin bit(s)
 * origin, spoken to as hp says (hp->tls: https://, hp->name: the DNS name
 * it is one address of, sent as SNI; "" for an address); no ring rebuild.
 * dup_ok: an active member with that address and scheme just gains the
 * origin (file sync, start up); otherwise it is -EEXIST, as is an address
 * already in another pool or spoken to the other way. *changed is set
 * when the ring must change. Returns the id, or -EEXIST / -ENOSPC with
 * err set.
 */
int pg_ctl_add_one(struct pg_gateway *gw, const union pg_sockaddr *sa, const struct pg_hostport *hp,
                   unsigned pool, uint8_t origin, bool dup_ok, bool *changed, char *err,
                   size_t errlen);

/*
 * DNS names (backend_names.c). pg_ctl_name_add: make hp (a name) a backend of
 * model pool pool with
 * origin bit(s) origin, its query due at once; dup_ok: a name already
 * there just gains the origin, otherwise -EEXIST. Returns its index, or
 * -EEXIST / -ENOSPC with err set.
 * pg_ctl_name_find: the index of hp's name, or -1.
 * pg_ctl_name_drop: name k loses origin bit(s) origin; with none left it
 * is forgotten and its members drained (*changed set).
 * pg_ctl_name_answer: apply an answer for name k (addrs[0..n), any order,
 * port ignored; reordered in place) as pg_dns_verdict decides: members
 * added and drained as the answer changed, the ring rebuilt if it did.
 */
int pg_ctl_name_add(struct pg_gateway *gw, const struct pg_hostport *hp, unsigned pool,
                    uint8_t origin, bool dup_ok, char *err, size_t errlen);
int pg_ctl_name_find(const struct pg_hostport *hp);
void pg_ctl_name_drop(struct pg_gateway *gw, int k, uint8_t origin, bool *changed);
void pg_ctl_name_answer(struct pg_gateway *gw, int k, enum pg_dns_status st,
                        union pg_sockaddr *addrs, size_t n, const char *why);

/* pg_members_sync without the ring rebuild, for the members of origin
 * (PG_ORIGIN_FILE, PG_ORIGIN_CONF): *changed says if one is due. Returns
 * the number of members added or drained, or -1 with err set. */
int pg_ctl_sync(struct pg_gateway *gw, char *const *list, size_t n, uint8_t origin, bool *changed,
                char *err, size_t errlen);

#endif /* PG_MEMBERS_INTERNAL_H */
