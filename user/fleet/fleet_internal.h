/* SPDX-License-Identifier: MIT */
/* The fleet's state, shared by fleet.c (the thread and the NATS callbacks)
 * and fleet_setup.c (start, stop, metrics). */
#ifndef PG_FLEET_INTERNAL_H
#define PG_FLEET_INTERNAL_H

#include <nats/nats.h>
#include <pthread.h>
#include "fleet/fleet.h"
#include "lib/flow.h"

/* The address table is rebuilt from the backend table this often. */
#define MAP_REFRESH_MS 50
/* A subscription's backlog at most (libnats drops beyond it, and counts). */
#define SUB_PENDING_MSGS  4096
#define SUB_PENDING_BYTES (16 * 1024 * 1024)

struct counters {
	uint64_t sent[PG_FLEET_MSG_TYPES], received[PG_FLEET_MSG_TYPES]; /* by type */
	uint64_t bad;                                                    /* undecodable messages */
	uint64_t peers_dropped;   /* peers expired for silence */
	uint64_t peers_full;      /* vectors ignored: PG_FLEET_MAX_PEERS live */
	uint64_t cache_published; /* decisions sent */
	uint64_t cache_applied;   /* decisions received and recorded */
	uint64_t cache_dropped;   /* decisions not sent: batch full or no NATS */
	uint64_t cache_unknown;   /* received for a backend not a member here */
	uint64_t fit_published;   /* first tokens learned from, sent */
	uint64_t fit_applied;     /* ... received and learned from */
	uint64_t fit_dropped;     /* ... not sent: batch full or no NATS */
	uint64_t fit_unknown;     /* ... received for a backend not a member here */
	uint64_t flow_published;  /* flow control's tenants told of (entries) */
	uint64_t flow_applied;    /* ... heard of */
	uint64_t quota_published; /* quotas' counts told of (tenant-seconds) */
	uint64_t quota_applied;   /* ... heard of */
	uint64_t mode_changes;
};

struct pg_fleet {
	struct pg_gateway *gw;
	pthread_t thread;
	bool started;
	natsOptions *opts;
	natsConnection *nc;
	natsSubscription *sub_load, *sub_cache, *sub_fit, *sub_flow, *sub_quota;
	char id[PG_FLEET_ID_MAX + 1];
	char subj_load[PG_FLEET_ID_MAX + 32], subj_cache[PG_FLEET_ID_MAX + 32],
	    subj_fit[PG_FLEET_ID_MAX + 32], subj_flow[PG_FLEET_ID_MAX + 32],
	    subj_quota[PG_FLEET_ID_MAX + 32];
	uint64_t boot, seq;
	/* Under mu: written by the fleet thread and the delivery threads. */
	pthread_mutex_t mu;
	struct pg_fleet_peers peers;
	struct pg_fleet_addrmap amap;
	uint32_t epoch[PG_MAX_BACKENDS]; /* slot epochs amap was built from; 0: empty */
	struct pg_fleet_decision dec;
	unsigned peers_seen;
	/* Flow control's tenants: each peer's requests queued (by its slot in
	 * peers, flow_owner[j] the id they are of), as its last FLOW said. */
	char flow_owner[PG_FLEET_MAX_PEERS][PG_FLEET_ID_MAX + 1];
	uint32_t flow_q[PG_FLEET_MAX_PEERS][PG_FLOW_TENANTS];
	/* The fleet thread's alone. */
	struct pg_fleet_load last_pub[PG_MAX_BACKENDS], cur_pub[PG_MAX_BACKENDS];
	uint64_t last_pub_ms, last_cache_ms, last_map_ms;
	struct pg_fleet_enc cenc, fenc;
	uint8_t cache_buf[PG_FLEET_CACHE_BATCH], fit_buf[PG_FLEET_CACHE_BATCH];
	uint8_t flow_buf[64 + PG_FLOW_TENANTS * (1 + PG_FLOW_LABEL_MAX + 20)];
	uint32_t flow_told[PG_FLOW_TENANTS]; /* each tenant's queued, as last published */
	/* quotas' counts: up to 3 seconds of every tenant a message; the
	 * second the last one was sent in (its counts may have grown since) */
	uint8_t quota_buf[64 + 3 * PG_FLOW_TENANTS * (1 + PG_FLOW_LABEL_MAX + 24)];
	uint64_t quota_sec;
	uint8_t load_buf[64 + PG_MAX_BACKENDS * (PG_FLEET_ADDR_MAX + 18)];
	/* Read by metrics and admin (atomics). */
	int mode, npeers, connected;
	struct counters c;
};

#define COUNT(f, field, n) __atomic_fetch_add(&(f)->c.field, (n), __ATOMIC_RELAXED)

/* The subscriptions' callbacks (libnats' delivery threads). */
void pg_fleet_on_load(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure);
void pg_fleet_on_cache(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure);
void pg_fleet_on_fit(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure);
void pg_fleet_on_flow(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure);
void pg_fleet_on_quota(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure);
/* A peer's message of this type decoded up to its entries: false (nothing
 * to apply) if it is undecodable (counted) or our own. */
bool pg_fleet_msg_begin(struct pg_fleet *f, natsMsg *msg, enum pg_fleet_msg_type type,
                        struct pg_fleet_dec *d, struct pg_fleet_hdr *h);
/* A message's header from this gateway, and its publication (counted). */
void pg_fleet_header(struct pg_fleet *f, uint8_t type, struct pg_fleet_hdr *h);
void pg_fleet_publish(struct pg_fleet *f, const char *subj, const struct pg_fleet_enc *e,
                      uint8_t type);
/* Flow control's tenants (fleet_flow.c): the work served here since the
 * last message and the requests queued, published (fleet thread); the
 * queued counts of peers no longer live taken back (under mu). */
void pg_fleet_publish_flow(struct pg_fleet *f);
void pg_fleet_flow_peers(struct pg_fleet *f);
/* Quotas' counts (fleet_quota.c): what this gateway counted in each tenant's
 * minute since the last message, published (fleet thread). */
void pg_fleet_publish_quota(struct pg_fleet *f);
/* The fleet thread. */
void *pg_fleet_main(void *arg);

#endif /* PG_FLEET_INTERNAL_H */
