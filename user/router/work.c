// SPDX-License-Identifier: MIT
/*
 * The online fit of an instance's speed (work.h): exponentially weighted
 * least squares over x = (1, ktokens, decoding), y = TTFT in ms, with
 * Huber weights. The prior enters as pseudo-observations that fade with
 * the rest.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "router/work.h"

/* The prior holds each coefficient near its own value by a ridge as
 * strong as an observation at these x (the overhead's, ktokens of prefill,
 * requests decoding), each coefficient apart: pseudo-observations of the
 * whole prior would tie the overhead to the rate, so that a rate that
 * turned out twice the prior's dragged the overhead along. The ridges
 * weigh PG_FIT_PRIOR_N / (1 + n) after n observations (never less than
 * PG_FIT_PRIOR_MIN), so a wrong prior (the defaults, before an instance
 * shows its own speed) is left behind within a few; the decode cost's,
 * which decoding counts rarely vary enough to tell apart from the rest,
 * stays whole. */
static const double ridge_x[3] = {1.0, 4.0, 10.0};

static void add(double s[3][3], double t[3], const double x[3], double y, double w)
{
	for (int i = 0; i < 3; i++) {
		for (int j = 0; j < 3; j++)
			s[i][j] += w * x[i] * x[j];
		t[i] += w * x[i] * y;
	}
}

static void seed(struct pg_fit *f, const struct pg_speed *prior)
{
	f->prior = *prior;
	f->cur = *prior;
}

void pg_fit_init(struct pg_fit *f, const struct pg_speed *prior)
{
	memset(f, 0, sizeof(*f));
	seed(f, prior);
}

void pg_fit_prior(struct pg_fit *f, const struct pg_speed *prior)
{
	if (!f->n)
		seed(f, prior);
	else
		f->prior = *prior;
}

/* Solve a x = b (3 x 3) by Gaussian elimination with partial pivoting;
 * false if singular. */
static bool solve3(double a[3][3], double b[3], double x[3])
{
	for (int c = 0; c < 3; c++) {
		int p = c;

		for (int r = c + 1; r < 3; r++)
			if (fabs(a[r][c]) > fabs(a[p][c]))
				p = r;
		if (fabs(a[p][c]) < 1e-12)
			return false;
		if (p != c) {
			for (int k = 0; k < 3; k++) {
				double t = a[c][k];

				a[c][k] = a[p][k];
				a[p][k] = t;
			}
			double t = b[c];

			b[c] = b[p];
			b[p] = t;
		}
		for (int r = c + 1; r < 3; r++) {
			double m = a[r][c] / a[c][c];

			for (int k = c; k < 3; k++)
				a[r][k] -= m * a[c][k];
			b[r] -= m * b[c];
		}
	}
	for (int r = 2; r >= 0; r--) {
		double s = b[r];

		for (int k = r + 1; k < 3; k++)
			s -= a[r][k] * x[k];
		x[r] = s / a[r][r];
	}
	return true;
}

static void coef_of(const struct pg_speed *s, double c[3])
{
	c[0] = s->overhead_ms;
	c[1] = s->ms_per_ktok;
	c[2] = s->ms_per_decode;
}

void pg_fit_observe(struct pg_fit *f, uint64_t now_ms, bool whole, double tokens, double decoding,
                    double ttft_ms)
{
	const double x[3] = {whole ? 1.0 : 0, tokens / 1000.0, whole ? decoding : 0};
	double a[3][3], b[3], c[3], pred, r, lim, wp, h = 1.0;

	if (!(ttft_ms >= 0) || !(tokens >= 0) || !(decoding >= 0))
		return;
	if (f->n && now_ms > f->last_ms) {
		const double d = exp(-(double)(now_ms - f->last_ms) / PG_FIT_TAU_MS);

		for (int i = 0; i < 3; i++) {
			for (int j = 0; j < 3; j++)
				f->s[i][j] *= d;
			f->t[i] *= d;
		}
		f->w *= d;
	}
	if (now_ms > f->last_ms || !f->n)
		f->last_ms = now_ms;
	/* Huber, once the first observations have placed the model: one far
	 * off it (farther than PG_FIT_HUBER typical residuals, and than a
	 * quarter of the prediction) weighs less */
	pred = whole ? pg_speed_predict(&f->cur, tokens, decoding)
	             : f->cur.ms_per_ktok * tokens / 1000.0;
	r = ttft_ms - pred;
	lim = fmax(PG_FIT_HUBER * f->scale, 0.25 * pred);
	if (f->n >= PG_FIT_WARMUP && fabs(r) > lim)
		h = lim / fabs(r);
	f->scale = f->n ? 0.95 * f->scale + 0.05 * fmin(fabs(r), 4 * lim) : fabs(r);
	add(f->s, f->t, x, ttft_ms, h);
	f->w += h;
	f->n++;
	/* (S + L) c = T + L prior, L the ridges */
	coef_of(&f->prior, c);
	wp = fmax(PG_FIT_PRIOR_N / (1.0 + (double)f->n), PG_FIT_PRIOR_MIN);
	memcpy(a, f->s, sizeof(a));
	memcpy(b, f->t, sizeof(b));
	for (int i = 0; i < 3; i++) {
		const double l = (i == 2 ? PG_FIT_PRIOR_N : wp) * ridge_x[i] * ridge_x[i];

		a[i][i] += l;
		b[i] += l * c[i];
	}
	if (!solve3(a, b, c))
		return;
	/* a negative coefficient is noise around 0; a rate is at most
	 * PG_FIT_RATE_RANGE times off the prior's (observations that hardly
	 * vary in size tell little of it) */
	f->cur.overhead_ms = fmax(c[0], 0);
	f->cur.ms_per_ktok = fmin(fmax(c[1], f->prior.ms_per_ktok / PG_FIT_RATE_RANGE),
	                          f->prior.ms_per_ktok * PG_FIT_RATE_RANGE);
	f->cur.ms_per_decode = fmax(c[2], 0);
}

void pg_fit_learn(struct pg_fit *f, uint64_t now_ms, const struct pg_fit_obs *o)
{
	pg_fit_observe(f, now_ms, o->whole, o->tokens, o->decoding, o->y_us / 1000.0);
}

bool pg_fit_first(struct pg_fit *f, uint64_t sent_ns, uint64_t now_ns, uint64_t prev_ns,
                  uint32_t own, double decoding, bool queued, struct pg_fit_obs *obs)
{
	uint64_t prev = f->last_first_ns, from;
	struct pg_fit_obs o;

	if (now_ns > f->last_first_ns)
		f->last_first_ns = now_ns;
	/* another gateway's first token, if later (and not after this one) */
	if (prev_ns > prev && prev_ns < now_ns)
		prev = prev_ns;
	if (now_ns < sent_ns)
		return false;
	/* the one before ended its prefill an overhead before its first
	 * token: if that was after this one was sent, this one's prefill
	 * followed it (its prefill alone); if before, the engine had nothing
	 * to prefill when this one came, though the one before was still
	 * on its way (its overhead), so this one is a whole TTFT. Taking the
	 * idle time for prefill, an engine whose overhead was 3.4 times its
	 * prefill was learned 2-4 times slower than it is (tests/unit/test_work.c
	 * test_idle_in_overhead). */
	if (prev > sent_ns && now_ns > prev)
		from = (double)prev - f->cur.overhead_ms * 1e6 > (double)sent_ns ? prev : sent_ns;
	else if (!queued)
		from = sent_ns; /* a whole TTFT */
	else
		return false;
	o = (struct pg_fit_obs){
	    .whole = from == sent_ns,
	    .tokens = own,
	    .decoding = (uint32_t)fmin(fmax(decoding, 0), UINT32_MAX),
	    .y_us = (uint32_t)fmin((double)(now_ns - from) / 1e3, UINT32_MAX),
	};
	pg_fit_learn(f, now_ns / 1000000, &o);
	if (obs)
		*obs = o;
	return true;
}

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define ADD(p, v)   __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define SUB(p, v)   __atomic_fetch_sub((p), (v), __ATOMIC_RELAXED)

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void pg_work_publish_speed(struct pg_backend *b, const struct pg_speed *sp)
{
	STORE(&b->fit_overhead_us, (uint32_t)fmin(sp->overhead_ms * 1000, UINT32_MAX));
	STORE(&b->fit_decode_us, (uint32_t)fmin(sp->ms_per_decode * 1000, UINT32_MAX));
	STORE(&b->fit_rate, (uint32_t)fmax(fmin(1e6 / sp->ms_per_ktok, UINT32_MAX), 1));
}

void pg_work_publish_bound(struct pg_backend *b, const struct pg_speed *sp)
{
	STORE(&b->bound_overhead_us, (uint32_t)fmin(sp->overhead_ms * 1000, UINT32_MAX));
	STORE(&b->bound_rate, (uint32_t)fmax(fmin(1e6 / sp->ms_per_ktok, UINT32_MAX), 1));
}

unsigned pg_work_median_speed(const struct pg_backend *table, unsigned max_id, uint32_t pool,
                              struct pg_speed *out)
{
	uint32_t v[3][PG_MAX_BACKENDS]; /* 48 KiB of the caller's stack */
	unsigned n = 0;

	for (unsigned id = 1; id <= max_id && id < PG_MAX_BACKENDS; id++) {
		const struct pg_backend *b = &table[id];

		if (!(LOAD(&b->flags) & PG_BACKEND_ACTIVE) || LOAD(&b->pool) != pool ||
		    LOAD(&b->fit_obs) < PG_FIT_OWN_MIN || !LOAD(&b->fit_rate))
			continue;
		v[0][n] = LOAD(&b->fit_rate);
		v[1][n] = LOAD(&b->fit_overhead_us);
		v[2][n] = LOAD(&b->fit_decode_us);
		n++;
	}
	if (!n)
		return 0;
	for (int k = 0; k < 3; k++)
		qsort(v[k], n, sizeof(v[k][0]), cmp_u32);
	out->ms_per_ktok = 1e6 / v[0][n / 2];
	out->overhead_ms = v[1][n / 2] / 1000.0;
	out->ms_per_decode = v[2][n / 2] / 1000.0;
	return n;
}

void pg_work_take(struct pg_backend *b, struct pg_work_ticket *t, uint32_t tokens,
                  const struct pg_speed *sp, uint64_t now_ns)
{
	const uint64_t now_ms = now_ns / 1000000;

	if (!tokens)
		tokens = 1;
	*t = (struct pg_work_ticket){
	    .pending = true,
	    .tokens = tokens,
	    .ahead = (float)(pg_work_queued(b, sp, now_ms) + tokens),
	    .decoding = (float)pg_work_decoding(b),
	    .sent_ns = now_ns,
	};
	t->pred_ms = (float)pg_speed_predict(sp, t->ahead, t->decoding);
	{
		/* (a racy average: a lost update is one sample fewer; each step
		 * moves it by at least a token, so it reaches what it averages) */
		const int64_t avg = LOAD(&b->work_avg), d = (int64_t)tokens - avg;
		const int64_t step = (d + (d > 0   ? PG_WORK_AVG_N - 1
		                           : d < 0 ? 1 - PG_WORK_AVG_N
		                                   : 0)) /
		                     PG_WORK_AVG_N;

		STORE(&b->work_avg, (uint32_t)(avg ? avg + step : tokens));
	}
	ADD(&b->prefill_tokens, tokens);
	t->seq = ADD(&b->takes, 1) + 1;
	t->queued = ADD(&b->prefill_reqs, 1) || LOAD(&b->peer_prefill_reqs);
	if (!t->queued) /* an idle engine starts on it now */
		STORE(&b->head_since_ms, now_ms);
}

void pg_work_drop(struct pg_backend *b, struct pg_work_ticket *t)
{
	if (!t->pending)
		return;
	t->pending = false;
	SUB(&b->prefill_tokens, t->tokens);
	SUB(&b->prefill_reqs, 1);
}

static void store_max(__u64 *p, uint64_t v);

void pg_work_leave(struct pg_backend *b, struct pg_work_ticket *t, uint64_t end_ms)
{
	if (!t->pending)
		return;
	pg_work_drop(b, t);
	store_max(&b->head_since_ms, end_ms);
}

/* *p = v if v is later (a concurrent later store is kept). */
static void store_max(__u64 *p, uint64_t v)
{
	__u64 cur = LOAD(p);

	while (v > cur &&
	       !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

double pg_work_first(struct pg_backend *b, struct pg_work_ticket *t, double overhead_ms,
                     uint64_t now_ns)
{
	const uint64_t end_ms = (uint64_t)fmax((double)now_ns / 1e6 - overhead_ms, 0);

	pg_work_drop(b, t);
	ADD(&b->firsts, 1);
	/* its prefill ended an overhead ago: the engine is on the next since */
	store_max(&b->head_since_ms, end_ms);
	store_max(&b->first_ns, now_ns);
	return (double)(now_ns - t->sent_ns) / 1e6;
}

bool pg_work_learn(struct pg_fit *f, const struct pg_backend *b, const struct pg_work_ticket *t,
                   uint64_t now_ns, struct pg_fit_obs *obs)
{
	/* another gateway's request may have been ahead of it unseen (sent
	 * just before, its news on the way): while any of theirs waits, it is
	 * not known to have reached an idle engine */
	return pg_fit_first(f, t->sent_ns, now_ns, LOAD(&b->peer_first_ns), t->tokens, t->decoding,
	                    t->queued || LOAD(&b->peer_prefill_reqs), obs);
}

/* now - then in us, or PG_WORK_AGE_NONE (then 0, or too long ago). */
static uint32_t age_us(uint64_t now_ns, uint64_t then_ns)
{
	const uint64_t a = now_ns > then_ns ? (now_ns - then_ns) / 1000 : 0;

	return then_ns && a < PG_WORK_AGE_NONE ? (uint32_t)a : PG_WORK_AGE_NONE;
}

void pg_work_ages(const struct pg_backend *b, uint64_t now_ns, uint32_t *head_age_us,
                  uint32_t *first_age_us)
{
	*head_age_us = age_us(now_ns, LOAD(&b->head_since_ms) * 1000000);
	*first_age_us = age_us(now_ns, LOAD(&b->first_ns));
}

void pg_work_heard(struct pg_backend *b, uint64_t now_ns, uint32_t head_age_us,
                   uint32_t first_age_us)
{
	const uint64_t head_ns = (uint64_t)head_age_us * 1000,
	               first_ns = (uint64_t)first_age_us * 1000;

	if (head_age_us != PG_WORK_AGE_NONE && head_ns < now_ns)
		store_max(&b->head_since_ms, (now_ns - head_ns) / 1000000);
	if (first_age_us != PG_WORK_AGE_NONE && first_ns < now_ns)
		store_max(&b->peer_first_ns, now_ns - first_ns);
}
