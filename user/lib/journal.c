// SPDX-License-Identifier: MIT
/* The route journal's lines (journal.h). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/journal.h"
#include "prefixgate.h"

static const char *const names[PG_JR_TYPES] = {
    [PG_JR_CONFIG] = "config",   [PG_JR_MEMBER] = "member",   [PG_JR_ROUTE] = "route",
    [PG_JR_TAKE] = "take",       [PG_JR_FIRST] = "first",     [PG_JR_ANSWERED] = "answered",
    [PG_JR_DUE] = "due",         [PG_JR_CUT] = "cut",         [PG_JR_DROP] = "drop",
    [PG_JR_VERDICT] = "verdict", [PG_JR_RELEASE] = "release", [PG_JR_TICK] = "tick",
};

/* snprintf's count, kept within cap. */
static size_t put(size_t cap, size_t at, int n)
{
	if (n < 0)
		return at;
	return at + (size_t)n < cap ? at + (size_t)n : cap - 1;
}

static size_t route_line(char *buf, size_t cap, const struct pg_jr *e)
{
	const struct pg_jr_route *r = &e->route;
	size_t at = put(cap, 0,
	                snprintf(buf, cap,
	                         "route %" PRIu64 " %" PRIu64 " %u %u %" PRIx64 " %u %u %" PRIx64
	                         " %" PRIx64 " %u %u %" PRIx64 " %u %" PRIx64 " %u %u %u %u",
	                         e->seq, e->t, r->worker, r->pool, r->rnd, r->budget_ms, r->prio,
	                         r->hash, r->anchor, r->tokens, r->source, r->kb_anchor,
	                         r->anchor_len, r->whole, r->n, r->id, r->decision, r->matched));

	for (uint32_t i = 0; i < r->n; i++)
		at = put(cap, at, snprintf(buf + at, cap - at, " %" PRIx64, r->chain[i]));
	return at;
}

size_t pg_jr_format(char *buf, size_t cap, const struct pg_jr *e)
{
	const char *t = e->type < PG_JR_TYPES ? names[e->type] : "?";
	size_t at;

	switch (e->type) {
	case PG_JR_CONFIG:
		at = put(cap, 0,
		         snprintf(buf, cap, "config %s %u %u %u %u %u %u", e->cfg.strategy,
		                  e->cfg.prefix_length, e->cfg.threshold, e->cfg.choices,
		                  e->cfg.capacity_blocks, e->cfg.slots, e->cfg.load_signal));
		break;
	case PG_JR_MEMBER:
		at = put(cap, 0, snprintf(buf, cap, "member %u %u %s", e->id, e->pool, e->name));
		break;
	case PG_JR_ROUTE:
		at = route_line(buf, cap, e);
		break;
	case PG_JR_TAKE:
		at = put(cap, 0,
		         snprintf(buf, cap, "take %" PRIu64 " %" PRIu64 " %u %u", e->seq, e->t,
		                  e->id, e->work));
		break;
	case PG_JR_FIRST:
	case PG_JR_ANSWERED:
	case PG_JR_DUE:
	case PG_JR_CUT:
		at = put(cap, 0, snprintf(buf, cap, "%s %" PRIu64 " %" PRIu64, t, e->seq, e->t));
		break;
	case PG_JR_VERDICT:
		at = put(
		    cap, 0,
		    snprintf(buf, cap, "verdict %" PRIu64 " %u %u", e->seq, e->kind, e->verdict));
		break;
	case PG_JR_TICK:
		at = put(cap, 0, snprintf(buf, cap, "tick %" PRIu64, e->t));
		break;
	default: /* drop, release */
		at = put(cap, 0, snprintf(buf, cap, "%s %" PRIu64, t, e->seq));
		break;
	}
	buf[at] = '\n';
	return at + 1;
}

/* The next word of *p as a number in base (its end is a space or the
 * line's); 0 or -1. */
static int num(const char **p, int base, uint64_t *out)
{
	char *end;

	if (**p != ' ')
		return -1;
	(*p)++;
	if (**p < '0' || **p > 'f')
		return -1;
	*out = strtoull(*p, &end, base);
	if (end == *p || (*end && *end != ' '))
		return -1;
	*p = end;
	return 0;
}

static int num32(const char **p, uint32_t *out)
{
	uint64_t v;

	if (num(p, 10, &v) || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_route(const char *p, struct pg_jr *e, uint64_t *chain)
{
	struct pg_jr_route *r = &e->route;

	if (num(&p, 10, &e->seq) || num(&p, 10, &e->t) || num32(&p, &r->worker) ||
	    num32(&p, &r->pool) || num(&p, 16, &r->rnd) || num32(&p, &r->budget_ms) ||
	    num32(&p, &r->prio) || num(&p, 16, &r->hash) || num(&p, 16, &r->anchor) ||
	    num32(&p, &r->tokens) || num32(&p, &r->source) || num(&p, 16, &r->kb_anchor) ||
	    num32(&p, &r->anchor_len) || num(&p, 16, &r->whole) || num32(&p, &r->n) ||
	    r->n > PG_CA_MAX_BLOCKS || num32(&p, &r->id) || num32(&p, &r->decision) ||
	    num32(&p, &r->matched))
		return -1;
	for (uint32_t i = 0; i < r->n; i++)
		if (num(&p, 16, &chain[i]))
			return -1;
	r->chain = chain;
	return *p ? -1 : 0;
}

static int parse_config(const char *p, struct pg_jr *e)
{
	struct pg_jr_config *c = &e->cfg;
	size_t n;

	if (*p++ != ' ')
		return -1;
	n = strcspn(p, " ");
	if (!n || n >= sizeof(c->strategy))
		return -1;
	memcpy(c->strategy, p, n);
	c->strategy[n] = 0;
	p += n;
	if (num32(&p, &c->prefix_length) || num32(&p, &c->threshold) || num32(&p, &c->choices) ||
	    num32(&p, &c->capacity_blocks) || num32(&p, &c->slots) || num32(&p, &c->load_signal))
		return -1;
	return *p ? -1 : 0;
}

int pg_jr_parse(const char *line, struct pg_jr *e, uint64_t *chain)
{
	const char *p = line;
	size_t n = strcspn(line, " ");
	int t;

	memset(e, 0, sizeof(*e));
	for (t = 0; t < PG_JR_TYPES; t++)
		if (strlen(names[t]) == n && !memcmp(line, names[t], n))
			break;
	if (t == PG_JR_TYPES)
		return -1;
	e->type = (enum pg_jr_type)t;
	p += n;
	switch (e->type) {
	case PG_JR_CONFIG:
		return parse_config(p, e);
	case PG_JR_MEMBER:
		if (num32(&p, &e->id) || num32(&p, &e->pool) || *p++ != ' ' || !*p ||
		    strlen(p) >= sizeof(e->name))
			return -1;
		strcpy(e->name, p);
		return 0;
	case PG_JR_ROUTE:
		return parse_route(p, e, chain);
	case PG_JR_TAKE:
		if (num(&p, 10, &e->seq) || num(&p, 10, &e->t) || num32(&p, &e->id) ||
		    num32(&p, &e->work))
			return -1;
		break;
	case PG_JR_FIRST:
	case PG_JR_ANSWERED:
	case PG_JR_DUE:
	case PG_JR_CUT:
		if (num(&p, 10, &e->seq) || num(&p, 10, &e->t))
			return -1;
		break;
	case PG_JR_VERDICT:
		if (num(&p, 10, &e->seq) || num32(&p, &e->kind) || num32(&p, &e->verdict))
			return -1;
		break;
	case PG_JR_TICK:
		if (num(&p, 10, &e->t))
			return -1;
		break;
	default:
		if (num(&p, 10, &e->seq))
			return -1;
		break;
	}
	return *p ? -1 : 0;
}
