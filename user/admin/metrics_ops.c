// SPDX-License-Identifier: MIT
/*
 * The metrics an operator tunes by (metrics.h): hit rates predicted by the
 * routing next to the ones the backends delivered, the backends' own load,
 * hot keys and shadow mode.
 *
 * Windowed ratios: every PG_METRICS_SAMPLE_MS the control thread keeps a
 * sample of the cumulative counters behind them; a ratio compares the live
 * counters with the oldest sample, which is at most PG_METRICS_WINDOW_MS
 * old. A backend counter lower than its sample (the backend restarted) or
 * a slot that changed member counts from zero. The samples are the
 * gateway's struct pg_metrics_window (gw->mwin), the control thread's only;
 * without one (tests) ratios count everything since start-up.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "admin/metrics.h"
#include "state/routestats.h"

#define NSAMPLES (PG_METRICS_WINDOW_MS / PG_METRICS_SAMPLE_MS + 1)

struct sample {
	uint64_t requests, hits, shadow_requests, shadow_hits;
	uint64_t kv_hits[PG_MAX_BACKENDS], kv_queries[PG_MAX_BACKENDS];
	uint32_t epoch[PG_MAX_BACKENDS];
};

struct pg_metrics_window {
	struct sample s[NSAMPLES];
	unsigned head, n; /* next to write, samples held */
	uint64_t next_ms; /* next sample due */
};

struct pg_metrics_window *pg_metrics_window_create(void)
{
	return calloc(1, sizeof(struct pg_metrics_window));
}

void pg_metrics_window_free(struct pg_metrics_window *w)
{
	free(w);
}

static void take(const struct pg_gateway *gw, struct sample *s, const struct pg_rstats_totals *t)
{
	s->requests = t->requests;
	s->hits = t->hits;
	s->shadow_requests = t->shadow_requests;
	s->shadow_hits = t->shadow_hits;
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];

		s->kv_hits[id] = __atomic_load_n(&b->kv_hit_tokens, __ATOMIC_RELAXED);
		s->kv_queries[id] = __atomic_load_n(&b->kv_query_tokens, __ATOMIC_RELAXED);
		s->epoch[id] = __atomic_load_n(&b->epoch, __ATOMIC_RELAXED);
	}
}

void pg_metrics_sample(const struct pg_gateway *gw, uint64_t now_ms)
{
	struct pg_metrics_window *w = gw->mwin;
	struct pg_rstats_totals t;

	if (!w || now_ms < w->next_ms)
		return;
	pg_rstats_sum(gw->rstats, &t);
	take(gw, &w->s[w->head], &t);
	w->head = (w->head + 1) % NSAMPLES;
	if (w->n < NSAMPLES)
		w->n++;
	w->next_ms = now_ms + PG_METRICS_SAMPLE_MS;
}

/* The window's start: the oldest sample once a whole window is held; before
 * that (or with no window) an all-zero one, so early ratios count
 * everything since start-up (the first sample may be taken after traffic
 * has begun). */
static const struct sample *base(const struct pg_metrics_window *w)
{
	static const struct sample zero;

	return w && w->n == NSAMPLES ? &w->s[w->head] : &zero;
}

static uint64_t delta(uint64_t cur, uint64_t old)
{
	return cur >= old ? cur - old : cur;
}

static void family(struct pg_buf *o, const char *name, const char *type, const char *help)
{
	pg_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name value, or no sample at all if the ratio is undefined (den 0). */
static void ratio(struct pg_buf *o, const char *name, const char *labels, uint64_t num,
                  uint64_t den)
{
	if (den)
		pg_buf_printf(o, "%s%s %.6f\n", name, labels, (double)num / (double)den);
}

struct row {
	unsigned id;
	char name[PG_ADDR_STRLEN];
	const struct pg_backend *b;
};

static size_t members(const struct pg_gateway *gw, struct row *r)
{
	unsigned max = pg_router_max_id(&gw->router);
	size_t n = 0;

	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];

		if (!(__atomic_load_n(&b->flags, __ATOMIC_ACQUIRE) & PG_BACKEND_ACTIVE))
			continue;
		r[n].id = id;
		r[n].b = b;
		pg_backend_name(b, r[n].name, sizeof(r[n].name));
		n++;
	}
	return n;
}

static void delivered(struct pg_buf *o, const struct sample *s0, const struct row *r, size_t n,
                      uint64_t now)
{
	static const char *const up = "prefixgate_backend_metrics_up",
	                         *const bh = "prefixgate_backend_kv_hit_ratio";
	uint64_t fh = 0, fq = 0;
	char lab[64];

	family(o, bh, "gauge",
	       "Delivered: prefix-cache hit tokens / queried tokens the backend reported "
	       "(vllm:prefix_cache_*) over the last 60 s; no sample before it reported any.");
	for (size_t i = 0; i < n; i++) {
		const bool same = s0->epoch[r[i].id] == r[i].b->epoch;
		uint64_t h = __atomic_load_n(&r[i].b->kv_hit_tokens, __ATOMIC_RELAXED);
		uint64_t q = __atomic_load_n(&r[i].b->kv_query_tokens, __ATOMIC_RELAXED);

		h = delta(h, same ? s0->kv_hits[r[i].id] : 0);
		q = delta(q, same ? s0->kv_queries[r[i].id] : 0);
		fh += h;
		fq += q;
		snprintf(lab, sizeof(lab), "{backend=\"%s\"}", r[i].name);
		ratio(o, bh, lab, h, q);
	}
	family(o, "prefixgate_kv_hit_ratio", "gauge",
	       "Delivered, fleet-wide: prefix-cache hit tokens / queried tokens over the last "
	       "60 s, summed over the backends.");
	ratio(o, "prefixgate_kv_hit_ratio", "", fh, fq);

	family(o, "prefixgate_backend_prefix_cache_hit_tokens_total", "counter",
	       "vllm:prefix_cache_hits_total as the backend last reported it.");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(
		    o,
		    "prefixgate_backend_prefix_cache_hit_tokens_total{backend=\"%s\"} "
		    "%llu\n",
		    r[i].name,
		    (unsigned long long)__atomic_load_n(&r[i].b->kv_hit_tokens, __ATOMIC_RELAXED));
	family(o, "prefixgate_backend_prefix_cache_query_tokens_total", "counter",
	       "vllm:prefix_cache_queries_total as the backend last reported it.");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o,
		              "prefixgate_backend_prefix_cache_query_tokens_total{backend=\"%s\"} "
		              "%llu\n",
		              r[i].name,
		              (unsigned long long)__atomic_load_n(&r[i].b->kv_query_tokens,
		                                                  __ATOMIC_RELAXED));
	family(o, "prefixgate_backend_requests_waiting", "gauge",
	       "vllm:num_requests_waiting at the backend's last scrape.");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o, "prefixgate_backend_requests_waiting{backend=\"%s\"} %u\n",
		              r[i].name, __atomic_load_n(&r[i].b->waiting, __ATOMIC_RELAXED));
	family(o, "prefixgate_backend_requests_running", "gauge",
	       "vllm:num_requests_running at the backend's last scrape.");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o, "prefixgate_backend_requests_running{backend=\"%s\"} %u\n",
		              r[i].name, __atomic_load_n(&r[i].b->running, __ATOMIC_RELAXED));
	family(o, up, "gauge",
	       "1 while the backend's scraped metrics are fresh (the load signal uses them).");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o, "%s{backend=\"%s\"} %d\n", up, r[i].name,
		              now < __atomic_load_n(&r[i].b->metrics_until_ms, __ATOMIC_ACQUIRE));
}

static void hot_keys(struct pg_buf *o, const struct pg_rstats *rs, uint64_t now)
{
	struct pg_hot_key hot[PG_HOT_TOP];
	size_t n = pg_rstats_hot(rs, now, hot, PG_HOT_TOP);

	family(o, "prefixgate_hot_key_requests_per_second", "gauge",
	       "The most frequent routing keys (by XXH3-64 hash, as the /route dry run shows "
	       "them) over the last 10 s window, estimated.");
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(o,
		              "prefixgate_hot_key_requests_per_second{rank=\"%zu\","
		              "key_hash=\"0x%016llx\"} %.3f\n",
		              i + 1, (unsigned long long)hot[i].hash,
		              (double)hot[i].count * 1000.0 / PG_HOT_WINDOW_MS);
}

static void shadow(struct pg_buf *o, const struct sample *s0, const struct pg_rstats_totals *t,
                   const struct row *r, size_t n)
{
	uint64_t all = 0;
	char lab[64];

	family(o, "prefixgate_shadow_requests_total", "counter",
	       "Requests for which shadow mode computed the prefix_aware choice.");
	pg_buf_printf(o, "prefixgate_shadow_requests_total %llu\n",
	              (unsigned long long)t->shadow_requests);
	family(o, "prefixgate_shadow_predicted_hits_total", "counter",
	       "Shadow requests whose key the prefix_aware choice had taken within "
	       "--predict-window.");
	pg_buf_printf(o, "prefixgate_shadow_predicted_hits_total %llu\n",
	              (unsigned long long)t->shadow_hits);
	family(o, "prefixgate_shadow_predicted_hit_ratio", "gauge",
	       "Predicted hit rate prefix_aware would have had, over the last 60 s.");
	ratio(o, "prefixgate_shadow_predicted_hit_ratio", "",
	      delta(t->shadow_hits, s0->shadow_hits),
	      delta(t->shadow_requests, s0->shadow_requests));
	family(o, "prefixgate_shadow_agreement_ratio", "gauge",
	       "Share of requests that went where prefix_aware would have sent them.");
	ratio(o, "prefixgate_shadow_agreement_ratio", "", t->shadow_agree, t->shadow_requests);
	family(o, "prefixgate_shadow_backend_requests_total", "counter",
	       "Requests prefix_aware would have sent to the backend.");
	for (size_t i = 0; i < n; i++) {
		all += t->shadow_by_backend[r[i].id];
		pg_buf_printf(o, "prefixgate_shadow_backend_requests_total{backend=\"%s\"} %llu\n",
		              r[i].name, (unsigned long long)t->shadow_by_backend[r[i].id]);
	}
	family(o, "prefixgate_shadow_backend_share", "gauge",
	       "Load spread prefix_aware would have had: its share of requests per backend.");
	for (size_t i = 0; i < n; i++) {
		snprintf(lab, sizeof(lab), "{backend=\"%s\"}", r[i].name);
		ratio(o, "prefixgate_shadow_backend_share", lab, t->shadow_by_backend[r[i].id],
		      all);
	}
}

void pg_metrics_ops_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	struct row *r = malloc(PG_MAX_BACKENDS * sizeof(*r));
	const struct sample *s0 = base(gw->mwin);
	const uint64_t now = pg_now_ms();
	struct pg_rstats_totals tot, *t = &tot;
	const unsigned sig = gw->cfg ? gw->cfg->load_signal : 0;
	size_t n;

	if (!r) {
		o->oom = true;
		return;
	}
	n = members(gw, r);
	pg_rstats_sum(gw->rstats, t);
	family(o, "prefixgate_predicted_requests_total", "counter",
	       "Requests routed and looked up in the hit prediction (every routed request).");
	pg_buf_printf(o, "prefixgate_predicted_requests_total %llu\n",
	              (unsigned long long)t->requests);
	family(o, "prefixgate_predicted_hits_total", "counter",
	       "Requests whose key went to the same backend within --predict-window before.");
	pg_buf_printf(o, "prefixgate_predicted_hits_total %llu\n", (unsigned long long)t->hits);
	family(o, "prefixgate_predicted_hit_ratio", "gauge",
	       "Predicted: share of requests over the last 60 s sent where their key had gone "
	       "within --predict-window (compare prefixgate_kv_hit_ratio).");
	ratio(o, "prefixgate_predicted_hit_ratio", "", delta(t->hits, s0->hits),
	      delta(t->requests, s0->requests));
	delivered(o, s0, r, n, now);
	hot_keys(o, gw->rstats, now);
	family(o, "prefixgate_load_signal", "gauge",
	       "The load least-outstanding choices compare (--load-signal), 1 for the one in use.");
	for (unsigned i = 0; i < PG_LOAD_SIGNAL_COUNT; i++)
		pg_buf_printf(o, "prefixgate_load_signal{signal=\"%s\"} %d\n",
		              pg_load_signal_name((enum pg_load_signal)i), i == sig);
	family(o, "prefixgate_shadow_enabled", "gauge", "1 when --shadow is on.");
	pg_buf_printf(o, "prefixgate_shadow_enabled %d\n", gw->cfg && gw->cfg->shadow);
	if (gw->cfg && gw->cfg->shadow)
		shadow(o, s0, t, r, n);
	free(r);
}
