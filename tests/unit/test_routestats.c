// SPDX-License-Identifier: MIT
/*
 * Routing statistics: the hit-prediction table, the space-saving hot-key
 * counter and its merge, per-thread recording and summing, and the
 * operations metrics rendered from them (windowed ratios).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "config/config.h"
#include "admin/metrics.h"
#include "state/routestats.h"
#include "state/host.h"

#define W 60000 /* prediction window, ms */

static uint64_t table[PG_PREDICT_SLOTS];

static void test_predict(void **state)
{
	/* Steps on one table, in order: key hash, backend, time, expected hit. */
	static const struct {
		uint64_t hash;
		uint16_t id;
		uint64_t now;
		bool hit;
	} steps[] = {
	    {0x0000000011110001ull, 3, 1000, false},             /* first sight */
	    {0x0000000011110001ull, 3, 2000, true},              /* same backend, in window */
	    {0x0000000011110001ull, 4, 3000, false},             /* another backend */
	    {0x0000000011110001ull, 4, 3000 + W, true},          /* exactly the window */
	    {0x0000000011110001ull, 4, 3000 + 2 * W + 1, false}, /* older than it */
	    {0x0000000022220001ull, 4, 200000, false},           /* same slot, other tag: evicts */
	    {0x0000000011110001ull, 4, 200001, false},           /* ... so the first key misses */
	    {0x0000000000010007ull, 7, 300000, false},           /* tag 1 */
	    {0x0000000000020007ull, 7, 300001, false},           /* same slot, tag 2 */
	    {0x0000000000020007ull, 7, 300002, true},
	    {0x0000000000020008ull, 7, 300003, false}, /* other slot (low bits) */
	};

	(void)state;
	memset(table, 0, sizeof(table));
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (pg_predict(table, steps[i].hash, steps[i].id, steps[i].now, W) != steps[i].hit)
			fail_msg("step %zu: hit %d expected", i, steps[i].hit);
	/* Another worker stored a slightly later time: still a hit. */
	memset(table, 0, sizeof(table));
	pg_predict(table, 42, 1, 5000, W);
	assert_true(pg_predict(table, 42, 1, 4990, W));
	/* Time stored modulo 2^40 ms: wraps without a false miss. */
	memset(table, 0, sizeof(table));
	pg_predict(table, 42, 1, (1ull << 40) - 10, W);
	assert_true(pg_predict(table, 42, 1, (1ull << 40) + 10, W));
}

static void test_hot_space_saving(void **state)
{
	struct pg_hot h = {0};
	uint64_t rng = 12345;
	unsigned found = 0;

	(void)state;
	/* 3 heavy keys (30%, 20%, 10%) in a stream of many distinct ones: each
	 * is present with a count at least its true count. */
	for (unsigned i = 0; i < 10000; i++) {
		unsigned r = (unsigned)(i * 7919u % 10);
		uint64_t key;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		key = r < 3 ? 1 : r < 5 ? 2 : r < 6 ? 3 : (rng >> 20) | 1ull << 40;
		pg_hot_add(&h, key);
	}
	for (unsigned i = 0; i < PG_HOT_SLOTS; i++) {
		if (h.hash[i] == 1 && h.count[i] >= 3000)
			found |= 1;
		if (h.hash[i] == 2 && h.count[i] >= 2000)
			found |= 2;
		if (h.hash[i] == 3 && h.count[i] >= 1000)
			found |= 4;
	}
	assert_int_equal(found, 7);
}

static void test_hot_merge(void **state)
{
	struct pg_hot_key l[3];
	size_t n = 0;

	(void)state;
	pg_hot_merge(l, &n, 3, 10, 5);
	pg_hot_merge(l, &n, 3, 20, 7);
	pg_hot_merge(l, &n, 3, 30, 1);
	pg_hot_merge(l, &n, 3, 40, 2); /* full: 30 (1) falls off */
	assert_int_equal(n, 3);
	assert_int_equal(l[0].hash, 20);
	assert_int_equal(l[1].hash, 10);
	assert_int_equal(l[2].hash, 40);
	pg_hot_merge(l, &n, 3, 40, 9); /* same hash again: summed, moves up */
	assert_int_equal(l[0].hash, 40);
	assert_int_equal(l[0].count, 11);
	pg_hot_merge(l, &n, 3, 50, 1); /* below all of a full list: ignored */
	assert_int_equal(n, 3);
	assert_int_equal(l[2].hash, 10);
}

static struct pg_config cfg;
static struct pg_gateway gw;

/* Fresh statistics of nslots workers in gw. */
static void fresh_rstats(unsigned nslots)
{
	pg_rstats_free(gw.rstats);
	gw.rstats = pg_rstats_create(nslots);
	assert_non_null(gw.rstats);
}

struct worker_arg {
	unsigned id;
	uint64_t base;
	unsigned n;
};

/* Worker id records n requests: keys base + i % 4 to backend 1 + i % 2,
 * shadow always backend 1. */
static void *worker(void *p)
{
	const struct worker_arg *a = p;

	for (unsigned i = 0; i < a->n; i++)
		pg_rstats_record(&gw, a->id, a->base + i % 4, (uint16_t)(1 + i % 2), 1, 1000 + i);
	return NULL;
}

static void test_record_threads(void **state)
{
	struct worker_arg args[3] = {{0, 1000, 800}, {1, 2000, 800}, {2, 3000, 800}};
	pthread_t t[3];
	struct pg_rstats_totals tot;

	(void)state;
	fresh_rstats(3);
	cfg.predict_window_ms = W;
	cfg.shadow = true;
	gw.cfg = &cfg;
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, &args[i]), 0);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	pg_rstats_sum(gw.rstats, &tot);
	assert_int_equal(tot.requests, 2400);
	/* key k always goes to the same backend (i % 4 fixes i % 2): all but
	 * the first sight of each of the 12 keys are hits. */
	assert_int_equal(tot.hits, 2400 - 12);
	assert_int_equal(tot.shadow_requests, 2400);
	assert_int_equal(tot.shadow_hits, 2400 - 12);
	assert_int_equal(tot.shadow_agree, 1200);
	assert_int_equal(tot.shadow_by_backend[1], 2400);
	/* No shared slot: a worker outside the slots is not recorded. */
	pg_rstats_record(&gw, 3, 1, 1, 0, 5000);
	pg_rstats_sum(gw.rstats, &tot);
	assert_int_equal(tot.requests, 2400);
	fresh_rstats(3);
	pg_rstats_sum(gw.rstats, &tot);
	assert_int_equal(tot.requests, 0);
	pg_rstats_sum(NULL, &tot); /* none at all: zeros */
	assert_int_equal(tot.requests, 0);
}

static void test_hot_windows(void **state)
{
	struct pg_hot_key hot[PG_HOT_TOP];
	size_t n;

	(void)state;
	fresh_rstats(1);
	gw.cfg = &cfg;
	/* Window 1 (t 0..10 s): key 7 80% of 8000 requests, rest distinct. */
	for (unsigned i = 0; i < 8000; i++)
		pg_rstats_record(&gw, 0, i % 5 ? 7 : 100000 + i, 1, 0, 1 + i);
	assert_int_equal(pg_rstats_hot(gw.rstats, 9000, hot, PG_HOT_TOP), 0); /* none finished */
	/* The next sampled request ends the window (it began at the first
	 * sampled one, t = PG_HOT_SAMPLE). */
	for (unsigned i = 0; i < PG_HOT_SAMPLE; i++)
		pg_rstats_record(&gw, 0, 7, 1, 0, 20 + PG_HOT_WINDOW_MS);
	n = pg_rstats_hot(gw.rstats, PG_HOT_WINDOW_MS + 25, hot, PG_HOT_TOP);
	assert_true(n >= 1);
	assert_int_equal(hot[0].hash, 7);
	/* about 6400 in the window, sampled 1 in 8 and scaled back */
	if (hot[0].count < 6000 || hot[0].count > 6800)
		fail_msg("key 7 counted %llu per window", (unsigned long long)hot[0].count);
	/* Stale after two more windows. */
	assert_int_equal(pg_rstats_hot(gw.rstats, 4 * PG_HOT_WINDOW_MS, hot, PG_HOT_TOP), 0);
}

/* ---- rendered metrics ------------------------------------------------------- */

static char *render(void)
{
	struct pg_buf b = {0};
	char *s;

	pg_metrics_render(&gw, &b);
	assert_false(b.oom);
	s = strndup(b.p, b.len);
	pg_buf_free(&b);
	return s;
}

/* The value of sample line `series` (name and labels), or -1 if absent. */
static double value(const char *text, const char *series)
{
	size_t l = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, series, l) && p[l] == ' ')
			return strtod(p + l + 1, NULL);
	return -1;
}

static void test_ops_metrics(void **state)
{
	struct pg_backend *b;
	char err[256], *m;

	(void)state;
	pg_rstats_free(gw.rstats);
	memset(&gw, 0, sizeof(gw));
	memset(&cfg, 0, sizeof(cfg));
	cfg.shadow = true;
	cfg.load_signal = PG_LOAD_BOTH;
	cfg.predict_window_ms = W;
	gw.cfg = &cfg;
	assert_int_equal(pg_maps_open(&gw.maps, false, "", 0, err, sizeof(err)), 0);
	pg_gateway_router(&gw);
	fresh_rstats(1);
	gw.mwin = pg_metrics_window_create();
	assert_non_null(gw.mwin);
	b = &gw.maps.backends[1];
	pg_router_activate(&gw.router, 1);
	b->flags = PG_BACKEND_ACTIVE;
	b->family = AF_INET;
	memcpy(b->addr, "\x7f\0\0\1", 4);
	b->port = 9001;
	b->epoch = 1;
	b->kv_hit_tokens = 100;
	b->kv_query_tokens = 1000;
	b->waiting = 4;
	b->running = 2;
	b->metrics_until_ms = pg_now_ms() + 60000;

	/* Before any sample: since start. 4 requests, key 5 twice to 1. */
	pg_rstats_record(&gw, 0, 5, 1, 1, 10);
	pg_rstats_record(&gw, 0, 5, 1, 1, 11);
	pg_rstats_record(&gw, 0, 6, 1, 1, 12);
	pg_rstats_record(&gw, 0, 6, 1, 1, 13);
	m = render();
	assert_true(value(m, "prefixgate_predicted_hit_ratio") == 0.5);
	assert_true(value(m, "prefixgate_backend_kv_hit_ratio{backend=\"127.0.0.1:9001\"}") == 0.1);
	assert_true(value(m, "prefixgate_kv_hit_ratio") == 0.1);
	assert_true(value(m, "prefixgate_backend_requests_waiting{backend=\"127.0.0.1:9001\"}") ==
	            4);
	assert_true(value(m, "prefixgate_backend_metrics_up{backend=\"127.0.0.1:9001\"}") == 1);
	assert_true(value(m, "prefixgate_load_signal{signal=\"both\"}") == 1);
	assert_true(value(m, "prefixgate_shadow_backend_share{backend=\"127.0.0.1:9001\"}") == 1);
	assert_true(value(m, "prefixgate_shadow_predicted_hit_ratio") == 0.5);
	assert_non_null(strstr(m, "# TYPE prefixgate_dispatch_latency_seconds histogram"));
	free(m);

	/* A sample before a whole window has passed: still since start-up
	 * (the first sample may come after traffic began). */
	pg_metrics_sample(&gw, 100000);
	b->kv_hit_tokens += 900;
	b->kv_query_tokens += 1000;
	m = render();
	assert_true(value(m, "prefixgate_backend_kv_hit_ratio{backend=\"127.0.0.1:9001\"}") == 0.5);
	free(m);
	/* A whole window of samples: then the ratio covers the last window
	 * only: 900 more hit tokens of 1000 -> 0.9; 2 more requests, both
	 * hits -> 1.0. */
	for (unsigned i = 1; i <= PG_METRICS_WINDOW_MS / PG_METRICS_SAMPLE_MS; i++)
		pg_metrics_sample(&gw, 100000 + i * PG_METRICS_SAMPLE_MS);
	b->kv_hit_tokens += 900;
	b->kv_query_tokens += 1000;
	pg_rstats_record(&gw, 0, 5, 1, 1, 20);
	pg_rstats_record(&gw, 0, 6, 1, 1, 21);
	m = render();
	assert_true(value(m, "prefixgate_backend_kv_hit_ratio{backend=\"127.0.0.1:9001\"}") == 0.9);
	assert_true(value(m, "prefixgate_predicted_hit_ratio") == 1.0);
	assert_true(value(m, "prefixgate_predicted_requests_total") == 6);
	free(m);

	/* The backend restarted (counters fell): counted from zero. */
	b->kv_hit_tokens = 30;
	b->kv_query_tokens = 40;
	b->metrics_until_ms = 1; /* stale */
	m = render();
	assert_true(value(m, "prefixgate_backend_kv_hit_ratio{backend=\"127.0.0.1:9001\"}") ==
	            0.75);
	assert_true(value(m, "prefixgate_backend_metrics_up{backend=\"127.0.0.1:9001\"}") == 0);
	free(m);

	/* Shadow off: no prefixgate_shadow_* samples but the enabled gauge. */
	cfg.shadow = false;
	m = render();
	assert_true(value(m, "prefixgate_shadow_enabled") == 0);
	assert_null(strstr(m, "prefixgate_shadow_requests_total"));
	free(m);
	pg_metrics_window_free(gw.mwin);
	pg_rstats_free(gw.rstats);
	pg_maps_close(&gw.maps);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_predict),     cmocka_unit_test(test_hot_space_saving),
	    cmocka_unit_test(test_hot_merge),   cmocka_unit_test(test_record_threads),
	    cmocka_unit_test(test_hot_windows), cmocka_unit_test(test_ops_metrics),
	};

	return cmocka_run_group_tests_name("routestats", tests, NULL, NULL);
}
