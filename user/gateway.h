/* SPDX-License-Identifier: MIT */
/*
 * The running gateway: configuration, shared routing state, worker threads
 * and their statistics, and the state of each other part (routing
 * statistics, metric samples, health checks, access log). Shared by the
 * workers, the control thread and the admin API, and passed to every
 * function that needs any of it. Process-wide state besides: the control
 * thread's own (control.c, admin.c), the log level and the privilege drop's
 * per-thread broadcast (sys/).
 */
#ifndef PG_GATEWAY_H
#define PG_GATEWAY_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "config/config.h"
#include "router/load.h"
#include "router/router.h"
#include "state/maps.h"

/* Routing-latency histogram bucket upper bounds, µs (last bucket: +Inf). */
#define PG_LAT_BUCKETS 24
extern const uint32_t pg_lat_bounds_us[PG_LAT_BUCKETS - 1];

/* Per-worker counters: each worker writes its own with relaxed atomics, the
 * admin API sums them. Cache-line aligned so workers never share a line. */
struct pg_worker_stats {
	uint64_t route_lat[PG_LAT_BUCKETS]; /* request head parsed -> backend chosen */
	uint64_t route_lat_sum_ns;
	/* body in hand -> backend chosen: the worker's own decision (key, pool,
	 * index, choice), without the wait for the body's bytes */
	uint64_t decide_lat[PG_LAT_BUCKETS];
	uint64_t decide_lat_sum_ns;
	uint64_t send_lat[PG_LAT_BUCKETS]; /* request head parsed -> first byte sent to backend */
	uint64_t send_lat_sum_ns;
	uint64_t requests;        /* requests routed */
	uint64_t key_fallbacks;   /* OpenAI body unusable as JSON: raw-bytes key */
	uint64_t parsed_ahead;    /* bodies whose JSON was parsed as they arrived */
	uint64_t client_errors;   /* requests answered 4xx by the gateway */
	uint64_t no_backend;      /* requests answered 502 */
	uint64_t aborted;         /* client went away before its response ended */
	uint64_t backend_errors;  /* backend failed mid-response */
	uint64_t connections;     /* client connections accepted */
	uint64_t spliced;         /* response bodies handed to an in-kernel path */
	uint64_t splice_unframed; /* ...of which the end could not be tracked */
	uint64_t early_answers;   /* responses begun while request bytes were owed */
	/* prefill/decode disaggregation (proxy/pd.h): requests sent to a
	 * pair, to the decode instance alone; prefill legs that failed;
	 * decode legs tried again with a fresh pair */
	uint64_t pd_pairs, pd_alone, pd_prefill_failures, pd_decode_retries;
	struct pg_ttft_err ttft_err; /* the load model's accuracy (router/load.h) */
} __attribute__((aligned(64)));

struct pg_worker;
struct pg_datapath;
struct pg_rstats;
struct pg_metrics_window;
struct pg_health;
struct pg_alog;
struct pg_otel;
struct pg_fleet;
struct pg_fleetq;
struct pg_pools;
struct pg_flowctl;
struct pg_quotas;
struct pg_tls;

struct pg_gateway {
	struct pg_config *cfg;
	struct pg_maps maps;
	struct pg_datapath *dp; /* kernel data paths (datapath.h); NULL: copy */
	unsigned nworkers;
	struct pg_worker **workers;
	struct pg_worker_stats *stats; /* nworkers entries */
	int stop;                      /* set (atomically) to stop every thread */
	/* An eventfd made readable with stop (pg_gateway_stop, lifecycle.h):
	 * the workers and the health-check thread poll it, so they stop at
	 * once rather than at their next 100 ms turn. -1: none. */
	int stop_fd;
	/* Set (atomically) at SIGTERM/SIGINT, before stop: workers close their
	 * listeners and idle keep-alive clients, in-flight requests finish
	 * (lifecycle.h). */
	int draining;
	/* Requests admitted under --max-in-flight (lifecycle.h; only counted
	 * when the cap is on). Its own cache line: every worker writes it. */
	int64_t admitted __attribute__((aligned(64)));
	/* Ring rebuilds (members.c): wall time of the last one and in all, ns;
	 * prefixgate_ring_rebuild_seconds and its _total. */
	uint64_t ring_rebuild_ns, ring_rebuild_total_ns;
	/* pg_ring_digest of the live ring (members.c, at each rebuild): equal
	 * on every gateway that routes alike; prefixgate_ring_digest. With
	 * model pools, every pool's digest folded in pool order; each pool's
	 * own in pool_digest (both logged at each change). */
	uint64_t ring_digest;
	uint64_t pool_digest[PG_MAX_POOLS];
	/* The parts' own state, each an object made at start-up and passed
	 * here; NULL when that part is off (or, in tests, not set up). */
	struct pg_rstats *rstats;       /* routestats.h: one slot per worker */
	struct pg_metrics_window *mwin; /* metrics.h: samples of the windowed ratios */
	struct pg_health *health;       /* health.h: the checker thread's */
	struct pg_alog *alog;           /* accesslog.h: the logger's, with the rings */
	struct pg_otel *otel;           /* sys/otel.h: the trace exporter's, with the rings */
	struct pg_fleet *fleet;         /* fleet/fleet.h: --nats / --fleet-size */
	struct pg_fleetq *fleetq;       /* state/fleetq.h: cache_aware decisions to publish */
	struct pg_fleetq *fleetq_obs;   /* ... and first tokens learned from (router/load.h) */
	struct pg_pools *pools;         /* state/pools.h: model pools; NULL: the default alone */
	struct pg_flowctl *flow;        /* state/flowctl.h: flow control; NULL: never on */
	struct pg_quotas *quotas;       /* state/quotas.h: quotas, usage accounting */
	struct pg_journal *journal;     /* sys/journal.h: --route-journal; NULL: off */
	/* Reports stored of backends whose queues only reports drain
	 * (members/health.c; router/work.h pg_work_blind), counted: one may
	 * show requests whose answers do not stream begun, so a worker that
	 * sees the count move checks its own then (proxy/exchange.c
	 * pg_proxy_reports), not at its next tick. */
	uint32_t reports;
	/* The routing core (router/router.h), over maps, the pools' members,
	 * the learned speeds and the fleet's queues: pg_gateway_router. */
	struct pg_router router;
	struct pg_tls *tls; /* tls/tls.h: certificates, backends' context; NULL: not set up */
	/* The port the admin listener is bound to (control/control.c sets it
	 * before the fleet and etcd start); 0 before, and after it closes. */
	uint16_t admin_port;
};

static inline uint64_t pg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall-clock milliseconds (for logs; never for intervals). */
static inline uint64_t pg_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline uint64_t pg_now_ms(void)
{
	return pg_now_ns() / 1000000;
}

/* "a.b.c.d:port" or "[v6]:port" of backend b, after "https://" for a TLS
 * one (its ring identity too). buf should hold PG_ADDR_STRLEN bytes. */
const char *pg_backend_name(const struct pg_backend *b, char *buf, size_t len);

/* This gateway's name among its peers, the one both NATS messages and
 * etcd's P/gateways/<id> carry: --gateway-id, or HOSTNAME:ADMIN-PORT (the
 * admin listener must be bound: gw->admin_port). */
void pg_gateway_id(const struct pg_gateway *gw, char *buf, size_t len);

/* Record one routing latency sample into a worker's histogram. */
void pg_stats_route_latency(struct pg_worker_stats *st, uint64_t ns);
void pg_stats_decide_latency(struct pg_worker_stats *st, uint64_t ns);

/* Record one "request head parsed -> first request byte written to the
 * backend" sample (gateway.c; the proxy calls it once per request, on
 * the first completed send of the first attempt). */
void pg_stats_send_latency(struct pg_worker_stats *st, uint64_t ns);

#endif /* PG_GATEWAY_H */
