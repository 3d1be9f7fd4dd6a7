/* SPDX-License-Identifier: MIT */
/*
 * State shared by the etcd thread (etcd.c) and the parts the control thread
 * and admin API run (etcd_admin.c). Include only from those files.
 *
 * Threads: view, w, cl, lease and the gateway record are the etcd thread's;
 * applied, route_text and admin_cl the control thread's; pending passes
 * from one to the other under lock; the counters and flags read by /health
 * and /metrics are atomics.
 */
#ifndef PG_CONTROL_ETCD_INTERNAL_H
#define PG_CONTROL_ETCD_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "fleet/etcd_client.h"
#include "gateway.h"
#include "lib/etcd.h"

struct pg_etcd_state {
	bool on, running, quit;
	const struct pg_etcd_cfg *cfg;
	char prefix[512];      /* --etcd-prefix with one trailing '/' */
	char routing_key[600]; /* prefix + config/routing */
	struct pg_etcd_client cl, admin_cl;
	pthread_t thread;
	int efd, stopfd; /* a view waits; stop the thread */
	struct pg_etcd_view view;
	int64_t published_rev; /* of the last view handed over */
	bool listed;           /* view is valid: a watch may resume from it */
	bool w_created;        /* the watch answered "created" */
	uint64_t w_opened_ms;
	int64_t seen_newest; /* newest mod_revision under the prefix at the last check */
	struct pg_etcd_watch w;
	pthread_mutex_t lock;
	struct pg_etcd_view pending;
	bool have_pending;
	struct pg_etcd_view applied;
	char *route_text;    /* config/routing as last applied */
	int64_t applied_rev; /* atomic */
	bool stale;          /* atomic */
	uint64_t last_ok_ms; /* etcd thread's copy */
	uint64_t last_ok_atomic;
	uint64_t lists, relists; /* atomic */
	/* the gateway record */
	struct pg_etcd_gateway rec, rec_put;
	char rec_key[700];
	int64_t lease;
	uint64_t next_keepalive_ms;
};

extern struct pg_etcd_state pg_etcd;

/* The gateway record: fill in the fixed fields; on the etcd thread, keep
 * it current (lease, keep-alive, a put when the revision or digest
 * changed); revoke its lease at stop. */
void pg_etcd_gateway_init(struct pg_gateway *gw);
void pg_etcd_gateway_record(struct pg_gateway *gw, uint64_t now);
void pg_etcd_gateway_revoke(void);

#endif /* PG_CONTROL_ETCD_INTERNAL_H */
