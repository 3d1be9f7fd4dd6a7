/* SPDX-License-Identifier: MIT */
/*
 * Quotas and usage accounting in a worker (doc/routing.md "Quotas",
 * doc/operations.md "Usage accounting"; lib/quota.h has the windows,
 * lib/account.h the figures, state/quotas.h the shared state): a request
 * taken against its tenant's quota when its key's bytes are in hand
 * (before it can wait), its prompt tokens counted when it is routed, the
 * x-ratelimit-* headers written on its answer, and what it used added up
 * when it ends. While no quota is in force, a request pays one atomic
 * load for them.
 */
#ifndef PG_PROXY_QUOTA_H
#define PG_PROXY_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include "lib/account.h"
#include "proxy/conn.h"
#include "router/route.h"

/* Room for the x-ratelimit-* lines of pg_quota_head. */
#define PG_QUOTA_HEAD_MAX 384

/* Its key's bytes are in hand (in): true when it goes on, false when it
 * was answered 429 (its tenant's quota is used up). */
bool pg_quota_arrive(struct pg_worker *w, struct pg_client *c, const struct pg_route_input *in);

/* Whether answers' usage is read as they pass (--exact-usage, or a quota
 * in force): else usage accounting estimates every figure. */
bool pg_quota_reads_usage(const struct pg_worker *w);

/* It was routed (in: what it was routed on): its prompt tokens, as
 * routing counts them, counted against its tenant's tokens a minute. */
void pg_quota_routed(struct pg_worker *w, struct pg_client *c, const struct pg_route_input *in);

/* The x-ratelimit-* lines (CRLF each) for an answer to x into out (cap
 * bytes, PG_QUOTA_HEAD_MAX fits them); their length, 0 when its tenant
 * has no quota. */
size_t pg_quota_head(struct pg_worker *w, const struct pg_exchange *x, char *out, size_t cap);

/* It ends with status (0: none sent), broken: its response was cut
 * short. Its usage is added to its tenant's and its pool's counters (and
 * its completion tokens to its tenant's tokens a minute); true and *use
 * (for the access log) when an instance answered it. */
bool pg_quota_end(struct pg_worker *w, const struct pg_client *c, unsigned status, bool broken,
                  struct pg_use *use);

#endif /* PG_PROXY_QUOTA_H */
