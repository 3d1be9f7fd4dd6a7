/* SPDX-License-Identifier: MIT */
/*
 * Model pools at run time (lib/modelpool.h has the table and the rules): which
 * backend ids each pool holds, for the routing decision, and the pools as
 * the pg_pools map shows them. Made at start-up when pools are configured
 * (gw->pools); with gw->pools NULL the gateway is the default pool alone
 * and every function here answers as for pool 0.
 *
 * members[p] is written by the control thread (word by word, atomically)
 * and read by the workers: a backend's bit is set once it is an ACTIVE
 * member of p and cleared when it starts draining, before its slot can be
 * reused (drain grace), so a worker never takes another pool's member.
 */
#ifndef PG_STATE_POOLS_H
#define PG_STATE_POOLS_H

#include "gateway.h"
#include "lib/modelpool.h"
#include "lib/ring.h"

struct pg_pools {
	const struct pg_pool_table *table; /* gw->cfg->pools */
	struct pg_idset members[PG_MAX_POOLS];
	struct pg_ring_last *last[PG_MAX_POOLS]; /* control thread: pool p's last ring build */
};

/* Pools configured (pg_maps_open_pools's npools). */
static inline unsigned pg_pools_count(const struct pg_config *cfg)
{
	return cfg && cfg->pools.n ? cfg->pools.n : 1;
}

/* Make gw->pools when cfg configures more than the default pool alone (or
 * any model or path); write the pg_pools map. 0, or -1 (out of memory). */
int pg_pools_init(struct pg_gateway *gw);
void pg_pools_free(struct pg_gateway *gw);

/* The table, or NULL (no pools). */
static inline const struct pg_pool_table *pg_pools_table(const struct pg_gateway *gw)
{
	return gw->pools ? gw->pools->table : NULL;
}

/* Pool p's name ("default" for pool 0). */
const char *pg_pool_name(const struct pg_gateway *gw, unsigned p);

/* Whether requests can reach pool p: a pool with models or paths, or the
 * default pool while it is the catch-all (always without pools). */
bool pg_pool_takes_requests(const struct pg_gateway *gw, unsigned p);

/* The pools' names, "a, b, c" (with_default: the default pool's too), in
 * buf. */
const char *pg_pool_names(const struct pg_gateway *gw, bool with_default, char *buf, size_t cap);

/* Pool of NAME[0..len) (the admin API's ?pool=, "pool" fields), or -1. An
 * empty name is the default pool. */
int pg_pool_lookup(const struct pg_gateway *gw, const char *name, size_t len);

/* The request-path rules (lib/modelpool.h), for a gateway: from the head, then for
 * a PG_POOL_BY_MODEL request from its body. */
int pg_pool_for_head(const struct pg_gateway *gw, bool post, const char *path, size_t len);
int pg_pool_for_body(const struct pg_gateway *gw, const char *body, size_t len, char *model,
                     int *mlen);

/* Control thread: backend id joins pool / leaves its pool (pg_backend.pool). */
void pg_pool_member_set(struct pg_gateway *gw, unsigned id, unsigned pool, bool member);

/* Whether any pool lists models (then GET /v1/models is the gateway's). */
static inline bool pg_pools_by_model(const struct pg_gateway *gw)
{
	return gw->pools && gw->pools->table->by_model;
}

/* The body of GET /v1/models: every model of every pool, OpenAI's list
 * format (each entry also names its "pool"), appended to out. */
struct pg_buf;
void pg_pools_models_json(const struct pg_gateway *gw, struct pg_buf *out);

#endif /* PG_STATE_POOLS_H */
