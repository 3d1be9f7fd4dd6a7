// SPDX-License-Identifier: MIT
/*
 * The fleet thread and its NATS connection (fleet.h). libnats runs its own
 * threads: the connection's reader and flusher, and one delivery thread per
 * subscription, which calls on_load / on_cache below.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "members/members.h"
#include "fleet/fleet_internal.h"
#include "router/work.h"
#include "state/fleetq.h"
#include "router/load.h"
#include "router/route.h"
#include "sys/log.h"

static bool nats_up(struct pg_fleet *f)
{
	return f->nc && natsConnection_Status(f->nc) == NATS_CONN_STATUS_CONNECTED;
}

/* Store v into *p if it differs (a store only where it changed: the line
 * stays shared with the workers that read it). */
#define STORE_CHANGED(p, v)                                                                        \
	do {                                                                                       \
		if (__atomic_load_n((p), __ATOMIC_RELAXED) != (v))                                 \
			__atomic_store_n((p), (v), __ATOMIC_RELAXED);                              \
	} while (0)

/* The peers' load on every slot (peer_in_flight, peer_prefill_*) and
 * peer_gateways to sum / np (under mu). */
static void store_peers(struct pg_fleet *f, const struct pg_fleet_load *sum, const uint32_t *np)
{
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		struct pg_backend *b = &f->gw->maps.backends[id];

		STORE_CHANGED(&b->peer_in_flight, sum[id].in_flight);
		STORE_CHANGED(&b->peer_prefill_reqs, sum[id].prefill_reqs);
		STORE_CHANGED(&b->peer_prefill_tokens, sum[id].prefill_tokens);
		STORE_CHANGED(&b->peer_gateways, np[id]);
	}
}

/* The peer counts the current mode says (under mu). */
static void apply_mode(struct pg_fleet *f, uint64_t now)
{
	static struct pg_fleet_load sum[PG_MAX_BACKENDS]; /* under mu */
	uint32_t np[PG_MAX_BACKENDS] = {0};

	memset(sum, 0, sizeof(sum));

	if (f->dec.mode == PG_FLEET_NATS) {
		pg_fleet_peers_sum(&f->peers, f->epoch, sum, np);
	} else if (f->dec.mode == PG_FLEET_BACKEND) {
		for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
			const struct pg_backend *b = &f->gw->maps.backends[id];

			if (!f->epoch[id] ||
			    now >= __atomic_load_n(&b->metrics_until_ms, __ATOMIC_ACQUIRE))
				continue;
			sum[id].in_flight = pg_fleet_backend_peers(
			    __atomic_load_n(&b->running, __ATOMIC_RELAXED) +
			        __atomic_load_n(&b->waiting, __ATOMIC_RELAXED),
			    __atomic_load_n(&b->in_flight, __ATOMIC_RELAXED));
		}
	}
	store_peers(f, sum, np);
}

bool pg_fleet_msg_begin(struct pg_fleet *f, natsMsg *msg, enum pg_fleet_msg_type type,
                        struct pg_fleet_dec *d, struct pg_fleet_hdr *h)
{
	if (pg_fleet_dec_begin(d, natsMsg_GetData(msg), (size_t)natsMsg_GetDataLength(msg), h) ||
	    h->type != type) {
		COUNT(f, bad, 1);
		return false;
	}
	if (!strcmp(h->id, f->id))
		return false;
	COUNT(f, received[type], 1);
	return true;
}

void pg_fleet_on_load(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	/* under mu */
	static uint16_t ids[PG_MAX_BACKENDS];
	static uint32_t ep[PG_MAX_BACKENDS];
	static struct pg_fleet_load load[PG_MAX_BACKENDS];
	static struct pg_fleet_ages ages[PG_MAX_BACKENDS];
	struct pg_fleet *f = closure;
	struct pg_fleet_entry e;
	struct pg_fleet_hdr h;
	struct pg_fleet_dec d;
	enum pg_fleet_update r;
	uint64_t now_ns;
	size_t n = 0;

	(void)nc;
	(void)sub;
	if (!pg_fleet_msg_begin(f, msg, PG_FLEET_MSG_LOAD, &d, &h))
		goto out;
	pthread_mutex_lock(&f->mu);
	while (n < PG_MAX_BACKENDS && pg_fleet_dec_next(&d, PG_FLEET_MSG_LOAD, &e)) {
		const struct pg_fleet_addr *a = pg_fleet_addrmap_find(&f->amap, e.addr);

		if (!a)
			continue; /* not a member here (yet) */
		ids[n] = a->id;
		ep[n] = a->epoch;
		ages[n] = e.ages;
		load[n++] = e.load;
	}
	if (d.bad) {
		pthread_mutex_unlock(&f->mu);
		COUNT(f, bad, 1);
		goto out;
	}
	now_ns = pg_now_ns();
	r = pg_fleet_peers_update(&f->peers, &h, ids, ep, load, n, now_ns / 1000000);
	/* the engines' heads and first tokens this peer saw (work.h) */
	for (size_t i = 0; i < n && r <= PG_FLEET_NEW_PEER; i++) {
		struct pg_backend *b = &f->gw->maps.backends[ids[i]];

		if (__atomic_load_n(&b->epoch, __ATOMIC_RELAXED) == ep[i])
			pg_work_heard(b, now_ns, ages[i].head_us, ages[i].first_us);
	}
	if (r == PG_FLEET_FULL)
		COUNT(f, peers_full, 1);
	if (r == PG_FLEET_NEW_PEER)
		pg_info("fleet: peer %s joined (%u peers)", h.id, f->peers.n);
	__atomic_store_n(&f->npeers, (int)f->peers.n, __ATOMIC_RELAXED);
	if (r <= PG_FLEET_NEW_PEER && f->dec.mode == PG_FLEET_NATS)
		apply_mode(f, pg_now_ms());
	pthread_mutex_unlock(&f->mu);
out:
	natsMsg_Destroy(msg);
}

void pg_fleet_on_cache(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	struct pg_fleet *f = closure;
	struct pg_ca_index ix = pg_router_index(&f->gw->router);
	uint64_t chain[PG_CA_MAX_BLOCKS];
	struct pg_fleet_entry e;
	struct pg_fleet_hdr h;
	struct pg_fleet_dec d;
	unsigned ev = 0;

	(void)nc;
	(void)sub;
	if (!pg_fleet_msg_begin(f, msg, PG_FLEET_MSG_CACHE, &d, &h))
		goto out;
	pthread_mutex_lock(&f->mu);
	while (pg_fleet_dec_next(&d, PG_FLEET_MSG_CACHE, &e)) {
		const struct pg_fleet_addr *a = pg_fleet_addrmap_find(&f->amap, e.addr);
		uint16_t n = 0;

		/* a request of the fleet's, wherever it went: the index's clock
		 * counts it, so that a prefix's share of the requests is its share
		 * of the fleet's, as the peer's was (router/index.h) */
		if (e.flags & PG_FLEET_CACHE_REQUEST)
			pg_ca_tick(&ix);
		if (!a || !ix.capacity_blocks ||
		    __atomic_load_n(&f->gw->maps.backends[a->id].epoch, __ATOMIC_RELAXED) !=
		        a->epoch) {
			COUNT(f, cache_unknown, 1);
			continue;
		}
		/* A chain hash is never 0 (key.h): a 0 ends what can be used. */
		while (n < e.n && n < PG_CA_MAX_BLOCKS && (chain[n] = pg_fleet_hash(&e, n)))
			n++;
		ev += pg_ca_record(&ix, chain, n, a->id);
		COUNT(f, cache_applied, 1);
	}
	pthread_mutex_unlock(&f->mu);
	if (d.bad)
		COUNT(f, bad, 1);
	if (ev)
		__atomic_fetch_add(&f->gw->router.ca_evictions, ev, __ATOMIC_RELAXED);
out:
	natsMsg_Destroy(msg);
}

void pg_fleet_on_fit(natsConnection *nc, natsSubscription *sub, natsMsg *msg, void *closure)
{
	struct pg_fleet *f = closure;
	struct pg_fleet_entry e;
	struct pg_fleet_hdr h;
	struct pg_fleet_dec d;

	(void)nc;
	(void)sub;
	if (!pg_fleet_msg_begin(f, msg, PG_FLEET_MSG_FIT, &d, &h))
		goto out;
	pthread_mutex_lock(&f->mu);
	while (pg_fleet_dec_next(&d, PG_FLEET_MSG_FIT, &e)) {
		const struct pg_fleet_addr *a = pg_fleet_addrmap_find(&f->amap, e.addr);

		if (!a) {
			COUNT(f, fit_unknown, 1);
			continue;
		}
		/* a fit of a slot that got another member is ignored there */
		pg_load_observe(&f->gw->router, a->id, a->epoch, &e.obs, pg_now_ns());
		COUNT(f, fit_applied, 1);
	}
	pthread_mutex_unlock(&f->mu);
	if (d.bad)
		COUNT(f, bad, 1);
out:
	natsMsg_Destroy(msg);
}

void pg_fleet_header(struct pg_fleet *f, uint8_t type, struct pg_fleet_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	memcpy(h->id, f->id, sizeof(h->id));
	h->boot = f->boot;
	h->seq = ++f->seq;
	h->wall_ms = pg_wall_ms();
	h->interval_ms = f->gw->cfg->fleet_interval_ms;
}

void pg_fleet_publish(struct pg_fleet *f, const char *subj, const struct pg_fleet_enc *e,
                      uint8_t type)
{
	if (natsConnection_Publish(f->nc, subj, e->p, (int)e->len) == NATS_OK)
		COUNT(f, sent[type], 1);
}

/* This gateway's vector, when its counts changed or an interval passed
 * (the ages ride along: they change all the time, and the counts change
 * with every head and first token). */
static void publish_load(struct pg_fleet *f, uint64_t now)
{
	const uint64_t now_ns = pg_now_ns();
	const struct pg_backend *bt = f->gw->maps.backends;
	unsigned max = pg_router_max_id(&f->gw->router);
	bool changed = now - f->last_pub_ms >= f->gw->cfg->fleet_interval_ms;
	struct pg_fleet_load *cur = f->cur_pub;
	struct pg_fleet_enc e;
	struct pg_fleet_hdr h;
	char name[PG_FLEET_ADDR_MAX + 1];

	memset(cur, 0, sizeof(f->cur_pub));
	for (unsigned id = 1; id <= max; id++) {
		if (__atomic_load_n(&bt[id].flags, __ATOMIC_RELAXED) & PG_BACKEND_ACTIVE)
			cur[id] = (struct pg_fleet_load){
			    .in_flight = __atomic_load_n(&bt[id].in_flight, __ATOMIC_RELAXED),
			    .prefill_reqs = __atomic_load_n(&bt[id].prefill_reqs, __ATOMIC_RELAXED),
			    .prefill_tokens =
			        __atomic_load_n(&bt[id].prefill_tokens, __ATOMIC_RELAXED),
			};
		changed |= memcmp(&cur[id], &f->last_pub[id], sizeof(cur[id])) != 0;
	}
	for (unsigned id = max + 1; id < PG_MAX_BACKENDS && !changed; id++)
		changed = f->last_pub[id].in_flight || f->last_pub[id].prefill_reqs;
	if (!changed)
		return;
	pg_fleet_header(f, PG_FLEET_MSG_LOAD, &h);
	if (pg_fleet_enc_begin(&e, f->load_buf, sizeof(f->load_buf), &h))
		return;
	for (unsigned id = 1; id <= max; id++) {
		struct pg_fleet_ages ages;

		if (!(__atomic_load_n(&bt[id].flags, __ATOMIC_RELAXED) & PG_BACKEND_ACTIVE))
			continue;
		pg_work_ages(&bt[id], now_ns, &ages.head_us, &ages.first_us);
		pg_fleet_enc_load(&e, pg_backend_name(&bt[id], name, sizeof(name)), &cur[id],
		                  &ages);
	}
	pg_fleet_publish(f, f->subj_load, &e, PG_FLEET_MSG_LOAD);
	memcpy(f->last_pub, cur, sizeof(f->last_pub));
	f->last_pub_ms = now;
}

/* pg_fleetq_take's callback: one decision into the batch. */
static void batch_one(uint16_t id, uint32_t epoch, const uint64_t *chain, uint16_t n, bool request,
                      void *arg)
{
	struct pg_fleet *f = arg;
	const struct pg_backend *b = &f->gw->maps.backends[id];
	char name[PG_FLEET_ADDR_MAX + 1];

	if (!f->cenc.p || __atomic_load_n(&b->epoch, __ATOMIC_RELAXED) != epoch ||
	    !pg_fleet_enc_cache(&f->cenc, pg_backend_name(b, name, sizeof(name)),
	                        request ? PG_FLEET_CACHE_REQUEST : 0, chain, n)) {
		COUNT(f, cache_dropped, 1);
		return;
	}
	COUNT(f, cache_published, 1);
}

/* pg_fleetq_take's callback: one observation into the batch. */
static void batch_fit(uint16_t id, uint32_t epoch, const uint64_t *w, uint16_t n, bool request,
                      void *arg)
{
	struct pg_fleet *f = arg;
	const struct pg_backend *b = &f->gw->maps.backends[id];
	char name[PG_FLEET_ADDR_MAX + 1];
	struct pg_fit_obs o;

	(void)request;
	if (n != 2)
		return;
	pg_fit_obs_unpack(w, &o);
	if (!f->fenc.p || __atomic_load_n(&b->epoch, __ATOMIC_RELAXED) != epoch ||
	    !pg_fleet_enc_fit(&f->fenc, pg_backend_name(b, name, sizeof(name)), &o)) {
		COUNT(f, fit_dropped, 1);
		return;
	}
	COUNT(f, fit_published, 1);
}

/* Every worker's queued first tokens learned from: one batch. */
static void publish_fit(struct pg_fleet *f, bool up)
{
	struct pg_fleet_hdr h;

	memset(&f->fenc, 0, sizeof(f->fenc));
	if (up) {
		pg_fleet_header(f, PG_FLEET_MSG_FIT, &h);
		if (pg_fleet_enc_begin(&f->fenc, f->fit_buf, sizeof(f->fit_buf), &h))
			memset(&f->fenc, 0, sizeof(f->fenc));
	}
	for (unsigned w = 0; w < f->gw->nworkers; w++)
		pg_fleetq_take(f->gw->fleetq_obs, w, batch_fit, f);
	if (f->fenc.p && f->fenc.count)
		pg_fleet_publish(f, f->subj_fit, &f->fenc, PG_FLEET_MSG_FIT);
}

/* Every worker's queued decisions: one batch (or, without NATS, dropped). */
static void publish_cache(struct pg_fleet *f, bool up)
{
	struct pg_fleet_hdr h;

	memset(&f->cenc, 0, sizeof(f->cenc));
	if (up) {
		pg_fleet_header(f, PG_FLEET_MSG_CACHE, &h);
		if (pg_fleet_enc_begin(&f->cenc, f->cache_buf, sizeof(f->cache_buf), &h))
			memset(&f->cenc, 0, sizeof(f->cenc));
	}
	for (unsigned w = 0; w < f->gw->nworkers; w++)
		pg_fleetq_take(f->gw->fleetq, w, batch_one, f);
	if (f->cenc.p && f->cenc.count)
		pg_fleet_publish(f, f->subj_cache, &f->cenc, PG_FLEET_MSG_CACHE);
}

static void rebuild_map(struct pg_fleet *f)
{
	const struct pg_backend *bt = f->gw->maps.backends;
	char name[PG_FLEET_ADDR_MAX + 1];

	pg_fleet_addrmap_reset(&f->amap);
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		f->epoch[id] = 0;
		if (!(__atomic_load_n(&bt[id].flags, __ATOMIC_ACQUIRE) & PG_BACKEND_ACTIVE))
			continue;
		f->epoch[id] = __atomic_load_n(&bt[id].epoch, __ATOMIC_RELAXED);
		pg_fleet_addrmap_add(&f->amap, pg_backend_name(&bt[id], name, sizeof(name)),
		                     (uint16_t)id, f->epoch[id]);
	}
	pg_fleet_addrmap_seal(&f->amap);
}

/* Every usable member has fresh scraped load (and there is one). */
static bool backends_reporting(const struct pg_gateway *gw, uint64_t now)
{
	unsigned max = pg_router_max_id(&gw->router), usable = 0;

	/* (a reload may change it, never to or from 0: control_reload.c) */
	if (!__atomic_load_n(&gw->cfg->metrics_scrape_ms, __ATOMIC_RELAXED))
		return false;
	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];

		if (!pg_backend_usable(b, now))
			continue;
		if (now >= __atomic_load_n(&b->metrics_until_ms, __ATOMIC_ACQUIRE))
			return false;
		usable++;
	}
	return usable > 0;
}

static const char *why(const struct pg_fleet_inputs *in)
{
	if (in->nats_configured && in->nats_connected)
		return "NATS connected";
	if (in->nats_configured)
		return in->backends_reporting
		           ? "no NATS connection; the backends report their load"
		           : "no NATS connection; the backends do not all report "
		             "their load";
	return in->backends_reporting ? "the backends report their load"
	                              : "the backends do not all report their load";
}

/* One look (under mu): membership, silent peers, the mode, peer counts. */
static void tick(struct pg_fleet *f, uint64_t now, bool up)
{
	struct pg_fleet_inputs in = {
	    .nats_configured = f->gw->cfg->nats_url != NULL,
	    .nats_connected = up,
	    .fleet_size = f->gw->cfg->fleet_size,
	};
	struct pg_fleet_decision d;
	char gone[PG_FLEET_ID_MAX + 1];
	unsigned k;

	if (now - f->last_map_ms >= MAP_REFRESH_MS) {
		rebuild_map(f);
		f->last_map_ms = now;
	}
	k = pg_fleet_peers_expire(&f->peers, now, gone);
	pg_fleet_flow_peers(f);
	if (k) {
		COUNT(f, peers_dropped, k);
		pg_info("fleet: peer %s%s silent for %u intervals: dropped (%u peers)", gone,
		        k > 1 ? " and others" : "", PG_FLEET_PEER_TTL_INTERVALS, f->peers.n);
	}
	if (up)
		f->peers_seen = f->peers.n;
	else
		pg_fleet_peers_clear(&f->peers);
	pg_fleet_flow_peers(f);
	__atomic_store_n(&f->npeers, (int)f->peers.n, __ATOMIC_RELAXED);
	in.peers_seen = f->peers_seen;
	in.backends_reporting = !up && backends_reporting(f->gw, now);
	d = pg_fleet_decide(&in);
	if (d.mode != f->dec.mode || d.share != f->dec.share) {
		char share[48] = "";

		if (d.mode == PG_FLEET_SHARE)
			snprintf(share, sizeof(share), " (ConcurrencyThreshold / %u per gateway)",
			         d.share);
		pg_info("fleet: load mode %s -> %s%s: %s", pg_fleet_mode_name(f->dec.mode),
		        pg_fleet_mode_name(d.mode), share, why(&in));
		f->dec = d;
		COUNT(f, mode_changes, 1);
		__atomic_store_n(&f->mode, (int)d.mode, __ATOMIC_RELAXED);
		__atomic_store_n(&f->gw->router.fleet_share, d.mode == PG_FLEET_SHARE ? d.share : 1,
		                 __ATOMIC_RELAXED);
	}
	apply_mode(f, now);
}

void *pg_fleet_main(void *arg)
{
	struct pg_fleet *f = arg;
	const struct timespec poll = {0, PG_FLEET_POLL_MS * 1000000L};

	while (!__atomic_load_n(&f->gw->stop, __ATOMIC_RELAXED)) {
		uint64_t now = pg_now_ms();
		bool up = nats_up(f);

		if (up != (bool)__atomic_load_n(&f->connected, __ATOMIC_RELAXED)) {
			__atomic_store_n(&f->connected, up, __ATOMIC_RELAXED);
			if (up)
				pg_info("fleet: NATS %s connected", f->gw->cfg->nats_url);
			else
				pg_warn("fleet: NATS %s connection lost", f->gw->cfg->nats_url);
		}
		pthread_mutex_lock(&f->mu);
		tick(f, now, up);
		pthread_mutex_unlock(&f->mu);
		if (up)
			publish_load(f, now);
		if (f->gw->fleetq && now - f->last_cache_ms >= PG_FLEET_CACHE_GAP_MS) {
			publish_cache(f, up);
			if (f->gw->fleetq_obs)
				publish_fit(f, up);
			if (f->gw->flow && up)
				pg_fleet_publish_flow(f);
			if (f->gw->quotas && up)
				pg_fleet_publish_quota(f);
			f->last_cache_ms = now;
		}
		nanosleep(&poll, NULL);
	}
	return NULL;
}
