// SPDX-License-Identifier: MIT
/*
 * tracesim --replay FILE: a gateway's route journal (--route-journal,
 * lib/journal.h) given to tracesim's routing core, event by event at the
 * gateway's own clock readings: its configuration and ring members, each
 * request's key and blocks as the gateway computed them, its work taken
 * (as tracesim's dispatch takes it: ts_work_on), its first token or
 * answer, its cache verdict, its slot given back, the periodic ticks.
 * No instance is simulated: what the instances did is what the journal
 * says they did. Each decision is compared with the gateway's (backend,
 * reason, tokens believed cached); the replay fails on the first event it
 * cannot give as the gateway gave it (a retry's take, another pool, a
 * member change once the first request or tick came).
 */
#include <stdlib.h>
#include <string.h>

#include "lib/journal.h"
#include "lib/names.h"
#include "router/capacity.h"
#include "router/route.h"
#include "tracesim.h"

/* One request of the journal, as tracesim's core saw it. */
struct rp_req {
	struct pg_choice ch;
	struct pg_load_ticket lt;
	uint32_t tokens;
	uint16_t id;
	bool same;       /* its decision is the gateway's */
	uint64_t anchor; /* its key's (router/capacity.h: a slot copy kept busy) */
};

struct rp {
	struct ts_world *w;
	FILE *out;
	struct pg_ring_member mem[TS_MAX_INSTANCES];
	size_t nmem;
	uint32_t slots, capacity_blocks;
	bool ready; /* the gateway is set up: members fixed from here */
	struct rp_req *req;
	size_t nreq, cap;
	size_t decisions, differ, shown, takes_differ;
	unsigned long line;
};

static int fail(struct rp *p, const char *why)
{
	fprintf(p->out, "tracesim: --replay %s:%lu: %s\n", p->w->o.replay, p->line, why);
	return -1;
}

/* The gateway, once the first request comes: the journal's members on
 * the world's ring, its configuration. */
static int ready(struct rp *p)
{
	struct ts_world *w = p->w;
	unsigned max = 0;

	if (!p->nmem)
		return fail(p, "a request before any member");
	for (size_t i = 0; i < p->nmem; i++)
		max = p->mem[i].id > max ? p->mem[i].id : max;
	if (max > TS_MAX_INSTANCES)
		return fail(p, "a member id past tracesim's instances");
	w->o.n = max;
	if (!(w->ring = calloc(1, sizeof(*w->ring))))
		return fail(p, "out of memory");
	pg_ring_build(w->ring, p->mem, p->nmem);
	if (ts_setup_gw(w, 0, p->slots, p->capacity_blocks))
		return fail(p, "out of memory");
	/* ids that are no member (none in a journal of one start-up) */
	for (unsigned id = 1; id <= max; id++) {
		bool member = false;

		for (size_t i = 0; i < p->nmem; i++)
			member |= p->mem[i].id == id;
		if (!member)
			w->gw[0].be[id].flags = 0;
	}
	w->gw[0].maps.state->nbackends = (uint32_t)p->nmem;
	p->ready = true;
	return 0;
}

static int config(struct rp *p, const struct pg_jr *e)
{
	struct ts_opts *o = &p->w->o;
	enum pg_strategy s;

	if (p->ready)
		return fail(p, "the configuration changed after the first request or tick");
	if (pg_strategy_parse(e->cfg.strategy, strlen(e->cfg.strategy), &s))
		return fail(p, "a strategy tracesim does not know");
	free((char *)o->strategy);
	o->strategy = strdup(e->cfg.strategy);
	o->prefix_length = e->cfg.prefix_length;
	o->threshold = e->cfg.threshold;
	o->choices = e->cfg.choices;
	p->slots = e->cfg.slots;
	p->capacity_blocks = e->cfg.capacity_blocks;
	p->nmem = 0; /* its members follow */
	return o->strategy ? 0 : fail(p, "out of memory");
}

static int member(struct rp *p, const struct pg_jr *e)
{
	if (p->ready)
		return fail(p, "a member change after the first request or tick");
	if (e->pool)
		return fail(p, "model pools are not replayed");
	if (p->nmem == TS_MAX_INSTANCES || !e->id)
		return fail(p, "too many members, or id 0");
	p->mem[p->nmem++] = (struct pg_ring_member){.id = (uint16_t)e->id,
	                                            .seed = pg_ring_seed(e->name, strlen(e->name))};
	return 0;
}

/* Request seq of the journal (numbered from 1, each once). */
static struct rp_req *req_of(struct rp *p, uint64_t seq)
{
	if (!seq || seq > p->nreq)
		return NULL;
	return &p->req[seq - 1];
}

static int route(struct rp *p, const struct pg_jr *e)
{
	const struct pg_jr_route *jr = &e->route;
	struct ts_world *w = p->w;
	static struct pg_key_blocks kb;
	struct pg_key key = {.hash = jr->hash,
	                     .anchor = jr->anchor,
	                     .tokens = jr->tokens,
	                     .source = (uint8_t)jr->source};
	struct rp_req *q;

	if (!p->ready && ready(p))
		return -1;
	if (e->seq != p->nreq + 1)
		return fail(p, "requests out of order");
	if (p->nreq == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct rp_req *n = realloc(p->req, cap * sizeof(*n));

		if (!n)
			return fail(p, "out of memory");
		p->req = n;
		p->cap = cap;
	}
	q = &p->req[p->nreq++];
	memset(q, 0, sizeof(*q));
	/* a key without blocks (not cache_aware) names no whole text */
	kb.n = jr->n;
	kb.anchor = jr->kb_anchor;
	kb.anchor_len = jr->anchor_len;
	kb.whole = jr->whole;
	memcpy(kb.chain, jr->chain, jr->n * sizeof(*kb.chain));
	w->now = e->t * 1000000;
	q->tokens = jr->tokens;
	q->id = pg_route_key(&w->gw[0].r, 0, jr->pool, &key, jr->whole ? &kb : NULL, NULL, jr->rnd,
	                     jr->budget_ms, (uint8_t)jr->prio, &q->ch);
	q->anchor = key.anchor;
	p->decisions++;
	q->same = q->id == jr->id && q->ch.decision == jr->decision && q->ch.matched == jr->matched;
	if (!q->same) {
		p->differ++;
		if (p->shown++ < 10)
			fprintf(p->out,
			        "request %llu at %llu ms: the gateway chose %u (%s, %u tokens "
			        "cached), tracesim %u (%s, %u)\n",
			        (unsigned long long)e->seq, (unsigned long long)e->t, jr->id,
			        pg_decision_name(jr->decision), jr->matched, q->id,
			        pg_decision_name(q->ch.decision), q->ch.matched);
	}
	return 0;
}

/* Every event but the header's and the decisions. */
static int event(struct rp *p, const struct pg_jr *e)
{
	struct ts_world *w = p->w;
	struct pg_router *r = &w->gw[0].r;
	struct rp_req *q;

	if (e->type == PG_JR_TICK) {
		/* from the first once the members are known, as the gateway's */
		if (!p->ready && (!p->nmem || ready(p)))
			return p->nmem ? -1 : 0;
		w->now = e->t * 1000000;
		pg_router_tick(r, e->t);
		return 0;
	}
	if (!(q = req_of(p, e->seq)))
		return fail(p, "an event of no request routed (a retry is not replayed)");
	switch (e->type) {
	case PG_JR_TAKE:
		w->now = e->t;
		/* a decision that agreed takes the same work on the same one */
		if (q->same &&
		    (ts_work_on(q->tokens, &q->ch, q->id) != e->work || q->id != e->id)) {
			p->takes_differ++;
			fprintf(
			    p->out,
			    "request %llu: the gateway took %u tokens on %u, tracesim %u on %u\n",
			    (unsigned long long)e->seq, e->work, e->id,
			    ts_work_on(q->tokens, &q->ch, q->id), q->id);
		}
		pg_inflight_take(r, q->id, q->ch.decision);
		pg_load_take(r, q->id, ts_work_on(q->tokens, &q->ch, q->id), &q->lt, e->t);
		if (q->ch.seq_taken) /* as proxy/exchange.c pg_attempt */
			q->lt.seq = q->anchor;
		break;
	case PG_JR_FIRST:
		w->now = e->t;
		pg_load_first(r, 0, NULL, &q->lt, e->t);
		break;
	case PG_JR_ANSWERED:
		w->now = e->t;
		pg_load_answered(r, &q->lt, e->t);
		break;
	case PG_JR_DUE:
		w->now = e->t * 1000000;
		if (!pg_load_due(r, &q->lt, e->t))
			return fail(p, "a request due at the gateway is not at tracesim");
		break;
	case PG_JR_CUT:
		w->now = e->t * 1000000;
		pg_load_cut(r, &q->lt, e->t);
		break;
	case PG_JR_DROP:
		pg_load_drop(r, &q->lt);
		break;
	case PG_JR_VERDICT:
		pg_capacity_answer(r, &q->ch, (enum pg_cc_kind)e->kind,
		                   (enum pg_cc_verdict)e->verdict);
		break;
	case PG_JR_RELEASE:
		pg_inflight_release(r, q->id);
		if (q->lt.seq) /* as proxy/slot.c pg_slot_give */
			pg_capacity_done(r, q->id, q->lt.seq);
		break;
	default:
		return fail(p, "an event out of place");
	}
	return 0;
}

int ts_replay(struct ts_world *w, FILE *out)
{
	static uint64_t chain[PG_CA_MAX_BLOCKS];
	struct rp p = {.w = w, .out = out};
	FILE *f = fopen(w->o.replay, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;

	if (!f) {
		perror(w->o.replay);
		return -1;
	}
	w->o.strategy = strdup(w->o.strategy);
	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		struct pg_jr e;

		p.line++;
		if (line[n - 1] == '\n')
			line[--n] = 0;
		if (p.line == 1) {
			if (strcmp(line, PG_JR_MAGIC))
				rc = fail(&p, "not a route journal");
			continue;
		}
		if (pg_jr_parse(line, &e, chain))
			rc = fail(&p, "not a journal line");
		else if (e.type == PG_JR_CONFIG)
			rc = config(&p, &e);
		else if (e.type == PG_JR_MEMBER)
			rc = member(&p, &e);
		else if (e.type == PG_JR_ROUTE)
			rc = route(&p, &e);
		else
			rc = event(&p, &e);
	}
	free(line);
	fclose(f);
	free(p.req);
	fprintf(out, "replay: %zu decisions, %zu differ; %zu takes differ\n", p.decisions, p.differ,
	        p.takes_differ);
	return rc || p.differ || p.takes_differ ? -1 : 0;
}
