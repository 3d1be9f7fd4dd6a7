// SPDX-License-Identifier: MIT
/*
 * Reporting: CSV (one row per request), JSON summary, human summary.
 * Percentiles are nearest-rank, and means arithmetic (pg_dist), over
 * successful requests (err == PG_OK); TTFT over those that had a content
 * event. Inter-token latency (itl.h): over every gap of every successful
 * streamed request, each gap one sample (a long reply weighs more than a
 * short one), and, separately, over the requests' largest gaps (ITL max:
 * how often a reply stalls at least once).
 * Throughput divides by the run's wall time, first arrival to last
 * completion. The cached-token ratio is sum(cached) / sum(prompt) over
 * successful responses whose usage reported both numbers.
 */
#include "pgload.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const err_names[PG_ERR__COUNT] = {
    [PG_OK] = "",
    [PG_ERR_CONNECT] = "connect",
    [PG_ERR_IO] = "io",
    [PG_ERR_EOF] = "eof",
    [PG_ERR_TIMEOUT] = "timeout",
    [PG_ERR_PARSE] = "parse",
    [PG_ERR_STATUS] = "status",
    [PG_ERR_TRUNCATED] = "truncated",
    [PG_ERR_ABORTED] = "aborted",
};

const char *pg_err_name(enum pg_err e)
{
	return e < PG_ERR__COUNT ? err_names[e] : "?";
}

struct summary {
	uint64_t n, ok, errors, by_err[PG_ERR__COUNT];
	double wall_s, rps, out_tps;
	uint64_t out_tokens, prompt_sum, cached_sum, usage_n;
	double ttft[4], e2e[4]; /* mean, p50, p90, p99 in ms; -1 when no sample */
	double itl[4], itl_max[4];
	uint64_t itl_gaps, itl_reqs; /* gaps, and requests with at least one */
	uint64_t per_backend[PGLOAD_MAX_BACKENDS], backend_total;
	double share_min, share_max; /* % of requests with a backend id */
	double cpu_pct;
};

static int summarise(const struct pg_run *run, struct summary *s)
{
	uint64_t *ttft = malloc((run->nrecs + 1) * sizeof(*ttft));
	uint64_t *e2e = malloc((run->nrecs + 1) * sizeof(*e2e));
	uint64_t *imax = malloc((run->nrecs + 1) * sizeof(*imax));
	uint64_t *gaps = malloc((run->itl.n + 1) * sizeof(*gaps));
	size_t nt = 0, ne = 0, nm = 0;

	memset(s, 0, sizeof(*s));
	if (!ttft || !e2e || !imax || !gaps) {
		free(ttft);
		free(e2e);
		free(imax);
		free(gaps);
		fprintf(stderr, "pgload: out of memory summarising\n");
		return -1;
	}
	s->n = run->nrecs;
	for (size_t i = 0; i < run->nrecs; i++) {
		const struct pg_rec *r = &run->recs[i];

		s->by_err[r->err < PG_ERR__COUNT ? r->err : PG_ERR_IO]++;
		if (r->err != PG_OK)
			continue;
		s->ok++;
		e2e[ne++] = r->e2e_ns;
		if (r->ttft_ns)
			ttft[nt++] = r->ttft_ns;
		if (r->itl_n)
			imax[nm++] = r->itl_max_ns;
		if (r->completion_tokens > 0)
			s->out_tokens += (uint64_t)r->completion_tokens;
		if (r->prompt_tokens >= 0 && r->cached_tokens >= 0) {
			s->prompt_sum += (uint64_t)r->prompt_tokens;
			s->cached_sum += (uint64_t)r->cached_tokens;
			s->usage_n++;
		}
		if (r->backend != PG_NO_BACKEND) {
			s->per_backend[r->backend]++;
			s->backend_total++;
		}
	}
	s->errors = s->n - s->ok;
	pg_dist(ttft, nt, s->ttft);
	pg_dist(e2e, ne, s->e2e);
	pg_dist(imax, nm, s->itl_max);
	if (run->itl.n)
		memcpy(gaps, run->itl.v, run->itl.n * sizeof(*gaps));
	pg_dist(gaps, run->itl.n, s->itl);
	s->itl_gaps = run->itl.n;
	s->itl_reqs = nm;
	free(ttft);
	free(e2e);
	free(imax);
	free(gaps);
	s->wall_s = (double)(run->end_ns - run->t0_ns) / 1e9;
	if (s->wall_s > 0) {
		s->rps = (double)s->ok / s->wall_s;
		s->out_tps = (double)s->out_tokens / s->wall_s;
		s->cpu_pct = 100.0 * (run->cpu_user_s + run->cpu_sys_s) / s->wall_s;
	}
	s->share_min = s->share_max = 0;
	for (unsigned b = 0; b < run->nbackends && s->backend_total; b++) {
		double pct = 100.0 * (double)s->per_backend[b] / (double)s->backend_total;

		if (b == 0 || pct < s->share_min)
			s->share_min = pct;
		if (b == 0 || pct > s->share_max)
			s->share_max = pct;
	}
	return 0;
}

static int write_csv(const struct pg_opts *o, const struct pg_run *run)
{
	FILE *f = fopen(o->csv_path, "w");

	if (!f) {
		fprintf(stderr, "pgload: --csv %s: %s\n", o->csv_path, strerror(errno));
		return -1;
	}
	fprintf(f, "index,start_us,queue_us,ttft_us,e2e_us,status,error,bytes_sent,bytes_recv,"
	           "prompt_tokens,cached_tokens,completion_tokens,backend,group,turn,target,"
	           "itl_mean_us,itl_max_us\n");
	for (size_t i = 0; i < run->nrecs; i++) {
		const struct pg_rec *r = &run->recs[i];

		fprintf(f, "%zu,%llu,%llu,", i,
		        (unsigned long long)((r->start_ns - run->t0_ns) / 1000),
		        (unsigned long long)((r->send_ns - r->start_ns) / 1000));
		if (r->ttft_ns)
			fprintf(f, "%llu", (unsigned long long)(r->ttft_ns / 1000));
		fprintf(f, ",%llu,%u,%s,%llu,%llu,%d,%d,%d,%s,%u,%u,%s,",
		        (unsigned long long)(r->e2e_ns / 1000), r->status,
		        pg_err_name((enum pg_err)r->err), (unsigned long long)r->bytes_sent,
		        (unsigned long long)r->bytes_recv, r->prompt_tokens, r->cached_tokens,
		        r->completion_tokens,
		        r->backend == PG_NO_BACKEND ? "" : run->backends[r->backend], r->group,
		        r->turn, o->targets[r->target].name);
		if (r->itl_n)
			fprintf(f, "%llu,%llu",
			        (unsigned long long)(r->itl_sum_ns / r->itl_n / 1000),
			        (unsigned long long)(r->itl_max_ns / 1000));
		else
			fputc(',', f);
		fputc('\n', f);
	}
	if (fclose(f) == EOF) {
		fprintf(stderr, "pgload: writing --csv %s: %s\n", o->csv_path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Backend ids come from the network: escape them for JSON. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v, bool comma)
{
	if (v < 0)
		fprintf(f, "\"%s\":null%s", key, comma ? "," : "");
	else
		fprintf(f, "\"%s\":%.3f%s", key, v, comma ? "," : "");
}

/* "open" (--rate), "trace" (the trace's own times) or "closed". */
static const char *mode_name(const struct pg_opts *o)
{
	return pg_scheduled(o) ? "trace" : o->rate > 0 ? "open" : "closed";
}

/* "trace":{...}, the replay's numbers (pgload.h, struct pg_trace_sum). */
static void json_trace(FILE *f, const struct pg_opts *o, const struct pg_trace_sum *t)
{
	fprintf(f, "\"trace\":{\"file\":");
	json_str(f, o->trace_path);
	fprintf(f,
	        ",\"requests_in_file\":%llu,\"first\":%llu,\"count\":%llu,"
	        "\"input_tokens\":%llu,\"uncached_tokens_W\":%llu,\"distinct_blocks\":%llu,"
	        "\"span_s_D\":%.3f,\"speedup_S\":%.6f,",
	        (unsigned long long)t->total, (unsigned long long)t->first,
	        (unsigned long long)t->count, (unsigned long long)t->input_tokens,
	        (unsigned long long)t->uncached_tokens, (unsigned long long)t->distinct_blocks,
	        t->span_s, t->speedup);
	if (o->load > 0)
		fprintf(f, "\"load\":%g,\"capacity_tokens_per_s\":%g,", o->load, o->capacity_tps);
	else
		fprintf(f, "\"load\":null,\"capacity_tokens_per_s\":null,");
	fprintf(f,
	        "\"mean_rate\":%.3f,\"built\":%llu,\"padded_requests\":%llu,"
	        "\"padded_tokens\":%llu},",
	        t->mean_rate, (unsigned long long)t->built, (unsigned long long)t->padded_requests,
	        (unsigned long long)t->padded_tokens);
}

/* {"mean":..,"p50":..,"p90":..,"p99":..} of pg_dist()'s v. */
static void json_dist(FILE *f, const double v[4])
{
	static const char *const keys[4] = {"mean", "p50", "p90", "p99"};

	fputc('{', f);
	for (int i = 0; i < 4; i++)
		json_num(f, keys[i], v[i], i < 3);
	fputc('}', f);
}

static int write_json(const struct pg_opts *o, const struct pg_run *run, const struct summary *s)
{
	FILE *f = fopen(o->json_path, "w");

	if (!f) {
		fprintf(stderr, "pgload: --json %s: %s\n", o->json_path, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"label\":");
	json_str(f, o->label);
	fprintf(f, ",\"workload\":\"%s\",\"target\":\"%s\",\"mode\":\"%s\",",
	        pg_workload_name(o->workload), o->target, mode_name(o));
	fprintf(f, "\"rate\":%g,\"concurrency\":%u,\"seed\":%llu,\"stream\":%s,",
	        run->trace.on ? run->trace.mean_rate : o->rate, o->concurrency,
	        (unsigned long long)o->seed, o->stream ? "true" : "false");
	if (run->trace.on)
		json_trace(f, o, &run->trace);
	fprintf(f, "\"requests\":%llu,\"ok\":%llu,\"errors\":%llu,\"errors_by_kind\":{",
	        (unsigned long long)s->n, (unsigned long long)s->ok, (unsigned long long)s->errors);
	for (int k = 1, first = 1; k < PG_ERR__COUNT; k++) {
		if (!s->by_err[k])
			continue;
		fprintf(f, "%s\"%s\":%llu", first ? "" : ",", err_names[k],
		        (unsigned long long)s->by_err[k]);
		first = 0;
	}
	fprintf(f, "},\"arrivals_unsent\":%llu,\"arrivals_delayed\":%llu,\"retries\":%llu,",
	        (unsigned long long)run->arrivals_unsent, (unsigned long long)run->arrivals_delayed,
	        (unsigned long long)run->retries);
	fprintf(f,
	        "\"wall_s\":%.3f,\"req_per_s\":%.3f,\"output_tokens\":%llu,"
	        "\"output_tokens_per_s\":%.3f,",
	        s->wall_s, s->rps, (unsigned long long)s->out_tokens, s->out_tps);
	fprintf(f, "\"ttft_ms\":");
	json_dist(f, s->ttft);
	fprintf(f, ",\"e2e_ms\":");
	json_dist(f, s->e2e);
	fprintf(f, ",\"itl_ms\":");
	json_dist(f, s->itl);
	fprintf(f, ",\"itl_max_ms\":");
	json_dist(f, s->itl_max);
	fprintf(f, ",\"itl_gaps\":%llu,\"itl_requests\":%llu", (unsigned long long)s->itl_gaps,
	        (unsigned long long)s->itl_reqs);
	fprintf(f, ",\"prompt_tokens\":%llu,\"cached_tokens\":%llu,",
	        (unsigned long long)s->prompt_sum, (unsigned long long)s->cached_sum);
	json_num(f, "cached_ratio",
	         s->prompt_sum ? (double)s->cached_sum / (double)s->prompt_sum : -1, true);
	fprintf(f, "\"backends\":{");
	for (unsigned b = 0; b < run->nbackends; b++) {
		json_str(f, run->backends[b]);
		fprintf(f, ":%llu%s", (unsigned long long)s->per_backend[b],
		        b + 1 < run->nbackends ? "," : "");
	}
	fprintf(f, "},\"targets\":{");
	for (unsigned t = 0; t < o->ntargets; t++) {
		uint64_t n = 0;

		for (size_t i = 0; i < run->nrecs; i++)
			n += run->recs[i].target == t;
		json_str(f, o->targets[t].name);
		fprintf(f, ":%llu%s", (unsigned long long)n, t + 1 < o->ntargets ? "," : "");
	}
	fprintf(f, "},");
	json_num(f, "share_min_pct", run->nbackends ? s->share_min : -1, true);
	json_num(f, "share_max_pct", run->nbackends ? s->share_max : -1, true);
	fprintf(f,
	        "\"cpu_user_s\":%.3f,\"cpu_sys_s\":%.3f,\"cpu_pct\":%.1f,"
	        "\"involuntary_switches\":%llu,\"max_timer_lag_ms\":%.3f,"
	        "\"connections_opened\":%llu,\"hit_deadline\":%s}\n",
	        run->cpu_user_s, run->cpu_sys_s, s->cpu_pct, (unsigned long long)run->preempted,
	        (double)run->max_lag_ns / 1e6, (unsigned long long)run->conns_opened,
	        run->hit_deadline ? "true" : "false");
	if (fclose(f) == EOF) {
		fprintf(stderr, "pgload: writing --json %s: %s\n", o->json_path, strerror(errno));
		return -1;
	}
	return 0;
}

static void print_pcts(const char *what, const double v[4])
{
	if (v[0] < 0) {
		printf("  %-11s n/a\n", what);
		return;
	}
	printf("  %-11s mean %.2f  p50 %.2f  p90 %.2f  p99 %.2f\n", what, v[0], v[1], v[2], v[3]);
}

static void print_trace(const struct pg_opts *o, const struct pg_trace_sum *t)
{
	printf("trace replay at %.4fx, mean %.2f req/s\n", t->speedup, t->mean_rate);
	printf("  trace       %s: requests %llu..%llu of %llu; W %llu tokens not cached by an "
	       "infinite prefix cache (of %llu; %llu distinct blocks), D %.3f s, S %.6f",
	       o->trace_path, (unsigned long long)t->first,
	       (unsigned long long)(t->first + t->count - 1), (unsigned long long)t->total,
	       (unsigned long long)t->uncached_tokens, (unsigned long long)t->input_tokens,
	       (unsigned long long)t->distinct_blocks, t->span_s, t->speedup);
	if (o->load > 0)
		printf(" = %g x %g x D / W\n", o->load, o->capacity_tps);
	else
		printf(" (%s)\n", o->speedup > 0 ? "--speedup" : "the trace's own pace");
	if (t->padded_requests)
		printf("  padding     %llu of %llu requests asked for more than their blocks: %llu "
		       "tokens padded\n",
		       (unsigned long long)t->padded_requests, (unsigned long long)t->built,
		       (unsigned long long)t->padded_tokens);
}

static void print_summary(const struct pg_opts *o, const struct pg_run *run,
                          const struct summary *s)
{
	printf("pgload [%s] workload %s -> %s, ", o->label, pg_workload_name(o->workload),
	       o->target);
	if (run->trace.on)
		print_trace(o, &run->trace);
	else if (o->rate > 0)
		printf("open loop %.1f req/s\n", o->rate);
	else
		printf("closed loop, concurrency %u\n", o->concurrency);
	printf("  requests    %llu sent, %llu ok, %llu errors", (unsigned long long)s->n,
	       (unsigned long long)s->ok, (unsigned long long)s->errors);
	for (int k = 1; k < PG_ERR__COUNT; k++)
		if (s->by_err[k])
			printf(" %s=%llu", err_names[k], (unsigned long long)s->by_err[k]);
	if (run->arrivals_unsent)
		printf(", %llu arrivals never sent", (unsigned long long)run->arrivals_unsent);
	printf("\n  throughput  %.1f req/s, %.0f output tokens/s over %.2f s\n", s->rps, s->out_tps,
	       s->wall_s);
	print_pcts("TTFT ms", s->ttft);
	print_pcts("e2e ms", s->e2e);
	if (s->itl_gaps) {
		print_pcts("ITL ms", s->itl);
		print_pcts("ITL max ms", s->itl_max);
		printf("              (%llu gaps between the streamed events of %llu requests; "
		       "ITL max: each request's largest%s)\n",
		       (unsigned long long)s->itl_gaps, (unsigned long long)s->itl_reqs,
		       run->itl_oom ? "; SOME GAPS LOST: out of memory" : "");
	} else if (o->stream) {
		printf("  ITL ms      n/a (no request streamed two content events)\n");
	}
	if (s->prompt_sum)
		printf("  cached      %.1f%% of prompt tokens (%llu / %llu)\n",
		       100.0 * (double)s->cached_sum / (double)s->prompt_sum,
		       (unsigned long long)s->cached_sum, (unsigned long long)s->prompt_sum);
	else
		printf("  cached      n/a (no usage with prompt_tokens and cached_tokens)\n");
	if (run->nbackends)
		printf("  instances   %u seen, share of requests min %.1f%% max %.1f%%\n",
		       run->nbackends, s->share_min, s->share_max);
	else
		printf("  instances   n/a (no X-Backend-Id header)\n");
	printf("  generator   CPU %.1f%% of one core (user %.2f s, sys %.2f s, %llu preemptions), "
	       "max timer lag %.3f ms, %llu connections, %llu arrivals delayed >1 ms%s\n",
	       s->cpu_pct, run->cpu_user_s, run->cpu_sys_s, (unsigned long long)run->preempted,
	       (double)run->max_lag_ns / 1e6, (unsigned long long)run->conns_opened,
	       (unsigned long long)run->arrivals_delayed,
	       run->hit_deadline ? ", HIT HARD DEADLINE" : "");
}

int pg_report(const struct pg_opts *o, const struct pg_run *run)
{
	struct summary *s = malloc(sizeof(*s));
	int rc = 0;

	if (!s || summarise(run, s) == -1) {
		free(s);
		return -1;
	}
	if (o->csv_path && write_csv(o, run) == -1)
		rc = -1;
	if (o->json_path && write_json(o, run, s) == -1)
		rc = -1;
	if (!o->quiet)
		print_summary(o, run, s);
	free(s);
	return rc;
}
