/* SPDX-License-Identifier: MIT */
/*
 * Model pools on the request path (state/pools.h has the rules): the pool
 * of a request, and the answers the gateway gives itself — GET /v1/models,
 * an unknown model (404 model_not_found, as OpenAI answers it), a missing
 * one (400), a path no pool serves (404).
 */
#ifndef PG_PROXY_MODELS_H
#define PG_PROXY_MODELS_H

#include <stdbool.h>
#include "lib/http.h"
#include "proxy/conn.h"

struct pg_route_input;

/* From the head (gw->pools set): c->x.pool is the pool of the path, or
 * PG_POOL_BY_MODEL when the body's model decides. true: answered. */
bool pg_pool_head(struct pg_worker *w, struct pg_client *c, const struct pg_http_request *req);

/* For a PG_POOL_BY_MODEL request, from its body: c->x.pool is the pool
 * of its model. true: answered (no pool serves it). */
bool pg_pool_body(struct pg_worker *w, struct pg_client *c, const struct pg_route_input *in);

#endif /* PG_PROXY_MODELS_H */
