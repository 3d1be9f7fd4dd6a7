// SPDX-License-Identifier: MIT
/*
 * Snapshots of a running gateway from its admin API: GET /pools (each
 * pool's RoutingConfig, ring and lists) and GET /backends (each member,
 * its health word and ring slots as the gateway computes them). source.c
 * has the maps' side and picks the source.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctl.h"
#include "lib/json.h"
#include "lib/modelpool.h"
#include "lib/flow.h"
#include "lib/names.h"

static int get_json(const struct ctl_opts *o, const char *target, struct ctl_http_resp *r,
                    char *err, size_t errlen)
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
	return 0;
}

static int64_t num(const struct pg_json *js, uint32_t obj, const char *name)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name)), x = 0;

	if (v < 0 || pg_json_get_i64(js, (uint32_t)v, &x))
		return -1;
	return x;
}

static double real(const struct pg_json *js, uint32_t obj, const char *name)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name));
	char buf[40];
	size_t n;

	if (v < 0 || js->tok[v].type != PG_JSON_NUMBER)
		return 0;
	n = js->tok[v].end - js->tok[v].start;
	if (n >= sizeof(buf))
		return 0;
	memcpy(buf, js->src + js->tok[v].start, n);
	buf[n] = 0;
	return strtod(buf, NULL);
}

static bool flag(const struct pg_json *js, uint32_t obj, const char *name)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name));

	return v >= 0 && js->tok[v].type == PG_JSON_TRUE;
}

/* (ctl.h) */
const char *ctl_json_get_str(const struct pg_json *js, uint32_t obj, const char *name, char *buf,
                             size_t cap)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name));
	size_t n = 0;

	if (v >= 0 && js->tok[v].type == PG_JSON_STRING) {
		n = pg_json_str_copy(js, (uint32_t)v, buf, cap - 1);
		if (n > cap - 1)
			n = cap - 1;
	}
	buf[n] = 0;
	return buf;
}

/* An array of strings (models, paths) as the pg_pools map holds it: its
 * first items that fit, comma-separated (pg_pool_list_join); *count its
 * length. */
static void list(const struct pg_json *js, uint32_t obj, const char *name, char *out, size_t cap,
                 uint32_t *count)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name));
	char items[PG_POOL_MODELS_MAX][PG_MODEL_NAME_MAX + 1], *ptr[PG_POOL_MODELS_MAX];
	uint32_t n = 0, k;

	out[0] = 0;
	*count = 0;
	if (v < 0 || js->tok[v].type != PG_JSON_ARRAY)
		return;
	k = pg_json_first((uint32_t)v);
	for (uint32_t i = 0; i < js->tok[v].size && n < PG_POOL_MODELS_MAX;
	     i++, k = js->tok[k].next) {
		size_t l = pg_json_str_copy(js, k, items[n], PG_MODEL_NAME_MAX);

		items[n][l < PG_MODEL_NAME_MAX ? l : PG_MODEL_NAME_MAX] = 0;
		ptr[n] = items[n];
		n++;
	}
	*count = js->tok[v].size;
	pg_pool_list_join(ptr, n, out, cap);
}

int ctl_parse_pools_json(const char *body, size_t len, struct ctl_snapshot *s, char *err,
                         size_t errlen)
{
	struct pg_json js = {0};
	uint32_t k;
	int rc = -1;

	s->npools = 0;
	if (pg_json_parse(&js, body, len)) {
		snprintf(err, errlen, "GET /pools: invalid JSON at byte %zu: %s", js.err_pos,
		         js.err_msg);
		goto out;
	}
	if (js.tok[0].type != PG_JSON_ARRAY || !js.tok[0].size || js.tok[0].size > PG_MAX_POOLS) {
		snprintf(err, errlen, "GET /pools: expected an array of 1-%d pools", PG_MAX_POOLS);
		goto out;
	}
	k = pg_json_first(0);
	for (uint32_t n = 0; n < js.tok[0].size; n++, k = js.tok[k].next) {
		struct ctl_pool *c = &s->pool[s->npools];
		int64_t rt = pg_json_find(&js, k, "routing", 7), v;
		char st[64];

		if (js.tok[k].type != PG_JSON_OBJECT || rt < 0) {
			snprintf(err, errlen, "GET /pools: element %u is not a pool", n);
			goto out;
		}
		memset(c, 0, sizeof(*c));
		ctl_json_get_str(&js, k, "name", c->name, sizeof(c->name));
		c->catch_all = flag(&js, k, "catch_all");
		list(&js, k, "models", c->models, sizeof(c->models), &c->nmodels);
		list(&js, k, "paths", c->paths, sizeof(c->paths), &c->npaths);
		c->members = (uint32_t)num(&js, k, "backends");
		c->ring_generation = (uint64_t)num(&js, k, "ring_generation");
		c->remapped = real(&js, k, "remapped_ratio");
		ctl_json_get_str(&js, (uint32_t)rt, "RoutingStrategy", st, sizeof(st));
		{
			enum pg_strategy e = PG_STRATEGY_PREFIX_AWARE;

			pg_strategy_parse(st, strlen(st), &e);
			c->strategy = e;
		}
		if ((v = pg_json_find(&js, (uint32_t)rt, "PrefixAwareRoutingConfig", 24)) >= 0) {
			c->prefix_length = (uint32_t)num(&js, (uint32_t)v, "PrefixLength");
			c->concurrency_threshold =
			    (uint32_t)num(&js, (uint32_t)v, "ConcurrencyThreshold");
		}
		c->new_choices = PG_CA_CHOICES_DEFAULT;
		if ((v = pg_json_find(&js, (uint32_t)rt, "CacheAwareConfig", 16)) >= 0)
			c->new_choices = (uint32_t)num(&js, (uint32_t)v, "NewConversationChoices");
		s->npools++;
	}
	rc = 0;
out:
	pg_json_free(&js);
	return rc;
}

/* The pool named name among s's pools (0 if none is). */
static unsigned pool_index(const struct ctl_snapshot *s, const char *name)
{
	for (unsigned p = 0; p < s->npools; p++)
		if (!strcmp(s->pool[p].name, name))
			return p;
	return 0;
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
		char pool[PG_POOL_NAME_MAX];

		/* address null: a DNS name that stands for no address (its "state") */
		if (js.tok[k].type != PG_JSON_OBJECT || a < 0 ||
		    (js.tok[a].type != PG_JSON_STRING && js.tok[a].type != PG_JSON_NULL) ||
		    s->n >= PG_MAX_BACKENDS) {
			snprintf(err, errlen, "GET /backends: element %u is not a backend", n);
			goto out;
		}
		memset(c, 0, sizeof(*c));
		ctl_json_get_str(&js, k, "address", c->addr, sizeof(c->addr));
		ctl_json_get_str(&js, k, "name", c->name, sizeof(c->name));
		c->id = (unsigned)num(&js, k, "id");
		/* the gateway's own word; a name's state; else (an older
		 * gateway) from its flags */
		if (!ctl_json_get_str(&js, k, "health", c->health, sizeof(c->health))[0] &&
		    !ctl_json_get_str(&js, k, "state", c->health, sizeof(c->health))[0])
			snprintf(c->health, sizeof(c->health), "%s",
			         flag(&js, k, "draining")  ? "draining"
			         : flag(&js, k, "healthy") ? "up"
			                                   : "down");
		c->healthy = flag(&js, k, "healthy");
		c->pool = pool_index(s, ctl_json_get_str(&js, k, "pool", pool, sizeof(pool)));
		c->in_flight = (int32_t)num(&js, k, "in_flight");
		c->epoch = (uint32_t)num(&js, k, "epoch");
		c->failures = (uint64_t)(num(&js, k, "failures") > 0 ? num(&js, k, "failures") : 0);
		c->ring_slots = c->id ? num(&js, k, "ring_slots") : -1;
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

/* A count of GET /flow: 0 when absent. */
static uint64_t cnt(const struct pg_json *js, uint32_t obj, const char *name)
{
	int64_t v = num(js, obj, name);

	return v > 0 ? (uint64_t)v : 0;
}

/* GET /flow's pools, summed into s->flow (and the default pool's
 * InstanceQueueMs). A gateway without GET /flow: the queue is unknown. */
static void api_flow(const struct ctl_opts *o, struct ctl_snapshot *s)
{
	struct ctl_http_resp r = {0};
	struct pg_json js = {0};
	struct pg_flow_stats *f = &s->flow;
	char e[256];
	int64_t pools;
	uint32_t k;

	if (get_json(o, "/flow", &r, e, sizeof(e)) || pg_json_parse(&js, r.body, r.len))
		goto out;
	pools = pg_json_find(&js, 0, "pools", 5);
	if (pools < 0 || js.tok[pools].type != PG_JSON_ARRAY)
		goto out;
	s->have_flow = true;
	memset(f, 0, sizeof(*f));
	k = (uint32_t)pools + 1;
	for (uint32_t i = 0; i < js.tok[pools].size; i++, k = js.tok[k].next) {
		int64_t c = pg_json_find(&js, k, "queued_class", 12);

		if (!i) {
			const int64_t q = pg_json_find(&js, k, "InstanceQueueMs", 15);

			s->flow_queue_ms = q >= 0 && js.tok[q].type == PG_JSON_STRING
			                       ? PG_FLOW_QUEUE_AUTO
			                       : (uint32_t)cnt(&js, k, "InstanceQueueMs");
		}
		f->queued += (uint32_t)cnt(&js, k, "queued");
		if (c >= 0)
			for (int p = 0; p < PG_FLOW_CLASSES; p++)
				f->queued_class[p] +=
				    (uint32_t)cnt(&js, (uint32_t)c, pg_prio_names[p]);
		f->queued_bytes += cnt(&js, k, "queued_bytes");
		f->enqueued += cnt(&js, k, "enqueued");
		f->dispatched += cnt(&js, k, "dispatched");
		f->wait_ms_total += cnt(&js, k, "wait_ms_total");
		f->expired += cnt(&js, k, "expired");
		f->late += cnt(&js, k, "late");
		f->shed += cnt(&js, k, "shed");
		f->refused += cnt(&js, k, "refused");
		f->gone += cnt(&js, k, "gone");
		f->bypassed += cnt(&js, k, "bypassed");
	}
out:
	pg_json_free(&js);
	ctl_http_resp_free(&r);
}

int ctl_api_snapshot(const struct ctl_opts *o, struct ctl_snapshot *s, char *err, size_t errlen)
{
	struct ctl_http_resp r = {0};
	int rc = -1;

	s->source = CTL_SRC_API;
	if (get_json(o, "/pools", &r, err, errlen) ||
	    ctl_parse_pools_json(r.body, r.len, s, err, errlen))
		goto out;
	ctl_http_resp_free(&r);
	if (get_json(o, "/backends", &r, err, errlen))
		goto out;
	s->taken = ctl_now();
	if (ctl_parse_backends_json(r.body, r.len, s, err, errlen))
		goto out;
	api_flow(o, s);
	rc = 0;
out:
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
