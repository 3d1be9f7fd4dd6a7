// SPDX-License-Identifier: MIT
#include <string.h>
#include "proxy/tracing.h"
#include "lib/forward.h"
#include "proxy/conn.h"
#include "proxy/worker_state.h"
#include "sys/otel.h"

static uint8_t cut(char *dst, size_t cap, const char *s, size_t n)
{
	n = n < cap ? n : cap;
	memcpy(dst, s, n);
	return (uint8_t)n;
}

void pg_trace_begin(struct pg_worker *w, struct pg_exchange *x, const struct pg_http_request *req,
                    struct pg_fwd_ident *id, char *tp)
{
	struct pg_otel *o = w->gw->otel;
	struct pg_trace_x *t = &x->trace;
	struct pg_trace_ctx parent;
	unsigned seen = 0;
	bool valid = false;

	if (!o)
		return;
	/* more than one traceparent field is not a valid one (W3C §3.2) */
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct pg_http_header *h = &req->headers[i];

		if (h->name.len == 11 && pg_name_is(h->name, "traceparent") && !seen++)
			valid = pg_traceparent_parse(h->value.p, h->value.len, &parent);
	}
	valid = valid && seen == 1;
	if (valid) {
		memcpy(t->trace_id, parent.trace_id, PG_TRACE_ID_LEN);
		memcpy(t->parent_id, parent.parent_id, PG_SPAN_ID_LEN);
	} else {
		pg_trace_new_id(t->trace_id, PG_TRACE_ID_LEN, pg_worker_rand(w), pg_worker_rand(w));
	}
	t->has_parent = valid;
	pg_trace_new_id(t->span_id, PG_SPAN_ID_LEN, pg_worker_rand(w), 0);
	t->on = pg_trace_sample(valid ? &parent : NULL, t->trace_id, pg_otel_threshold(o));
	pg_traceparent_format(tp, t->trace_id, t->span_id, t->on);
	id->traceparent = tp;
	id->drop_tracestate = !valid;
}

/* The choice's runner-up: cache_aware's, else the ring's next candidate. */
static uint16_t runner_up(const struct pg_choice *ch)
{
	if (ch->est[0].id == ch->backend && ch->est[1].id)
		return ch->est[1].id;
	for (unsigned i = 0; i < ch->ncand && i < PG_RING_CANDIDATES; i++)
		if (ch->cand[i] && ch->cand[i] != ch->backend)
			return ch->cand[i];
	return 0;
}

void pg_trace_routed_(struct pg_worker *w, struct pg_exchange *x, uint64_t t_ns, uint64_t now)
{
	struct pg_trace_x *t = &x->trace;
	const struct pg_choice *ch = &x->choice;

	t->route_start_ns = t_ns;
	t->route_end_ns = now;
	t->strategy = __atomic_load_n(&w->gw->maps.state[ch->pool].strategy, __ATOMIC_RELAXED);
	t->decision = ch->decision;
	t->backend = ch->backend;
	t->runner_up = ch->backend ? runner_up(ch) : 0;
	t->matched = ch->matched;
}

void pg_trace_attempt_(struct pg_trace_x *t, uint16_t id, bool reused)
{
	if (t->natt >= PG_TRACE_ATTEMPTS)
		return; /* the first ones are kept */
	t->att[t->natt++] =
	    (struct pg_trace_attempt){.start_ns = pg_now_ns(), .backend = id, .reused = reused};
}

/* The attempt under way, or NULL when it is not recorded. */
static struct pg_trace_attempt *current(struct pg_trace_x *t)
{
	return t->natt && !t->att[t->natt - 1].end_ns ? &t->att[t->natt - 1] : NULL;
}

void pg_trace_connected_(struct pg_trace_x *t)
{
	struct pg_trace_attempt *a = current(t);

	if (a && !a->reused && !a->connected_ns)
		a->connected_ns = pg_now_ns();
}

void pg_trace_failed_(struct pg_trace_x *t)
{
	struct pg_trace_attempt *a = current(t);

	if (a) {
		a->end_ns = pg_now_ns();
		a->result = PG_TRACE_FAILED;
	}
}

/* The spans x's record would make (lib/trace_spans.c), counted when the
 * ring has no room for it. */
static unsigned span_count(const struct pg_trace_x *t, const struct pg_exchange *x)
{
	unsigned n =
	    1 + (x->queued_ns != 0) + (t->route_start_ns != 0) + 2 * (x->ttft_ns != 0 && t->natt);

	for (unsigned i = 0; i < t->natt; i++)
		n += 1 + (t->att[i].connected_ns != 0);
	return n;
}

void pg_trace_end_(struct pg_worker *w, const struct pg_client *c, unsigned status,
                   unsigned outcome)
{
	const struct pg_exchange *x = &c->x;
	const struct pg_trace_x *t = &x->trace;
	struct pg_trace_ring *g = pg_otel_ring(w->gw->otel, w->id);
	struct pg_trace_rec *r = g ? pg_trace_ring_slot(g, span_count(t, x)) : NULL;
	struct pg_str m, p;
	uint64_t now;

	if (!r)
		return;
	now = pg_now_ns();
	*r = (struct pg_trace_rec){
	    .has_parent = t->has_parent,
	    .tls = c->s.tls != NULL,
	    .stream = x->key.stream,
	    .api = x->api,
	    .strategy = t->strategy,
	    .decision = t->decision,
	    .outcome = (uint8_t)outcome,
	    .attempts = x->attempts,
	    .status = (uint16_t)status,
	    .backend = t->backend,
	    .runner_up = t->runner_up,
	    .matched = t->matched,
	    .key_len = x->key.length,
	    .max_tokens = x->key.max_tokens,
	    .start_ns = x->t0_ns,
	    .end_ns = now,
	    .queued_ns = x->queued_ns,
	    .route_start_ns = t->route_start_ns,
	    .route_end_ns = t->route_end_ns,
	    .ttft_ns = x->ttft_ns,
	};
	memcpy(r->trace_id, t->trace_id, PG_TRACE_ID_LEN);
	memcpy(r->span_id, t->span_id, PG_SPAN_ID_LEN);
	memcpy(r->parent_id, t->parent_id, PG_SPAN_ID_LEN);
	memcpy(r->att, t->att, sizeof(r->att));
	if (t->natt && !r->att[t->natt - 1].end_ns)
		r->att[t->natt - 1].end_ns = now;
	pg_fwd_request_line(x->fwd, x->fwd_head, &m, &p);
	r->method_len = cut(r->method, sizeof(r->method), m.p, m.len);
	r->path_len = cut(r->path, sizeof(r->path), p.p, p.len);
	r->client_len = cut(r->client, sizeof(r->client), c->peer, c->peer_len);
	pg_trace_ring_commit(g);
}
