// SPDX-License-Identifier: MIT
/*
 * The admin API's members (admin_backends.h): GET /backends, POST /backends,
 * DELETE /backends/ADDR:PORT. Control thread only: membership changes
 * happen here (members/members.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "admin/admin_backends.h"
#include "admin/admin_pools.h"
#include "members/members.h"
#include "fleet/etcd.h"
#include "lib/json.h"
#include "lib/names.h"
#include "router/work.h"
#include "state/maps.h"
#include "state/pools.h"

/* A member's load as the load model has it (router/work.h), its "load"
 * member: this gateway's queue of prefill work on it, the predicted wait,
 * its speed as learned (or the defaults, learned false). */
static void load_json(struct pg_buf *o, const struct pg_backend *b, uint64_t now)
{
	struct pg_speed sp;

	pg_work_speed(b, &sp);
	pg_buf_printf(o,
	              "\"load\":{\"prefill_queue_tokens\":%llu,\"prefill_queue_requests\":%u,"
	              "\"predicted_wait_ms\":%.1f,\"prefill_tokens_per_s\":%.0f,"
	              "\"ttft_overhead_ms\":%.1f,\"decode_cost_ms\":%.2f,\"speed_learned\":%s}",
	              (unsigned long long)__atomic_load_n(&b->prefill_tokens, __ATOMIC_RELAXED),
	              __atomic_load_n(&b->prefill_reqs, __ATOMIC_RELAXED),
	              sp.ms_per_ktok * pg_work_queued(b, &sp, now) / 1000 +
	                  sp.ms_per_decode * pg_work_decoding(b),
	              1e6 / sp.ms_per_ktok, sp.overhead_ms, sp.ms_per_decode,
	              __atomic_load_n(&b->fit_obs, __ATOMIC_RELAXED) >= PG_FIT_OWN_MIN ? "true"
	                                                                               : "false");
}

/* slots[id]: the slots of its pool's live ring whose first candidate is
 * member id (what prefixgatectl shows as its ring share, from the maps
 * too). slots: PG_MAX_BACKENDS entries. The control thread is the rings'
 * only writer: what it reads here is whole. */
static void ring_slots(const struct pg_gateway *gw, uint32_t *slots)
{
	unsigned np = gw->pools ? gw->maps.npools : 1;

	memset(slots, 0, PG_MAX_BACKENDS * sizeof(*slots));
	for (unsigned p = 0; p < np; p++) {
		const struct pg_ring *r = pg_maps_pool_live_ring(&gw->maps, p);

		for (uint32_t i = 0; r && i < PG_RING_SLOTS; i++)
			if (r->slot[i][0] < PG_MAX_BACKENDS)
				slots[r->slot[i][0]]++;
	}
}

static void member_json(struct pg_buf *o, const struct pg_gateway *gw, int id, uint64_t now,
                        const uint32_t *slots)
{
	const struct pg_backend *b = &gw->maps.backends[id];
	uint16_t f = __atomic_load_n(&b->flags, __ATOMIC_ACQUIRE);
	bool down = !pg_backend_healthy(b, now);
	uint64_t req[PG_DEC_MAX], total = 0;
	char name[PG_ADDR_STRLEN], from[PG_HOSTPORT_STRLEN];

	for (int d = 0; d < PG_DEC_MAX; d++)
		total += req[d] = __atomic_load_n(&b->requests[d], __ATOMIC_RELAXED);
	pg_buf_printf(o, "{\"id\":%d,\"address\":\"%s\",", id,
	              pg_backend_name(b, name, sizeof(name)));
	/* The DNS name it is one of the addresses of (none for a literal),
	 * and why that name's lookups fail while they do (it is kept). */
	if (pg_member_name(id, from)) {
		struct pg_name_info ni;

		pg_buf_printf(o, "\"name\":\"%s\",", from);
		if (pg_backend_name_info(pg_member_name_slot(id), &ni) &&
		    ni.state == PG_NAME_UNRESOLVED) {
			pg_buf_puts(o, "\"name_error\":");
			pg_buf_json_str(o, ni.error, strlen(ni.error));
			pg_buf_puts(o, ",");
		}
	}
	pg_buf_printf(o,
	              "\"healthy\":%s,\"draining\":%s,\"health\":\"%s\","
	              "\"in_flight\":%d,\"requests\":%llu,\"failures\":%llu,\"epoch\":%u,"
	              "\"pool\":\"%s\",\"ring_slots\":%u,\"requests_by_decision\":{",
	              down ? "false" : "true", f & PG_BACKEND_DRAINING ? "true" : "false",
	              pg_backend_health(b, now), __atomic_load_n(&b->in_flight, __ATOMIC_RELAXED),
	              (unsigned long long)total,
	              (unsigned long long)__atomic_load_n(&b->failures, __ATOMIC_RELAXED), b->epoch,
	              pg_pool_name(gw, b->pool), slots[id]);
	for (int d = 0; d < PG_DEC_MAX; d++)
		pg_buf_printf(o, "%s\"%s\":%llu", d ? "," : "", pg_decision_name((unsigned)d),
		              (unsigned long long)req[d]);
	pg_buf_printf(o, "},\"peer_in_flight\":%d,\"recent\":%.2f,",
	              __atomic_load_n(&b->peer_in_flight, __ATOMIC_RELAXED),
	              (double)__atomic_load_n(&b->recent, __ATOMIC_RELAXED) / PG_CA_RECENT_ONE);
	load_json(o, b, now);
	pg_buf_puts(o, "}");
}

/* A name that stands for no address, as a GET /backends entry: no id and
 * no address, the fields a member has zero, and why. */
static void name_json(struct pg_buf *o, const struct pg_gateway *gw, const struct pg_name_info *ni)
{
	pg_buf_printf(o, "{\"id\":0,\"address\":null,\"name\":\"%s\",\"state\":\"%s\",\"error\":",
	              ni->name, ni->state == PG_NAME_RESOLVING ? "resolving" : "unresolved");
	if (ni->error[0])
		pg_buf_json_str(o, ni->error, strlen(ni->error));
	else
		pg_buf_puts(o, "null");
	pg_buf_printf(o,
	              ",\"lookup_failures\":%llu,\"failing_seconds\":%.1f,\"healthy\":false,"
	              "\"draining\":false,\"in_flight\":0,\"requests\":0,\"pool\":\"%s\"}",
	              (unsigned long long)ni->failures, (double)ni->failing_ms / 1000,
	              pg_pool_name(gw, ni->pool));
}

int pg_admin_backends_get(struct pg_gateway *gw, struct pg_str query, struct pg_admin_reply *r)
{
	unsigned max = pg_router_max_id(&gw->router);
	uint64_t now = pg_now_ms();
	bool first = true;
	char err[160];
	int pool = query.len ? pg_admin_query_pool(gw, query, err, sizeof(err)) : -1;
	uint32_t *slots;

	if (query.len && pool < 0)
		return pg_admin_reply_error(r, 404, err);

	if (!(slots = malloc(PG_MAX_BACKENDS * sizeof(*slots))))
		return pg_admin_reply_error(r, 500, "out of memory");
	ring_slots(gw, slots);
	pg_buf_puts(&r->body, "[");
	for (unsigned id = 1; id <= max; id++) {
		if (!(__atomic_load_n(&gw->maps.backends[id].flags, __ATOMIC_ACQUIRE) &
		      PG_BACKEND_ACTIVE) ||
		    (pool >= 0 && gw->maps.backends[id].pool != (unsigned)pool))
			continue;
		pg_buf_puts(&r->body, first ? "\n" : ",\n");
		member_json(&r->body, gw, (int)id, now, slots);
		first = false;
	}
	/* Names that stand for no address: no member shows them, yet the
	 * operator added them and they serve nothing. */
	for (int k = 0; k < PG_BACKEND_NAMES_MAX; k++) {
		struct pg_name_info ni;

		if (!pg_backend_name_info(k, &ni) || ni.naddrs ||
		    (pool >= 0 && ni.pool != (unsigned)pool))
			continue;
		pg_buf_puts(&r->body, first ? "\n" : ",\n");
		name_json(&r->body, gw, &ni);
		first = false;
	}
	free(slots);
	pg_buf_puts(&r->body, "\n]\n");
	return r->status = 200;
}

/* addr: the request's; a DNS name's reply (id 0) names it and what follows. */
static int member_status(struct pg_gateway *gw, int id, int ok, const char *addr, const char *err,
                         struct pg_admin_reply *r)
{
	struct pg_hostport hp;
	char canon[PG_HOSTPORT_STRLEN];
	uint32_t *slots;

	if (id == -EINVAL)
		return pg_admin_reply_error(r, 400, err);
	if (id == -ENOENT)
		return pg_admin_reply_error(r, 404, err);
	if (id < 0)
		return pg_admin_reply_error(r, 409, err);
	if (id == 0 && !pg_hostport_parse(addr, &hp, false, NULL, 0)) {
		pg_buf_printf(&r->body, "{\"name\":\"%s\",\"%s\":true}\n",
		              pg_hostport_format(&hp, canon), ok == 201 ? "resolving" : "draining");
		return r->status = 202;
	}
	if (!(slots = malloc(PG_MAX_BACKENDS * sizeof(*slots))))
		return pg_admin_reply_error(r, 500, "out of memory");
	ring_slots(gw, slots);
	member_json(&r->body, gw, id, pg_now_ms(), slots);
	free(slots);
	pg_buf_puts(&r->body, "\n");
	return r->status = ok;
}

int pg_admin_backends_post(struct pg_gateway *gw, const char *body, size_t len,
                           struct pg_admin_reply *r)
{
	struct pg_json js = {0};
	char addr[PG_HOSTPORT_STRLEN], err[PG_HOSTPORT_STRLEN + PG_MAX_POOLS * PG_POOL_NAME_MAX];
	int64_t v = -1, pv = -1;
	size_t alen;
	int id, pool = 0;

	if (pg_json_parse(&js, body ? body : "", len)) {
		snprintf(err, sizeof(err), "invalid JSON at byte %zu: %s", js.err_pos, js.err_msg);
		goto bad;
	}
	if (js.tok[0].type != PG_JSON_OBJECT) {
		snprintf(err, sizeof(err), "expected {\"address\":\"host:port\"}");
		goto bad;
	}
	for (uint32_t k = 1, n = 0; n < js.tok[0].size; n++, k = pg_json_member_next(&js, k)) {
		if (pg_json_str_eq(&js, k, "pool", 4)) {
			pv = k + 1;
			continue;
		}
		if (!pg_json_str_eq(&js, k, "address", 7)) {
			snprintf(err, sizeof(err),
			         "unknown field (only \"address\" and \"pool\" are accepted)");
			goto bad;
		}
		v = k + 1;
	}
	if (pv >= 0) {
		char name[PG_POOL_NAME_MAX];
		size_t nl = js.tok[pv].type == PG_JSON_STRING
		                ? pg_json_str_copy(&js, (uint32_t)pv, name, sizeof(name))
		                : sizeof(name);

		pool = nl < sizeof(name) ? pg_pool_lookup(gw, name, nl) : -1;
		if (pool < 0) {
			snprintf(err, sizeof(err),
			         "pool: not a pool's name (GET /pools lists them)");
			goto bad;
		}
	}
	if (v < 0 || js.tok[v].type != PG_JSON_STRING) {
		snprintf(err, sizeof(err), "address: %s", v < 0 ? "missing" : "expected a string");
		goto bad;
	}
	alen = pg_json_str_copy(&js, (uint32_t)v, addr, sizeof(addr) - 1);
	if (alen > sizeof(addr) - 1) {
		snprintf(err, sizeof(err), "address: too long");
		goto bad;
	}
	addr[alen] = 0;
	if (strlen(addr) != alen) {
		snprintf(err, sizeof(err), "address: contains a NUL character");
		goto bad;
	}
	pg_json_free(&js);
	if (pool == PG_POOL_DEFAULT && !pg_pool_takes_requests(gw, PG_POOL_DEFAULT)) {
		/* it would join a pool no request reaches: say where it can go */
		char names[PG_MAX_POOLS * PG_POOL_NAME_MAX];

		snprintf(err, sizeof(err),
		         "pool: %s: the default pool takes no requests on this "
		         "gateway (it is not the catch-all); name one of %s",
		         pv >= 0 ? "default" : "required",
		         pg_pool_names(gw, false, names, sizeof(names)));
		return pg_admin_reply_error(r, 400, err);
	}
	if (pg_etcd_enabled()) /* etcd is the source: the change goes there */
		return r->status = pg_etcd_admin_backend(
		           gw, addr, pool ? pg_pool_name(gw, (unsigned)pool) : NULL, true,
		           &r->body);
	id = pg_member_add_pool(gw, addr, (unsigned)pool, err, sizeof(err));
	return member_status(gw, id, 201, addr, err, r);
bad:
	pg_json_free(&js);
	return pg_admin_reply_error(r, 400, err);
}

int pg_admin_backend_delete(struct pg_gateway *gw, struct pg_str addr, struct pg_admin_reply *r)
{
	size_t n;
	char *a = pg_admin_url_decode(addr, false, &n), err[PG_HOSTPORT_STRLEN + 100];
	int id, rc;

	if (!a)
		return pg_admin_reply_error(r, 500, "out of memory");
	if (strlen(a) != n) {
		free(a);
		return pg_admin_reply_error(r, 400, "address contains a NUL character");
	}
	if (pg_etcd_enabled()) {
		r->status = pg_etcd_admin_backend(gw, a, NULL, false, &r->body);
		free(a);
		return r->status;
	}
	id = pg_member_remove(gw, a, err, sizeof(err));
	rc = member_status(gw, id, 202, a, err, r);
	free(a);
	return rc;
}
