/* SPDX-License-Identifier: MIT */
/*
 * The gateway as the routing core's host (router/router.h): what the core
 * tells the rest of it (decisions and observations for the fleet's queues,
 * state/fleetq.h; decisions for the routing statistics,
 * state/routestats.h) and its clock.
 */
#ifndef PG_STATE_HOST_H
#define PG_STATE_HOST_H

#include "gateway.h"

/* Wire gw->router to the gateway: its maps (open), its fleet queues and
 * routing statistics (as they come and go), its clock and flags (gw->cfg,
 * may be NULL): once the maps are open, before any routing (main.c; test
 * fixtures that make a gateway by hand). The pools' members join when
 * the pools are made (state/pools.c), the learned speeds when allocated
 * (router.speeds). */
void pg_gateway_router(struct pg_gateway *gw);

#endif /* PG_STATE_HOST_H */
