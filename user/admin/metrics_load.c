// SPDX-License-Identifier: MIT
/*
 * /metrics: cache_aware's load model (router/load.h, router/work.h): each
 * backend's queue of prefill work, its speed as learned from the first
 * tokens it gave, and the prediction error of those first tokens.
 */
#include "admin/metrics.h"
#include "router/work.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* The TTFT prediction error: a histogram of |error|, its sum, and the
 * mean signed error (the model's bias); in seconds, the Prometheus base
 * unit, or (ms) in milliseconds, as the deprecated families were. */
static void prediction_error(const struct pg_gateway *gw, struct pg_buf *o, bool ms)
{
	const char *unit = ms ? "milliseconds" : "seconds";
	const double scale = ms ? 1e3 : 1e6; /* µs per unit */
	uint64_t cum = 0, abs_us = 0;
	int64_t signed_us = 0;
	char h[96], b[96], help[400];

	for (unsigned w = 0; gw->stats && w < gw->nworkers; w++) {
		abs_us += LOAD(&gw->stats[w].ttft_err.abs_us);
		signed_us += LOAD(&gw->stats[w].ttft_err.sum_us);
	}
	snprintf(h, sizeof(h), "prefixgate_ttft_prediction_error_%s", unit);
	snprintf(b, sizeof(b), "prefixgate_ttft_prediction_bias_%s", unit);
	if (ms)
		snprintf(help, sizeof(help),
		         "DEPRECATED, removed in the next release: "
		         "prefixgate_ttft_prediction_error_seconds in milliseconds; use "
		         "prefixgate_ttft_prediction_error_seconds.");
	else
		snprintf(help, sizeof(help),
		         "|first token - predicted| of each streamed response whose first token "
		         "was seen, seconds (the load model, doc/routing.md, Routing under load).");
	pg_metrics_family(o, h, "histogram", help);
	for (unsigned i = 0; i < PG_TTFT_ERR_BUCKETS; i++) {
		for (unsigned w = 0; gw->stats && w < gw->nworkers; w++)
			cum += LOAD(&gw->stats[w].ttft_err.bucket[i]);
		if (i == PG_TTFT_ERR_BUCKETS - 1)
			pg_buf_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n", h,
			              (unsigned long long)cum);
		else if (ms)
			pg_buf_printf(o, "%s_bucket{le=\"%u\"} %llu\n", h, pg_ttft_err_bounds_ms[i],
			              (unsigned long long)cum);
		else
			pg_buf_printf(o, "%s_bucket{le=\"%g\"} %llu\n", h,
			              pg_ttft_err_bounds_ms[i] / 1000.0, (unsigned long long)cum);
	}
	pg_buf_printf(o, ms ? "%s_sum %.3f\n%s_count %llu\n" : "%s_sum %.6f\n%s_count %llu\n", h,
	              (double)abs_us / scale, h, (unsigned long long)cum);
	if (ms)
		snprintf(help, sizeof(help),
		         "DEPRECATED, removed in the next release: "
		         "prefixgate_ttft_prediction_bias_seconds in milliseconds; use "
		         "prefixgate_ttft_prediction_bias_seconds.");
	else
		snprintf(help, sizeof(help),
		         "Mean of (first token - predicted) since start-up, seconds: positive, "
		         "first tokens come later than predicted.");
	pg_metrics_family(o, b, "gauge", help);
	pg_buf_printf(o, ms ? "%s %.3f\n" : "%s %.6f\n", b,
	              cum ? (double)signed_us / scale / (double)cum : 0);
}

/* One gauge family over the active backends: f(b) for each. */
static void per_backend(const struct pg_gateway *gw, struct pg_buf *o, const char *name,
                        const char *help, double (*f)(const struct pg_backend *, uint64_t))
{
	unsigned max = pg_router_max_id(&gw->router);
	uint64_t now = pg_now_ms();
	char nb[PG_ADDR_STRLEN];

	pg_metrics_family(o, name, "gauge", help);
	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];

		if (LOAD(&b->flags) & PG_BACKEND_ACTIVE)
			pg_buf_printf(o, "%s{backend=\"%s\"} %.6g\n", name,
			              pg_backend_name(b, nb, sizeof(nb)), f(b, now));
	}
}

static double queue_tokens(const struct pg_backend *b, uint64_t now)
{
	(void)now;
	return (double)LOAD(&b->prefill_tokens);
}

static double queue_requests(const struct pg_backend *b, uint64_t now)
{
	(void)now;
	return (double)LOAD(&b->prefill_reqs);
}

static double wait_seconds(const struct pg_backend *b, uint64_t now)
{
	struct pg_speed sp;

	pg_work_speed(b, &sp);
	return (sp.ms_per_ktok * pg_work_queued(b, &sp, now) / 1000 +
	        sp.ms_per_decode * pg_work_decoding(b)) /
	       1000;
}

static double rate(const struct pg_backend *b, uint64_t now)
{
	struct pg_speed sp;

	(void)now;
	pg_work_speed(b, &sp);
	return 1e6 / sp.ms_per_ktok;
}

static double overhead(const struct pg_backend *b, uint64_t now)
{
	struct pg_speed sp;

	(void)now;
	pg_work_speed(b, &sp);
	return sp.overhead_ms / 1000;
}

static double decode(const struct pg_backend *b, uint64_t now)
{
	struct pg_speed sp;

	(void)now;
	pg_work_speed(b, &sp);
	return sp.ms_per_decode / 1000;
}

static double learned(const struct pg_backend *b, uint64_t now)
{
	(void)now;
	return LOAD(&b->fit_obs) >= PG_FIT_OWN_MIN;
}

void pg_metrics_load_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	per_backend(gw, o, "prefixgate_backend_prefill_queue_tokens",
	            "Prefill work this gateway sent the backend whose first token has not come "
	            "(prompt tokens less what its cache was believed to hold).",
	            queue_tokens);
	per_backend(gw, o, "prefixgate_backend_prefill_queue_requests",
	            "Requests this gateway sent the backend whose first token has not come.",
	            queue_requests);
	per_backend(gw, o, "prefixgate_backend_predicted_wait_seconds",
	            "What a request sent to the backend now would wait before its own prefill, "
	            "as the load model predicts (every gateway's queue, the engine's progress, "
	            "its requests decoding), seconds.",
	            wait_seconds);
	per_backend(gw, o, "prefixgate_backend_prefill_tokens_per_second",
	            "The backend's prefill rate as routed on: learned from its first tokens "
	            "(its pool's, or the default 36600, until it has given 8).",
	            rate);
	per_backend(gw, o, "prefixgate_backend_ttft_overhead_seconds",
	            "The fixed part of the backend's time to first token, as learned.", overhead);
	per_backend(gw, o, "prefixgate_backend_decode_cost_seconds",
	            "What each request decoding on the backend adds to a time to first token, as "
	            "learned.",
	            decode);
	per_backend(gw, o, "prefixgate_backend_speed_learned",
	            "1 once the backend's own speed is routed on (learned from PG_FIT_OWN_MIN, 8, "
	            "first tokens), 0 while its pool's (or the defaults) apply.",
	            learned);
	prediction_error(gw, o, false);
	/* The millisecond families, kept for one release so that dashboards
	 * can move (doc/operations.md, Operating prefixgate). */
	prediction_error(gw, o, true);
}
