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
#include "config/config_opts.h"
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

/* A pool's keys: its lists, and its RoutingConfig's fields by the
 * gateway's flags of the same name (their ranges), in pg_opts. */
#define PD (-2)
static const struct pool_key {
	const char *name;
	enum pg_pool_key_kind kind;
	int opt;      /* the gateway's flag (pg_opts), -1: none, PD: config_pd.c's */
	unsigned bit; /* PG_POOL_SET_* */
} pool_keys[] = {
    {"model", PG_PK_LIST, -1, 0},
    {"path", PG_PK_LIST, -1, 0},
    {"backend", PG_PK_LIST, -1, 0},
    {"strategy", PG_PK_ONE, O_STRATEGY, PG_POOL_SET_STRATEGY},
    {"prefix-length", PG_PK_ONE, O_PREFIX_LENGTH, PG_POOL_SET_PREFIX},
    {"concurrency-threshold", PG_PK_ONE, O_CONCURRENCY, PG_POOL_SET_THRESHOLD},
    {"new-conversation-choices", PG_PK_ONE, O_CA_CHOICES, PG_POOL_SET_CHOICES},
    {"flow-control", PG_PK_FLAG, O_FLOW_CONTROL, PG_POOL_SET_FLOW_ON},
    {"flow-instance-queue-ms", PG_PK_ONE, O_FLOW_QUEUE_MS, PG_POOL_SET_FLOW_QUEUE},
    {"flow-deadline-ms", PG_PK_ONE, O_FLOW_DEADLINE, PG_POOL_SET_FLOW_DEADLINE},
    {"routing-config", PG_PK_ONE, -1, PG_POOL_SET_FILE},
    {"pd", PG_PK_ONE, PD, 0},
    {"prefill", PG_PK_LIST, PD, 0},
    {"decode", PG_PK_LIST, PD, 0},
    {"pd-min-tokens", PG_PK_ONE, PD, 0},
    {"bootstrap-port", PG_PK_ONE, PD, 0},
};
#define NKEYS (sizeof(pool_keys) / sizeof(pool_keys[0]))

static const struct pool_key *key_of(const char *key)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (!strcmp(key, pool_keys[i].name))
			return &pool_keys[i];
	return NULL;
}

enum pg_pool_key_kind pg_pool_key_kind(const char *key, int *index)
{
	const struct pool_key *k = key_of(key);

	if (index)
		*index = k ? (int)(k - pool_keys) : -1;
	return k ? k->kind : PG_PK_NONE;
}

const char *pg_pool_key_name(size_t i)
{
	return i < NKEYS ? pool_keys[i].name : NULL;
}

const char *pg_pool_keys(char *buf, size_t cap)
{
	size_t n = 0;

	buf[0] = 0;
	for (size_t i = 0; i < NKEYS && n < cap; i++) {
		int k = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", pool_keys[i].name);

		n += k > 0 ? (size_t)k : 0;
	}
	return buf;
}

/* model, path, backend: one item. */
static int list_item(struct pg_pool_table *t, unsigned p, const char *key, const char *it,
                     size_t len, char sep, bool merge, char *err, size_t errlen)
{
	struct pg_pool_cfg *pc = &t->pool[p];
	struct pg_hostport a;
	char buf[PG_MODEL_NAME_MAX + 1], e[PG_HOSTPORT_STRLEN + 100];
	size_t dup;
	int rc, other;

	if (!len || len > PG_MODEL_NAME_MAX) {
		pg_errf(err, errlen, "%s%s: an empty item, or one longer than %d bytes", key,
		        sep == '=' ? "=" : "", PG_MODEL_NAME_MAX);
		return -1;
	}
	memcpy(buf, it, len);
	buf[len] = 0;
	if (!strcmp(key, "model")) {
		other = pg_pool_by_model_name(t, it, len);
		if (other == (int)p && merge)
			return 0;
		if (other >= 0) {
			pg_errf(err, errlen, "model %s is already served by pool %s", buf,
			        t->pool[other].name);
			return -1;
		}
		rc = add_str(&pc->models, &pc->nmodels, PG_POOL_MODELS_MAX, it, len);
	} else if (!strcmp(key, "path")) {
		for (unsigned q = 0; q < t->n; q++)
			for (size_t i = 0; i < t->pool[q].npaths; i++) {
				if (strcmp(t->pool[q].paths[i], buf))
					continue;
				if (q == p && merge)
					return 0;
				pg_errf(err, errlen, "path %s is already pool %s's", buf,
				        t->pool[q].name);
				return -1;
			}
		if (buf[0] != '/' || strpbrk(buf, "?# \t")) {
			pg_errf(err, errlen, "path%c%s: a path prefix starts with '/'", sep, buf);
			return -1;
		}
		rc = add_str(&pc->paths, &pc->npaths, PG_POOL_PATHS_MAX, it, len);
	} else {
		if (pg_hostport_parse(buf, &a, false, e, sizeof(e))) {
			pg_errf(err, errlen, "backend%c%s", sep, e);
			return -1;
		}
		rc = pg_backend_add(&pc->backends, &pc->nbackends, &a, &dup);
		if (rc == 1 && merge)
			return 0;
		if (rc == 1) {
			pg_errf(err, errlen, "backend %s given twice", buf);
			return -1;
		}
	}
	if (rc == 2)
		pg_errf(err, errlen, "%s%s: too many (at most %d)", key, sep == '=' ? "=" : "",
		        !strcmp(key, "model")  ? PG_POOL_MODELS_MAX
		        : !strcmp(key, "path") ? PG_POOL_PATHS_MAX
		                               : PG_MAX_BACKENDS - 1);
	else if (rc)
		pg_errf(err, errlen, "out of memory");
	return rc ? -1 : 0;
}

int pg_pool_add_item(struct pg_pool_table *t, unsigned p, const char *key, const char *it,
                     size_t len, bool merge, char *err, size_t errlen)
{
	return list_item(t, p, key, it, len, '=', merge, err, errlen);
}

bool pg_pool_pd_key_is(const char *key)
{
	const struct pool_key *k = key_of(key);

	return k && k->opt == PD;
}

/* routing-config=FILE: its RoutingConfig, all of it. */
static int routing_file(struct pg_pool_cfg *pc, const char *v, char sep, char *err, size_t errlen)
{
	char *text, e[256];
	size_t len;
	int rc = pg_read_file(v, PG_CONFIG_FILE_MAX, &text, &len, e, sizeof(e));

	if (!rc) {
		rc = pg_routing_config_parse(text, len, &pc->route, e, sizeof(e));
		free(text);
	}
	if (rc) {
		pg_errf(err, errlen, "routing-config%c%s: %s", sep, v, e);
		return -1;
	}
	free(pc->routing_file);
	pc->routing_file = strdup(v);
	if (!pc->routing_file) {
		pg_errf(err, errlen, "out of memory");
		return -1;
	}
	pc->route_set |= PG_POOL_SET_FILE;
	return 0;
}

int pg_pool_key(struct pg_pool_table *t, unsigned p, const char *key, const char *val, char sep,
                bool merge, char *err, size_t errlen)
{
	const struct pool_key *k = key_of(key);
	struct pg_pool_cfg *pc = &t->pool[p];
	char names[PG_POOL_KEYS_LEN];
	const struct pg_opt *o;
	uint32_t *dst;

	if (!k && !strcmp(key, "max-load-gap")) {
		pg_errf(err, errlen, "max-load-gap: %s", PG_CA_GAP_REMOVED);
		return -1;
	}
	if (!k) {
		pg_errf(err, errlen, "unknown key \"%s\" (%s)", key,
		        pg_pool_keys(names, sizeof(names)));
		return -1;
	}
	if (k->opt == PD)
		return pg_pool_pd_key(t, p, key, val, sep, merge, err, errlen);
	if (k->kind == PG_PK_LIST)
		return list_item(t, p, key, val, strlen(val), sep, merge, err, errlen);
	if (k->opt < 0)
		return routing_file(pc, val, sep, err, errlen);
	o = &pg_opts[k->opt];
	if (k->kind == PG_PK_FLAG) {
		/* on: InstanceQueueMs's default where none is set; off: none */
		if (val && strcmp(val, "on") && strcmp(val, "off")) {
			pg_errf(err, errlen, "%s%c%s: on or off", key, sep, val);
			return -1;
		}
		if (val && !strcmp(val, "off")) {
			pc->own.flow_queue_ms = 0;
			pc->route_set =
			    (pc->route_set & ~PG_POOL_SET_FLOW_ON) | PG_POOL_SET_FLOW_QUEUE;
		} else {
			pc->route_set |= PG_POOL_SET_FLOW_ON;
		}
		return 0;
	}
	if (k->opt == O_STRATEGY) {
		if (pg_strategy_parse(val, strlen(val), &pc->own.strategy)) {
			pg_errf(err, errlen, "strategy%c%s: not a strategy (%s)", sep, val,
			        o->list(names, sizeof(names), ", "));
			return -1;
		}
		pc->route_set |= k->bit;
		return 0;
	}
	dst = (uint32_t *)(void *)((char *)&pc->own + o->field);
	if (o->zero_off && !strcmp(val, "0")) {
		*dst = 0;
	} else if (number(val, o->min, o->max, dst)) {
		pg_errf(err, errlen, "%s%c%s: not a number in %s%u-%u", key, sep, val,
		        o->zero_off ? "0 or " : "", o->min, o->max);
		return -1;
	}
	pc->route_set |= k->bit;
	return 0;
}

int pg_pool_declare(struct pg_pool_table *t, const char *name, size_t nlen, char *err,
                    size_t errlen)
{
	int p;

	table_init(t);
	if (!pg_pool_name_ok(name, nlen)) {
		pg_errf(err, errlen, "--pool %.*s: NAME is 1-%d of A-Z a-z 0-9 _ . -",
		        (int)(nlen < 64 ? nlen : 64), name, PG_POOL_NAME_MAX - 1);
		return -1;
	}
	p = pg_pool_find(t, name, nlen);
	if (p < 0) {
		if (t->n >= PG_MAX_POOLS) {
			pg_errf(err, errlen,
			        "--pool %.*s: more than %d pools besides default (%d with it, the "
			        "most a gateway has)",
			        (int)nlen, name, PG_MAX_POOLS - 1, PG_MAX_POOLS);
			return -1;
		}
		p = (int)t->n++;
		memcpy(t->pool[p].name, name, nlen);
	}
	t->pool[p].declared = true;
	return p;
}

int pg_pool_spec_parse(struct pg_pool_table *t, const char *v, bool merge, char *err, size_t errlen)
{
	const char *colon = strchr(v, ':'), *eq, *val, *it;
	size_t nlen = colon ? (size_t)(colon - v) : strlen(v);
	char key[32], e[400], item[PG_MODEL_NAME_MAX + 2];
	int p = pg_pool_declare(t, v, nlen, err, errlen);

	if (p < 0 || !colon)
		return p < 0 ? -1 : 0;
	eq = strchr(colon + 1, '=');
	if (!eq || (size_t)(eq - colon - 1) >= sizeof(key) || eq == colon + 1) {
		pg_errf(err, errlen, "--pool %s: expected NAME:KEY=VALUE", v);
		return -1;
	}
	memcpy(key, colon + 1, (size_t)(eq - colon - 1));
	key[eq - colon - 1] = 0;
	val = eq + 1;
	/* (prefill/decode keys take their comma-separated lists whole) */
	if (pg_pool_key_kind(key, NULL) != PG_PK_LIST || pg_pool_pd_key_is(key)) {
		if (pg_pool_key(t, (unsigned)p, key, val, '=', merge, e, sizeof(e)) == 0)
			return 0;
		pg_errf(err, errlen, "--pool %.*s: %s", (int)nlen, v, e);
		return -1;
	}
	for (it = val;; it++) {
		const char *end = strchr(it, ',');
		size_t len = end ? (size_t)(end - it) : strlen(it);

		/* an item too long is refused by its length */
		snprintf(item, sizeof(item), "%.*s", (int)len, it);
		if (list_item(t, (unsigned)p, key, item, len, '=', merge, e, sizeof(e))) {
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

int pg_pools_finish(struct pg_config *cfg, unsigned skip, unsigned *pool, char *err, size_t errlen)
{
	struct pg_pool_table *t = &cfg->pools;
	const char *owner;
	int rc = 0;

	table_init(t);
	for (unsigned p = 0; p < t->n; p++) {
		struct pg_pool_cfg *pc = &t->pool[p];

		t->by_model |= pc->nmodels > 0;
		t->by_path |= pc->npaths > 0;
		if (!(pc->route_set & PG_POOL_SET_FILE))
			pc->route = cfg->route;
		pg_route_overlay(&pc->route, &pc->own, pc->route_set);
		if (rc || (skip >> p & 1))
			continue; /* told already: the first error, or the pool's own */
		for (size_t i = 0; i < pc->nbackends && !rc; i++) {
			if ((owner = backend_owner(cfg, p, pc->backends[i]))) {
				*pool = p;
				pg_errf(err, errlen, "--pool %s: backend %s is already pool %s's",
				        pc->name, pc->backends[i], owner);
				rc = -1;
			}
		}
		if (!rc && p && !pc->nmodels && !pc->npaths && !pc->decode_set) {
			*pool = p;
			pg_errf(err, errlen,
			        "--pool %s: no model= and no path=: no request would reach it",
			        pc->name);
			rc = -1;
		}
	}
	if (rc || pg_pools_pd_finish(t, skip, pool, err, errlen))
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
		rc->flow_queue_ms = PG_FLOW_QUEUE_AUTO;
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
