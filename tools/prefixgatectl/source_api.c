// SPDX-License-Identifier: MIT
/*
 * Snapshots of a running gateway from its admin API (source.c has the
 * maps' side and picks the source).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "lib/json.h"
#include "lib/names.h"

/* ---- admin API -------------------------------------------------------------- */

static int get_json(const struct ctl_opts *o, const char *target, struct ctl_http_resp *r,
                    struct pg_json *js, char *err, size_t errlen)
{
	char msg[200];

	if (ctl_http(o, "GET", target, NULL, NULL, 0, ctl_timeout(o, CTL_TIMEOUT_DEFAULT), r, err,
	             errlen))
		return -1;
	if (r->status != 200) {
		snprintf(err, errlen, "admin API %s: GET %s: HTTP %d %s", o->admin, target,
		         r->status, ctl_api_error(r, msg, sizeof(msg)));
		return -1;
	}
	if (js && pg_json_parse(js, r->body, r->len)) {
		snprintf(err, errlen, "admin API %s: GET %s: invalid JSON at byte %zu: %s",
		         o->admin, target, js->err_pos, js->err_msg);
		return -1;
	}
	return 0;
}

static int64_t num(const struct pg_json *js, uint32_t obj, const char *name)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name)), x = 0;

	if (v < 0 || pg_json_get_i64(js, (uint32_t)v, &x))
		return -1;
	return x;
}

static bool flag(const struct pg_json *js, uint32_t obj, const char *name)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name));

	return v >= 0 && js->tok[v].type == PG_JSON_TRUE;
}

int ctl_parse_backends_json(const char *body, size_t len, struct ctl_snapshot *s, char *err,
                            size_t errlen)
{
	struct pg_json js = {0};
	uint32_t k;
	int rc = -1;

	s->n = 0;
	if (pg_json_parse(&js, body, len)) {
		snprintf(err, errlen, "GET /backends: invalid JSON at byte %zu: %s", js.err_pos,
		         js.err_msg);
		goto out;
	}
	if (js.tok[0].type != PG_JSON_ARRAY) {
		snprintf(err, errlen, "GET /backends: expected an array");
		goto out;
	}
	k = pg_json_first(0);
	for (uint32_t n = 0; n < js.tok[0].size; n++, k = js.tok[k].next) {
		struct ctl_backend *c = &s->b[s->n];
		int64_t a = pg_json_find(&js, k, "address", 7), rb;
		size_t l;

		/* address null: a DNS name that stands for no address (its "state") */
		if (js.tok[k].type != PG_JSON_OBJECT || a < 0 ||
		    (js.tok[a].type != PG_JSON_STRING && js.tok[a].type != PG_JSON_NULL) ||
		    s->n >= PG_MAX_BACKENDS) {
			snprintf(err, errlen, "GET /backends: element %u is not a backend", n);
			goto out;
		}
		memset(c, 0, sizeof(*c));
		if (js.tok[a].type == PG_JSON_STRING) {
			l = pg_json_str_copy(&js, (uint32_t)a, c->addr, sizeof(c->addr) - 1);
			c->addr[l < sizeof(c->addr) ? l : sizeof(c->addr) - 1] = 0;
		} else {
			snprintf(c->addr, sizeof(c->addr), "-");
			if ((a = pg_json_find(&js, k, "state", 5)) >= 0 &&
			    js.tok[a].type == PG_JSON_STRING) {
				l = pg_json_str_copy(&js, (uint32_t)a, c->state,
				                     sizeof(c->state) - 1);
				c->state[l < sizeof(c->state) ? l : sizeof(c->state) - 1] = 0;
			}
		}
		if ((a = pg_json_find(&js, k, "name", 4)) >= 0 &&
		    js.tok[a].type == PG_JSON_STRING) {
			l = pg_json_str_copy(&js, (uint32_t)a, c->name, sizeof(c->name) - 1);
			c->name[l < sizeof(c->name) ? l : sizeof(c->name) - 1] = 0;
		}
		c->id = (unsigned)num(&js, k, "id");
		c->in_flight = (int32_t)num(&js, k, "in_flight");
		c->epoch = (uint32_t)num(&js, k, "epoch");
		c->failures = (uint64_t)num(&js, k, "failures");
		c->draining = flag(&js, k, "draining");
		c->down = pg_json_find(&js, k, "healthy", 7) >= 0 && !flag(&js, k, "healthy");
		c->ring_slots = -1;
		rb = pg_json_find(&js, k, "requests_by_decision", 20);
		for (int d = 0; d < PG_DEC_MAX && rb >= 0; d++) {
			int64_t x = num(&js, (uint32_t)rb, pg_decision_name(d));

			c->requests[d] = x > 0 ? (uint64_t)x : 0;
		}
		if (rb < 0) /* older API: only the total, counted as affinity */
			c->requests[0] =
			    (uint64_t)(num(&js, k, "requests") > 0 ? num(&js, k, "requests") : 0);
		s->n++;
	}
	rc = 0;
out:
	pg_json_free(&js);
	return rc;
}

/* "name value" lines of a Prometheus exposition: the value of an unlabelled
 * sample, or -1. */
static double metric(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

int ctl_api_snapshot(const struct ctl_opts *o, struct ctl_snapshot *s, char *err, size_t errlen)
{
	struct ctl_http_resp r = {0};
	struct pg_json js = {0};
	int64_t v;
	int rc = -1;
	double g, rr;

	if (get_json(o, "/backends", &r, NULL, err, errlen))
		goto out;
	s->taken = ctl_now();
	s->source = CTL_SRC_API;
	if (ctl_parse_backends_json(r.body, r.len, s, err, errlen))
		goto out;
	ctl_http_resp_free(&r);
	if (get_json(o, "/routing", &r, &js, err, errlen))
		goto out;
	v = pg_json_find(&js, 0, "RoutingStrategy", 15);
	if (v >= 0 && js.tok[v].type == PG_JSON_STRING) {
		enum pg_strategy st;

		if (!pg_strategy_parse(js.src + js.tok[v].start, js.tok[v].end - js.tok[v].start,
		                       &st)) {
			s->strategy = st;
			s->have_routing = true;
		}
	}
	v = pg_json_find(&js, 0, "PrefixAwareRoutingConfig", 24);
	if (v >= 0) {
		s->prefix_length = (uint32_t)num(&js, (uint32_t)v, "PrefixLength");
		s->concurrency_threshold = (uint32_t)num(&js, (uint32_t)v, "ConcurrencyThreshold");
	}
	v = pg_json_find(&js, 0, "CacheAwareConfig", 16);
	if (v >= 0) {
		s->new_choices = (uint32_t)num(&js, (uint32_t)v, "NewConversationChoices");
	}
	ctl_http_resp_free(&r);
	/* ring generation and remap share: only /metrics has them */
	if (!get_json(o, "/metrics", &r, NULL, err, errlen)) {
		g = metric(r.body, "prefixgate_ring_generation");
		rr = metric(r.body, "prefixgate_ring_remapped_ratio");
		if (g >= 0) {
			s->have_ring = true;
			s->ring_generation = (uint64_t)g;
			s->remapped = rr >= 0 ? rr : 0;
		}
	}
	rc = 0;
out:
	pg_json_free(&js);
	ctl_http_resp_free(&r);
	return rc;
}

/* GET /health answers (any status with a body: 503 means no healthy
 * backend, not no gateway). */
int ctl_api_check(const struct ctl_opts *o, char *err, size_t errlen)
{
	struct ctl_http_resp r = {0};
	char msg[160];

	if (ctl_http(o, "GET", "/health", NULL, NULL, 0, ctl_timeout(o, CTL_TIMEOUT_DEFAULT), &r,
	             err, errlen))
		return -1;
	if (r.status != 200 && r.status != 503) {
		snprintf(err, errlen, "admin API %s: GET /health: HTTP %d %s", o->admin, r.status,
		         ctl_api_error(&r, msg, sizeof(msg)));
		ctl_http_resp_free(&r);
		return -1;
	}
	ctl_http_resp_free(&r);
	return 0;
}
