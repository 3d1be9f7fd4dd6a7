// SPDX-License-Identifier: MIT
/* tracesim: the figures of a run, as text and JSON (tracesim.h). */
#include <stdlib.h>
#include <string.h>

#include "tracesim.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The p-quantile of sorted v[0..n) (nearest rank). */
static double pct(const double *v, size_t n, double p)
{
	size_t i = (size_t)(p * (double)(n - 1) + 0.5);

	return n ? v[i < n ? i : n - 1] : 0;
}

struct figures {
	double mean, p50, p90, p99;
	double hit;                       /* cached / prompt tokens, over the instances */
	double req[TS_MAX_INSTANCES + 1]; /* share of requests */
	double tok[TS_MAX_INSTANCES + 1]; /* share of prompt tokens */
	double slow[15];                  /* the slowed one's token share by 10 s */
};

/* The slowed instance's share of the prompt tokens sent in window k of
 * 10 s, k = -3..11 around the slowdown. */
static double slow_share(const struct ts_world *w, int k)
{
	const int64_t lo = (int64_t)w->slow_t + (int64_t)k * 10000000000ll;
	double tot = 0, mine = 0;

	for (size_t i = 0; i < w->nlog; i++) {
		if ((int64_t)w->log[i].t_ns < lo || (int64_t)w->log[i].t_ns >= lo + 10000000000ll)
			continue;
		tot += w->log[i].tokens;
		mine += w->log[i].b == w->o.slow_inst ? w->log[i].tokens : 0;
	}
	return tot ? mine / tot : 0;
}

static void compute(const struct ts_world *w, double *sorted, struct figures *f)
{
	double q = 0, h = 0, sum = 0, tokens = 0;

	memset(f, 0, sizeof(*f));
	memcpy(sorted, w->ttft, w->nttft * sizeof(*sorted));
	qsort(sorted, w->nttft, sizeof(*sorted), cmp_double);
	for (size_t i = 0; i < w->nttft; i++)
		sum += sorted[i];
	f->mean = w->nttft ? sum / (double)w->nttft : 0;
	f->p50 = pct(sorted, w->nttft, 0.50);
	f->p90 = pct(sorted, w->nttft, 0.90);
	f->p99 = pct(sorted, w->nttft, 0.99);
	for (unsigned i = 1; i <= w->o.n; i++) {
		struct sim_stats st;

		sim_get_stats(w->inst[i], &st);
		q += (double)st.prefix_queries;
		h += (double)st.prefix_hits;
		f->tok[i] = (double)st.prefix_queries;
		tokens += (double)st.prefix_queries;
		f->req[i] = (double)w->sent[i] / (double)w->nrec;
	}
	f->hit = q ? h / q : 0;
	for (unsigned i = 1; i <= w->o.n; i++)
		f->tok[i] = tokens ? f->tok[i] / tokens : 0;
	for (int k = 0; w->slowed && k < 15; k++)
		f->slow[k] = slow_share(w, k - 3);
}

static void json_shares(FILE *j, const char *name, const double *v, unsigned n)
{
	fprintf(j, ",\"%s\":[", name);
	for (unsigned i = 1; i <= n; i++)
		fprintf(j, "%s%.4f", i > 1 ? "," : "", v[i]);
	fprintf(j, "]");
}

static int write_json(const struct ts_world *w, const struct figures *f)
{
	FILE *j = fopen(w->o.json, "w");

	if (!j) {
		perror(w->o.json);
		return -1;
	}
	fprintf(j,
	        "{\"strategy\":\"%s\",\"load\":%g,\"instances\":%u,\"gateways\":%u,"
	        "\"requests\":%zu,"
	        "\"speedup\":%.4f,\"ttft_ms\":{\"mean\":%.1f,\"p50\":%.1f,\"p90\":%.1f,"
	        "\"p99\":%.1f},\"hit_rate\":%.4f,\"prediction_error_ms\":{\"mean\":%.1f,"
	        "\"mean_abs\":%.1f},\"max_queue_tokens\":%.0f",
	        w->o.strategy, w->o.load, w->o.n, w->o.gateways, w->nrec, w->speedup, f->mean,
	        f->p50, f->p90, f->p99, f->hit, w->nttft ? w->err_sum / (double)w->nttft : 0,
	        w->nttft ? w->err_abs / (double)w->nttft : 0, w->max_queue);
	json_shares(j, "share_requests", f->req, w->o.n);
	json_shares(j, "share_tokens", f->tok, w->o.n);
	fprintf(j, ",\"speeds\":[");
	for (unsigned i = 1; i <= w->o.n; i++)
		fprintf(j, "%s%g", i > 1 ? "," : "", w->o.speed[i]);
	fprintf(j, "]");
	if (w->slowed) {
		fprintf(j,
		        ",\"slow\":{\"instance\":%u,\"factor\":%g,\"at_s\":%.1f,\"windows_s\":10,"
		        "\"share_tokens\":[",
		        w->o.slow_inst, w->o.slow_factor, (double)w->slow_t / 1e9);
		for (int k = 0; k < 15; k++)
			fprintf(j, "%s%.4f", k ? "," : "", f->slow[k]);
		fprintf(j, "],\"first_window\":-3}");
	}
	fprintf(j, "}\n");
	return fclose(j) ? -1 : 0;
}

int ts_report(const struct ts_world *w, FILE *out)
{
	double *sorted = malloc((w->nttft ? w->nttft : 1) * sizeof(*sorted));
	struct figures f;
	int rc = 0;

	if (!sorted)
		return -1;
	compute(w, sorted, &f);
	free(sorted);
	fprintf(out,
	        "%-26s load %.2f  TTFT ms mean %7.0f p50 %7.0f p90 %7.0f p99 %7.0f  hit %.3f  "
	        "error %+.0f/%.0f ms\n",
	        w->o.strategy, w->o.load, f.mean, f.p50, f.p90, f.p99, f.hit,
	        w->nttft ? w->err_sum / (double)w->nttft : 0,
	        w->nttft ? w->err_abs / (double)w->nttft : 0);
	if (w->o.verbose) {
		fprintf(out, "  share of requests / prompt tokens, and the speed learned%s:\n",
		        w->o.gateways > 1 ? " by each gateway" : "");
		for (unsigned i = 1; i <= w->o.n; i++) {
			fprintf(out, "  %2u (x%g): %.3f / %.3f ", i, w->o.speed[i], f.req[i],
			        f.tok[i]);
			for (unsigned g = 0; g < w->o.gateways; g++) {
				struct pg_speed sp; /* what it routes on */

				pg_work_speed(&w->gw[g].be[i], &sp);
				fprintf(out,
				        " %s%.1f ms, %.0f tokens/s, %.2f ms a decoding request",
				        g ? "| " : "", sp.overhead_ms, 1e6 / sp.ms_per_ktok,
				        sp.ms_per_decode);
			}
			fprintf(out, "\n");
		}
	}
	if (w->slowed) {
		fprintf(
		    out,
		    "  instance %u slowed to %gx at %.1f s; its share of prompt tokens by 10 s:",
		    w->o.slow_inst, w->o.slow_factor, (double)w->slow_t / 1e9);
		for (int k = 0; k < 15; k++)
			fprintf(out, "%s %.3f", k == 3 ? " |" : "", f.slow[k]);
		fprintf(out, "\n");
	}
	if (w->o.json)
		rc = write_json(w, &f);
	return rc;
}
