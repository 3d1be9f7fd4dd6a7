// SPDX-License-Identifier: MIT
/*
 * A traced request's record made into spans (trace_rec.h). Their
 * attributes follow OpenTelemetry's HTTP and GenAI semantic conventions
 * where one names the fact (http.*, url.*, server.*, client.*, error.type,
 * gen_ai.operation.name), else prefixgate.*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/key.h"
#include "lib/names.h"
#include "lib/trace_rec.h"

/* The inner spans' numbers (pg_trace_child_id's k). */
enum { K_QUEUE = 1, K_ROUTE, K_FIRST_TOKEN, K_RESPONSE, K_ATTEMPT };

static const char *const outcomes[] = {"ok", "client_abort", "backend_error", "gateway"};

/* gen_ai.operation.name of each API (NULL: not a GenAI one). */
static const char *operation(unsigned api)
{
	switch (api) {
	case PG_API_CHAT:
	case PG_API_RESPONSES:
	case PG_API_MESSAGES:
		return "chat";
	case PG_API_COMPLETIONS:
		return "text_completion";
	case PG_API_EMBEDDINGS:
		return "embeddings";
	default:
		return NULL;
	}
}

static struct pg_otlp_span *child(const struct pg_trace_rec *r, struct pg_otlp_span *s,
                                  const uint8_t *parent, unsigned k, const char *name, uint8_t kind,
                                  uint64_t start, uint64_t end, uint64_t off)
{
	*s = (struct pg_otlp_span){.name = name, .kind = kind, .has_parent = true};
	memcpy(s->trace_id, r->trace_id, PG_TRACE_ID_LEN);
	memcpy(s->parent_id, parent, PG_SPAN_ID_LEN);
	pg_trace_child_id(s->span_id, r->span_id, k);
	s->start_ns = start + off;
	s->end_ns = (end > start ? end : start) + off;
	return s;
}

/* server.address and server.port of a backend's name ("https://" and
 * IPv6 brackets dropped). */
static void server_attrs(struct pg_otlp_span *s, const char *name)
{
	const char *h = strncmp(name, "https://", 8) ? name : name + 8;
	const char *colon = strrchr(h, ':');
	size_t hl = colon ? (size_t)(colon - h) : strlen(h);
	long port = colon ? strtol(colon + 1, NULL, 10) : 0;

	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	pg_otlp_str(s, "server.address", h, hl);
	if (port > 0)
		pg_otlp_int(s, "server.port", port);
}

static void request_span(const struct pg_trace_rec *r, uint64_t off, struct pg_trace_text *t,
                         struct pg_otlp_span *s)
{
	const char *op = operation(r->api);

	*s = (struct pg_otlp_span){.kind = PG_OTLP_SERVER, .has_parent = r->has_parent};
	memcpy(s->trace_id, r->trace_id, PG_TRACE_ID_LEN);
	memcpy(s->span_id, r->span_id, PG_SPAN_ID_LEN);
	memcpy(s->parent_id, r->parent_id, PG_SPAN_ID_LEN);
	/* HTTP's span name: "METHOD ROUTE" where the route is a known one */
	snprintf(t->name, sizeof(t->name), "%.*s%s%.*s", r->method_len, r->method, op ? " " : "",
	         op ? r->path_len : 0, r->path);
	s->name = t->name;
	s->start_ns = r->start_ns + off;
	s->end_ns = (r->end_ns > r->start_ns ? r->end_ns : r->start_ns) + off;
	pg_otlp_str(s, "http.request.method", r->method, r->method_len);
	pg_otlp_str(s, "url.path", r->path, r->path_len);
	pg_otlp_str(s, "url.scheme", r->tls ? "https" : "http", r->tls ? 5 : 4);
	pg_otlp_str(s, "network.protocol.version", "1.1", 3);
	pg_otlp_str(s, "client.address", r->client, r->client_len);
	if (r->status)
		pg_otlp_int(s, "http.response.status_code", r->status);
	if (op)
		pg_otlp_str(s, "gen_ai.operation.name", op, strlen(op));
	if (r->max_tokens)
		pg_otlp_int(s, "gen_ai.request.max_tokens", r->max_tokens);
	pg_otlp_bool(s, "prefixgate.stream", r->stream);
	pg_otlp_int(s, "prefixgate.attempts", r->attempts);
	pg_otlp_str(s, "prefixgate.outcome", outcomes[r->outcome & 3],
	            strlen(outcomes[r->outcome & 3]));
	if (r->status >= 500 || !r->status) {
		/* a server span's error: a 5xx, or no answer at all */
		s->status = PG_OTLP_ERROR;
		if (r->status)
			pg_otlp_str(
			    s, "error.type", t->status,
			    (size_t)snprintf(t->status, sizeof(t->status), "%u", r->status));
		else
			pg_otlp_str(s, "error.type", outcomes[r->outcome & 3],
			            strlen(outcomes[r->outcome & 3]));
	}
}

static void route_span(const struct pg_trace_rec *r, uint64_t off, pg_trace_name_fn *name,
                       void *arg, struct pg_trace_text *t, struct pg_otlp_span *s)
{
	const char *st = pg_strategy_flag((enum pg_strategy)r->strategy);

	child(r, s, r->span_id, K_ROUTE, "prefixgate.route", PG_OTLP_INTERNAL, r->route_start_ns,
	      r->route_end_ns, off);
	pg_otlp_str(s, "prefixgate.route.strategy", st, strlen(st));
	if (!r->backend) {
		s->status = PG_OTLP_ERROR;
		pg_otlp_str(s, "error.type", "no_backend", 10);
		return;
	}
	st = pg_decision_name(r->decision);
	pg_otlp_str(s, "prefixgate.route.decision", st, strlen(st));
	name(arg, r->backend, t->backend[PG_TRACE_ATTEMPTS], sizeof(t->backend[0]));
	pg_otlp_str(s, "prefixgate.route.backend", t->backend[PG_TRACE_ATTEMPTS],
	            strlen(t->backend[PG_TRACE_ATTEMPTS]));
	pg_otlp_int(s, "prefixgate.route.matched_tokens", r->matched);
	pg_otlp_int(s, "prefixgate.route.key_length", r->key_len);
	if (r->runner_up) {
		name(arg, r->runner_up, t->backend[PG_TRACE_ATTEMPTS + 1], sizeof(t->backend[0]));
		pg_otlp_str(s, "prefixgate.route.runner_up", t->backend[PG_TRACE_ATTEMPTS + 1],
		            strlen(t->backend[PG_TRACE_ATTEMPTS + 1]));
	}
}

/* Attempt i's span, and its connect's when it made a connection: how many. */
static size_t attempt_spans(const struct pg_trace_rec *r, unsigned i, uint64_t off,
                            pg_trace_name_fn *name, void *arg, struct pg_trace_text *t,
                            struct pg_otlp_span *s)
{
	const struct pg_trace_attempt *a = &r->att[i];
	const unsigned k = K_ATTEMPT + 2 * i;
	bool last = i + 1 == r->attempts; /* the one that answered, if any did */

	child(r, s, r->span_id, k, "prefixgate.backend", PG_OTLP_CLIENT, a->start_ns,
	      a->end_ns ? a->end_ns : r->end_ns, off);
	name(arg, a->backend, t->backend[i], sizeof(t->backend[0]));
	server_attrs(s, t->backend[i]);
	pg_otlp_str(s, "http.request.method", r->method, r->method_len);
	pg_otlp_int(s, "prefixgate.attempt", i + 1);
	pg_otlp_bool(s, "prefixgate.connection.reused", a->reused);
	if (a->result == PG_TRACE_FAILED) {
		s->status = PG_OTLP_ERROR;
		pg_otlp_str(s, "error.type", "backend_failed", 14);
	} else if (last && r->status) {
		pg_otlp_int(s, "http.response.status_code", r->status);
		if (r->status >= 500)
			s->status = PG_OTLP_ERROR;
	}
	if (!a->connected_ns)
		return 1;
	child(r, s + 1, s->span_id, k + 1, "prefixgate.connect", PG_OTLP_INTERNAL, a->start_ns,
	      a->connected_ns, off);
	server_attrs(s + 1, t->backend[i]);
	return 2;
}

size_t pg_trace_spans(const struct pg_trace_rec *r, uint64_t wall_off, pg_trace_name_fn *name,
                      void *arg, struct pg_trace_text *t, struct pg_otlp_span *out)
{
	size_t n = 0;
	unsigned natt = 0;
	const struct pg_trace_attempt *last;

	while (natt < PG_TRACE_ATTEMPTS && natt < r->attempts && r->att[natt].start_ns)
		natt++;
	last = natt ? &r->att[natt - 1] : NULL;

	request_span(r, wall_off, t, &out[n++]);
	if (r->queued_ns) /* to its turn, or to its end (a 429, a client gone) */
		child(r, &out[n++], r->span_id, K_QUEUE, "prefixgate.queue", PG_OTLP_INTERNAL,
		      r->queued_ns, r->route_start_ns ? r->route_start_ns : r->end_ns, wall_off);
	if (r->route_start_ns)
		route_span(r, wall_off, name, arg, t, &out[n++]);
	for (unsigned i = 0; i < natt; i++)
		n += attempt_spans(r, i, wall_off, name, arg, t, &out[n]);
	if (r->ttft_ns && last) {
		/* the instance's time to its first token, from the last attempt */
		child(r, &out[n++], r->span_id, K_FIRST_TOKEN, "prefixgate.first_token",
		      PG_OTLP_INTERNAL, last->start_ns, r->ttft_ns, wall_off);
		/* and the answer from there to its end */
		child(r, &out[n], r->span_id, K_RESPONSE, "prefixgate.response", PG_OTLP_INTERNAL,
		      r->ttft_ns, r->end_ns, wall_off);
		pg_otlp_str(&out[n], "prefixgate.outcome", outcomes[r->outcome & 3],
		            strlen(outcomes[r->outcome & 3]));
		if (r->outcome != PG_TRACE_OK)
			out[n].status = PG_OTLP_ERROR;
		n++;
	}
	return n;
}
