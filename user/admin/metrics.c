// SPDX-License-Identifier: MIT
/*
 * Prometheus exposition (metrics.h). Families are written one at a time,
 * each with HELP and TYPE, every sample of a family together, as the text
 * format requires. Backends are labelled by "a.b.c.d:port" (never needs
 * escaping).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "sys/accesslog.h"
#include "members/members.h"
#include "fleet/fleet.h"
#include "admin/metrics.h"
#include "fleet/etcd.h"
#include "state/pools.h"
#include "router/route.h"

void pg_metrics_family(struct pg_buf *o, const char *name, const char *type, const char *help)
{
	pg_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void family(struct pg_buf *o, const char *name, const char *type, const char *help)
{
	pg_metrics_family(o, name, type, help);
}

/* Per-backend snapshot, taken once so every family shows the same members. */
struct member {
	char name[PG_ADDR_STRLEN];
	char pool[PG_POOL_NAME_MAX + 10]; /* ,pool="NAME" with model pools, else empty */
	uint16_t flags;
	bool down;
	int32_t in_flight;
	uint64_t failures;
	uint64_t requests[PG_DEC_MAX];
};

static size_t snapshot(const struct pg_gateway *gw, struct member *m)
{
	unsigned max = pg_router_max_id(&gw->router);
	uint64_t now = pg_now_ms();
	size_t n = 0;

	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];
		uint16_t f = __atomic_load_n(&b->flags, __ATOMIC_ACQUIRE);

		if (!(f & PG_BACKEND_ACTIVE))
			continue;
		pg_backend_name(b, m[n].name, sizeof(m[n].name));
		m[n].pool[0] = 0;
		if (gw->pools)
			snprintf(m[n].pool, sizeof(m[n].pool), ",pool=\"%s\"",
			         pg_pool_name(gw, b->pool));
		m[n].flags = f;
		m[n].down = !pg_backend_healthy(b, now);
		m[n].in_flight = __atomic_load_n(&b->in_flight, __ATOMIC_RELAXED);
		m[n].failures = __atomic_load_n(&b->failures, __ATOMIC_RELAXED);
		for (int d = 0; d < PG_DEC_MAX; d++)
			m[n].requests[d] = __atomic_load_n(&b->requests[d], __ATOMIC_RELAXED);
		n++;
	}
	return n;
}

static void counters(const struct pg_gateway *gw, struct pg_buf *o)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} c[] = {
	    {"prefixgate_routed_total", "Requests routed to a backend.",
	     offsetof(struct pg_worker_stats, requests)},
	    {"prefixgate_key_extraction_fallbacks_total",
	     "OpenAI-API bodies whose JSON was unusable, routed by their raw bytes.",
	     offsetof(struct pg_worker_stats, key_fallbacks)},
	    {"prefixgate_parsed_ahead_total",
	     "OpenAI-API bodies keyed from the parse made as they arrived in pieces: routing "
	     "parsed only the last piece.",
	     offsetof(struct pg_worker_stats, parsed_ahead)},
	    {"prefixgate_client_errors_total", "Requests answered 4xx by the gateway itself.",
	     offsetof(struct pg_worker_stats, client_errors)},
	    {"prefixgate_no_backend_total", "Requests answered 502: no usable backend.",
	     offsetof(struct pg_worker_stats, no_backend)},
	    {"prefixgate_aborted_total",
	     "Requests whose client went away before the response ended.",
	     offsetof(struct pg_worker_stats, aborted)},
	    {"prefixgate_backend_errors_total", "Responses cut short by a backend failure.",
	     offsetof(struct pg_worker_stats, backend_errors)},
	    {"prefixgate_connections_total", "Client connections accepted.",
	     offsetof(struct pg_worker_stats, connections)},
	    {"prefixgate_spliced_responses_total",
	     "Response bodies carried by an in-kernel data path (sockmap, sockmsg).",
	     offsetof(struct pg_worker_stats, spliced)},
	    {"prefixgate_spliced_unframed_total",
	     "Spliced responses whose end could not be tracked (a short write to a slow "
	     "client): ended by the backend's close, client connection closed.",
	     offsetof(struct pg_worker_stats, splice_unframed)},
	    {"prefixgate_early_answers_total",
	     "Responses that began before the backend had the whole request (a 401 or 404 "
	     "answered before reading the body): that backend connection was closed, never "
	     "pooled.",
	     offsetof(struct pg_worker_stats, early_answers)},
	    {"prefixgate_pd_pairs_total",
	     "Prefill/decode pools: requests sent to a prefill and a decode instance.",
	     offsetof(struct pg_worker_stats, pd_pairs)},
	    {"prefixgate_pd_decode_alone_total",
	     "Prefill/decode pools: requests sent to the decode instance alone (a short prompt, "
	     "one it mostly holds, or no prefill instance left).",
	     offsetof(struct pg_worker_stats, pd_alone)},
	    {"prefixgate_pd_prefill_failures_total",
	     "Prefill legs that failed (no connection, an error status, no answer in time).",
	     offsetof(struct pg_worker_stats, pd_prefill_failures)},
	    {"prefixgate_pd_decode_retries_total",
	     "Decode legs that failed before answering, tried again with a fresh pair.",
	     offsetof(struct pg_worker_stats, pd_decode_retries)},
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t sum = 0;

		for (unsigned w = 0; gw->stats && w < gw->nworkers; w++)
			sum += __atomic_load_n(
			    (const uint64_t *)((const char *)&gw->stats[w] + c[i].off),
			    __ATOMIC_RELAXED);
		family(o, c[i].name, "counter", c[i].help);
		pg_buf_printf(o, "%s %llu\n", c[i].name, (unsigned long long)sum);
	}
	family(o, "prefixgate_access_log_dropped_total", "counter",
	       "Access-log records dropped because the logger fell behind.");
	pg_buf_printf(o, "prefixgate_access_log_dropped_total %llu\n",
	              (unsigned long long)pg_alog_dropped(gw->alog));
}

/* A bucket bound of pg_lat_bounds_us in seconds, as a decimal without
 * trailing zeros ("0.000012", "0.01"): exact, unlike a float printed. */
static const char *le_seconds(uint32_t us, char *buf, size_t cap)
{
	size_t n = (size_t)snprintf(buf, cap, "%u.%06u", us / 1000000, us % 1000000);

	while (n > 3 && buf[n - 1] == '0')
		buf[--n] = 0;
	return buf;
}

/* A latency histogram from the per-worker buckets at offset lat (uint64_t
 * [PG_LAT_BUCKETS]) and their sum in ns at offset sum; in seconds, the
 * Prometheus base unit, or (micro) in microseconds, as the deprecated
 * families were. */
static void histogram(const struct pg_gateway *gw, struct pg_buf *o, const char *h,
                      const char *help, size_t lat, size_t sum, bool micro)
{
	uint64_t cum = 0, sum_ns = 0;
	char le[24];

	family(o, h, "histogram", help);
	for (unsigned w = 0; gw->stats && w < gw->nworkers; w++)
		sum_ns += __atomic_load_n((const uint64_t *)((const char *)&gw->stats[w] + sum),
		                          __ATOMIC_RELAXED);
	for (unsigned b = 0; b < PG_LAT_BUCKETS; b++) {
		for (unsigned w = 0; gw->stats && w < gw->nworkers; w++)
			cum += __atomic_load_n(
			    (const uint64_t *)((const char *)&gw->stats[w] + lat) + b,
			    __ATOMIC_RELAXED);
		if (b == PG_LAT_BUCKETS - 1)
			snprintf(le, sizeof(le), "+Inf");
		else if (micro)
			snprintf(le, sizeof(le), "%u", pg_lat_bounds_us[b]);
		else
			le_seconds(pg_lat_bounds_us[b], le, sizeof(le));
		pg_buf_printf(o, "%s_bucket{le=\"%s\"} %llu\n", h, le, (unsigned long long)cum);
	}
	if (micro)
		pg_buf_printf(o, "%s_sum %llu.%03llu\n", h, (unsigned long long)(sum_ns / 1000),
		              (unsigned long long)(sum_ns % 1000));
	else
		pg_buf_printf(o, "%s_sum %llu.%09llu\n", h,
		              (unsigned long long)(sum_ns / 1000000000),
		              (unsigned long long)(sum_ns % 1000000000));
	pg_buf_printf(o, "%s_count %llu\n", h, (unsigned long long)cum);
}

static void latency(const struct pg_gateway *gw, struct pg_buf *o)
{
	static const struct {
		const char *name, *old, *help;
		size_t lat, sum;
	} h[] = {
	    {"prefixgate_routing_latency_seconds", "prefixgate_routing_latency_microseconds",
	     "Time from a request's head being parsed to its backend being chosen",
	     offsetof(struct pg_worker_stats, route_lat),
	     offsetof(struct pg_worker_stats, route_lat_sum_ns)},
	    {"prefixgate_routing_decision_seconds", "prefixgate_routing_decision_microseconds",
	     "Time a worker spent choosing a request's backend once the body bytes its key needs "
	     "were in hand (key extraction, model pool, cache index, choice)",
	     offsetof(struct pg_worker_stats, decide_lat),
	     offsetof(struct pg_worker_stats, decide_lat_sum_ns)},
	    {"prefixgate_dispatch_latency_seconds", "prefixgate_dispatch_latency_microseconds",
	     "Time from a request's head being parsed to its first byte being written to the "
	     "backend",
	     offsetof(struct pg_worker_stats, send_lat),
	     offsetof(struct pg_worker_stats, send_lat_sum_ns)},
	};
	char help[400];

	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
		snprintf(help, sizeof(help), "%s, seconds.", h[i].help);
		histogram(gw, o, h[i].name, help, h[i].lat, h[i].sum, false);
	}
	/* The microsecond families, kept for one release so that dashboards
	 * can move (doc/operations.md, Operating prefixgate). */
	for (size_t i = 0; i < sizeof(h) / sizeof(h[0]); i++) {
		snprintf(help, sizeof(help),
		         "DEPRECATED, removed in the next release: %s in microseconds; use %s.",
		         h[i].name, h[i].name);
		histogram(gw, o, h[i].old, help, h[i].lat, h[i].sum, true);
	}
}

/* cache_aware's block index: matched lengths, occupancy, evictions. */
static void cache_index(const struct pg_gateway *gw, struct pg_buf *o)
{
	const struct pg_ca_index ix = pg_router_index(&gw->router);
	uint64_t cum = 0, sum = 0;

	family(o, "prefixgate_cache_matched_blocks", "histogram",
	       "cache_aware: longest cached prefix of each routed request, in " PG_STR(
	           PG_CA_BLOCK) "-byte blocks of key text.");
	for (unsigned b = 0; b < PG_CA_MATCH_BUCKETS; b++) {
		uint64_t n = __atomic_load_n(&gw->router.ca_matched[b], __ATOMIC_RELAXED);

		cum += n;
		sum += n * (b ? 1ull << (b - 1) : 0); /* each bucket at its lower bound */
		if (b < PG_CA_MATCH_BUCKETS - 1)
			pg_buf_printf(o,
			              "prefixgate_cache_matched_blocks_bucket{le=\"%llu\"} %llu\n",
			              b ? (1ull << b) - 1 : 0ull, (unsigned long long)cum);
	}
	pg_buf_printf(o,
	              "prefixgate_cache_matched_blocks_bucket{le=\"+Inf\"} %llu\n"
	              "prefixgate_cache_matched_blocks_sum %llu\n"
	              "prefixgate_cache_matched_blocks_count %llu\n",
	              (unsigned long long)cum, (unsigned long long)sum, (unsigned long long)cum);
	family(o, "prefixgate_cache_index_slots", "gauge",
	       "cache_aware: slots of the block index (pinned map pg_cache_index), by state.");
	pg_buf_printf(o, "prefixgate_cache_index_slots{state=\"total\"} %u\n", ix.nslots);
	pg_buf_printf(o, "prefixgate_cache_index_slots{state=\"used\"} %u\n",
	              ix.slots ? pg_ca_occupancy(&ix) : 0);
	family(o, "prefixgate_cache_index_bytes", "gauge",
	       "cache_aware: memory of the block index (bounded at start-up by --cache-capacity).");
	pg_buf_printf(o, "prefixgate_cache_index_bytes %zu\n",
	              (size_t)ix.nslots * sizeof(struct pg_ca_slot));
	family(o, "prefixgate_cache_index_evictions_total", "counter",
	       "cache_aware: index slots taken over while their prefix was still live.");
	pg_buf_printf(
	    o, "prefixgate_cache_index_evictions_total %llu\n",
	    (unsigned long long)__atomic_load_n(&gw->router.ca_evictions, __ATOMIC_RELAXED));
}

/* Backends given by DNS name, while any is: how many addresses each stands
 * for, whether its last lookup answered, and its failed lookups, so that a
 * name that never resolves shows (it has no member to show it). */
static void backend_names(struct pg_buf *o)
{
	static const struct {
		const char *name, *type, *help;
	} fam[] = {
	    {"prefixgate_backend_name_addresses", "gauge",
	     "Addresses a backend given by DNS name stands for (members it added)."},
	    {"prefixgate_backend_name_resolved", "gauge",
	     "1 when the name's last lookup gave addresses; 0 before its first answer and while "
	     "its lookups fail."},
	    {"prefixgate_backend_name_lookup_failures_total", "counter",
	     "Lookups of the name that failed or gave no address."},
	};
	struct pg_name_info ni;
	int k = 0;

	while (k < PG_BACKEND_NAMES_MAX && !pg_backend_name_info(k, &ni))
		k++;
	if (k == PG_BACKEND_NAMES_MAX)
		return;
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		family(o, fam[f].name, fam[f].type, fam[f].help);
		for (int j = k; j < PG_BACKEND_NAMES_MAX; j++) {
			if (!pg_backend_name_info(j, &ni))
				continue;
			pg_buf_printf(o, "%s{name=\"%s\"} %llu\n", fam[f].name, ni.name,
			              f == 0   ? (unsigned long long)ni.naddrs
			              : f == 1 ? (unsigned long long)(ni.state == PG_NAME_RESOLVED)
			                       : (unsigned long long)ni.failures);
		}
	}
}

void pg_metrics_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	struct member *m = malloc(PG_MAX_BACKENDS * sizeof(*m));
	const struct pg_state *st = gw->maps.state;
	size_t n, nstate[3] = {0};
	struct pg_route_cfg rc;

	if (!m) {
		o->oom = true;
		return;
	}
	n = snapshot(gw, m);
	family(o, "prefixgate_requests_total", "counter",
	       "Requests dispatched to a backend, by backend and routing decision.");
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < PG_DEC_MAX; d++)
			pg_buf_printf(
			    o, "prefixgate_requests_total{backend=\"%s\"%s,decision=\"%s\"} %llu\n",
			    m[i].name, m[i].pool, pg_decision_name((unsigned)d),
			    (unsigned long long)m[i].requests[d]);
	family(o, "prefixgate_backend_in_flight", "gauge",
	       "Requests dispatched to the backend and not yet finished.");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o, "prefixgate_backend_in_flight{backend=\"%s\"%s} %d\n", m[i].name,
		              m[i].pool, m[i].in_flight);
	family(o, "prefixgate_backend_up", "gauge",
	       "1 unless failure detection has marked the backend down.");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o, "prefixgate_backend_up{backend=\"%s\"} %d\n", m[i].name,
		              !m[i].down);
	family(o, "prefixgate_backend_failures_total", "counter",
	       "Attempts to the backend that failed (connect, reset, timeout).");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o, "prefixgate_backend_failures_total{backend=\"%s\"} %llu\n",
		              m[i].name, (unsigned long long)m[i].failures);

	for (size_t i = 0; i < n; i++)
		nstate[m[i].flags & PG_BACKEND_DRAINING ? 1 : m[i].down ? 2 : 0]++;
	family(o, "prefixgate_backends", "gauge",
	       "Members by state: active (taking requests), draining (being removed), "
	       "down (failed, retried later).");
	pg_buf_printf(o,
	              "prefixgate_backends{state=\"active\"} %zu\n"
	              "prefixgate_backends{state=\"draining\"} %zu\n"
	              "prefixgate_backends{state=\"down\"} %zu\n",
	              nstate[0], nstate[1], nstate[2]);

	latency(gw, o);
	counters(gw, o);

	family(o, "prefixgate_ring_generation", "gauge",
	       "Generation of the live consistent-hash ring (bumped by every membership change).");
	pg_buf_printf(o, "prefixgate_ring_generation %llu\n",
	              (unsigned long long)__atomic_load_n(&st->ring_generation, __ATOMIC_RELAXED));
	family(o, "prefixgate_ring_remapped_ratio", "gauge",
	       "Share of keys whose first-choice backend changed at the last ring rebuild.");
	pg_buf_printf(o, "prefixgate_ring_remapped_ratio %.6f\n",
	              (double)__atomic_load_n(&st->remapped_ppm, __ATOMIC_RELAXED) / 1e6);
	family(o, "prefixgate_ring_rebuild_seconds", "gauge",
	       "Wall time of the last ring rebuild (membership read, table built, published), "
	       "seconds.");
	pg_buf_printf(o, "prefixgate_ring_rebuild_seconds %.6f\n",
	              (double)__atomic_load_n(&gw->ring_rebuild_ns, __ATOMIC_RELAXED) / 1e9);
	family(o, "prefixgate_ring_rebuild_seconds_total", "counter",
	       "Wall time spent in ring rebuilds since start-up, seconds.");
	pg_buf_printf(o, "prefixgate_ring_rebuild_seconds_total %.6f\n",
	              (double)__atomic_load_n(&gw->ring_rebuild_total_ns, __ATOMIC_RELAXED) / 1e9);

	pg_router_cfg(&gw->router, 0, &rc);
	family(o, "prefixgate_routing_strategy", "gauge",
	       "The routing strategy in use (1 for the active one).");
	for (int s = 0; s < PG_STRATEGY_COUNT; s++)
		pg_buf_printf(o, "prefixgate_routing_strategy{strategy=\"%s\"} %d\n",
		              pg_strategy_name((enum pg_strategy)s),
		              rc.strategy == (enum pg_strategy)s);
	family(o, "prefixgate_prefix_length", "gauge", "PrefixLength of prefix-aware routing.");
	pg_buf_printf(o, "prefixgate_prefix_length %u\n", rc.prefix_length);
	family(o, "prefixgate_concurrency_threshold", "gauge",
	       "ConcurrencyThreshold of prefix-aware routing.");
	pg_buf_printf(o, "prefixgate_concurrency_threshold %u\n", rc.concurrency_threshold);
	cache_index(gw, o);
	backend_names(o);
	pg_metrics_load_render(gw, o);
	pg_metrics_flow_render(gw, o);
	pg_metrics_usage_render(gw, o);
	pg_metrics_tls_render(gw, o);
	pg_metrics_ops_render(gw, o);
	pg_metrics_otel_render(gw, o);
	pg_fleet_metrics_render(gw, o);
	pg_etcd_metrics(gw, o);
	if (gw->pools)
		pg_metrics_pools_render(gw, o);
	free(m);
}
