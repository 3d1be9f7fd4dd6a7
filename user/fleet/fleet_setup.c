// SPDX-License-Identifier: MIT
/* Start, stop and the metrics of the fleet (fleet.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "members/members.h"
#include "fleet/fleet_internal.h"
#include "state/fleetq.h"
#include "sys/log.h"

/* libnats reconnects every this often while NATS is away, forever. */
#define RECONNECT_WAIT_MS 250
/* A server that stops answering pings is given up after 2 x this. */
#define PING_INTERVAL_MS 1000
/* Publications buffered while reconnecting: none (the counts would be
 * stale by the time they arrive; the fleet thread stops publishing). */
#define RECONNECT_BUF 0

int pg_fleet_init(struct pg_gateway *gw, char *err, size_t errlen)
{
	struct pg_fleet *f;

	if (!gw->cfg->nats_url && !gw->cfg->fleet_size)
		return 0;
	f = calloc(1, sizeof(*f));
	if (f && gw->cfg->nats_url) {
		gw->fleetq = pg_fleetq_create(gw->nworkers);
		gw->fleetq_obs = pg_fleetq_create(gw->nworkers);
	}
	if (!f || (gw->cfg->nats_url && (!gw->fleetq || !gw->fleetq_obs))) {
		free(f);
		pg_fleetq_free(gw->fleetq);
		pg_fleetq_free(gw->fleetq_obs);
		gw->fleetq = gw->fleetq_obs = NULL;
		snprintf(err, errlen, "fleet: out of memory");
		return -1;
	}
	f->gw = gw;
	pthread_mutex_init(&f->mu, NULL);
	pg_fleet_peers_init(&f->peers);
	f->dec.mode = PG_FLEET_LOCAL;
	f->dec.share = 1;
	gw->fleet = f;
	return 0;
}

static int nats_fail(natsStatus s, const char *what, char *err, size_t errlen)
{
	snprintf(err, errlen, "--nats: %s: %s", what, natsStatus_GetText(s));
	return -1;
}

/* Given to natsOptions_SetRetryOnFailedConnect: with a callback,
 * natsConnection_Connect returns NATS_NOT_YET_CONNECTED at once when NATS is
 * down and connects in the background; without one it retries forever in
 * the caller, and start-up (then SIGTERM) would wait for NATS. The fleet
 * thread sees the connection come up and logs it. */
static void nats_connected(natsConnection *nc, void *closure)
{
	(void)nc;
	(void)closure;
}

static int nats_open(struct pg_fleet *f, char *err, size_t errlen)
{
	const struct pg_config *cfg = f->gw->cfg;
	natsStatus s;

	s = natsOptions_Create(&f->opts);
	if (s == NATS_OK)
		s = natsOptions_SetURL(f->opts, cfg->nats_url);
	if (s == NATS_OK)
		s = natsOptions_SetName(f->opts, f->id);
	if (s == NATS_OK) /* our own messages are not for us */
		s = natsOptions_SetNoEcho(f->opts, true);
	if (s == NATS_OK)
		s = natsOptions_SetMaxReconnect(f->opts, -1);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectWait(f->opts, RECONNECT_WAIT_MS);
	if (s == NATS_OK)
		s = natsOptions_SetReconnectBufSize(f->opts, RECONNECT_BUF);
	if (s == NATS_OK)
		s = natsOptions_SetPingInterval(f->opts, PING_INTERVAL_MS);
	if (s == NATS_OK)
		s = natsOptions_SetMaxPingsOut(f->opts, 2);
	if (s == NATS_OK) /* start without NATS, connect when it comes */
		s = natsOptions_SetRetryOnFailedConnect(f->opts, true, nats_connected, NULL);
	if (s != NATS_OK)
		return nats_fail(s, cfg->nats_url, err, errlen);
	s = natsConnection_Connect(&f->nc, f->opts);
	if (s != NATS_OK && s != NATS_NOT_YET_CONNECTED)
		return nats_fail(s, cfg->nats_url, err, errlen);
	if (s == NATS_NOT_YET_CONNECTED)
		pg_warn("fleet: NATS %s not reachable yet; retrying in the background",
		        cfg->nats_url);
	s = natsConnection_Subscribe(&f->sub_load, f->nc, f->subj_load, pg_fleet_on_load, f);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(f->sub_load, SUB_PENDING_MSGS,
		                                      SUB_PENDING_BYTES);
	if (s == NATS_OK)
		s = natsConnection_Subscribe(&f->sub_cache, f->nc, f->subj_cache, pg_fleet_on_cache,
		                             f);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(f->sub_cache, SUB_PENDING_MSGS,
		                                      SUB_PENDING_BYTES);
	if (s == NATS_OK)
		s = natsConnection_Subscribe(&f->sub_fit, f->nc, f->subj_fit, pg_fleet_on_fit, f);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(f->sub_fit, SUB_PENDING_MSGS,
		                                      SUB_PENDING_BYTES);
	if (s == NATS_OK)
		s = natsConnection_Subscribe(&f->sub_flow, f->nc, f->subj_flow, pg_fleet_on_flow,
		                             f);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(f->sub_flow, SUB_PENDING_MSGS,
		                                      SUB_PENDING_BYTES);
	if (s == NATS_OK)
		s = natsConnection_Subscribe(&f->sub_quota, f->nc, f->subj_quota, pg_fleet_on_quota,
		                             f);
	if (s == NATS_OK)
		s = natsSubscription_SetPendingLimits(f->sub_quota, SUB_PENDING_MSGS,
		                                      SUB_PENDING_BYTES);
	if (s != NATS_OK)
		return nats_fail(s, "subscribe", err, errlen);
	return 0;
}

int pg_fleet_start(struct pg_gateway *gw, char *err, size_t errlen)
{
	struct pg_fleet *f = gw->fleet;
	const struct pg_config *cfg = gw->cfg;
	struct timespec ts;

	if (!f)
		return 0;
	pg_gateway_id(gw, f->id, sizeof(f->id));
	snprintf(f->subj_load, sizeof(f->subj_load), "prefixgate.%s.load", cfg->nats_cluster);
	snprintf(f->subj_cache, sizeof(f->subj_cache), "prefixgate.%s.cache", cfg->nats_cluster);
	snprintf(f->subj_fit, sizeof(f->subj_fit), "prefixgate.%s.fit", cfg->nats_cluster);
	snprintf(f->subj_flow, sizeof(f->subj_flow), "prefixgate.%s.flow", cfg->nats_cluster);
	snprintf(f->subj_quota, sizeof(f->subj_quota), "prefixgate.%s.quota", cfg->nats_cluster);
	clock_gettime(CLOCK_REALTIME, &ts);
	f->boot = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (cfg->nats_url && nats_open(f, err, errlen))
		return -1;
	if (pthread_create(&f->thread, NULL, pg_fleet_main, f)) {
		snprintf(err, errlen, "fleet: cannot start its thread");
		return -1;
	}
	f->started = true;
	pg_info("fleet: gateway %s%s%s, subjects %s|cache|fit|flow|quota, interval %u ms%s", f->id,
	        cfg->nats_url ? ", NATS " : ", no NATS", cfg->nats_url ? cfg->nats_url : "",
	        f->subj_load, cfg->fleet_interval_ms, cfg->fleet_size ? ", --fleet-size" : "");
	return 0;
}

void pg_fleet_stop(struct pg_gateway *gw)
{
	struct pg_fleet *f = gw->fleet;

	if (f && f->started) {
		__atomic_store_n(&gw->stop, 1, __ATOMIC_RELAXED);
		pthread_join(f->thread, NULL);
	}
	if (f) {
		/* Subscriptions first: their callbacks use f. */
		if (f->sub_load)
			natsSubscription_Unsubscribe(f->sub_load);
		if (f->sub_cache)
			natsSubscription_Unsubscribe(f->sub_cache);
		if (f->sub_fit)
			natsSubscription_Unsubscribe(f->sub_fit);
		if (f->sub_flow)
			natsSubscription_Unsubscribe(f->sub_flow);
		if (f->sub_quota)
			natsSubscription_Unsubscribe(f->sub_quota);
		natsSubscription_Destroy(f->sub_load);
		natsSubscription_Destroy(f->sub_cache);
		natsSubscription_Destroy(f->sub_fit);
		natsSubscription_Destroy(f->sub_flow);
		natsSubscription_Destroy(f->sub_quota);
		if (f->nc)
			natsConnection_Close(f->nc);
		natsConnection_Destroy(f->nc);
		natsOptions_Destroy(f->opts);
		if (gw->cfg->nats_url)
			nats_CloseAndWait(1000);
		pthread_mutex_destroy(&f->mu);
		free(f);
		gw->fleet = NULL;
	}
	pg_fleetq_free(gw->fleetq);
	pg_fleetq_free(gw->fleetq_obs);
	gw->fleetq = gw->fleetq_obs = NULL;
}

enum pg_fleet_mode pg_fleet_mode(const struct pg_gateway *gw, unsigned *peers)
{
	const struct pg_fleet *f = gw->fleet;

	if (peers)
		*peers = f ? (unsigned)__atomic_load_n(&f->npeers, __ATOMIC_RELAXED) : 0;
	return f ? (enum pg_fleet_mode)__atomic_load_n(&f->mode, __ATOMIC_RELAXED) : PG_FLEET_LOCAL;
}

static void family(struct pg_buf *o, const char *name, const char *type, const char *help)
{
	pg_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static uint64_t load(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/* The fleet's plain counters in /metrics: name, help, field of struct
 * counters. */
static const struct {
	const char *name, *help;
	size_t off;
} scalars[] = {
    {"prefixgate_fleet_messages_bad_total",
     "Messages on the fleet subjects that could not be decoded.", offsetof(struct counters, bad)},
    {"prefixgate_fleet_peers_dropped_total", "Peers dropped after going silent.",
     offsetof(struct counters, peers_dropped)},
    {"prefixgate_fleet_mode_changes_total", "Load mode changes.",
     offsetof(struct counters, mode_changes)},
    {"prefixgate_fleet_cache_published_total", "cache_aware decisions sent to the peers.",
     offsetof(struct counters, cache_published)},
    {"prefixgate_fleet_cache_applied_total",
     "Peers' cache_aware decisions recorded in this gateway's block index.",
     offsetof(struct counters, cache_applied)},
    {"prefixgate_fleet_cache_unknown_total",
     "Peers' cache_aware decisions for a backend that is not a member here.",
     offsetof(struct counters, cache_unknown)},
    {"prefixgate_fleet_fit_published_total",
     "First tokens this gateway learned a backend's speed from, sent to the peers.",
     offsetof(struct counters, fit_published)},
    {"prefixgate_fleet_fit_applied_total",
     "Peers' first tokens this gateway's speed fits learned from.",
     offsetof(struct counters, fit_applied)},
    {"prefixgate_fleet_fit_unknown_total",
     "Peers' first tokens from a backend that is not a member here.",
     offsetof(struct counters, fit_unknown)},
    {"prefixgate_fleet_flow_published_total",
     "Flow control's tenants told to the peers (work served, requests queued), entries.",
     offsetof(struct counters, flow_published)},
    {"prefixgate_fleet_flow_applied_total",
     "Peers' flow control tenants heard of, entries: their work charged here.",
     offsetof(struct counters, flow_applied)},
    {"prefixgate_fleet_quota_published_total", "Quotas' counts told to the peers, tenant-seconds.",
     offsetof(struct counters, quota_published)},
    {"prefixgate_fleet_quota_applied_total",
     "Peers' quota counts heard of, tenant-seconds: counted in the tenants' minutes here.",
     offsetof(struct counters, quota_applied)},
};

void pg_fleet_metrics_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	static const char *const types[PG_FLEET_MSG_TYPES] = {[PG_FLEET_MSG_LOAD] = "load",
	                                                      [PG_FLEET_MSG_CACHE] = "cache",
	                                                      [PG_FLEET_MSG_FIT] = "fit",
	                                                      [PG_FLEET_MSG_FLOW] = "flow",
	                                                      [PG_FLEET_MSG_QUOTA] = "quota"};
	const struct pg_fleet *f = gw->fleet;
	unsigned max = pg_router_max_id(&gw->router), peers;
	enum pg_fleet_mode mode = pg_fleet_mode(gw, &peers);
	char name[PG_FLEET_ADDR_MAX + 1];

	family(o, "prefixgate_fleet_load_mode", "gauge",
	       "What routing adds to this gateway's in-flight counts (1 for the mode in use): "
	       "local nothing, nats the peers' published counts, backend the backends' "
	       "running+waiting, share ConcurrencyThreshold divided among the gateways.");
	for (int m = 0; m < PG_FLEET_MODES; m++)
		pg_buf_printf(o, "prefixgate_fleet_load_mode{mode=\"%s\"} %d\n",
		              pg_fleet_mode_name((enum pg_fleet_mode)m),
		              mode == (enum pg_fleet_mode)m);
	family(o, "prefixgate_fleet_peers", "gauge", "Other gateways heard from recently.");
	pg_buf_printf(o, "prefixgate_fleet_peers %u\n", peers);
	family(o, "prefixgate_fleet_nats_connected", "gauge", "1 while connected to --nats.");
	pg_buf_printf(o, "prefixgate_fleet_nats_connected %d\n",
	              f ? __atomic_load_n(&f->connected, __ATOMIC_RELAXED) : 0);
	family(o, "prefixgate_backend_peer_in_flight", "gauge",
	       "Requests the other gateways have in flight to the backend, as the load mode "
	       "estimates it.");
	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];

		if (!(__atomic_load_n(&b->flags, __ATOMIC_RELAXED) & PG_BACKEND_ACTIVE))
			continue;
		pg_buf_printf(o, "prefixgate_backend_peer_in_flight{backend=\"%s\"} %d\n",
		              pg_backend_name(b, name, sizeof(name)),
		              __atomic_load_n(&b->peer_in_flight, __ATOMIC_RELAXED));
	}
	if (!f)
		return;
	family(o, "prefixgate_fleet_messages_sent_total", "counter",
	       "Messages published to the fleet, by subject.");
	for (int t = PG_FLEET_MSG_LOAD; t < PG_FLEET_MSG_TYPES; t++)
		pg_buf_printf(o, "prefixgate_fleet_messages_sent_total{type=\"%s\"} %llu\n",
		              types[t], (unsigned long long)load(&f->c.sent[t]));
	family(o, "prefixgate_fleet_messages_received_total", "counter",
	       "Messages received from peers, by subject.");
	for (int t = PG_FLEET_MSG_LOAD; t < PG_FLEET_MSG_TYPES; t++)
		pg_buf_printf(o, "prefixgate_fleet_messages_received_total{type=\"%s\"} %llu\n",
		              types[t], (unsigned long long)load(&f->c.received[t]));
	for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++) {
		family(o, scalars[i].name, "counter", scalars[i].help);
		pg_buf_printf(o, "%s %llu\n", scalars[i].name,
		              (unsigned long long)load(
		                  (const uint64_t *)((const char *)&f->c + scalars[i].off)));
	}
	family(o, "prefixgate_fleet_cache_dropped_total", "counter",
	       "cache_aware decisions not sent: a worker's buffer busy or full, the batch full, "
	       "or no NATS connection.");
	pg_buf_printf(o, "prefixgate_fleet_cache_dropped_total %llu\n",
	              (unsigned long long)(load(&f->c.cache_dropped) +
	                                   (gw->fleetq ? pg_fleetq_dropped(gw->fleetq) : 0)));
	family(o, "prefixgate_fleet_fit_dropped_total", "counter",
	       "First tokens learned from not sent: a worker's buffer busy or full, the batch "
	       "full, or no NATS connection.");
	pg_buf_printf(
	    o, "prefixgate_fleet_fit_dropped_total %llu\n",
	    (unsigned long long)(load(&f->c.fit_dropped) +
	                         (gw->fleetq_obs ? pg_fleetq_dropped(gw->fleetq_obs) : 0)));
}

void pg_fleet_json(const struct pg_gateway *gw, struct pg_buf *o)
{
	struct pg_fleet *f = gw->fleet;
	uint64_t now = pg_now_ms();
	unsigned k = 0;

	if (!f) {
		pg_buf_puts(o, "{\"gateway_id\":null,\"load_mode\":\"local\",\"share\":1,"
		               "\"nats_connected\":false,\"peers\":[]}\n");
		return;
	}
	pthread_mutex_lock(&f->mu);
	pg_buf_puts(o, "{\"gateway_id\":");
	pg_buf_json_str(o, f->id, strlen(f->id));
	pg_buf_printf(o, ",\"load_mode\":\"%s\",\"share\":%u,\"nats_connected\":%s,\"peers\":[",
	              pg_fleet_mode_name(f->dec.mode), f->dec.share,
	              __atomic_load_n(&f->connected, __ATOMIC_RELAXED) ? "true" : "false");
	for (unsigned i = 0; i < PG_FLEET_MAX_PEERS; i++) {
		const struct pg_fleet_peer *p = &f->peers.p[i];

		if (!p->id[0])
			continue;
		pg_buf_puts(o, k++ ? ",{\"id\":" : "{\"id\":");
		pg_buf_json_str(o, p->id, strlen(p->id));
		pg_buf_printf(o, ",\"age_ms\":%llu,\"seq\":%llu}",
		              (unsigned long long)(now > p->last_ms ? now - p->last_ms : 0),
		              (unsigned long long)p->seq);
	}
	pthread_mutex_unlock(&f->mu);
	pg_buf_puts(o, "]}\n");
}
