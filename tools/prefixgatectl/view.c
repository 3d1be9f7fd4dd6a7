// SPDX-License-Identifier: MIT
/*
 * Output of status, backends list and top: aligned tables for people,
 * JSON (one document; top: one per line) for scripts. Decision names in JSON
 * are the gateway's own, as in GET /backends. Everything printed comes from
 * the snapshot, which holds the same whichever source filled it: only the
 * "source" line (and JSON member) says which. With model pools a POOL
 * column shows each member's pool, and its ring share is of its pool's
 * ring (view_pools.c has the pools' own lines).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "config/config.h"
#include "ctl.h"
#include "lib/names.h"

/* Column headers, indexed by enum pg_decision (display only). */
static const char *const dec_col[PG_DEC_MAX] = {
    [PG_DEC_AFFINITY] = "AFFINITY", [PG_DEC_OVERFLOW] = "OVERFLOW",
    [PG_DEC_RANDOM] = "RANDOM",     [PG_DEC_LEAST_OUTSTANDING] = "LEAST-OUT",
    [PG_DEC_RETRY] = "RETRY",       [PG_DEC_EXPLICIT_KEY] = "EXPL-KEY",
    [PG_DEC_CACHED] = "CACHED",     [PG_DEC_BALANCED] = "BALANCED",
};
static const char *const dec_rate_col[PG_DEC_MAX] = {
    [PG_DEC_AFFINITY] = "AFF/S", [PG_DEC_OVERFLOW] = "OVF/S",
    [PG_DEC_RANDOM] = "RND/S",   [PG_DEC_LEAST_OUTSTANDING] = "LOR/S",
    [PG_DEC_RETRY] = "RTY/S",    [PG_DEC_EXPLICIT_KEY] = "KEY/S",
    [PG_DEC_CACHED] = "CCH/S",   [PG_DEC_BALANCED] = "BAL/S",
};

const char *ctl_health(const struct ctl_backend *b)
{
	return b->health[0] ? b->health : "up";
}

uint64_t ctl_requests_total(const struct ctl_backend *b)
{
	uint64_t t = 0;

	for (int d = 0; d < PG_DEC_MAX; d++)
		t += b->requests[d];
	return t;
}

void ctl_json_str(FILE *out, const char *s, size_t n)
{
	fputc('"', out);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

static const char *source_name(const struct ctl_snapshot *s)
{
	return s->source == CTL_SRC_MAPS ? "maps" : "api";
}

static void source_line(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s)
{
	if (s->source == CTL_SRC_MAPS && s->stale)
		fprintf(out,
		        "source     BPF maps pinned at %s: STALE, %s (no gateway updates them)\n",
		        o->pin_path, s->stale_why);
	else if (s->source == CTL_SRC_MAPS)
		fprintf(out, "source     BPF maps pinned at %s, written by a live gateway\n",
		        o->pin_path);
	else
		fprintf(out, "source     admin API at %s\n", o->admin);
}

/* ADDRESS: a member's address; a name standing for no address shows its
 * name there in top, "-" in the table (which has a NAME column). */
static const char *address(const struct ctl_backend *b, bool name_instead)
{
	return b->addr[0] ? b->addr : name_instead && b->name[0] ? b->name : "-";
}

static bool any_name(const struct ctl_snapshot *s)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->b[i].name[0])
			return true;
	return false;
}

/* A member's ring share as a table cell: "-" when unknown (a name). */
static void share_cell(FILE *out, const struct ctl_backend *b, int width)
{
	if (b->ring_slots >= 0)
		fprintf(out, "  %*.1f%%", width - 1, 100.0 * (double)b->ring_slots / PG_RING_SLOTS);
	else
		fprintf(out, "  %*s", width, "-");
}

static void table(FILE *out, const struct ctl_snapshot *s)
{
	bool names = any_name(s), pools = ctl_has_pools(s);

	fprintf(out, "%3s  %-21s  %-10s  %9s  %9s", "ID", "ADDRESS", "HEALTH", "IN-FLIGHT",
	        "REQUESTS");
	for (int d = 0; d < PG_DEC_MAX; d++)
		fprintf(out, "  %s", dec_col[d]);
	fprintf(out, "  %8s  %10s", "FAILURES", "RING-SHARE");
	if (pools)
		fprintf(out, names ? "  %-16s" : "  %s", "POOL");
	fputs(names ? "  NAME\n" : "\n", out);
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_backend *b = &s->b[i];

		if (b->id)
			fprintf(out, "%3u", b->id);
		else
			fprintf(out, "%3s", "-");
		fprintf(out, "  %-21s  %-10s  %9d  %9llu", address(b, false), ctl_health(b),
		        b->in_flight, (unsigned long long)ctl_requests_total(b));
		for (int d = 0; d < PG_DEC_MAX; d++)
			fprintf(out, "  %*llu", (int)strlen(dec_col[d]),
			        (unsigned long long)b->requests[d]);
		fprintf(out, "  %8llu", (unsigned long long)b->failures);
		share_cell(out, b, 10);
		if (pools)
			fprintf(out, names ? "  %-16s" : "  %s", s->pool[b->pool].name);
		if (names)
			fprintf(out, "  %s", b->name[0] ? b->name : "-");
		fputc('\n', out);
	}
	if (!s->n)
		fprintf(out, "(no backends: the gateway answers 502 until one is added)\n");
}

static void json_backend(FILE *out, const struct ctl_snapshot *s, const struct ctl_backend *b)
{
	fprintf(out, "{\"id\":%u,\"address\":", b->id);
	if (b->addr[0])
		ctl_json_str(out, b->addr, strlen(b->addr));
	else
		fputs("null", out);
	if (b->name[0]) {
		fprintf(out, ",\"name\":");
		ctl_json_str(out, b->name, strlen(b->name));
	}
	fprintf(out, ",\"health\":\"%s\",\"healthy\":%s,\"draining\":%s,\"pool\":", ctl_health(b),
	        b->healthy ? "true" : "false", ctl_draining(b) ? "true" : "false");
	ctl_json_str(out, s->pool[b->pool].name, strlen(s->pool[b->pool].name));
	fprintf(out, ",\"in_flight\":%d,\"epoch\":%u,\"requests\":%llu,\"requests_by_decision\":{",
	        b->in_flight, b->epoch, (unsigned long long)ctl_requests_total(b));
	for (int d = 0; d < PG_DEC_MAX; d++)
		fprintf(out, "%s\"%s\":%llu", d ? "," : "", pg_decision_name(d),
		        (unsigned long long)b->requests[d]);
	fprintf(out, "},\"failures\":%llu,", (unsigned long long)b->failures);
	if (b->ring_slots >= 0)
		fprintf(out, "\"ring_slots\":%lld,\"ring_share\":%.6f}", (long long)b->ring_slots,
		        (double)b->ring_slots / PG_RING_SLOTS);
	else
		fprintf(out, "\"ring_slots\":null,\"ring_share\":null}");
}

static void json_backends(FILE *out, const struct ctl_snapshot *s)
{
	fputc('[', out);
	for (size_t i = 0; i < s->n; i++) {
		fputs(i ? "," : "", out);
		json_backend(out, s, &s->b[i]);
	}
	fputc(']', out);
}

/* The document's head: its source; the default pool's routing and ring
 * (as before pools, for scripts that read them); every pool. */
static void json_head(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s)
{
	const struct ctl_pool *p0 = &s->pool[0];

	fprintf(out, "{\"source\":\"%s\",\"stale\":%s,\"pin_path\":", source_name(s),
	        s->stale ? "true" : "false");
	ctl_json_str(out, o->pin_path, strlen(o->pin_path));
	fputs(",\"admin\":", out);
	ctl_json_str(out, o->admin, strlen(o->admin));
	fputs(",\"routing\":", out);
	ctl_json_routing(out, p0);
	fprintf(out,
	        ",\"ring\":{\"generation\":%llu,\"slots\":%u,\"remapped_ratio\":%.6f,"
	        "\"members\":%u},\"pools\":[",
	        (unsigned long long)p0->ring_generation, PG_RING_SLOTS, p0->remapped, p0->members);
	for (unsigned p = 0; p < s->npools; p++) {
		fputs(p ? "," : "", out);
		ctl_json_pool(out, s, p);
	}
	fputc(']', out);
}

void ctl_view_status(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s,
                     bool backends_only, const struct ctl_http_resp *tls)
{
	unsigned up = 0, down = 0, unhealthy = 0, draining = 0, names = 0;
	long long inflight = 0;

	if (o->json) {
		if (backends_only) {
			json_backends(out, s);
		} else {
			json_head(out, o, s);
			ctl_view_tls(out, o, tls);
			ctl_json_queue(out, s);
			fputs(",\"backends\":", out);
			json_backends(out, s);
			fputc('}', out);
		}
		fputc('\n', out);
		return;
	}
	if (!backends_only) {
		for (size_t i = 0; i < s->n; i++) {
			const char *h = ctl_health(&s->b[i]);

			if (!s->b[i].id) {
				names++;
				continue;
			}
			up += !strcmp(h, "up");
			down += !strcmp(h, "down");
			unhealthy += !strcmp(h, "unhealthy");
			draining += !strcmp(h, "draining");
			inflight += s->b[i].in_flight;
		}
		source_line(out, o, s);
		ctl_view_tls(out, o, tls);
		ctl_view_pool_lines(out, s);
		ctl_view_queue_line(out, s);
		fprintf(out,
		        "backends   %zu (%u up, %u down, %u unhealthy, %u draining), %lld in "
		        "flight",
		        s->n - names, up, down, unhealthy, draining, inflight);
		if (names)
			fprintf(out, "; %u DNS name%s standing for no address", names,
			        names == 1 ? "" : "s");
		fputs("\n\n", out);
	}
	table(out, s);
}

/* The same backend in both snapshots (a reused slot is a new member). */
static const struct ctl_backend *find_prev(const struct ctl_snapshot *prev,
                                           const struct ctl_backend *b)
{
	for (size_t i = 0; prev && i < prev->n; i++)
		if (prev->b[i].id == b->id && prev->b[i].epoch == b->epoch &&
		    !strcmp(prev->b[i].addr, b->addr) && !strcmp(prev->b[i].name, b->name))
			return &prev->b[i];
	return NULL;
}

static void top_json(FILE *out, const char *clock, double dt, double total, long long inflight,
                     const struct ctl_snapshot *prev, const struct ctl_snapshot *cur,
                     const uint64_t *delta, const bool *known)
{
	fprintf(out,
	        "{\"time\":\"%s\",\"interval\":%.3f,\"source\":\"%s\",\"stale\":%s,"
	        "\"requests_per_second\":%.3f,\"in_flight\":%lld,\"ring_generation\":%llu",
	        clock, dt, source_name(cur), cur->stale ? "true" : "false", total / dt, inflight,
	        (unsigned long long)cur->pool[0].ring_generation);
	ctl_json_queue(out, cur);
	fputs(",\"backends\":[", out);
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctl_backend *b = &cur->b[i], *p = find_prev(prev, b);

		fprintf(out, "%s{\"id\":%u,\"address\":", i ? "," : "", b->id);
		if (b->addr[0])
			ctl_json_str(out, b->addr, strlen(b->addr));
		else
			fputs("null", out);
		fprintf(out, ",\"health\":\"%s\",\"pool\":", ctl_health(b));
		ctl_json_str(out, cur->pool[b->pool].name, strlen(cur->pool[b->pool].name));
		fprintf(out, ",\"in_flight\":%d,", b->in_flight);
		if (!known[i]) {
			fputs("\"requests_per_second\":null,\"share\":null,"
			      "\"decisions_per_second\":null,",
			      out);
		} else {
			fprintf(out,
			        "\"requests_per_second\":%.3f,\"share\":%.6f,"
			        "\"decisions_per_second\":{",
			        (double)delta[i] / dt, total ? (double)delta[i] / total : 0);
			for (int d = 0; d < PG_DEC_MAX; d++)
				fprintf(out, "%s\"%s\":%.3f", d ? "," : "", pg_decision_name(d),
				        (double)(b->requests[d] - p->requests[d]) / dt);
			fputs("},", out);
		}
		if (b->ring_slots >= 0)
			fprintf(out, "\"ring_share\":%.6f}", (double)b->ring_slots / PG_RING_SLOTS);
		else
			fputs("\"ring_share\":null}", out);
	}
	fputs("]}\n", out);
}

void ctl_view_top(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *prev,
                  const struct ctl_snapshot *cur)
{
	double dt = cur->taken - prev->taken, total = 0, rate;
	static uint64_t delta[PG_MAX_BACKENDS];
	static bool known[PG_MAX_BACKENDS];
	bool pools = ctl_has_pools(cur);
	long long inflight = 0;
	char clock[16];
	time_t now = time(NULL);
	struct tm tm;

	if (dt <= 0)
		dt = 1e-9;
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctl_backend *p = find_prev(prev, &cur->b[i]);

		known[i] = p != NULL;
		delta[i] = 0;
		if (p && ctl_requests_total(&cur->b[i]) >= ctl_requests_total(p))
			delta[i] = ctl_requests_total(&cur->b[i]) - ctl_requests_total(p);
		total += (double)delta[i];
		inflight += cur->b[i].in_flight;
	}
	strftime(clock, sizeof(clock), "%H:%M:%S", localtime_r(&now, &tm));
	if (o->json) {
		top_json(out, clock, dt, total, inflight, prev, cur, delta, known);
		fflush(out);
		return;
	}
	fprintf(out, "prefixgatectl top  %s  every %.1fs  source %s%s%s%s  (Ctrl-C to stop)\n",
	        clock, o->interval, cur->source == CTL_SRC_MAPS ? o->pin_path : o->admin,
	        cur->stale ? ": STALE, " : "", cur->stale ? cur->stale_why : "",
	        cur->stale ? " (no gateway updates them)" : "");
	ctl_view_pool_lines(out, cur);
	ctl_view_queue_line(out, cur);
	fprintf(out, "total      %.1f req/s, %lld in flight, %zu backend%s\n\n", total / dt,
	        inflight, cur->n, cur->n == 1 ? "" : "s");
	fprintf(out, "%-21s  %-10s  %9s  %8s  %6s  %6s", "ADDRESS", "HEALTH", "IN-FLIGHT", "REQ/S",
	        "SHARE", "RING");
	for (int d = 0; d < PG_DEC_MAX; d++)
		fprintf(out, "  %7s", dec_rate_col[d]);
	fputs(pools ? "  POOL\n" : "\n", out);
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctl_backend *b = &cur->b[i], *p = find_prev(prev, b);

		fprintf(out, "%-21s  %-10s  %9d", address(b, true), ctl_health(b), b->in_flight);
		rate = (double)delta[i] / dt;
		if (known[i])
			fprintf(out, "  %8.1f  %5.1f%%", rate,
			        total ? 100.0 * (double)delta[i] / total : 0.0);
		else
			fprintf(out, "  %8s  %6s", "new", "-");
		share_cell(out, b, 6);
		for (int d = 0; d < PG_DEC_MAX; d++) {
			if (known[i])
				fprintf(out, "  %7.1f",
				        (double)(b->requests[d] - p->requests[d]) / dt);
			else
				fprintf(out, "  %7s", "-");
		}
		if (pools)
			fprintf(out, "  %s", cur->pool[b->pool].name);
		fputc('\n', out);
	}
	if (!cur->n)
		fprintf(out, "(no backends)\n");
	fflush(out);
}
