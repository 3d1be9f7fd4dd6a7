// SPDX-License-Identifier: MIT
/*
 * Membership of the backend table, ring rebuilds, the routing config in
 * the shared state and the periodic drain / DOWN expiry (members.h). Runs
 * on the control thread, or before it starts; the state it keeps per
 * member lives in pg_ctl (members_internal.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sys/journal.h"
#include "config/config.h"
#include "members/members.h"
#include "members/members_internal.h"
#include "sys/log.h"
#include "lib/ring.h"
#include "router/load.h"
#include "state/pools.h"
#include "tls/tls.h"

static uint16_t flags_load(const struct pg_backend *b)
{
	return __atomic_load_n(&b->flags, __ATOMIC_ACQUIRE);
}

/* The one definition of the membership's state (members_internal.h). */
struct pg_ctl_state pg_ctl;

void pg_members_reset(struct pg_gateway *gw)
{
	memset(pg_ctl.origin, 0, sizeof(pg_ctl.origin));
	memset(pg_ctl.drain_since, 0, sizeof(pg_ctl.drain_since));
	memset(pg_ctl.name_of, 0, sizeof(pg_ctl.name_of));
	for (int k = 0; k < PG_MAX_NAMES; k++) {
		free(pg_ctl.names[k].addrs);
		pg_ctl.names[k] = (struct pg_name){.gen = pg_ctl.names[k].gen + 1};
	}
	pg_ctl.ring_last.valid = false; /* a new gateway: its first ring is built whole */
	pg_ctl.gw = gw;
}

/* Member (ACTIVE slot, draining or not) with this address and scheme
 * (tls: 1 https://, 0 plain, -1 either), or 0. */
int pg_ctl_find_member(const struct pg_gateway *gw, const union pg_sockaddr *sa, int tls)
{
	union pg_sockaddr a;

	for (int id = 1; id < PG_MAX_BACKENDS; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];
		uint16_t f = flags_load(b);

		if (!(f & PG_BACKEND_ACTIVE) || (tls >= 0 && !(f & PG_BACKEND_TLS) != !tls))
			continue;
		pg_backend_addr_get(b, &a);
		if (pg_sockaddr_equal(&a, sa))
			return id;
	}
	return 0;
}

int pg_ctl_parse_addr(const char *addr, struct pg_hostport *hp, char *err, size_t errlen)
{
	char e[PG_HOSTPORT_STRLEN + 100];

	if (pg_hostport_parse(addr, hp, false, e, sizeof(e))) {
		snprintf(err, errlen, "address %s", e);
		return -EINVAL;
	}
	return 0;
}

/*
 * Make sa a member with origin bit(s) origin; no ring rebuild. dup_ok: an
 * active member with that address just gains the origin (file sync, start
 * up); otherwise it is -EEXIST. *changed is set when the ring must change.
 */
int pg_ctl_add_one(struct pg_gateway *gw, const union pg_sockaddr *sa, const struct pg_hostport *hp,
                   unsigned pool, uint8_t origin, bool dup_ok, bool *changed, char *err,
                   size_t errlen)
{
	char name[PG_ADDR_STRLEN], a[PG_ADDR_STRLEN];
	struct pg_backend *b;
	int id = pg_ctl_find_member(gw, sa, hp->tls), other;

	snprintf(name, sizeof(name), "%s%s", hp->tls ? PG_TLS_SCHEME : "", pg_addr_format(sa, a));
	/* the same address spoken to the other way: a second member only
	 * where a source changes its scheme (the old one drains) */
	if (!id && !dup_ok && (other = pg_ctl_find_member(gw, sa, !hp->tls)) &&
	    !(flags_load(&gw->maps.backends[other]) & PG_BACKEND_DRAINING)) {
		snprintf(err, errlen, "%s is already a member as %s (id %d)", name,
		         pg_backend_name(&gw->maps.backends[other], a, sizeof(a)), other);
		return -EEXIST;
	}
	if (id) {
		b = &gw->maps.backends[id];
		if (!(flags_load(b) & PG_BACKEND_DRAINING)) {
			if (b->pool != pool) {
				snprintf(err, errlen, "%s is already a member of pool %s (id %d)",
				         name, pg_pool_name(gw, b->pool), id);
				return -EEXIST;
			}
			if (!dup_ok) {
				snprintf(err, errlen, "%s is already a member (id %d)", name, id);
				return -EEXIST;
			}
			pg_ctl.origin[id] |= origin;
			return id;
		}
		pg_pool_member_set(gw, (unsigned)id, pool, true);
		pg_tls_backend_name_set(gw, (unsigned)id, hp->name[0] ? hp->name : NULL);
		__atomic_fetch_and(&b->flags, (uint16_t)~PG_BACKEND_DRAINING, __ATOMIC_RELEASE);
		pg_ctl.origin[id] = origin;
		pg_ctl.drain_since[id] = 0;
		*changed = true;
		pg_info("backend %s re-activated (id %d, was draining)", name, id);
		return id;
	}
	for (id = 1; id < PG_MAX_BACKENDS; id++)
		if (!flags_load(&gw->maps.backends[id]))
			break;
	if (id == PG_MAX_BACKENDS) {
		snprintf(err, errlen, "cannot add %s: the backend table is full (%d members)", name,
		         PG_MAX_BACKENDS - 1);
		return -ENOSPC;
	}
	b = &gw->maps.backends[id];
	/* The slot is free, so no worker looks at it: plain stores for the
	 * fields only we write, atomics for the counters workers add to (a
	 * straggler from the slot's previous member could still be there; its
	 * in_flight is left alone so its release balances). Publishing ACTIVE
	 * last, with release order, makes the rest visible first. */
	pg_backend_addr_set(b, sa);
	b->pool = pool;
	b->epoch++;
	/* Nothing cache_aware remembers of the slot's previous member holds. */
	__atomic_fetch_add(
	    &b->ca_clock,
	    (uint64_t)__atomic_load_n(&gw->maps.state->ca_capacity_blocks, __ATOMIC_RELAXED) + 1,
	    __ATOMIC_RELAXED);
	__atomic_store_n(&b->down_until_ms, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->failures, 0, __ATOMIC_RELAXED);
	for (int d = 0; d < PG_DEC_MAX; d++)
		__atomic_store_n(&b->requests[d], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->recent, 0, __ATOMIC_RELAXED);
	/* Nor its speed or cache size: this one shows its own (router/load.h);
	 * its queue of work is left alone, as in_flight. */
	__atomic_store_n(&b->fit_rate, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->fit_overhead_us, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->fit_decode_us, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->fit_obs, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->work_avg, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->ca_capacity_blocks, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->explore_after_ms, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->bound_rate, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->bound_overhead_us, 0, __ATOMIC_RELAXED);
	/* The previous member's scraped numbers are not this one's. */
	__atomic_store_n(&b->metrics_until_ms, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->scraped_ms, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->waiting, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->running, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->kv_hit_tokens, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->kv_query_tokens, 0, __ATOMIC_RELAXED);
	pg_tls_backend_name_set(gw, (unsigned)id, hp->name[0] ? hp->name : NULL);
	pg_router_activate(&gw->router, (unsigned)id);
	__atomic_store_n(&b->flags, PG_BACKEND_ACTIVE | (hp->tls ? PG_BACKEND_TLS : 0),
	                 __ATOMIC_RELEASE);
	pg_pool_member_set(gw, (unsigned)id, pool, true);
	/* it goes by its pool's speed from its first request, not the defaults
	 * until the next tick (router/load.h) */
	pg_load_share_speeds(&gw->router);
	pg_ctl.origin[id] = origin;
	pg_ctl.drain_since[id] = 0;
	*changed = true;
	if (gw->pools)
		pg_info("backend %s added to pool %s (id %d)", name, pg_pool_name(gw, pool), id);
	else
		pg_info("backend %s added (id %d)", name, id);
	return id;
}

void pg_ctl_drain(struct pg_gateway *gw, int id)
{
	char name[PG_ADDR_STRLEN];
	struct pg_backend *b = &gw->maps.backends[id];

	__atomic_fetch_or(&b->flags, PG_BACKEND_DRAINING, __ATOMIC_RELEASE);
	pg_pool_member_set(gw, (unsigned)id, b->pool, false);
	pg_ctl.origin[id] = 0;
	pg_ctl.name_of[id] = 0;
	pg_ctl.drain_since[id] = pg_now_ms();
	pg_info("backend %s draining (id %d, %d in flight)", pg_backend_name(b, name, sizeof(name)),
	        id, __atomic_load_n(&b->in_flight, __ATOMIC_RELAXED));
}

/* This thread's CPU time, ns: a rebuild's own cost, whatever else runs. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whether last was built from exactly m[0..n) (then pool p's ring stands). */
static bool same_members(const struct pg_ring_last *last, const struct pg_ring_member *m, size_t n)
{
	if (!last->valid || last->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (last->m[i].id != m[i].id || last->m[i].seed != m[i].seed)
			return false;
	return true;
}

/* Rebuild pool's ring from its members and publish it. With pools, a pool
 * whose members did not change keeps its ring (and generation). */
static void rebuild_pool(struct pg_gateway *gw, unsigned pool)
{
	struct pg_ring_member *m = pg_ctl.ring_members;
	struct pg_ring_last *last = pool ? gw->pools->last[pool] : &pg_ctl.ring_last;
	static uint64_t seed_of_id[PG_MAX_BACKENDS];
	struct pg_state *st = &gw->maps.state[pool];
	const struct pg_ring *live = pg_maps_pool_live_ring(&gw->maps, pool);
	const uint64_t t0 = pg_now_ns(), c0 = thread_cpu_ns();
	struct pg_ring *r;
	char name[PG_ADDR_STRLEN], label[PG_POOL_NAME_MAX + 8] = "";
	uint64_t ppm, wall, cpu;
	size_t n = 0;

	for (int id = 1; id < PG_MAX_BACKENDS; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];
		uint16_t f = flags_load(b);

		if (!(f & PG_BACKEND_ACTIVE) || (f & PG_BACKEND_DRAINING) || b->pool != pool)
			continue;
		pg_backend_name(b, name, sizeof(name));
		m[n].id = (uint16_t)id;
		m[n].seed = pg_ring_seed(name, strlen(name));
		n++;
	}
	if (gw->pools && st->ring_generation && same_members(last, m, n))
		return;
	memset(seed_of_id, 0, sizeof(seed_of_id));
	for (size_t i = 0; i < n; i++)
		seed_of_id[m[i].id] = m[i].seed;
	/* live is the other copy: it stays intact while the spare is built. */
	r = pg_maps_pool_ring_begin(&gw->maps, pool);
	pg_ring_update(r, last, m, n);
	ppm = pg_ring_moved_ppm(live, r);
	__atomic_store_n(&st->remapped_ppm, ppm, __ATOMIC_RELAXED);
	__atomic_store_n(&st->nbackends, (uint32_t)n, __ATOMIC_RELAXED);
	__atomic_store_n(&gw->pool_digest[pool], pg_ring_digest(r, seed_of_id), __ATOMIC_RELAXED);
	pg_maps_pool_ring_publish(&gw->maps, pool, r);
	wall = pg_now_ns() - t0;
	cpu = thread_cpu_ns() - c0;
	__atomic_store_n(&gw->ring_rebuild_ns, wall, __ATOMIC_RELAXED);
	__atomic_fetch_add(&gw->ring_rebuild_total_ns, wall, __ATOMIC_RELAXED);
	if (gw->pools)
		snprintf(label, sizeof(label), "pool %s ", pg_pool_name(gw, pool));
	pg_info("%sring generation %llu: %zu backend%s, %.1f%% of keys remapped, rebuilt in %.1f "
	        "ms (%.1f ms CPU), digest %016llx",
	        label, (unsigned long long)st->ring_generation, n, n == 1 ? "" : "s",
	        (double)ppm / 10000.0, (double)wall / 1e6, (double)cpu / 1e6,
	        (unsigned long long)gw->pool_digest[pool]);
}

void pg_control_rebuild_ring(struct pg_gateway *gw)
{
	const unsigned npools = gw->pools ? gw->maps.npools : 1;
	uint64_t digest = 0;

	for (unsigned p = 0; p < npools; p++)
		rebuild_pool(gw, p);
	/* The gateway's digest (P/gateways/<id>, metrics): its one ring's, or
	 * every pool's folded in pool order. */
	for (unsigned p = 0; p < npools; p++)
		digest = npools == 1 ? gw->pool_digest[0]
		                     : (digest ^ gw->pool_digest[p]) * 0x9e3779b97f4a7c15ull;
	/* With pools, the folded digest is a number no pool's line shows: log
	 * it, so that the metric's and the fleet's digest can be found. */
	if (npools > 1 && digest != gw->ring_digest)
		pg_info("ring digest %016llx (the %u pools' digests folded: what "
		        "prefixgate_ring_digest_info{digest} and prefixgatectl fleet show)",
		        (unsigned long long)digest, npools);
	__atomic_store_n(&gw->ring_digest, digest, __ATOMIC_RELAXED);
	pg_journal_members(gw->journal, gw);
}

unsigned pg_members_count(const struct pg_gateway *gw)
{
	unsigned n = 0;

	for (unsigned p = 0; p < (gw->pools ? gw->maps.npools : 1); p++)
		n += __atomic_load_n(&gw->maps.state[p].nbackends, __ATOMIC_RELAXED);
	return n;
}

int pg_member_add(struct pg_gateway *gw, const char *addr, char *err, size_t errlen)
{
	return pg_member_add_pool(gw, addr, 0, err, errlen);
}

int pg_member_add_pool(struct pg_gateway *gw, const char *addr, unsigned pool, char *err,
                       size_t errlen)
{
	struct pg_hostport hp;
	bool changed = false;
	int id = pg_ctl_parse_addr(addr, &hp, err, errlen);

	if (id)
		return id;
	if (hp.name[0]) {
		id = pg_ctl_name_add(gw, &hp, pool, PG_ORIGIN_STATIC, false, err, errlen);
		return id < 0 ? id : 0;
	}
	id =
	    pg_ctl_add_one(gw, &hp.addr, &hp, pool, PG_ORIGIN_STATIC, false, &changed, err, errlen);
	if (changed)
		pg_control_rebuild_ring(gw);
	return id;
}

int pg_member_remove(struct pg_gateway *gw, const char *addr, char *err, size_t errlen)
{
	struct pg_hostport hp;
	char name[PG_HOSTPORT_STRLEN];
	bool changed = false;
	int id = pg_ctl_parse_addr(addr, &hp, err, errlen);

	if (id)
		return id;
	if (hp.name[0]) {
		if ((id = pg_ctl_name_find(&hp)) < 0) {
			snprintf(err, errlen, "%s is not a backend", pg_hostport_format(&hp, name));
			return -ENOENT;
		}
		pg_ctl_name_drop(gw, id, PG_ORIGIN_STATIC | PG_ORIGIN_FILE | PG_ORIGIN_CONF,
		                 &changed);
		if (changed)
			pg_control_rebuild_ring(gw);
		return 0;
	}
	/* without a scheme: the member at that address, either way */
	id = pg_ctl_find_member(gw, &hp.addr, hp.tls ? 1 : -1);
	if (!id) {
		snprintf(err, errlen, "%s is not a member", pg_hostport_format(&hp, name));
		return -ENOENT;
	}
	if (!(flags_load(&gw->maps.backends[id]) & PG_BACKEND_DRAINING)) {
		pg_ctl_drain(gw, id);
		pg_control_rebuild_ring(gw);
	}
	return id;
}

/* pg_members_sync without the ring rebuild, for the members of one origin
 * (the backends file's, or the configuration file's): *changed says if
 * one is due. */
int pg_ctl_sync(struct pg_gateway *gw, char *const *list, size_t n, uint8_t origin, bool *changed,
                char *err, size_t errlen)
{
	static bool listed[PG_MAX_BACKENDS], listed_name[PG_MAX_NAMES];
	struct pg_hostport hp;
	int id, count = 0, rc = 0;

	memset(listed, 0, sizeof(listed));
	memset(listed_name, 0, sizeof(listed_name));
	for (size_t i = 0; i < n && rc >= 0; i++) {
		const char *sp = strchr(list[i], ' ');
		char addr[PG_HOSTPORT_STRLEN + 8];
		int pool = 0;

		/* "HOST:PORT pool=NAME" (pg_backends_parse) */
		if (sp && !strncmp(sp, " pool=", 6) &&
		    (pool = pg_pool_lookup(gw, sp + 6, strlen(sp + 6))) < 0) {
			snprintf(err, errlen, "%s: no such pool (--pool)", list[i]);
			rc = -EINVAL;
			break;
		}
		snprintf(addr, sizeof(addr), "%.*s",
		         (int)(sp ? (size_t)(sp - list[i]) : strlen(list[i])), list[i]);
		if ((rc = pg_ctl_parse_addr(addr, &hp, err, errlen)))
			break;
		if (hp.name[0]) {
			id = pg_ctl_name_find(&hp);
			if (id < 0 || !(pg_ctl.names[id].origin & origin))
				count++;
			rc = pg_ctl_name_add(gw, &hp, (unsigned)pool, origin, true, err, errlen);
			if (rc >= 0)
				listed_name[rc] = true;
			continue;
		}
		id = pg_ctl_find_member(gw, &hp.addr, hp.tls);
		/* The file moved a member of its own to another pool: it drains
		 * and comes back there (in the same slot). */
		if (id && gw->maps.backends[id].pool != (unsigned)pool &&
		    pg_ctl.origin[id] == origin &&
		    !(flags_load(&gw->maps.backends[id]) & PG_BACKEND_DRAINING)) {
			pg_ctl_drain(gw, id);
			*changed = true;
		}
		if (!id || (flags_load(&gw->maps.backends[id]) & PG_BACKEND_DRAINING))
			count++;
		rc = pg_ctl_add_one(gw, &hp.addr, &hp, (unsigned)pool, origin, true, changed, err,
		                    errlen);
		if (rc > 0)
			listed[rc] = true;
	}
	if (rc >= 0) {
		for (int k = 0; k < PG_MAX_NAMES; k++) {
			if (listed_name[k] || !(pg_ctl.names[k].origin & origin))
				continue;
			pg_ctl_name_drop(gw, k, origin, changed);
			count++;
		}
		for (id = 1; id < PG_MAX_BACKENDS; id++) {
			uint16_t f = flags_load(&gw->maps.backends[id]);

			if (listed[id] || !(pg_ctl.origin[id] & origin) ||
			    !(f & PG_BACKEND_ACTIVE) || (f & PG_BACKEND_DRAINING))
				continue;
			pg_ctl.origin[id] &= (uint8_t)~origin;
			if (!pg_ctl.origin[id]) {
				pg_ctl_drain(gw, id);
				*changed = true;
				count++;
			}
		}
	}
	return rc < 0 ? -1 : count;
}

int pg_members_sync(struct pg_gateway *gw, char *const *list, size_t n, char *err, size_t errlen)
{
	bool changed = false;
	int rc = pg_ctl_sync(gw, list, n, PG_ORIGIN_FILE, &changed, err, errlen);

	/* Even after an error, what was added is in the table: publish it. */
	if (changed)
		pg_control_rebuild_ring(gw);
	return rc;
}

void pg_control_tick(struct pg_gateway *gw, uint64_t now_ms)
{
	char name[PG_ADDR_STRLEN];

	pg_journal_lock(gw->journal);
	pg_router_tick(&gw->router, now_ms);
	pg_journal_event(gw->journal, PG_JR_TICK, 0, now_ms);
	pg_journal_unlock(gw->journal);
	pg_journal_flush(gw->journal);

	for (int id = 1; id <= (int)pg_router_hwm(&gw->router); id++) {
		struct pg_backend *b = &gw->maps.backends[id];
		uint16_t f = flags_load(b);

		if (!(f & PG_BACKEND_ACTIVE))
			continue;
		if (f & PG_BACKEND_DRAINING) {
			if (__atomic_load_n(&b->in_flight, __ATOMIC_ACQUIRE) > 0 ||
			    now_ms < pg_ctl.drain_since[id] + PG_DRAIN_GRACE_MS)
				continue;
			pg_info("backend %s removed (id %d, drained)",
			        pg_backend_name(b, name, sizeof(name)), id);
			__atomic_store_n(&b->flags, 0, __ATOMIC_RELEASE);
			memset(b->addr, 0, sizeof(b->addr));
			b->family = 0;
			b->port = 0;
			pg_ctl.origin[id] = 0;
			pg_ctl.name_of[id] = 0;
			pg_ctl.drain_since[id] = 0;
		} else if ((f & PG_BACKEND_DOWN) &&
		           now_ms >= __atomic_load_n(&b->down_until_ms, __ATOMIC_ACQUIRE)) {
			__atomic_fetch_and(&b->flags, (uint16_t)~PG_BACKEND_DOWN, __ATOMIC_ACQ_REL);
			/* A worker may have marked it down again meanwhile. */
			if (__atomic_load_n(&b->down_until_ms, __ATOMIC_ACQUIRE) > now_ms) {
				__atomic_fetch_or(&b->flags, PG_BACKEND_DOWN, __ATOMIC_RELEASE);
				continue;
			}
			pg_info("backend %s back (id %d)", pg_backend_name(b, name, sizeof(name)),
			        id);
		}
	}
}

void pg_control_set_routing(struct pg_gateway *gw, const struct pg_route_cfg *rc, const char *why)
{
	pg_control_set_routing_pool(gw, 0, rc, why);
}

/* The RoutingConfig extensions of rc a log line shows. */
static void extensions(char *buf, size_t len, const struct pg_route_cfg *rc, bool ca, bool flow)
{
	int n = 0;

	buf[0] = 0;
	if (ca)
		n = snprintf(buf, len, " NewConversationChoices=%u", rc->new_choices);
	if (flow && n >= 0 && (size_t)n < len) {
		char q[16];

		snprintf(buf + n, len - (size_t)n, " FlowControl InstanceQueueMs=%s DeadlineMs=%u",
		         pg_flow_queue_json(rc->flow_queue_ms, q, sizeof(q)), rc->flow_deadline_ms);
	}
}

void pg_control_set_routing_pool(struct pg_gateway *gw, unsigned pool,
                                 const struct pg_route_cfg *rc, const char *why)
{
	struct pg_state *st = &gw->maps.state[pool];
	struct pg_route_cfg old;
	char was[128], now[128], label[PG_POOL_NAME_MAX + 8] = "";
	bool ca, flow;

	pg_router_cfg(&gw->router, pool, &old);
	if (gw->pools)
		snprintf(label, sizeof(label), " of pool %s", pg_pool_name(gw, pool));
	ca = old.strategy == PG_STRATEGY_CACHE_AWARE || rc->strategy == PG_STRATEGY_CACHE_AWARE;
	flow = old.flow_queue_ms || rc->flow_queue_ms;
	__atomic_store_n(&st->strategy, (uint32_t)rc->strategy, __ATOMIC_RELAXED);
	__atomic_store_n(&st->prefix_length, rc->prefix_length, __ATOMIC_RELAXED);
	__atomic_store_n(&st->concurrency_threshold, rc->concurrency_threshold, __ATOMIC_RELAXED);
	__atomic_store_n(&st->ca_choices, rc->new_choices, __ATOMIC_RELAXED);
	__atomic_store_n(&st->flow_queue_ms, rc->flow_queue_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&st->flow_deadline_ms, rc->flow_deadline_ms, __ATOMIC_RELAXED);
	/* CacheAwareConfig only where cache_aware is on either side, and
	 * FlowControlConfig where flow control is. */
	extensions(was, sizeof(was), &old, ca, flow);
	extensions(now, sizeof(now), rc, ca, flow);
	pg_info("routing config%s (%s): %s PrefixLength=%u ConcurrencyThreshold=%u%s -> "
	        "%s PrefixLength=%u ConcurrencyThreshold=%u%s",
	        label, why, pg_strategy_name(old.strategy), old.prefix_length,
	        old.concurrency_threshold, was, pg_strategy_name(rc->strategy), rc->prefix_length,
	        rc->concurrency_threshold, now);
}
