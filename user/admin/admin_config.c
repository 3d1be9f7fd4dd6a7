// SPDX-License-Identifier: MIT
/*
 * GET /config (admin.c dispatches to it): the configuration the gateway
 * runs, as a configuration file (config.h pg_config_render): the file and
 * the flags merged, as the last reload left them, each pool's RoutingConfig
 * as it is live. prefixgatectl config prints it; prefixgate -c reads it
 * back. Control thread only.
 */
#include "config/config.h"
#include "admin/admin_pools.h"
#include "lib/buf.h"

int pg_admin_config_get(struct pg_gateway *gw, struct pg_admin_reply *r)
{
	struct pg_route_cfg live[PG_MAX_POOLS];

	for (unsigned p = 0; p < PG_MAX_POOLS; p++)
		pg_router_cfg(&gw->router, p < gw->maps.npools ? p : 0, &live[p]);
	pg_config_render(gw->cfg, live, &r->body);
	r->content_type = "text/plain; charset=utf-8";
	return r->status = 200;
}
