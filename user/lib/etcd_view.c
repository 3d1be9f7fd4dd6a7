// SPDX-License-Identifier: MIT
/*
 * The prefix's key-value view (etcd.h): building it from a range, applying
 * watch responses to it, what the gateway routes on, the records kept under
 * it, and the state file.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/etcd.h"
#include "lib/json.h"
#include "lib/modelpool.h"

void pg_etcd_view_free(struct pg_etcd_view *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->e[i].key);
		free(v->e[i].val);
	}
	free(v->e);
	memset(v, 0, sizeof(*v));
}

/* Index of key, or where it would go (*found false). */
static size_t find(const struct pg_etcd_view *v, const char *key, bool *found)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(v->e[mid].key, key);

		if (!c) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

const struct pg_etcd_kv *pg_etcd_view_get(const struct pg_etcd_view *v, const char *key)
{
	bool found;
	size_t i = find(v, key, &found);

	return found ? &v->e[i] : NULL;
}

int pg_etcd_view_set(struct pg_etcd_view *v, const char *key, const char *val, size_t vlen)
{
	bool found;
	size_t i = find(v, key, &found);
	char *copy, *kcopy = NULL;

	if (!val) {
		if (found) {
			free(v->e[i].key);
			free(v->e[i].val);
			memmove(&v->e[i], &v->e[i + 1], (v->n - i - 1) * sizeof(v->e[0]));
			v->n--;
		}
		return 0;
	}
	copy = malloc(vlen + 1);
	if (!copy)
		return -1;
	memcpy(copy, val, vlen);
	copy[vlen] = 0;
	if (found) {
		free(v->e[i].val);
		v->e[i].val = copy;
		v->e[i].vlen = vlen;
		return 0;
	}
	kcopy = strdup(key);
	if (!kcopy)
		goto oom;
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		struct pg_etcd_kv *e = realloc(v->e, cap * sizeof(*e));

		if (!e)
			goto oom;
		v->e = e;
		v->cap = cap;
	}
	memmove(&v->e[i + 1], &v->e[i], (v->n - i) * sizeof(v->e[0]));
	v->e[i] = (struct pg_etcd_kv){.key = kcopy, .val = copy, .vlen = vlen};
	v->n++;
	return 0;
oom:
	free(kcopy);
	free(copy);
	return -1;
}

/* A key under prefix other than the gateways' records: those change with
 * every gateway's own writes and route nothing (a gateway reacting to them
 * would write its record again, and so on). */
static bool routed_key(const char *key, const char *prefix, size_t plen)
{
	return !strncmp(key, prefix, plen) &&
	       strncmp(key + plen, PG_ETCD_GATEWAYS_DIR, strlen(PG_ETCD_GATEWAYS_DIR));
}

int pg_etcd_view_from_range(struct pg_etcd_view *out, const char *prefix,
                            const struct pg_etcd_resp *r, char *err, size_t errlen)
{
	struct pg_etcd_view v = {.revision = r->revision};
	size_t plen = strlen(prefix);

	if (r->code) {
		snprintf(err, errlen, "range: %s (code %d)", r->error, r->code);
		return -1;
	}
	if (r->revision <= 0) {
		snprintf(err, errlen, "range: no header revision");
		return -1;
	}
	for (size_t i = 0; i < r->nkv; i++) {
		if (!routed_key(r->kv[i].key, prefix, plen))
			continue;
		if (pg_etcd_view_set(&v, r->kv[i].key + plen, r->kv[i].val, r->kv[i].vlen)) {
			pg_etcd_view_free(&v);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	}
	pg_etcd_view_free(out);
	*out = v;
	return 0;
}

int pg_etcd_view_step(struct pg_etcd_view *v, const char *prefix, const struct pg_etcd_resp *r)
{
	size_t plen = strlen(prefix);
	int64_t upto = v->revision;
	bool changed = false;

	if (r->canceled || r->code)
		return PG_ETCD_RELIST;
	if (r->revision && r->revision < v->revision)
		return PG_ETCD_RELIST;
	for (size_t i = 0; i < r->nkv; i++) {
		const struct pg_etcd_kv *kv = &r->kv[i];

		if (kv->mod_revision && kv->mod_revision <= v->revision)
			continue; /* replayed (a DELETE's kv carries its revision too) */
		if (kv->mod_revision > upto)
			upto = kv->mod_revision;
		if (!routed_key(kv->key, prefix, plen))
			continue;
		if (pg_etcd_view_set(v, kv->key + plen, kv->deleted ? NULL : kv->val, kv->vlen))
			return -1;
		changed = true;
	}
	/* The events say how far the view has come. The header's revision
	 * only does in a progress notification: the one of "created" is the
	 * store's, and the events from the start revision up to it follow. */
	if (!r->nkv && !r->created && r->revision > upto)
		upto = r->revision;
	v->revision = upto;
	return changed ? PG_ETCD_CHANGED : PG_ETCD_NOTHING;
}

/* ---- what is derived from the view ---------------------------------------- */

int pg_etcd_backend_parse(const char *val, size_t len, char *addr, size_t cap, char *pool,
                          bool *active, char *err, size_t errlen)
{
	struct pg_json js = {0};
	int64_t a, s, p;
	size_t n;
	int rc = -1;

	*active = true;
	if (pool)
		pool[0] = 0;
	if (pg_json_parse(&js, val, len) || js.tok[0].type != PG_JSON_OBJECT) {
		snprintf(err, errlen, "not a JSON object");
		goto out;
	}
	a = pg_json_find(&js, 0, "address", 7);
	s = pg_json_find(&js, 0, "state", 5);
	p = pg_json_find(&js, 0, "pool", 4);
	if (a < 0 || js.tok[a].type != PG_JSON_STRING) {
		snprintf(err, errlen, "address: missing or not a string");
		goto out;
	}
	n = pg_json_str_copy(&js, (uint32_t)a, addr, cap - 1);
	addr[n < cap ? n : cap - 1] = 0;
	if (!n || n >= cap || strlen(addr) != n) {
		snprintf(err, errlen, "address: empty, too long or with a NUL");
		goto out;
	}
	if (s >= 0) {
		if (js.tok[s].type == PG_JSON_STRING &&
		    pg_json_str_eq(&js, (uint32_t)s, "active", 6))
			*active = true;
		else if (js.tok[s].type == PG_JSON_STRING &&
		         pg_json_str_eq(&js, (uint32_t)s, "draining", 8))
			*active = false;
		else {
			snprintf(err, errlen, "state: not \"active\" or \"draining\"");
			goto out;
		}
	}
	if (p >= 0) {
		char name[PG_ETCD_POOL_MAX];

		n = js.tok[p].type == PG_JSON_STRING
		        ? pg_json_str_copy(&js, (uint32_t)p, name, sizeof(name) - 1)
		        : sizeof(name);
		if (n >= sizeof(name) || !pg_pool_name_ok(name, n)) {
			snprintf(err, errlen, "pool: not a pool's name (1-%d of A-Z a-z 0-9 _ . -)",
			         PG_ETCD_POOL_MAX - 1);
			goto out;
		}
		name[n] = 0;
		if (pool)
			memcpy(pool, name, n + 1);
	}
	rc = 0;
out:
	pg_json_free(&js);
	return rc;
}

void pg_etcd_backend_json(struct pg_buf *o, const char *addr, const char *pool, bool active)
{
	pg_buf_puts(o, "{\"address\":");
	pg_buf_json_str(o, addr, strlen(addr));
	pg_buf_printf(o, ",\"state\":\"%s\"", active ? "active" : "draining");
	if (pool && pool[0]) {
		pg_buf_puts(o, ",\"pool\":");
		pg_buf_json_str(o, pool, strlen(pool));
	}
	pg_buf_puts(o, "}");
}

int pg_etcd_view_backends(const struct pg_etcd_view *v, char ***list, size_t *n, size_t *bad)
{
	const size_t dl = strlen(PG_ETCD_BACKENDS_DIR);
	char addr[256], pool[PG_ETCD_POOL_MAX], e[128];
	bool active;

	*list = calloc(v->n + 1, sizeof(char *));
	*n = *bad = 0;
	if (!*list)
		return -1;
	for (size_t i = 0; i < v->n; i++) {
		if (strncmp(v->e[i].key, PG_ETCD_BACKENDS_DIR, dl))
			continue;
		if (pg_etcd_backend_parse(v->e[i].val, v->e[i].vlen, addr, sizeof(addr), pool,
		                          &active, e, sizeof(e))) {
			(*bad)++;
			continue;
		}
		if (!active)
			continue;
		/* (as the backends file has it: the default pool named by none) */
		if (pool[0] && strcmp(pool, "default")
		        ? asprintf(&(*list)[*n], "%s pool=%s", addr, pool) < 0
		        : !((*list)[*n] = strdup(addr))) {
			pg_etcd_list_free(*list, *n);
			*list = NULL;
			*n = 0;
			return -1;
		}
		(*n)++;
	}
	return 0;
}

void pg_etcd_list_free(char **list, size_t n)
{
	for (size_t i = 0; list && i < n; i++)
		free(list[i]);
	free(list);
}

void pg_etcd_gateway_json(struct pg_buf *o, const struct pg_etcd_gateway *g)
{
	pg_buf_puts(o, "{\"id\":");
	pg_buf_json_str(o, g->id, strlen(g->id));
	pg_buf_puts(o, ",\"address\":");
	pg_buf_json_str(o, g->address, strlen(g->address));
	pg_buf_puts(o, ",\"version\":");
	pg_buf_json_str(o, g->version, strlen(g->version));
	pg_buf_printf(o, ",\"revision\":\"%lld\",\"digest\":\"%016" PRIx64 "\",\"backends\":%u}",
	              (long long)g->revision, g->digest, g->backends);
}

static void copy_str(const struct pg_json *js, int64_t i, char *dst, size_t cap)
{
	size_t n = 0;

	if (i >= 0 && js->tok[i].type == PG_JSON_STRING)
		n = pg_json_str_copy(js, (uint32_t)i, dst, cap - 1);
	dst[n < cap ? n : cap - 1] = 0;
}

int pg_etcd_gateway_parse(const char *val, size_t len, struct pg_etcd_gateway *g, char *err,
                          size_t errlen)
{
	struct pg_json js = {0};
	char num[24];
	int64_t b;
	int rc = -1;

	memset(g, 0, sizeof(*g));
	if (pg_json_parse(&js, val, len) || js.tok[0].type != PG_JSON_OBJECT) {
		snprintf(err, errlen, "not a JSON object");
		goto out;
	}
	copy_str(&js, pg_json_find(&js, 0, "id", 2), g->id, sizeof(g->id));
	copy_str(&js, pg_json_find(&js, 0, "address", 7), g->address, sizeof(g->address));
	copy_str(&js, pg_json_find(&js, 0, "version", 7), g->version, sizeof(g->version));
	copy_str(&js, pg_json_find(&js, 0, "revision", 8), num, sizeof(num));
	g->revision = strtoll(num, NULL, 10);
	copy_str(&js, pg_json_find(&js, 0, "digest", 6), num, sizeof(num));
	g->digest = strtoull(num, NULL, 16);
	b = pg_json_find(&js, 0, "backends", 8);
	if (b >= 0 && js.tok[b].type == PG_JSON_NUMBER) {
		int64_t x = 0;

		pg_json_get_i64(&js, (uint32_t)b, &x);
		g->backends = (unsigned)x;
	}
	rc = 0;
out:
	pg_json_free(&js);
	return rc;
}

/* ---- the state file --------------------------------------------------------- */

void pg_etcd_view_dump(const struct pg_etcd_view *v, struct pg_buf *o)
{
	const size_t gl = strlen(PG_ETCD_GATEWAYS_DIR);
	bool first = true;

	pg_buf_printf(o, "{\"revision\":\"%lld\",\"kvs\":{", (long long)v->revision);
	for (size_t i = 0; i < v->n; i++) {
		if (!strncmp(v->e[i].key, PG_ETCD_GATEWAYS_DIR, gl))
			continue;
		pg_buf_puts(o, first ? "\n" : ",\n");
		first = false;
		pg_buf_json_str(o, v->e[i].key, strlen(v->e[i].key));
		pg_buf_puts(o, ":");
		pg_buf_json_str(o, v->e[i].val, v->e[i].vlen);
	}
	pg_buf_puts(o, "\n}}\n");
}

int pg_etcd_view_load(struct pg_etcd_view *out, const char *text, size_t len, char *err,
                      size_t errlen)
{
	struct pg_json js = {0};
	struct pg_etcd_view v = {0};
	char num[24], *key = NULL, *val = NULL;
	int64_t kvs, r;
	int rc = -1;

	if (pg_json_parse(&js, text, len) || js.tok[0].type != PG_JSON_OBJECT) {
		snprintf(err, errlen, "not a JSON object");
		goto out;
	}
	r = pg_json_find(&js, 0, "revision", 8);
	kvs = pg_json_find(&js, 0, "kvs", 3);
	if (r < 0 || kvs < 0 || js.tok[kvs].type != PG_JSON_OBJECT) {
		snprintf(err, errlen, "expected {\"revision\":...,\"kvs\":{...}}");
		goto out;
	}
	copy_str(&js, r, num, sizeof(num));
	v.revision = strtoll(num, NULL, 10);
	for (uint32_t k = pg_json_first((uint32_t)kvs), n = 0; n < js.tok[kvs].size;
	     n++, k = pg_json_member_next(&js, k)) {
		size_t kl = js.tok[k].end - js.tok[k].start, vl;

		if (js.tok[k + 1].type != PG_JSON_STRING) {
			snprintf(err, errlen, "kvs: values must be strings");
			goto out;
		}
		vl = js.tok[k + 1].end - js.tok[k + 1].start;
		key = malloc(kl + 1);
		val = malloc(vl + 1);
		if (!key || !val) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		key[pg_json_str_copy(&js, k, key, kl)] = 0;
		vl = pg_json_str_copy(&js, k + 1, val, vl);
		if (pg_etcd_view_set(&v, key, val, vl)) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		free(key);
		free(val);
		key = val = NULL;
	}
	pg_etcd_view_free(out);
	*out = v;
	v = (struct pg_etcd_view){0};
	rc = 0;
out:
	free(key);
	free(val);
	pg_etcd_view_free(&v);
	pg_json_free(&js);
	return rc;
}

int pg_etcd_endpoint_parse(const char *url, char *hp, size_t cap, char *err, size_t errlen)
{
	const char *p = url;
	size_t n;

	if (!strncmp(p, "https://", 8)) {
		snprintf(err, errlen, "%s: https is not supported (use http on a trusted network)",
		         url);
		return -1;
	}
	if (!strncmp(p, "http://", 7))
		p += 7;
	n = strcspn(p, "/");
	if (p[n] && strcmp(p + n, "/")) {
		snprintf(err, errlen, "%s: expected http://host:port", url);
		return -1;
	}
	if (!n || n >= cap) {
		snprintf(err, errlen, "%s: expected http://host:port", url);
		return -1;
	}
	memcpy(hp, p, n);
	hp[n] = 0;
	return 0;
}
