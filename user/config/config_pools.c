// SPDX-License-Identifier: MIT
/*
 * --pool NAME[:KEY=VALUE] (config.h): the model pools of the command line,
 * into cfg->pools (lib/modelpool.h). One KEY a flag; the flags naming one pool
 * add up. Pure parsing, no global state.
 */
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "lib/modelpool.h"

static int add_str(char ***v, size_t *n, size_t max, const char *s, size_t len)
{
	char **nv;

	if (*n >= max)
		return 2;
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return -1;
	*v = nv;
	nv[*n] = strndup(s, len);
	if (!nv[*n])
		return -1;
	(*n)++;
	return 0;
}

static void table_init(struct pg_pool_table *t)
{
	if (!t->n) {
		t->n = 1;
		strcpy(t->pool[0].name, "default");
	}
}

/* A decimal in min..max. */
static int number(const char *v, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t x = 0;
	const char *p = v;

	for (; *p >= '0' && *p <= '9' && x <= max; p++)
		x = x * 10 + (uint64_t)(*p - '0');
	if (p == v || *p || x < min || x > max)
		return -1;
	*out = (uint32_t)x;
	return 0;
}

/* model=, path=, backend=: comma-separated items. */
int pg_pool_add_item(struct pg_pool_table *t, struct pg_pool_cfg *pc, const char *key,
                     const char *it, size_t len, char *err, size_t errlen)
{
	struct pg_hostport a;
	char buf[PG_MODEL_NAME_MAX + 1], e[PG_HOSTPORT_STRLEN + 100];
	size_t dup;
	int rc, other;

	if (!len || len > PG_MODEL_NAME_MAX) {
		pg_errf(err, errlen, "%s=: an empty item, or one longer than %d bytes", key,
		        PG_MODEL_NAME_MAX);
		return -1;
	}
	memcpy(buf, it, len);
	buf[len] = 0;
	if (!strcmp(key, "model")) {
		other = pg_pool_by_model_name(t, it, len);
		if (other >= 0) {
			pg_errf(err, errlen, "model %s is already served by pool %s", buf,
			        t->pool[other].name);
			return -1;
		}
		rc = add_str(&pc->models, &pc->nmodels, PG_POOL_MODELS_MAX, it, len);
	} else if (!strcmp(key, "path")) {
		for (unsigned p = 0; p < t->n; p++)
			for (size_t i = 0; i < t->pool[p].npaths; i++)
				if (!strcmp(t->pool[p].paths[i], buf)) {
					pg_errf(err, errlen, "path %s is already pool %s's", buf,
					        t->pool[p].name);
					return -1;
				}
		if (buf[0] != '/' || strpbrk(buf, "?# \t")) {
			pg_errf(err, errlen, "path=%s: a path prefix starts with '/'", buf);
			return -1;
		}
		rc = add_str(&pc->paths, &pc->npaths, PG_POOL_PATHS_MAX, it, len);
	} else {
		if (pg_hostport_parse(buf, &a, false, e, sizeof(e))) {
			pg_errf(err, errlen, "backend=%s", e);
			return -1;
		}
		rc = pg_backend_add(&pc->backends, &pc->nbackends, &a, &dup);
		if (rc == 1) {
			pg_errf(err, errlen, "backend %s given twice", buf);
			return -1;
		}
	}
	if (rc == 2)
		pg_errf(err, errlen, "%s=: too many (at most %d)", key,
		        !strcmp(key, "model")  ? PG_POOL_MODELS_MAX
		        : !strcmp(key, "path") ? PG_POOL_PATHS_MAX
		                               : PG_MAX_BACKENDS - 1);
	else if (rc)
		pg_errf(err, errlen, "out of memory");
	return rc ? -1 : 0;
}

static int route_key(struct pg_pool_cfg *pc, const char *key, const char *v, char *err,
                     size_t errlen)
{
	static const struct {
		const char *key;
		unsigned bit;
		uint32_t min, max;
		size_t off;
	} nums[] = {
	    {"prefix-length", PG_POOL_SET_PREFIX, PG_PREFIX_LENGTH_MIN, PG_PREFIX_LENGTH_MAX,
	     offsetof(struct pg_route_cfg, prefix_length)},
	    {"concurrency-threshold", PG_POOL_SET_THRESHOLD, PG_CONCURRENCY_MIN, PG_CONCURRENCY_MAX,
	     offsetof(struct pg_route_cfg, concurrency_threshold)},
	    {"new-conversation-choices", PG_POOL_SET_CHOICES, 1, PG_RING_CANDIDATES,
	     offsetof(struct pg_route_cfg, new_choices)},
	};
	char *text, e[256];
	size_t len;
	int rc;

	if (!strcmp(key, "strategy")) {
		if (pg_strategy_parse(v, strlen(v), &pc->own.strategy)) {
			pg_errf(err, errlen, "strategy=%s: not a strategy (see --strategy)", v);
			return -1;
		}
		pc->route_set |= PG_POOL_SET_STRATEGY;
		return 0;
	}
	if (!strcmp(key, "routing-config")) {
		rc = pg_read_file(v, PG_CONFIG_FILE_MAX, &text, &len, e, sizeof(e));
		if (!rc) {
			rc = pg_routing_config_parse(text, len, &pc->route, e, sizeof(e));
			free(text);
		}
		if (rc) {
			pg_errf(err, errlen, "routing-config=%s: %s", v, e);
			return -1;
		}
		pc->route_set |= PG_POOL_SET_FILE;
		return 0;
	}
	if (!strcmp(key, "max-load-gap")) {
		pg_errf(err, errlen, "max-load-gap: %s", PG_CA_GAP_REMOVED);
		return -1;
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(key, nums[i].key))
			continue;
		if (number(v, nums[i].min, nums[i].max,
		           (uint32_t *)(void *)((char *)&pc->own + nums[i].off))) {
			pg_errf(err, errlen, "%s=%s: not a number in %u-%u", key, v, nums[i].min,
			        nums[i].max);
			return -1;
		}
		pc->route_set |= nums[i].bit;
		return 0;
	}
	pg_errf(err, errlen,
	        "unknown key \"%s\" (model, path, backend, strategy, prefix-length, "
	        "concurrency-threshold, new-conversation-choices, routing-config; pd, prefill, "
	        "decode, pd-min-tokens, bootstrap-port)",
	        key);
	return -1;
}

int pg_pool_spec_parse(struct pg_pool_table *t, const char *v, char *err, size_t errlen)
{
	const char *colon = strchr(v, ':'), *eq, *val, *it;
	size_t nlen = colon ? (size_t)(colon - v) : strlen(v);
	char key[32], e[300];
	struct pg_pool_cfg *pc;
	int p;

	table_init(t);
	if (!pg_pool_name_ok(v, nlen)) {
		pg_errf(err, errlen, "--pool %s: NAME is 1-%d of A-Z a-z 0-9 _ . -", v,
		        PG_POOL_NAME_MAX - 1);
		return -1;
	}
	p = pg_pool_find(t, v, nlen);
	if (p < 0) {
		if (t->n >= PG_MAX_POOLS) {
			pg_errf(err, errlen, "--pool %s: more than %d pools", v, PG_MAX_POOLS);
			return -1;
		}
		p = (int)t->n++;
		memcpy(t->pool[p].name, v, nlen);
	}
	pc = &t->pool[p];
	pc->declared = true;
	if (!colon)
		return 0;
	eq = strchr(colon + 1, '=');
	if (!eq || (size_t)(eq - colon - 1) >= sizeof(key) || eq == colon + 1) {
		pg_errf(err, errlen, "--pool %s: expected NAME:KEY=VALUE", v);
		return -1;
	}
	memcpy(key, colon + 1, (size_t)(eq - colon - 1));
	key[eq - colon - 1] = 0;
	val = eq + 1;
	if (strcmp(key, "model") && strcmp(key, "path") && strcmp(key, "backend")) {
		int rc = pg_pool_pd_key(t, (unsigned)p, key, val, e, sizeof(e));

		if (rc == 0 || (rc == 1 && route_key(pc, key, val, e, sizeof(e)) == 0))
			return 0;
		pg_errf(err, errlen, "--pool %.*s: %s", (int)nlen, v, e);
		return -1;
	}
	for (it = val;; it++) {
		const char *end = strchr(it, ',');
		size_t len = end ? (size_t)(end - it) : strlen(it);

		if (pg_pool_add_item(t, pc, key, it, len, e, sizeof(e))) {
			pg_errf(err, errlen, "--pool %.*s: %s", (int)nlen, v, e);
			return -1;
		}
		if (!end)
			break;
		it = end;
	}
	return 0;
}

void pg_pools_file_catch_all(struct pg_pool_table *t, char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strstr(v[i], " pool="))
			t->catch_all = true;
}

/* Whether canonical address a is listed before pool p (or by --backend). */
static const char *backend_owner(const struct pg_config *cfg, unsigned p, const char *a)
{
	for (size_t i = 0; i < cfg->nbackends; i++)
		if (!strcmp(cfg->backends[i], a))
			return "default (--backend)";
	for (unsigned q = 0; q < p; q++)
		for (size_t i = 0; i < cfg->pools.pool[q].nbackends; i++)
			if (!strcmp(cfg->pools.pool[q].backends[i], a))
				return cfg->pools.pool[q].name;
	return NULL;
}

int pg_pools_finish(struct pg_config *cfg, char *err, size_t errlen)
{
	struct pg_pool_table *t = &cfg->pools;
	const char *owner;

	table_init(t);
	for (unsigned p = 0; p < t->n; p++) {
		struct pg_pool_cfg *pc = &t->pool[p];

		t->by_model |= pc->nmodels > 0;
		t->by_path |= pc->npaths > 0;
		if (!(pc->route_set & PG_POOL_SET_FILE))
			pc->route = cfg->route;
		pg_route_overlay(&pc->route, &pc->own, pc->route_set);
		for (size_t i = 0; i < pc->nbackends; i++) {
			if ((owner = backend_owner(cfg, p, pc->backends[i]))) {
				pg_errf(err, errlen, "--pool %s: backend %s is already pool %s's",
				        pc->name, pc->backends[i], owner);
				return -1;
			}
		}
		if (p && !pc->nmodels && !pc->npaths && !pc->decode_set) {
			pg_errf(err, errlen,
			        "--pool %s: no model= and no path=: no request would reach it",
			        pc->name);
			return -1;
		}
	}
	if (pg_pools_pd_finish(t, err, errlen))
		return -1;
	/* (catch_all may be set already: pg_pools_file_catch_all) */
	t->catch_all |= (!t->by_model && !t->by_path) || t->pool[0].declared || cfg->nbackends ||
	                t->pool[0].nbackends;
	return 0;
}

void pg_route_overlay(struct pg_route_cfg *rc, const struct pg_route_cfg *own, unsigned set)
{
	if (set & PG_POOL_SET_STRATEGY)
		rc->strategy = own->strategy;
	if (set & PG_POOL_SET_PREFIX)
		rc->prefix_length = own->prefix_length;
	if (set & PG_POOL_SET_THRESHOLD)
		rc->concurrency_threshold = own->concurrency_threshold;
	if (set & PG_POOL_SET_CHOICES)
		rc->new_choices = own->new_choices;
	if (set & PG_POOL_SET_FLOW_QUEUE)
		rc->flow_queue_ms = own->flow_queue_ms;
	else if ((set & PG_POOL_SET_FLOW_ON) && !rc->flow_queue_ms)
		rc->flow_queue_ms = PG_FLOW_QUEUE_MS_DEFAULT;
	if (set & PG_POOL_SET_FLOW_DEADLINE)
		rc->flow_deadline_ms = own->flow_deadline_ms;
}

bool pg_route_of_pool(const struct pg_config *cfg, unsigned p, const struct pg_route_cfg *file,
                      struct pg_route_cfg *out)
{
	const struct pg_pool_cfg *pc = p < cfg->pools.n ? &cfg->pools.pool[p] : NULL;
	struct pg_route_cfg rc = {
	    .strategy = PG_STRATEGY_PREFIX_AWARE,
	    .prefix_length = PG_PREFIX_LENGTH_DEFAULT,
	    .concurrency_threshold = PG_CONCURRENCY_DEFAULT,
	    .new_choices = PG_CA_CHOICES_DEFAULT,
	};

	if (pc && (pc->route_set & PG_POOL_SET_FILE))
		return false;
	if (file)
		rc = *file;
	pg_route_overlay(&rc, &cfg->route_flags, cfg->route_flags_set);
	if (pc)
		pg_route_overlay(&rc, &pc->own, pc->route_set);
	*out = rc;
	return true;
}
