// SPDX-License-Identifier: MIT
/*
 * The admin API (admin.h): the request handlers (the output buffer is
 * buf.c); admin_http.c frames the exchange. No sockets: admin_listener.c moves the
 * bytes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "admin/admin.h"
#include "admin/admin_backends.h"
#include "admin/admin_pools.h"
#include "config/config.h"
#include "members/members.h"
#include "fleet/fleet.h"
#include "lib/json.h"
#include "lib/key.h"
#include "lib/names.h"
#include "admin/metrics.h"
#include "state/pools.h"
#include "router/route.h"
#include "fleet/etcd.h"
#include "sys/lifecycle.h"

#define JSON_TYPE "application/json"

/* ---- replies ------------------------------------------------------------- */

static int reply_error(struct pg_admin_reply *r, int status, const char *msg)
{
	return pg_admin_reply_error(r, status, msg);
}

static bool str_is(struct pg_str s, const char *lit)
{
	return s.len == strlen(lit) && !memcmp(s.p, lit, s.len);
}

char *pg_admin_url_decode(struct pg_str s, bool plus_space, size_t *n)
{
	char *d = malloc(s.len + 1);

	if (!d)
		return NULL;
	*n = 0;
	for (size_t i = 0; i < s.len; i++) {
		if (s.p[i] == '%' && i + 2 < s.len && pg_frame_hex(s.p[i + 1]) >= 0 &&
		    pg_frame_hex(s.p[i + 2]) >= 0) {
			d[(*n)++] =
			    (char)(pg_frame_hex(s.p[i + 1]) << 4 | pg_frame_hex(s.p[i + 2]));
			i += 2;
		} else {
			d[(*n)++] = plus_space && s.p[i] == '+' ? ' ' : s.p[i];
		}
	}
	d[*n] = 0;
	return d;
}

/* The query string names parameter name (alone or with a value). */
static bool query_has(struct pg_str q, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < q.len;) {
		const char *amp = memchr(q.p + i, '&', q.len - i);
		size_t end = amp ? (size_t)(amp - q.p) : q.len;

		if (end - i >= n && !memcmp(q.p + i, name, n) &&
		    (end - i == n || q.p[i + n] == '='))
			return true;
		i = end + 1;
	}
	return false;
}

/* ---- handlers -------------------------------------------------------------- */

/* GET /health: 200 while requests can be served, else 503 (a gateway that
 * can only answer 502 is not healthy). With model pools, a pool requests
 * reach but no healthy member serves makes it "degraded", naming the pool:
 * still 200, since the other pools serve; 503 once no such pool serves.
 * ?ready, the readiness form: also 503 once draining (SIGTERM), so load
 * balancers stop sending before the listener closes. */
static int h_health(struct pg_gateway *gw, struct pg_str query, struct pg_admin_reply *r)
{
	unsigned max = pg_router_max_id(&gw->router), n = 0, healthy = 0,
	         np = gw->pools ? gw->maps.npools : 1;
	unsigned pn[PG_MAX_POOLS] = {0}, ph[PG_MAX_POOLS] = {0}, reachable = 0, degraded = 0;
	uint64_t now = pg_now_ms();
	bool ready = query_has(query, "ready"), draining = pg_draining(gw);
	const char *status = "ok";
	bool serving = true;

	for (unsigned id = 1; id <= max; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];
		uint16_t f = __atomic_load_n(&b->flags, __ATOMIC_ACQUIRE);
		unsigned p = gw->pools && b->pool < np ? b->pool : 0;
		bool usable;

		if (!(f & PG_BACKEND_ACTIVE) || (f & PG_BACKEND_DRAINING))
			continue;
		usable = pg_backend_usable(b, now);
		n++;
		healthy += usable;
		pn[p]++;
		ph[p] += usable;
	}
	for (unsigned p = 0; p < np; p++) {
		if (!pg_pool_takes_requests(gw, p))
			continue;
		reachable++;
		degraded += !ph[p];
	}
	if (!healthy || degraded == reachable) {
		status = "no healthy backend";
		serving = false;
	} else if (ready && draining) {
		status = "draining";
		serving = false;
	} else if (degraded) {
		status = "degraded";
	}
	pg_buf_printf(&r->body, "{\"status\":\"%s\",\"backends\":%u,\"healthy\":%u", status, n,
	              healthy);
	if (ready)
		pg_buf_printf(&r->body, ",\"ready\":%s,\"draining\":%s", serving ? "true" : "false",
		              draining ? "true" : "false");
	if (degraded && gw->pools) {
		/* what the 502s of those pools' requests come from */
		pg_buf_puts(&r->body, ",\"degraded_pools\":[");
		for (unsigned p = 0, k = 0; p < np; p++) {
			if (!pg_pool_takes_requests(gw, p) || ph[p])
				continue;
			pg_buf_printf(&r->body, "%s{\"pool\":\"%s\",\"backends\":%u,\"healthy\":0}",
			              k++ ? "," : "", pg_pool_name(gw, p), pn[p]);
		}
		pg_buf_puts(&r->body, "]");
	}
	pg_etcd_health_json(&r->body);
	pg_buf_puts(&r->body, "}\n");
	return r->status = serving ? 200 : 503;
}

static const char *const api_names[] = {
    [PG_API_RAW] = "raw",
    [PG_API_CHAT] = "chat",
    [PG_API_COMPLETIONS] = "completions",
    [PG_API_RESPONSES] = "responses",
    [PG_API_MESSAGES] = "messages",
    [PG_API_EMBEDDINGS] = "embeddings",
};
_Static_assert(sizeof(api_names) / sizeof(api_names[0]) == PG_API_COUNT, "a name for each API");

/* Bytes of the key shown by the dry run ("key_preview"). */
#define KEY_PREVIEW 256

/* One cache_aware estimate (pg_ca_est) of the dry run, as the member
 * "name" followed by a comma; id 0 (none) is null. */
static void est_json(struct pg_gateway *gw, struct pg_buf *o, const char *name,
                     const struct pg_ca_est *e)
{
	char nb[PG_ADDR_STRLEN];

	if (!e->id) {
		pg_buf_printf(o, "\"%s\":null,", name);
		return;
	}
	pg_buf_printf(o,
	              "\"%s\":{\"backend\":\"%s\",\"matched\":%u,\"wait_ms\":%.1f,"
	              "\"prefill_ms\":%.1f,\"saved_ms\":%.1f,\"ttft_ms\":%.1f},",
	              name, pg_backend_name(&gw->maps.backends[e->id], nb, sizeof(nb)), e->matched,
	              e->wait_ms, e->prefill_ms, e->saved_ms, e->ttft_ms);
}

/* A fresh 64-bit random number for the balancer (splitmix64 over a
 * clock-seeded counter; control thread only, quality is not critical). */
static uint64_t dry_run_rnd(void)
{
	static uint64_t st;
	uint64_t z;

	if (!st)
		st = pg_now_ns() | 1;
	z = (st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The dry run's answer when no backend is usable: why, in the pool's terms
 * (a pool without members is a configuration to fix; members all down is
 * an outage). */
static void no_backend_json(struct pg_gateway *gw, unsigned pool, struct pg_buf *o)
{
	unsigned n = __atomic_load_n(&gw->maps.state[pool].nbackends, __ATOMIC_RELAXED);
	char in[PG_POOL_NAME_MAX + 16] = "";

	if (gw->pools)
		snprintf(in, sizeof(in), " in pool %s", pg_pool_name(gw, pool));
	if (n)
		pg_buf_printf(o,
		              "\"backend\":null,\"error\":\"no usable backend%s (%u member%s, none "
		              "healthy)\",",
		              in, n, n == 1 ? "" : "s");
	else
		pg_buf_printf(o, "\"backend\":null,\"error\":\"no usable backend%s (no member)\",",
		              in);
}

static int h_route(struct pg_gateway *gw, struct pg_str query, const char *body, size_t len,
                   struct pg_admin_reply *r)
{
	static const struct pg_str post = {"POST", 4};
	char *path = NULL, *key = NULL, *name, *val, preview[KEY_PREVIEW], err[160],
	     nb[PG_ADDR_STRLEN];
	size_t path_len = 0, key_len = 0, nlen, vlen, tlen = 0;
	int vlen_model;
	/* a request of the default class (flow control's room: route.h) */
	struct pg_route_input in = {.api = PG_API_RAW,
	                            .body = body ? body : "",
	                            .body_len = len,
	                            .complete = true,
	                            .prio = PG_PRIO_STANDARD};
	struct pg_route_cfg rc, dc;
	struct pg_choice ch, pch;
	const struct pg_pool_cfg *pc;
	enum pg_pd_route pdr = PG_PDR_NONE;
	uint64_t anchor;
	uint32_t tokens;
	struct pg_key k;
	uint16_t id;
	int status = 0, pool = -1;
	unsigned dpool; /* the pool the answering backend is chosen in */

	/* ?path=P&key=K, in any order; the last of a repeated name wins */
	for (size_t i = 0; i < query.len && !status;) {
		const char *amp = memchr(query.p + i, '&', query.len - i);
		size_t end = amp ? (size_t)(amp - query.p) : query.len;
		const char *eq = memchr(query.p + i, '=', end - i);
		size_t ne = eq ? (size_t)(eq - query.p) : end;

		name = pg_admin_url_decode((struct pg_str){query.p + i, ne - i}, true, &nlen);
		val = pg_admin_url_decode(
		    (struct pg_str){query.p + ne + (eq != NULL), end - ne - (eq != NULL)}, true,
		    &vlen);
		if (!name || !val) {
			status = reply_error(r, 500, "out of memory");
		} else if (!strcmp(name, "path") || !strcmp(name, "key")) {
			bool is_path = name[0] == 'p';

			free(is_path ? path : key);
			*(is_path ? &path : &key) = val;
			*(is_path ? &path_len : &key_len) = vlen;
			val = NULL;
		} else if (!strcmp(name, "pool")) {
			pool = pg_pool_lookup(gw, val, vlen);
			if (pool < 0)
				status = reply_error(r, 404, "pool: no such pool (GET /pools)");
		} else if (nlen) {
			snprintf(err, sizeof(err),
			         "unknown query parameter \"%.40s\" (path, key, pool)", name);
			status = reply_error(r, 400, err);
		}
		free(name);
		free(val);
		i = end + 1;
	}
	if (!status && path && path[0] != '/')
		status = reply_error(r, 400, "path: must start with '/'");
	if (status)
		goto out;
	if (path) {
		/* The API is the path without its query, as for real requests
		 * (?path=/v1/chat/completions%3Fapi-version=1). */
		const char *q = memchr(path, '?', path_len);

		in.api = pg_key_api(post, (struct pg_str){path, q ? (size_t)(q - path) : path_len});
	}
	if (key)
		in.header_key = (struct pg_str){key, key_len};
	/* The pool real traffic would go to, unless ?pool= names one. */
	if (pool < 0)
		pool = pg_pool_for_head(gw, true, path ? path : "/", path ? path_len : 1);
	if (pool == PG_POOL_BY_MODEL)
		pool = pg_pool_for_body(gw, in.body, in.body_len, preview, &vlen_model);
	if (pool < 0) {
		status = reply_error(r, 404, "no model pool serves this request (GET /pools)");
		goto out;
	}
	in.pool = (unsigned)pool;
	pg_router_cfg(&gw->router, in.pool, &rc);
	pc = pg_pools_table(gw) && in.pool < pg_pools_table(gw)->n
	         ? &pg_pools_table(gw)->pool[in.pool]
	         : NULL;
	dpool = in.pool;
	if (pc && pc->pd && pc->decode) {
		/* prefill/decode: the pair, or the decode instance alone, as a
		 * request of the pool goes; the answer comes from the decode one */
		dpool = pc->decode;
		pch = (struct pg_choice){0};
		pdr = pg_route_pd(&gw->router, PG_ROUTE_DRY, &in, dpool, pc->pd_min_tokens, NULL,
		                  NULL, dry_run_rnd(), &k, &pch, &ch);
		id = pdr != PG_PDR_NONE ? ch.backend : 0;
	} else {
		id = pg_route_dry(&gw->router, &in, NULL, dry_run_rnd(), &k, &ch);
	}
	pg_router_cfg(&gw->router, dpool, &dc);
	anchor = k.anchor;
	tokens = k.tokens;
	/* The key again, for its text: same inputs, same key. */
	pg_key_compute(in.api, in.header_key, in.body, in.body_len, true, rc.prefix_length, &k,
	               preview, sizeof(preview), &tlen);

	pg_buf_puts(&r->body, "{");
	if (id)
		pg_buf_printf(&r->body, "\"backend\":\"%s\",\"backend_id\":%u,\"reason\":\"%s\",",
		              pg_backend_name(&gw->maps.backends[id], nb, sizeof(nb)), id,
		              pg_decision_name(ch.decision));
	else
		no_backend_json(gw, dpool, &r->body);
	if (dpool != in.pool && id) {
		pg_buf_printf(&r->body, "\"pd_route\":\"%s\",\"decode_pool\":\"%s\",\"prefill\":",
		              pdr == PG_PDR_PAIR ? "pair" : "decode_alone",
		              pg_pool_name(gw, dpool));
		if (pdr == PG_PDR_PAIR)
			pg_buf_printf(
			    &r->body, "\"%s\",\"prefill_reason\":\"%s\",",
			    pg_backend_name(&gw->maps.backends[pch.backend], nb, sizeof(nb)),
			    pg_decision_name(pch.decision));
		else
			pg_buf_puts(&r->body, "null,");
	}
	if (dc.strategy == PG_STRATEGY_CACHE_AWARE) {
		pg_buf_printf(&r->body,
		              "\"matched\":%u,\"prompt_tokens\":%u,\"anchor_hash\":\"0x%016llx\",",
		              ch.matched, tokens, (unsigned long long)anchor);
		if (id) {
			est_json(gw, &r->body, "chosen", &ch.est[0]);
			est_json(gw, &r->body, "runner_up", &ch.est[1]);
		}
	}
	pg_buf_puts(&r->body, "\"candidates\":[");
	for (unsigned c = 0; c < ch.ncand && id; c++)
		pg_buf_printf(&r->body, "%s\"%s\"", c ? "," : "",
		              pg_backend_name(&gw->maps.backends[ch.cand[c]], nb, sizeof(nb)));
	pg_buf_printf(&r->body,
	              "],\"strategy\":\"%s\",\"api\":\"%s\",\"key_hash\":\"0x%016llx\","
	              "\"key_length\":%u,\"key_source\":\"%s\",\"fallback\":%s,"
	              "\"ring_generation\":%llu,\"pool\":\"%s\",\"key_preview\":",
	              pg_strategy_flag(rc.strategy), api_names[in.api], (unsigned long long)k.hash,
	              k.length, pg_key_source_name(k.source), k.fallback ? "true" : "false",
	              (unsigned long long)__atomic_load_n(&gw->maps.state[in.pool].ring_generation,
	                                                  __ATOMIC_RELAXED),
	              pg_pool_name(gw, in.pool));
	pg_buf_json_str(&r->body, preview, tlen < sizeof(preview) ? tlen : sizeof(preview));
	pg_buf_puts(&r->body, "}\n");
	status = r->status = id ? 200 : 503;
out:
	free(path);
	free(key);
	return status;
}

int pg_admin_handle(struct pg_gateway *gw, struct pg_str method, struct pg_str path,
                    struct pg_str query, const char *body, size_t len, struct pg_admin_reply *out)
{
	static const char prefix[] = "/backends/", tprefix[] = "/tenants/";
	const size_t plen = sizeof(prefix) - 1;
	const bool get = str_is(method, "GET");
	char msg[128];

	memset(out, 0, sizeof(*out));
	out->content_type = JSON_TYPE;
	if (len > PG_ADMIN_BODY_MAX)
		return reply_error(out, 413, "request body larger than 16 MiB");
	if (str_is(path, "/health")) {
		if (get)
			return h_health(gw, query, out);
		out->allow = "GET";
	} else if (str_is(path, "/metrics")) {
		if (get) {
			out->content_type = PG_METRICS_CONTENT_TYPE;
			pg_metrics_render(gw, &out->body);
			return out->status = 200;
		}
		out->allow = "GET";
	} else if (str_is(path, "/backends")) {
		if (get)
			return pg_admin_backends_get(gw, query, out);
		if (str_is(method, "POST"))
			return pg_admin_backends_post(gw, body, len, out);
		out->allow = "GET, POST";
	} else if (path.len > plen && !memcmp(path.p, prefix, plen)) {
		if (str_is(method, "DELETE"))
			return pg_admin_backend_delete(
			    gw, (struct pg_str){path.p + plen, path.len - plen}, out);
		out->allow = "DELETE";
	} else if (str_is(path, "/route")) {
		if (str_is(method, "POST"))
			return h_route(gw, query, body, len, out);
		out->allow = "POST";
	} else if (str_is(path, "/fleet")) {
		if (get) {
			pg_fleet_json(gw, &out->body);
			return out->status = 200;
		}
		out->allow = "GET";
	} else if (str_is(path, "/routing")) {
		if (get || str_is(method, "PUT"))
			return pg_admin_routing(gw, !get, query, body, len, out);
		out->allow = "GET, PUT";
	} else if (str_is(path, "/pools")) {
		if (get)
			return pg_admin_pools_get(gw, out);
		out->allow = "GET";
	} else if (str_is(path, "/flow")) {
		if (get)
			return pg_admin_flow_get(gw, out);
		out->allow = "GET";
	} else if (str_is(path, "/tenants")) {
		if (get)
			return pg_admin_tenants_get(gw, out);
		out->allow = "GET";
	} else if (path.len > sizeof(tprefix) - 1 &&
	           !memcmp(path.p, tprefix, sizeof(tprefix) - 1)) {
		if (str_is(method, "PUT"))
			return pg_admin_tenant_put(
			    gw,
			    (struct pg_str){path.p + sizeof(tprefix) - 1,
			                    path.len - (sizeof(tprefix) - 1)},
			    body, len, out);
		out->allow = "PUT";
	} else if (str_is(path, "/config")) {
		if (get)
			return pg_admin_config_get(gw, out);
		out->allow = "GET";
	} else if (str_is(path, "/tls")) {
		if (get)
			return pg_admin_tls_get(gw, out);
		out->allow = "GET";
	} else if (str_is(path, "/tls/reload")) {
		if (str_is(method, "POST"))
			return pg_admin_tls_reload(gw, out);
		out->allow = "POST";
	} else {
		return reply_error(
		    out, 404,
		    "no such endpoint (GET /health /metrics /backends /routing /fleet /pools "
		    "/flow /tenants /config /tls, POST /backends /route /tls/reload, DELETE "
		    "/backends/ADDR:PORT, PUT /routing /tenants/NAME)");
	}
	snprintf(msg, sizeof(msg), "method not allowed here; allowed: %s", out->allow);
	return reply_error(out, 405, msg);
}
