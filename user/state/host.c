// SPDX-License-Identifier: MIT
/* The gateway as the routing core's host (host.h). */
#include <stddef.h>
#include "router/cache.h"
#include "state/fleetq.h"
#include "state/host.h"
#include "state/pools.h"
#include "state/routestats.h"
#include "sys/journal.h"

static struct pg_gateway *gw_of(const struct pg_router *r)
{
	return (struct pg_gateway *)((char *)r - offsetof(struct pg_gateway, router));
}

static uint64_t gw_clock(const struct pg_router *r)
{
	(void)r;
	return pg_now_ns();
}

/* In a fleet, decisions and observations are queued for the fleet thread,
 * never waiting (state/fleetq.h); decisions also feed the routing
 * statistics (state/routestats.h). */
static void gw_sent(const struct pg_router *r, unsigned worker, uint16_t id, uint32_t epoch,
                    const uint64_t *chain, uint32_t n, bool request)
{
	struct pg_gateway *gw = gw_of(r);

	if (gw->fleetq)
		pg_fleetq_push(gw->fleetq, worker, id, epoch, chain, n, request);
}

static void gw_learned(const struct pg_router *r, unsigned worker, uint16_t id, uint32_t epoch,
                       const struct pg_fit_obs *obs)
{
	struct pg_gateway *gw = gw_of(r);
	uint64_t w[2];

	if (!gw->fleetq_obs)
		return;
	pg_fit_obs_pack(obs, w);
	pg_fleetq_push(gw->fleetq_obs, worker, id, epoch, w, 2, false);
}

static void gw_decided(const struct pg_router *r, unsigned worker, uint64_t anchor, uint16_t id,
                       uint16_t shadow, uint64_t now_ms)
{
	pg_rstats_record(gw_of(r), worker, anchor, id, shadow, now_ms);
}

static void gw_routed(const struct pg_router *r, unsigned worker, unsigned pool,
                      const struct pg_key *key, const struct pg_key_blocks *kb, uint64_t rnd,
                      uint32_t budget_ms, uint8_t prio, uint64_t now_ms, uint16_t id,
                      const struct pg_choice *choice)
{
	pg_journal_route(gw_of(r)->journal, worker, pool, key, kb, rnd, budget_ms, prio, now_ms, id,
	                 choice);
}

static const struct pg_router_out gw_out = {
    .sent = gw_sent,
    .learned = gw_learned,
    .decided = gw_decided,
};

/* With --route-journal: each decision's inputs too (a decision pays for
 * the hook only then). */
static const struct pg_router_out gw_out_journal = {
    .sent = gw_sent,
    .learned = gw_learned,
    .decided = gw_decided,
    .routed = gw_routed,
};

void pg_gateway_router(struct pg_gateway *gw)
{
	struct pg_router *r = &gw->router;

	r->maps = &gw->maps;
	r->members = gw->pools ? gw->pools->members : NULL;
	r->out = gw->journal ? &gw_out_journal : &gw_out;
	r->clock = gw_clock;
	r->load_signal = gw->cfg ? gw->cfg->load_signal : PG_LOAD_INFLIGHT;
	r->shadow = gw->cfg && gw->cfg->shadow;
	r->ca_work_base = PG_CA_WORK_BASE;
	r->ca_work_queued = PG_CA_WORK_QUEUED;
}
