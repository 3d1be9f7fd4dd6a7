/* SPDX-License-Identifier: MIT */
/*
 * The admin API's model pools (admin.c dispatches to these): GET /pools,
 * the ?pool=NAME parameter of /backends and /routing, and the RoutingConfig
 * JSON both files write. Control thread only.
 */
#ifndef PG_ADMIN_POOLS_H
#define PG_ADMIN_POOLS_H

#include "admin/admin_reply.h"
#include "gateway.h"
#include "lib/http.h"

/* The pool a query string names (?pool=NAME; absent: the default pool),
 * or -1 with err set: an unknown pool, or a parameter other than pool. */
int pg_admin_query_pool(const struct pg_gateway *gw, struct pg_str query, char *err, size_t errlen);

/* RoutingConfig JSON of rc, as GET /routing answers it. */
void pg_admin_routing_json(struct pg_buf *o, const struct pg_route_cfg *rc);

/* GET /pools: each pool, its models, paths, RoutingConfig and members. */
int pg_admin_pools_get(struct pg_gateway *gw, struct pg_admin_reply *r);

/* GET /routing and PUT /routing, for the pool ?pool= names (0: default). */
int pg_admin_routing(struct pg_gateway *gw, bool put, struct pg_str query, const char *body,
                     size_t len, struct pg_admin_reply *r);

/* GET /flow: flow control's queue of each pool and its tenants
 * (admin_flow.c). */
int pg_admin_flow_get(struct pg_gateway *gw, struct pg_admin_reply *r);

/* GET /tenants: each tenant's quota, its minute and its usage, and the
 * usage by model pool; PUT /tenants/NAME {"rpm":N,"tpm":N}: its own quota
 * (null: --quota's), live until a reload (admin_tenants.c). */
int pg_admin_tenants_get(struct pg_gateway *gw, struct pg_admin_reply *r);
int pg_admin_tenant_put(struct pg_gateway *gw, struct pg_str name, const char *body, size_t len,
                        struct pg_admin_reply *r);

/* GET /config: the configuration as a configuration file, each pool's
 * routing as it is live (admin_config.c). */
int pg_admin_config_get(struct pg_gateway *gw, struct pg_admin_reply *r);

/* GET /tls: the TLS listener, its certificates and their expiry, the
 * backends' CA and certificate, the ticket keys, the reloads; POST
 * /tls/reload: every certificate file read again, or the reload refused
 * whole (422, "FILE: what is wrong") (admin_tls.c). */
int pg_admin_tls_get(struct pg_gateway *gw, struct pg_admin_reply *r);
int pg_admin_tls_reload(struct pg_gateway *gw, struct pg_admin_reply *r);

#endif /* PG_ADMIN_POOLS_H */
