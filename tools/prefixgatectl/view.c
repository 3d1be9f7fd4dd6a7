// SPDX-License-Identifier: MIT
/*
 * Output of status, backends list and top: aligned tables for people,
 * JSON (one document; top: one per line) for scripts. Decision names in JSON
 * are the gateway's own, as in GET /backends.
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
	if (b->state[0])
		return b->state;
	return b->draining ? "draining" : b->down ? "down" : "up";
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
		fprintf(out, "source     admin API at %s (ring share: only from the pinned maps)\n",
		        o->admin);
}

static void routing_line(FILE *out, const struct ctl_snapshot *s)
{
	if (!s->have_routing) {
		fprintf(out, "routing    unknown\n");
		return;
	}
	fprintf(out, "routing    %s, PrefixLength %u, ConcurrencyThreshold %u",
	        pg_strategy_name((enum pg_strategy)s->strategy), s->prefix_length,
	        s->concurrency_threshold);
	if (s->strategy == PG_STRATEGY_CACHE_AWARE)
		fprintf(out, ", NewConversationChoices %u", s->new_choices);
	fputc('\n', out);
}

static void ring_line(FILE *out, const struct ctl_snapshot *s)
{
	if (!s->have_ring) {
		fprintf(out, "ring       unknown\n");
		return;
	}
	fprintf(out, "ring       generation %llu", (unsigned long long)s->ring_generation);
	if (s->have_ring_members)
		fprintf(out, ", %u members, %u slots", s->ring_members, PG_RING_SLOTS);
	fprintf(out, "; last change moved %.1f%% of keys\n", s->remapped * 100);
}

static void table(FILE *out, const struct ctl_snapshot *s)
{
	bool names = false;

	/* NAME: the DNS name a member came from, when any did (API source). */
	for (size_t i = 0; i < s->n; i++)
		names = names || s->b[i].name[0];
	fprintf(out, "%3s  %-21s  %-8s  %9s  %9s", "ID", "ADDRESS", "HEALTH", "IN-FLIGHT",
	        "REQUESTS");
	for (int d = 0; d < PG_DEC_MAX; d++)
		fprintf(out, "  %s", dec_col[d]);
	fprintf(out, "  %8s  %10s%s\n", "FAILURES", "RING-SHARE", names ? "  NAME" : "");
	for (size_t i = 0; i < s->n; i++) {
		const struct ctl_backend *b = &s->b[i];

		fprintf(out, "%3u  %-21s  %-8s  %9d  %9llu", b->id, b->addr, ctl_health(b),
		        b->in_flight, (unsigned long long)ctl_requests_total(b));
		for (int d = 0; d < PG_DEC_MAX; d++)
			fprintf(out, "  %*llu", (int)strlen(dec_col[d]),
			        (unsigned long long)b->requests[d]);
		fprintf(out, "  %8llu", (unsigned long long)b->failures);
		if (b->ring_slots >= 0)
			fprintf(out, "  %9.1f%%", 100.0 * (double)b->ring_slots / PG_RING_SLOTS);
		else
			fprintf(out, "  %10s", "-");
		if (names)
			fprintf(out, "  %s", b->name[0] ? b->name : "-");
		fputc('\n', out);
	}
	if (!s->n)
		fprintf(out, "(no backends: the gateway answers 502 until one is added)\n");
}

static void json_backend(FILE *out, const struct ctl_backend *b)
{
	fprintf(out, "{\"id\":%u,\"address\":", b->id);
	ctl_json_str(out, b->addr, strlen(b->addr));
	if (b->name[0]) {
		fprintf(out, ",\"name\":");
		ctl_json_str(out, b->name, strlen(b->name));
	}
	fprintf(out,
	        ",\"health\":\"%s\",\"healthy\":%s,\"draining\":%s,\"in_flight\":%d,"
	        "\"epoch\":%u,\"requests\":%llu,\"requests_by_decision\":{",
	        ctl_health(b), b->down ? "false" : "true", b->draining ? "true" : "false",
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
		json_backend(out, &s->b[i]);
	}
	fputc(']', out);
}

static void json_head(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s)
{
	fprintf(out, "{\"source\":\"%s\",\"stale\":%s,\"pin_path\":", source_name(s),
	        s->stale ? "true" : "false");
	ctl_json_str(out, o->pin_path, strlen(o->pin_path));
	fputs(",\"admin\":", out);
	ctl_json_str(out, o->admin, strlen(o->admin));
	fputs(",\"routing\":", out);
	if (!s->have_routing) {
		fputs("null", out);
	} else {
		fprintf(out,
		        "{\"RoutingStrategy\":\"%s\",\"PrefixAwareRoutingConfig\":"
		        "{\"PrefixLength\":%u,\"ConcurrencyThreshold\":%u}",
		        pg_strategy_name((enum pg_strategy)s->strategy), s->prefix_length,
		        s->concurrency_threshold);
		if (s->strategy == PG_STRATEGY_CACHE_AWARE)
			fprintf(out, ",\"CacheAwareConfig\":{\"NewConversationChoices\":%u}",
			        s->new_choices);
		fputc('}', out);
	}
	fputs(",\"ring\":", out);
	if (s->have_ring) {
		fprintf(out,
		        "{\"generation\":%llu,\"slots\":%u,\"remapped_ratio\":%.6f,\"members\":",
		        (unsigned long long)s->ring_generation, PG_RING_SLOTS, s->remapped);
		if (s->have_ring_members)
			fprintf(out, "%u}", s->ring_members);
		else
			fputs("null}", out);
	} else {
		fputs("null", out);
	}
}

void ctl_view_status(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s,
                     bool backends_only)
{
	unsigned up = 0, down = 0, draining = 0;
	long long inflight = 0;

	if (o->json) {
		if (backends_only) {
			json_backends(out, s);
		} else {
			json_head(out, o, s);
			fputs(",\"backends\":", out);
			json_backends(out, s);
			fputc('}', out);
		}
		fputc('\n', out);
		return;
	}
	if (!backends_only) {
		for (size_t i = 0; i < s->n; i++) {
			up += !s->b[i].draining && !s->b[i].down;
			down += !s->b[i].draining && s->b[i].down;
			draining += s->b[i].draining;
			inflight += s->b[i].in_flight;
		}
		source_line(out, o, s);
		routing_line(out, s);
		ring_line(out, s);
		fprintf(out, "backends   %zu (%u up, %u down, %u draining), %lld in flight\n\n",
		        s->n, up, down, draining, inflight);
	}
	table(out, s);
}

/* The same member in both snapshots (a reused slot is a new member). */
static const struct ctl_backend *find_prev(const struct ctl_snapshot *prev,
                                           const struct ctl_backend *b)
{
	for (size_t i = 0; prev && i < prev->n; i++)
		if (prev->b[i].id == b->id && prev->b[i].epoch == b->epoch &&
		    !strcmp(prev->b[i].addr, b->addr))
			return &prev->b[i];
	return NULL;
}

void ctl_view_top(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *prev,
                  const struct ctl_snapshot *cur)
{
	double dt = cur->taken - prev->taken, total = 0, rate;
	uint64_t delta[PG_MAX_BACKENDS] = {0};
	bool known[PG_MAX_BACKENDS] = {0};
	long long inflight = 0;
	char clock[16];
	time_t now = time(NULL);
	struct tm tm;

	if (dt <= 0)
		dt = 1e-9;
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctl_backend *p = find_prev(prev, &cur->b[i]);

		known[i] = p != NULL;
		if (p && ctl_requests_total(&cur->b[i]) >= ctl_requests_total(p))
			delta[i] = ctl_requests_total(&cur->b[i]) - ctl_requests_total(p);
		total += (double)delta[i];
		inflight += cur->b[i].in_flight;
	}
	strftime(clock, sizeof(clock), "%H:%M:%S", localtime_r(&now, &tm));
	if (o->json) {
		fprintf(out, "{\"time\":\"%s\",\"interval\":%.3f,\"source\":\"%s\",", clock, dt,
		        source_name(cur));
		fprintf(out, "\"requests_per_second\":%.3f,\"in_flight\":%lld,\"ring_generation\":",
		        total / dt, inflight);
		if (cur->have_ring)
			fprintf(out, "%llu", (unsigned long long)cur->ring_generation);
		else
			fputs("null", out);
		fputs(",\"backends\":[", out);
		for (size_t i = 0; i < cur->n; i++) {
			const struct ctl_backend *b = &cur->b[i], *p = find_prev(prev, b);

			fprintf(out, "%s{\"id\":%u,\"address\":", i ? "," : "", b->id);
			ctl_json_str(out, b->addr, strlen(b->addr));
			fprintf(out, ",\"health\":\"%s\",\"in_flight\":%d,", ctl_health(b),
			        b->in_flight);
			if (!known[i]) {
				fputs("\"requests_per_second\":null,\"share\":null,"
				      "\"decisions_per_second\":null,",
				      out);
			} else {
				fprintf(out,
				        "\"requests_per_second\":%.3f,\"share\":%.6f,"
				        "\"decisions_per_second\":{",
				        (double)delta[i] / dt,
				        total ? (double)delta[i] / total : 0);
				for (int d = 0; d < PG_DEC_MAX; d++)
					fprintf(out, "%s\"%s\":%.3f", d ? "," : "",
					        pg_decision_name(d),
					        (double)(b->requests[d] - p->requests[d]) / dt);
				fputs("},", out);
			}
			if (b->ring_slots >= 0)
				fprintf(out, "\"ring_share\":%.6f}",
				        (double)b->ring_slots / PG_RING_SLOTS);
			else
				fputs("\"ring_share\":null}", out);
		}
		fputs("]}\n", out);
		fflush(out);
		return;
	}
	fprintf(out, "prefixgatectl top  %s  every %.1fs  source %s  (Ctrl-C to stop)\n", clock,
	        o->interval, cur->source == CTL_SRC_MAPS ? o->pin_path : o->admin);
	routing_line(out, cur);
	ring_line(out, cur);
	fprintf(out, "total      %.1f req/s, %lld in flight, %zu backends\n\n", total / dt,
	        inflight, cur->n);
	fprintf(out, "%-21s  %-8s  %9s  %8s  %6s  %6s", "ADDRESS", "HEALTH", "IN-FLIGHT", "REQ/S",
	        "SHARE", "RING");
	for (int d = 0; d < PG_DEC_MAX; d++)
		fprintf(out, "  %7s", dec_rate_col[d]);
	fputc('\n', out);
	for (size_t i = 0; i < cur->n; i++) {
		const struct ctl_backend *b = &cur->b[i], *p = find_prev(prev, b);

		fprintf(out, "%-21s  %-8s  %9d", b->addr, ctl_health(b), b->in_flight);
		rate = (double)delta[i] / dt;
		if (known[i])
			fprintf(out, "  %8.1f  %5.1f%%", rate,
			        total ? 100.0 * (double)delta[i] / total : 0.0);
		else
			fprintf(out, "  %8s  %6s", "new", "-");
		if (b->ring_slots >= 0)
			fprintf(out, "  %5.1f%%", 100.0 * (double)b->ring_slots / PG_RING_SLOTS);
		else
			fprintf(out, "  %6s", "-");
		for (int d = 0; d < PG_DEC_MAX; d++) {
			if (known[i])
				fprintf(out, "  %7.1f",
				        (double)(b->requests[d] - p->requests[d]) / dt);
			else
				fprintf(out, "  %7s", "-");
		}
		fputc('\n', out);
	}
	if (!cur->n)
		fprintf(out, "(no backends)\n");
	fflush(out);
}
