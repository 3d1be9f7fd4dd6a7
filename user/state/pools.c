// SPDX-License-Identifier: MIT
/* Model pools at run time (pools.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/buf.h"
#include "state/pools.h"

/* Pool p into the pg_pools map: what bpftool and prefixgatectl show. */
static void publish(struct pg_gateway *gw, unsigned p)
{
	const struct pg_pool_cfg *pc = &gw->cfg->pools.pool[p];
	struct pg_pool *e = &gw->maps.pools[p];

	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", pc->name);
	e->nmodels = (uint32_t)pc->nmodels;
	pg_pool_list_join(pc->models, pc->nmodels, e->models, sizeof(e->models));
	e->npaths = (uint32_t)pc->npaths;
	pg_pool_list_join(pc->paths, pc->npaths, e->paths, sizeof(e->paths));
	e->flags = PG_POOL_ACTIVE | (!p && gw->cfg->pools.catch_all ? PG_POOL_CATCH_ALL : 0) |
	           (pc->decode_set ? PG_POOL_DECODE : 0);
	e->pd = pc->pd;
	e->decode = pc->decode_set ? pc->prefill : pc->decode;
}

int pg_pools_init(struct pg_gateway *gw)
{
	const struct pg_pool_table *t = gw->cfg ? &gw->cfg->pools : NULL;

	if (!t || !gw->maps.pools)
		return 0;
	if (t->n > gw->maps.npools)
		return -1; /* the maps were opened for fewer pools */
	for (unsigned p = 0; p < t->n && p < gw->maps.npools; p++)
		publish(gw, p);
	if (t->n <= 1 && !t->by_model && !t->by_path)
		return 0;
	gw->pools = calloc(1, sizeof(*gw->pools));
	if (!gw->pools)
		return -1;
	gw->pools->table = t;
	gw->router.members = gw->pools->members;
	for (unsigned p = 1; p < t->n; p++) {
		gw->pools->last[p] = calloc(1, sizeof(struct pg_ring_last));
		if (!gw->pools->last[p]) {
			pg_pools_free(gw);
			return -1;
		}
	}
	return 0;
}

void pg_pools_free(struct pg_gateway *gw)
{
	if (!gw->pools)
		return;
	for (unsigned p = 0; p < PG_MAX_POOLS; p++)
		free(gw->pools->last[p]);
	free(gw->pools);
	gw->pools = NULL;
	gw->router.members = NULL;
}

const char *pg_pool_name(const struct pg_gateway *gw, unsigned p)
{
	const struct pg_pool_table *t = gw->cfg ? &gw->cfg->pools : NULL;

	return t && p < t->n ? t->pool[p].name : "default";
}

bool pg_pool_takes_requests(const struct pg_gateway *gw, unsigned p)
{
	const struct pg_pool_table *t = pg_pools_table(gw);

	return t ? pg_pool_reachable(t, p) : p == PG_POOL_DEFAULT;
}

const char *pg_pool_names(const struct pg_gateway *gw, bool with_default, char *buf, size_t cap)
{
	static const struct pg_pool_table none;

	return pg_pool_table_names(gw->cfg ? &gw->cfg->pools : &none, with_default, buf, cap);
}

int pg_pool_lookup(const struct pg_gateway *gw, const char *name, size_t len)
{
	const struct pg_pool_table *t = gw->cfg ? &gw->cfg->pools : NULL;

	if (!len)
		return 0;
	if (!t || !t->n)
		return len == 7 && !memcmp(name, "default", 7) ? 0 : -1;
	return pg_pool_find(t, name, len);
}

int pg_pool_for_head(const struct pg_gateway *gw, bool post, const char *path, size_t len)
{
	return gw->pools ? pg_pool_by_path(gw->pools->table, post, path, len) : 0;
}

int pg_pool_for_body(const struct pg_gateway *gw, const char *body, size_t len, char *model,
                     int *mlen)
{
	*mlen = pg_json_model(body, len, model);
	return gw->pools ? pg_pool_by_model(gw->pools->table, model, *mlen) : 0;
}

void pg_pool_member_set(struct pg_gateway *gw, unsigned id, unsigned pool, bool member)
{
	uint64_t bit = 1ull << (id % 64);

	if (member)
		__atomic_store_n(&gw->maps.backends[id].pool, pool, __ATOMIC_RELAXED);
	if (!gw->pools)
		return;
	if (member)
		__atomic_fetch_or(&gw->pools->members[pool].bits[id / 64], bit, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&gw->pools->members[pool].bits[id / 64], ~bit, __ATOMIC_RELEASE);
}

void pg_pools_models_json(const struct pg_gateway *gw, struct pg_buf *out)
{
	const struct pg_pool_table *t = pg_pools_table(gw);
	struct pg_buf *bp = out;
	bool first = true;

	pg_buf_puts(bp, "{\"object\":\"list\",\"data\":[");
	for (unsigned p = 0; t && p < t->n; p++)
		for (size_t i = 0; i < t->pool[p].nmodels; i++) {
			pg_buf_puts(bp, first ? "{\"id\":" : ",{\"id\":");
			pg_buf_json_str(bp, t->pool[p].models[i], strlen(t->pool[p].models[i]));
			pg_buf_puts(
			    bp, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"prefixgate\","
			        "\"pool\":");
			pg_buf_json_str(bp, t->pool[p].name, strlen(t->pool[p].name));
			pg_buf_puts(bp, "}");
			first = false;
		}
	pg_buf_puts(bp, "]}\n");
}
