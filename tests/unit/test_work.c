// SPDX-License-Identifier: MIT
/*
 * The load model (router/work.h): the online fit converges on synthetic
 * observations, tracks a step change within a minute, shrugs off
 * outliers, starts from its prior and ignores nonsense; the queue on the
 * shared table is taken, drained and given back; in a fleet of gateways
 * the queue is the fleet's, and each gateway learns every first token.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include "router/work.h"

static const struct pg_speed prior = {61.5, 1e6 / 36600, 0};

/* A deterministic uniform in [0, 1). */
static double unif(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(*s >> 11) / 9007199254740992.0;
}

/* n observations of truth, one every `every` ms from *t, noise: +- frac;
 * each `outlier`-th one (0: none) 5 times too slow. */
static void feed(struct pg_fit *f, const struct pg_speed *truth, int n, uint64_t *t, uint64_t every,
                 double frac, int outlier, uint64_t *seed)
{
	for (int i = 0; i < n; i++) {
		double tokens = 500 + unif(seed) * 60000, dec = unif(seed) * 40;
		double y = pg_speed_predict(truth, tokens, dec) * (1 + frac * (2 * unif(seed) - 1));

		if (outlier && i % outlier == outlier - 1)
			y *= 5;
		*t += every;
		pg_fit_observe(f, *t, true, tokens, dec, y);
	}
}

static void near(double got, double want, double tol, const char *what)
{
	if (fabs(got - want) > tol)
		fail_msg("%s: %.3f, want %.3f +- %.3f", what, got, want, tol);
}

static void test_converges(void **state)
{
	const struct pg_speed truth = {40, 20, 1.5};
	struct pg_fit f;
	uint64_t t = 0, seed = 1;

	(void)state;
	pg_fit_init(&f, &prior);
	feed(&f, &truth, 400, &t, 200, 0.05, 0, &seed);
	near(f.cur.ms_per_ktok, 20, 0.6, "ms per 1,000 tokens");
	near(f.cur.overhead_ms, 40, 15, "overhead");
	near(f.cur.ms_per_decode, 1.5, 0.5, "ms per decoding request");
	assert_int_equal(f.n, 400);
}

/* The instance halves its speed: within a minute of observations at
 * 5 a second, the fit predicts the new speed within 10%. */
static void test_tracks_step(void **state)
{
	const struct pg_speed before = {60, 25, 0}, after = {120, 50, 0};
	struct pg_fit f;
	uint64_t t = 0, seed = 2;

	(void)state;
	pg_fit_init(&f, &prior);
	feed(&f, &before, 600, &t, 200, 0.05, 0, &seed);
	near(pg_speed_predict(&f.cur, 30000, 10), pg_speed_predict(&before, 30000, 10),
	     0.05 * pg_speed_predict(&before, 30000, 10), "before the step");
	feed(&f, &after, 300, &t, 200, 0.05, 0, &seed); /* 60 s */
	near(pg_speed_predict(&f.cur, 30000, 10), pg_speed_predict(&after, 30000, 10),
	     0.10 * pg_speed_predict(&after, 30000, 10), "a minute after the step");
}

/* One observation in ten five times too slow (a request the index
 * believed cached that was not): the fit stays within 15%. */
static void test_outliers(void **state)
{
	const struct pg_speed truth = {60, 27, 0};
	struct pg_fit f;
	uint64_t t = 0, seed = 3;

	(void)state;
	pg_fit_init(&f, &prior);
	feed(&f, &truth, 600, &t, 200, 0.05, 10, &seed);
	near(f.cur.ms_per_ktok, 27, 0.15 * 27, "ms per 1,000 tokens, with outliers");
}

static void test_prior(void **state)
{
	const struct pg_speed slow = {200, 100, 0};
	struct pg_fit f;

	(void)state;
	pg_fit_init(&f, &prior);
	assert_memory_equal(&f.cur, &prior, sizeof(prior));
	/* a new prior (the backend's report) while nothing is learned */
	pg_fit_prior(&f, &slow);
	assert_memory_equal(&f.cur, &slow, sizeof(slow));
	pg_fit_prior(&f, &prior);
	/* one observation moves it, but the prior still weighs */
	pg_fit_observe(&f, 1000, true, 10000, 0, 10 * pg_speed_predict(&prior, 10000, 0));
	assert_true(f.cur.ms_per_ktok > prior.ms_per_ktok);
	assert_true(pg_speed_predict(&f.cur, 10000, 0) < 10 * pg_speed_predict(&prior, 10000, 0));
	/* nonsense is ignored */
	pg_fit_observe(&f, 2000, true, 10000, 0, -5);
	pg_fit_observe(&f, 2000, true, -1, 0, 100);
	pg_fit_observe(&f, 2000, true, 10000, 0, NAN);
	assert_int_equal(f.n, 1);
	/* a clock that goes back is taken as no time passing */
	pg_fit_observe(&f, 500, true, 10000, 0, pg_speed_predict(&prior, 10000, 0));
	assert_int_equal(f.n, 2);
	assert_true(f.last_ms == 1000);
}

/* First tokens from a first-come-first-served engine (146,400 tokens/s,
 * 15 ms overhead) fed bursts of 4 requests: from a prior 4 times slower,
 * the rate and the overhead are learned within 40 first tokens, from the
 * gaps between consecutive ones (queued) and the whole TTFTs (idle). */
static void test_first_tokens(void **state)
{
	const double rate = 146400, ov = 15;
	struct pg_fit f;
	uint64_t seed = 4, free_at = 0; /* ns: the engine's prefill is free then */
	uint64_t first[64], sent[64];
	uint32_t own[64];
	int n = 0;

	(void)state;
	pg_fit_init(&f, &prior);
	for (int burst = 0; burst < 10; burst++) {
		const uint64_t t = (uint64_t)burst * 400000000ull; /* every 400 ms */

		for (int k = 0; k < 4; k++, n++) {
			uint64_t start = t > free_at ? t : free_at;

			own[n] = (uint32_t)(1000 + unif(&seed) * 9000);
			sent[n] = t;
			free_at = start + (uint64_t)(own[n] / rate * 1e9);
			first[n] = free_at + (uint64_t)(ov * 1e6);
		}
	}
	/* each seen in order, queued when an earlier one had no first token yet */
	for (int i = 0; i < n; i++)
		pg_fit_first(&f, sent[i], first[i], 0, own[i], 0, i % 4 != 0, NULL);
	near(1e6 / f.cur.ms_per_ktok, rate, 0.05 * rate, "rate");
	near(f.cur.overhead_ms, ov, 3, "overhead");
	/* a first token before its request was sent is nonsense: ignored */
	assert_false(pg_fit_first(&f, first[n - 1] + 1000, first[n - 1], 0, 5000, 0, false, NULL));
	assert_int_equal(f.n, (uint64_t)n);
}

/* An engine whose overhead (185 ms) is 3.4 times its prefill (12,200
 * tokens/s, 400-1,000 tokens): most requests come while the one before is
 * past its prefill, in its overhead, the engine idle (one in 4 before
 * that prefill ended). Such a request's first token follows the one
 * before's, but the time between them is not its prefill: learned from
 * its sending, the rate and overhead are found (taken for its prefill,
 * the rate came out 2-4 times too slow). */
static void test_idle_in_overhead(void **state)
{
	const double rate = 12200, ov = 185;
	struct pg_fit f;
	uint64_t seed = 9, end = 1000000000ull; /* ns: the last prefill's end */

	(void)state;
	pg_fit_init(&f, &prior);
	for (int i = 0; i < 80; i++) {
		const uint32_t own = (uint32_t)(400 + unif(&seed) * 600);
		const uint64_t sent =
		    i % 4 == 3 ? end - 20000000ull : end + (uint64_t)(unif(&seed) * 150e6);
		const uint64_t start = sent > end ? sent : end;

		end = start + (uint64_t)(own / rate * 1e9);
		/* queued: the one before had no first token yet */
		pg_fit_first(&f, sent, end + (uint64_t)(ov * 1e6), 0, own, 0, i > 0, NULL);
	}
	near(1e6 / f.cur.ms_per_ktok, rate, 0.1 * rate, "rate");
	near(f.cur.overhead_ms, ov, 10, "overhead");
}

/* The same engine and bursts, each burst's 4 requests from 4 gateways at
 * once (none knew of the others'): each gateway learns from its own first
 * tokens, after the latest first token the others saw (peer_first_ns),
 * and from the ones they learned from (pg_fit_learn); every gateway's fit
 * finds the rate and the overhead as one gateway's does. */
static void test_fleet_first_tokens(void **state)
{
	const double rate = 146400, ov = 15;
	struct pg_fit f[4];
	uint64_t seed = 4, free_at = 0, last[4] = {0};
	int whole = 0;

	(void)state;
	for (int g = 0; g < 4; g++)
		pg_fit_init(&f[g], &prior);
	for (int burst = 0; burst < 10; burst++) {
		const uint64_t t = (uint64_t)burst * 400000000ull;

		for (int g = 0; g < 4; g++) { /* in the engine's order */
			const uint64_t start = t > free_at ? t : free_at;
			const uint32_t own = (uint32_t)(1000 + unif(&seed) * 9000);
			uint64_t peers = 0, first;
			struct pg_fit_obs o;

			free_at = start + (uint64_t)(own / rate * 1e9);
			first = free_at + (uint64_t)(ov * 1e6);
			for (int p = 0; p < 4; p++)
				if (p != g && last[p] > peers)
					peers = last[p];
			/* sent to an idle engine as far as g knew (its news of the
			 * others' came later) */
			if (!pg_fit_first(&f[g], t, first, peers, own, 0, false, &o))
				continue;
			whole += o.whole;
			last[g] = first;
			for (int p = 0; p < 4; p++)
				if (p != g)
					pg_fit_learn(&f[p], first / 1000000, &o);
		}
	}
	assert_int_equal(whole, 10); /* one a burst; the others queued behind it */
	for (int g = 0; g < 4; g++) {
		assert_int_equal(f[g].n, 40);
		near(1e6 / f[g].cur.ms_per_ktok, rate, 0.05 * rate, "rate");
		near(f[g].cur.overhead_ms, ov, 3, "overhead");
	}
}

/* The queue on the shared table: taken, drained by the engine's progress
 * since it began the head (at a measured speed), left at the first token
 * or dropped. */
static void test_queue(void **state)
{
	static struct pg_backend b;
	const struct pg_speed sp = {50, 1e6 / 40000, 0}; /* 40 tokens a ms */
	struct pg_work_ticket t1, t2, t3;
	double ttft;

	(void)state;
	pg_work_publish_speed(&b, &sp);                       /* measured: its progress counts */
	pg_work_take(&b, &t1, 40000, &sp, 1000 * 1000000ull); /* 1 s of work, at 1 s */
	assert_int_equal(b.prefill_tokens, 40000);
	assert_int_equal(b.prefill_reqs, 1);
	assert_int_equal(b.head_since_ms, 1000); /* an idle engine starts on it */
	assert_float_equal(t1.ahead, 40000, 0.5);
	assert_float_equal(t1.pred_ms, 50 + 1000, 0.5);
	/* 250 ms later a quarter of it is done */
	pg_work_take(&b, &t2, 4000, &sp, 1250 * 1000000ull);
	assert_int_equal(b.head_since_ms, 1000); /* the engine is busy: unchanged */
	assert_float_equal(t2.ahead, 30000 + 4000, 0.5);
	assert_float_equal(pg_work_queued(&b, &sp, 1250), 30000 + 4000, 0.5);
	/* never below nothing */
	assert_float_equal(pg_work_queued(&b, &sp, 9000), 0, 0.01);
	/* t1's first token at 2,060 ms: its prefill ended an overhead before */
	ttft = pg_work_first(&b, &t1, 50, 2060 * 1000000ull);
	assert_float_equal(ttft, 1060, 0.01);
	assert_false(t1.pending);
	assert_int_equal(b.prefill_tokens, 4000);
	assert_int_equal(b.prefill_reqs, 1);
	assert_int_equal(b.head_since_ms, 2010);
	assert_float_equal(pg_work_queued(&b, &sp, 2010), 4000, 0.5);
	assert_float_equal(pg_work_queued(&b, &sp, 2060), 2000, 0.5);
	/* a first token seen late does not move the engine back */
	pg_work_take(&b, &t3, 100, &sp, 2070 * 1000000ull);
	pg_work_first(&b, &t3, 50, 2080 * 1000000ull);
	assert_int_equal(b.head_since_ms, 2030);
	pg_work_drop(&b, &t2);
	pg_work_drop(&b, &t2); /* once */
	assert_int_equal(b.prefill_tokens, 0);
	assert_int_equal(b.prefill_reqs, 0);
	/* the peers' queue counts (its head began just now: nothing of it is
	 * done); requests past their first token decode */
	b.head_since_ms = 5000;
	b.peer_prefill_tokens = 500;
	b.in_flight = 3;
	b.peer_in_flight = 2;
	b.peer_prefill_reqs = 1;
	assert_float_equal(pg_work_queued(&b, &sp, 5000), 500, 0.01);
	assert_float_equal(pg_work_decoding(&b), 4, 0.01);
	/* it reports 4 waiting: 3 more than the fleet's (1), from other clients */
	b.waiting = 4;
	b.scraped_ms = 4500;
	b.firsts_at_scrape = b.firsts; /* the two first tokens above came before */
	assert_float_equal(pg_work_queued(&b, &sp, 5000), 500 + 3 * PG_WORK_FOREIGN_TOKENS, 0.01);
	assert_int_equal(pg_work_waiting(&b, 5000), 4);
	/* one of ours seen to leave its queue since: 3 wait */
	b.firsts++;
	assert_int_equal(pg_work_waiting(&b, 5000), 3);
	b.firsts--;
	/* older than PG_WORK_FRESH_MS: not counted (an engine idle since would
	 * look busy) */
	b.scraped_ms = 5000 - PG_WORK_FRESH_MS;
	assert_float_equal(pg_work_queued(&b, &sp, 5000), 500, 0.01);
	assert_int_equal(pg_work_waiting(&b, 5000), 0);
	b.scraped_ms = 4500;
	b.waiting = 1;
	assert_float_equal(pg_work_queued(&b, &sp, 5000), 500, 0.01);
	b.scraped_ms = 0;
	/* the published speed, or the defaults */
	b.fit_rate = b.fit_overhead_us = b.fit_decode_us = 0;
	{
		struct pg_speed got;

		pg_work_speed(&b, &got);
		assert_float_equal(got.overhead_ms, PG_SPEED_OVERHEAD_DEFAULT, 1e-9);
		b.fit_rate = 20000;
		b.fit_overhead_us = 30000;
		b.fit_decode_us = 500;
		pg_work_speed(&b, &got);
		assert_float_equal(got.ms_per_ktok, 50, 1e-9);
		assert_float_equal(got.overhead_ms, 30, 1e-9);
		assert_float_equal(got.ms_per_decode, 0.5, 1e-9);
	}
}

/* In a fleet: the queue is the fleet's, drained from the fleet's head;
 * the others' heads and first tokens come as ages (pg_work_ages,
 * pg_work_heard); a request sent while another gateway's wait is queued,
 * and learns no whole TTFT while one may have been ahead of it unseen. */
static void test_fleet_queue(void **state)
{
	static struct pg_backend b, peer;
	const struct pg_speed sp = {50, 1e6 / 40000, 0}; /* 40 tokens a ms */
	const uint64_t ms = 1000000;
	struct pg_work_ticket t;
	struct pg_fit f, g;
	struct pg_fit_obs o;
	uint32_t head, first;

	(void)state;
	pg_work_publish_speed(&b, &sp); /* measured: its progress counts */
	/* the peer's engine began a 40,000-token head at 1,000 ms */
	pg_work_take(&peer, &t, 40000, &sp, 1000 * ms);
	pg_work_ages(&peer, 1010 * ms, &head, &first);
	assert_int_equal(head, 10000);
	assert_true(first == PG_WORK_AGE_NONE);
	pg_work_heard(&b, 1010 * ms, head, first);
	assert_int_equal(b.head_since_ms, 1000);
	assert_int_equal(b.peer_first_ns, 0);
	b.peer_prefill_tokens = 40000;
	b.peer_prefill_reqs = 1;
	/* 250 ms in, a quarter of it is done, whoever sent it */
	assert_float_equal(pg_work_queued(&b, &sp, 1250), 30000, 0.5);
	/* ours queues behind it: the engine is busy, its head stays */
	pg_work_take(&b, &t, 4000, &sp, 1250 * ms);
	assert_true(t.queued);
	assert_int_equal(b.head_since_ms, 1000);
	assert_float_equal(t.ahead, 30000 + 4000, 0.5);
	/* the peer's first token at 2,050 ms, heard 3 ms later; an older
	 * head heard late changes nothing */
	pg_work_heard(&b, 2053 * ms, 3000, 3000);
	assert_int_equal(b.head_since_ms, 2050);
	assert_true(b.peer_first_ns == 2050 * ms);
	pg_work_heard(&b, 2054 * ms, 900000, 900000);
	assert_int_equal(b.head_since_ms, 2050);
	b.peer_prefill_tokens = 0;
	b.peer_prefill_reqs = 0;
	/* ours, 100 ms after the peer's: its prefill alone is learned */
	pg_fit_init(&f, &sp);
	pg_work_first(&b, &t, 50, 2150 * ms);
	assert_true(b.first_ns == 2150 * ms);
	assert_true(pg_work_learn(&f, &b, &t, 2150 * ms, &o));
	assert_false(o.whole);
	assert_int_equal(o.tokens, 4000);
	assert_int_equal(o.y_us, 100000);
	pg_work_ages(&b, 2160 * ms, &head, &first);
	assert_int_equal(head, 60000); /* 2,100: its prefill ended an overhead before */
	assert_int_equal(first, 10000);
	/* sent to an engine idle as far as we knew, while a peer's request
	 * waits: it may have been ahead, nothing is learned */
	pg_fit_init(&g, &sp);
	pg_work_take(&b, &t, 1000, &sp, 3000 * ms);
	assert_false(t.queued);
	assert_int_equal(b.head_since_ms, 3000);
	b.peer_prefill_reqs = 1;
	pg_work_first(&b, &t, 50, 3100 * ms);
	assert_false(pg_work_learn(&g, &b, &t, 3100 * ms, &o));
	assert_int_equal(g.n, 0);
	/* with none waiting, it is a whole TTFT */
	b.peer_prefill_reqs = 0;
	pg_work_take(&b, &t, 1000, &sp, 4000 * ms);
	pg_work_first(&b, &t, 50, 4080 * ms);
	assert_true(pg_work_learn(&g, &b, &t, 4080 * ms, &o));
	assert_true(o.whole);
	assert_int_equal(o.y_us, 80000);
	/* nothing heard yet: no age */
	pg_work_ages(&peer, 0, &head, &first);
	assert_true(first == PG_WORK_AGE_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_converges),          cmocka_unit_test(test_tracks_step),
	    cmocka_unit_test(test_outliers),           cmocka_unit_test(test_prior),
	    cmocka_unit_test(test_first_tokens),       cmocka_unit_test(test_idle_in_overhead),
	    cmocka_unit_test(test_fleet_first_tokens), cmocka_unit_test(test_queue),
	    cmocka_unit_test(test_fleet_queue),
	};

	return cmocka_run_group_tests_name("work", tests, NULL, NULL);
}
