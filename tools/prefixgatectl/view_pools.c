// SPDX-License-Identifier: MIT
/*
 * The model pools as prefixgatectl shows them: the pools command's table
 * and JSON, the pool lines of status and top, and a pool's JSON object
 * (the same in pools --json and status --json). From the snapshot, so the
 * same whichever source filled it.
 */
#include <stdio.h>
#include <string.h>
#include "ctl.h"
#include "lib/names.h"

void ctl_json_routing(FILE *out, const struct ctl_pool *p)
{
	fprintf(out,
	        "{\"RoutingStrategy\":\"%s\",\"PrefixAwareRoutingConfig\":"
	        "{\"PrefixLength\":%u,\"ConcurrencyThreshold\":%u}",
	        pg_strategy_name((enum pg_strategy)p->strategy), p->prefix_length,
	        p->concurrency_threshold);
	if (p->strategy == PG_STRATEGY_CACHE_AWARE)
		fprintf(out, ",\"CacheAwareConfig\":{\"NewConversationChoices\":%u}",
		        p->new_choices);
	fputc('}', out);
}

/* How many of a list's items the joined text holds (it may hold fewer than
 * the pool has: the first that fit). */
static unsigned shown(const char *joined)
{
	unsigned n = joined[0] ? 1 : 0;

	for (const char *c = joined; *c; c++)
		n += *c == ',';
	return n;
}

static void json_list(FILE *out, const char *joined)
{
	const char *at = joined;

	fputc('[', out);
	while (*at) {
		size_t l = strcspn(at, ",");

		ctl_json_str(out, at, l);
		at += l;
		if (*at) {
			at++;
			fputc(',', out);
		}
	}
	fputc(']', out);
}

/* Members of pool p up (taking requests) in the snapshot. */
static unsigned healthy(const struct ctl_snapshot *s, unsigned p)
{
	unsigned n = 0;

	for (size_t i = 0; i < s->n; i++)
		n += s->b[i].id && s->b[i].pool == p && ctl_up(&s->b[i]);
	return n;
}

void ctl_json_pool(FILE *out, const struct ctl_snapshot *s, unsigned p)
{
	const struct ctl_pool *c = &s->pool[p];

	fputs("{\"name\":", out);
	ctl_json_str(out, c->name, strlen(c->name));
	fprintf(out, ",\"catch_all\":%s,\"backends\":%u,\"healthy\":%u,\"models\":",
	        c->catch_all ? "true" : "false", c->members, healthy(s, p));
	json_list(out, c->models);
	fprintf(out, ",\"nmodels\":%u,\"paths\":", c->nmodels);
	json_list(out, c->paths);
	fprintf(out, ",\"npaths\":%u,\"routing\":", c->npaths);
	ctl_json_routing(out, c);
	fprintf(out, ",\"ring\":{\"generation\":%llu,\"members\":%u,\"remapped_ratio\":%.6f}}",
	        (unsigned long long)c->ring_generation, c->members, c->remapped);
}

static void routing_text(FILE *out, const struct ctl_pool *p)
{
	fprintf(out, "%s, PrefixLength %u, ConcurrencyThreshold %u",
	        pg_strategy_name((enum pg_strategy)p->strategy), p->prefix_length,
	        p->concurrency_threshold);
	if (p->strategy == PG_STRATEGY_CACHE_AWARE)
		fprintf(out, ", NewConversationChoices %u", p->new_choices);
}

static void ring_text(FILE *out, const struct ctl_pool *p)
{
	fprintf(out, "generation %llu, %u member%s, %u slots; last change moved %.1f%% of keys",
	        (unsigned long long)p->ring_generation, p->members, p->members == 1 ? "" : "s",
	        PG_RING_SLOTS, p->remapped * 100);
}

void ctl_view_pool_lines(FILE *out, const struct ctl_snapshot *s)
{
	if (!ctl_has_pools(s)) {
		fputs("routing    ", out);
		routing_text(out, &s->pool[0]);
		fputs("\nring       ", out);
		ring_text(out, &s->pool[0]);
		fputc('\n', out);
		return;
	}
	/* each pool's own RoutingConfig and ring: a pool's ring share is of
	 * its own ring */
	for (unsigned p = 0; p < s->npools; p++) {
		fprintf(out, "pool       %s%s: ", s->pool[p].name,
		        s->pool[p].catch_all ? " (catch-all)" : "");
		routing_text(out, &s->pool[p]);
		fputs("; ring ", out);
		ring_text(out, &s->pool[p]);
		fputc('\n', out);
	}
}

/* A list cell: the items shown, "(+N more)" when the pool has more. */
static const char *list_cell(char *buf, size_t cap, const char *joined, unsigned n)
{
	unsigned k = shown(joined);

	if (!n)
		snprintf(buf, cap, "-");
	else if (k < n)
		snprintf(buf, cap, "%s (+%u more)", joined, n - k);
	else
		snprintf(buf, cap, "%s", joined);
	return buf;
}

void ctl_view_pools(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s)
{
	if (o->json) {
		fputc('[', out);
		for (unsigned p = 0; p < s->npools; p++) {
			fputs(p ? "," : "", out);
			ctl_json_pool(out, s, p);
		}
		fputs("]\n", out);
		return;
	}
	fprintf(out, "%-16s %-9s %8s %7s %-26s %6s %6s %5s  %-24s  %s\n", "POOL", "CATCH-ALL",
	        "BACKENDS", "HEALTHY", "STRATEGY", "PREFIX", "THRESH", "GEN", "MODELS", "PATHS");
	for (unsigned p = 0; p < s->npools; p++) {
		const struct ctl_pool *c = &s->pool[p];
		char models[sizeof(c->models) + 24], paths[sizeof(c->paths) + 24];

		fprintf(out, "%-16s %-9s %8u %7u %-26s %6u %6u %5llu  ", c->name,
		        c->catch_all ? "yes" : "no", c->members, healthy(s, p),
		        pg_strategy_name((enum pg_strategy)c->strategy), c->prefix_length,
		        c->concurrency_threshold, (unsigned long long)c->ring_generation);
		fprintf(out, "%-24s  %s\n",
		        list_cell(models, sizeof(models), c->models, c->nmodels),
		        list_cell(paths, sizeof(paths), c->paths, c->npaths));
	}
}
