// SPDX-License-Identifier: MIT
/* The admin API's model pools (admin_pools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "admin/admin_pools.h"
#include "lib/pd.h"
#include "members/members.h"
#include "lib/names.h"
#include "state/pools.h"

int pg_admin_query_pool(const struct pg_gateway *gw, struct pg_str query, char *err, size_t errlen)
{
	int pool = 0;

	for (size_t i = 0; i < query.len;) {
		const char *amp = memchr(query.p + i, '&', query.len - i);
		size_t end = amp ? (size_t)(amp - query.p) : query.len;

		if (end - i >= 5 && !memcmp(query.p + i, "pool=", 5)) {
			pool = pg_pool_lookup(gw, query.p + i + 5, end - i - 5);
			if (pool < 0) {
				snprintf(err, errlen, "no pool \"%.*s\" (GET /pools lists them)",
				         (int)(end - i - 5 > 64 ? 64 : end - i - 5),
				         query.p + i + 5);
				return -1;
			}
		} else if (end > i) {
			snprintf(err, errlen, "unknown query parameter \"%.*s\" (pool)",
			         (int)(end - i > 40 ? 40 : end - i), query.p + i);
			return -1;
		}
		i = end + 1;
	}
	return pool;
}

void pg_admin_routing_json(struct pg_buf *o, const struct pg_route_cfg *rc)
{
	pg_buf_printf(o,
	              "{\"RoutingStrategy\":\"%s\",\"PrefixAwareRoutingConfig\":"
	              "{\"PrefixLength\":%u,\"ConcurrencyThreshold\":%u}",
	              pg_strategy_name(rc->strategy), rc->prefix_length, rc->concurrency_threshold);
	if (rc->strategy == PG_STRATEGY_CACHE_AWARE)
		pg_buf_printf(o, ",\"CacheAwareConfig\":{\"NewConversationChoices\":%u}",
		              rc->new_choices);
	if (rc->flow_queue_ms) {
		char q[16];

		pg_buf_printf(
		    o, ",\"FlowControlConfig\":{\"InstanceQueueMs\":%s,\"DeadlineMs\":%u}",
		    pg_flow_queue_json(rc->flow_queue_ms, q, sizeof(q)), rc->flow_deadline_ms);
	}
	pg_buf_puts(o, "}");
}

static void str_list(struct pg_buf *o, char *const *v, size_t n)
{
	pg_buf_puts(o, "[");
	for (size_t i = 0; i < n; i++) {
		if (i)
			pg_buf_puts(o, ",");
		pg_buf_json_str(o, v[i], strlen(v[i]));
	}
	pg_buf_puts(o, "]");
}

/* Pool p's members that take requests (not draining), by address, in id
 * order: the ones its "backends" count counts. */
static void members_json(const struct pg_gateway *gw, unsigned p, struct pg_buf *o)
{
	unsigned max = pg_router_max_id(&gw->router), k = 0;
	char name[PG_ADDR_STRLEN];

	pg_buf_puts(o, "[");
	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];
		uint16_t f = __atomic_load_n(&b->flags, __ATOMIC_ACQUIRE);

		if (!(f & PG_BACKEND_ACTIVE) || (f & PG_BACKEND_DRAINING) ||
		    (gw->pools ? b->pool : 0) != p)
			continue;
		pg_buf_printf(o, "%s\"%s\"", k++ ? "," : "",
		              pg_backend_name(b, name, sizeof(name)));
	}
	pg_buf_puts(o, "]");
}

int pg_admin_pools_get(struct pg_gateway *gw, struct pg_admin_reply *r)
{
	const struct pg_pool_table *t = gw->cfg ? &gw->cfg->pools : NULL;
	unsigned n = t && t->n ? t->n : 1;

	pg_buf_puts(&r->body, "[");
	for (unsigned p = 0; p < n && p < gw->maps.npools; p++) {
		const struct pg_pool_cfg *pc = t && t->n ? &t->pool[p] : NULL;
		const struct pg_state *st = &gw->maps.state[p];
		struct pg_route_cfg rc;

		pg_router_cfg(&gw->router, p, &rc);
		pg_buf_printf(&r->body, "%s\n{\"name\":", p ? "," : "");
		pg_buf_json_str(&r->body, pg_pool_name(gw, p), strlen(pg_pool_name(gw, p)));
		pg_buf_puts(&r->body, ",\"models\":");
		str_list(&r->body, pc ? pc->models : NULL, pc ? pc->nmodels : 0);
		pg_buf_puts(&r->body, ",\"paths\":");
		str_list(&r->body, pc ? pc->paths : NULL, pc ? pc->npaths : 0);
		pg_buf_printf(&r->body, ",\"catch_all\":%s,\"backends\":%u,\"members\":",
		              !p && (!t || !t->n || t->catch_all) ? "true" : "false",
		              __atomic_load_n(&st->nbackends, __ATOMIC_RELAXED));
		members_json(gw, p, &r->body);
		if (pc && pc->pd) /* prefill/decode: its members prefill, its decode set */
			pg_buf_printf(&r->body, ",\"pd\":\"%s\",\"decode_pool\":\"%s\"",
			              pg_pd_name((enum pg_pd)pc->pd), pg_pool_name(gw, pc->decode));
		if (pc && pc->decode_set)
			pg_buf_printf(&r->body, ",\"decode_of\":\"%s\"",
			              pg_pool_name(gw, pc->prefill));
		pg_buf_printf(
		    &r->body, ",\"ring_generation\":%llu,\"remapped_ratio\":%.6f,\"routing\":",
		    (unsigned long long)__atomic_load_n(&st->ring_generation, __ATOMIC_RELAXED),
		    (double)__atomic_load_n(&st->remapped_ppm, __ATOMIC_RELAXED) / 1e6);
		pg_admin_routing_json(&r->body, &rc);
		pg_buf_puts(&r->body, "}");
	}
	pg_buf_puts(&r->body, "\n]\n");
	return r->status = 200;
}

int pg_admin_routing(struct pg_gateway *gw, bool put, struct pg_str query, const char *body,
                     size_t len, struct pg_admin_reply *r)
{
	struct pg_route_cfg rc;
	char err[256];
	int pool = pg_admin_query_pool(gw, query, err, sizeof(err));

	if (pool < 0)
		return pg_admin_reply_error(r, 404, err);
	if (!put) {
		pg_router_cfg(&gw->router, (unsigned)pool, &rc);
	} else {
		/* omitted fields keep the pool's live values */
		pg_router_cfg(&gw->router, (unsigned)pool, &rc);
		if (pg_routing_config_update(body ? body : "", len, &rc, err, sizeof(err)))
			return pg_admin_reply_error(r, 400, err);
		pg_control_set_routing_pool(gw, (unsigned)pool, &rc, "PUT /routing");
	}
	pg_admin_routing_json(&r->body, &rc);
	pg_buf_puts(&r->body, "\n");
	return r->status = 200;
}
