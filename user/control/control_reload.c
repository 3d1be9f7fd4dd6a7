// SPDX-License-Identifier: MIT
/*
 * SIGHUP with a configuration file (doc/configuration.md "Configuration file"): the file
 * and the command line are read again as at start-up (config.h
 * pg_config_reparse). A file with any error is refused whole, each error
 * logged as FILE:LINE, and the running configuration kept. Otherwise what
 * can change at once is applied: the backends the file lists (added, or
 * drained when gone), each pool's RoutingConfig when what the file and the
 * flags make of it changed (so a PUT /routing lasts until then, as with
 * --routing-config), the health checks' settings, the log level and the
 * tenants' weights and priorities; the rest (listeners, workers, the pin
 * path, the set of pools and their models, ...) is logged as needing a
 * restart, and keeps running as it is. Control thread only.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "members/members.h"
#include "members/members_internal.h"
#include "control/control_internal.h"
#include "lib/buf.h"
#include "lib/conf.h"
#include "state/flowctl.h"
#include "state/quotas.h"
#include "state/pools.h"
#include "sys/log.h"

#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

/* What a reload did: the log line's two lists. */
struct report {
	struct pg_gateway *gw;
	const struct pg_config *nc;
	struct pg_buf applied, restart;
};

static void say(struct pg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct pg_buf *b, const char *fmt, ...)
{
	char one[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(one, sizeof(one), fmt, ap);
	va_end(ap);
	pg_buf_printf(b, "%s%s", b->len ? ", " : "", one);
}

/* An option of the table that differs (pg_config_diff): the live ones
 * applied, the others told. */
static void option(void *arg, const char *name, bool live, const char *was, const char *now)
{
	struct report *r = arg;
	struct pg_config *cfg = r->gw->cfg;
	const struct pg_config *nc = r->nc;
	const char *path;

	if (live && !strcmp(name, "health-check-path") && cfg->health.path && nc->health.path) {
		path = pg_config_keep(cfg, nc->health.path);
		if (path) {
			__atomic_store_n(&cfg->health.path, path, __ATOMIC_RELEASE);
			say(&r->applied, "%s %s -> %s", name, was, now);
			return;
		}
	} else if (live && !strcmp(name, "metrics-scrape-interval") && cfg->metrics_scrape_ms &&
	           nc->metrics_scrape_ms) {
		STORE(&cfg->metrics_scrape_ms, nc->metrics_scrape_ms);
		say(&r->applied, "%s %s -> %s", name, was, now);
		return;
	} else if (live && !strcmp(name, "quota")) {
		cfg->flow.quota = nc->flow.quota;
		if (r->gw->quotas && r->gw->flow)
			pg_quotas_apply(r->gw->quotas, r->gw->flow, &cfg->flow);
		say(&r->applied, "%s %s -> %s", name, was, now);
		return;
	} else if (live && !strcmp(name, "log-level")) {
		/* stored once the reload's line is logged (at the level it had) */
		cfg->log_level = nc->log_level;
		say(&r->applied, "%s %s -> %s", name, was, now);
		return;
	} else if (live && !strncmp(name, "health-", 7) && strcmp(name, "health-check-path")) {
		/* read by the checker thread at each round (health.c), if it runs */
		STORE(&cfg->health.interval_ms, nc->health.interval_ms);
		STORE(&cfg->health.timeout_ms, nc->health.timeout_ms);
		STORE(&cfg->health.rise, nc->health.rise);
		STORE(&cfg->health.fall, nc->health.fall);
		say(&r->applied, "%s %s -> %s", name, was, now);
		return;
	}
	/* health checks or scraping turned on or off: the checker thread's
	 * life, and the health marks it left, are start-up's */
	say(&r->restart, "%s (running %s, the file says %s)", name, was, now);
}

/* Whether a pool's prefill/decode settings are the same (the workers read
 * them as they run: a change needs a restart). */
static bool same_pd(const struct pg_pool_cfg *a, const struct pg_pool_cfg *b)
{
	bool same = a->pd == b->pd && a->decode_set == b->decode_set &&
	            a->pd_min_tokens == b->pd_min_tokens &&
	            a->bootstrap_port == b->bootstrap_port && a->nbootstraps == b->nbootstraps;

	for (size_t i = 0; same && i < a->nbootstraps; i++)
		same = a->bootstraps[i].port == b->bootstraps[i].port &&
		       !strcmp(a->bootstraps[i].addr, b->bootstraps[i].addr);
	return same;
}

/* The pools of the file, by name, against the running ones: map[q] is
 * the running pool of the file's pool q, -1 for one that needs a
 * restart (its members are then left as they run). */
static void pools(struct report *r, int *map)
{
	const struct pg_pool_table *t = &r->gw->cfg->pools, *nt = &r->nc->pools;

	for (unsigned q = 0; q < nt->n; q++) {
		const struct pg_pool_cfg *np = &nt->pool[q];
		int p = pg_pool_find(t, np->name, strlen(np->name));
		bool same =
		    p >= 0 && t->pool[p].nmodels == np->nmodels && t->pool[p].npaths == np->npaths;

		for (size_t i = 0; same && i < np->nmodels; i++)
			same = !strcmp(t->pool[p].models[i], np->models[i]);
		for (size_t i = 0; same && i < np->npaths; i++)
			same = !strcmp(t->pool[p].paths[i], np->paths[i]);
		map[q] = p < 0 || (unsigned)p >= r->gw->maps.npools ? -1 : p;
		if (map[q] < 0) {
			say(&r->restart, "pool %s (new)", np->name);
		} else if (!same_pd(&t->pool[p], np)) {
			say(&r->restart, "pool %s's prefill/decode settings", np->name);
			map[q] = -1;
		} else if (!same) {
			say(&r->restart, "pool %s's models and paths", np->name);
		}
	}
	for (unsigned p = 0; p < t->n; p++)
		if (pg_pool_find(nt, t->pool[p].name, strlen(t->pool[p].name)) < 0)
			say(&r->restart, "pool %s (gone from the file)", t->pool[p].name);
	if (t->catch_all != nt->catch_all)
		say(&r->restart, "whether the default pool takes every model (running: %s)",
		    t->catch_all ? "yes" : "no");
}

/* The backends the file and the flags list, synced as members of their
 * origin: added, or drained when no longer listed. The lists move into
 * the running configuration. */
static void backends(struct report *r, const int *map)
{
	struct pg_config *cfg = r->gw->cfg;
	struct pg_config *nc = (struct pg_config *)r->nc;
	char **list = NULL, err[512];
	size_t n = 0, cap = 0;
	bool changed = false;
	int count;

	for (unsigned q = 0; q <= nc->pools.n; q++) {
		char *const *v = q ? nc->pools.pool[q - 1].backends : nc->backends;
		size_t nv = q ? nc->pools.pool[q - 1].nbackends : nc->nbackends;

		if (q && map[q - 1] < 0)
			continue;
		for (size_t i = 0; i < nv; i++) {
			if (n == cap) {
				char **nl = realloc(list, (cap = cap ? cap * 2 : 16) * sizeof(*nl));

				if (!nl)
					goto oom;
				list = nl;
			}
			/* pool 0 is the default one: no pool= */
			if (q > 1 &&
			    asprintf(&list[n], "%s pool=%s", v[i], nc->pools.pool[q - 1].name) < 0)
				goto oom;
			if (q <= 1 && !(list[n] = strdup(v[i])))
				goto oom;
			n++;
		}
	}
	count = pg_ctl_sync(r->gw, list, n, PG_ORIGIN_CONF, &changed, err, sizeof(err));
	if (changed)
		pg_control_rebuild_ring(r->gw);
	if (count < 0)
		say(&r->restart, "backends: %s", err);
	else if (count)
		say(&r->applied, "backends (%d added or drained, %u in the rings)", count,
		    pg_members_count(r->gw));
	/* the running configuration lists them now (GET /config) */
	for (unsigned q = 0; q <= nc->pools.n; q++) {
		char ***a =
		    q ? &cfg->pools.pool[map[q - 1] < 0 ? 0 : map[q - 1]].backends : &cfg->backends;
		char ***b = q ? &nc->pools.pool[q - 1].backends : &nc->backends;
		size_t *na = q ? &cfg->pools.pool[map[q - 1] < 0 ? 0 : map[q - 1]].nbackends
		               : &cfg->nbackends;
		size_t *nb = q ? &nc->pools.pool[q - 1].nbackends : &nc->nbackends;
		char **tv = *a;
		size_t tn = *na;

		if (q && map[q - 1] < 0)
			continue;
		*a = *b, *na = *nb, *b = tv, *nb = tn;
	}
	pg_backends_free(list, n);
	return;
oom:
	pg_backends_free(list, n);
	say(&r->restart, "backends: out of memory");
}

static bool same_route(const struct pg_route_cfg *a, const struct pg_route_cfg *b)
{
	return a->strategy == b->strategy && a->prefix_length == b->prefix_length &&
	       a->concurrency_threshold == b->concurrency_threshold &&
	       a->new_choices == b->new_choices && a->flow_queue_ms == b->flow_queue_ms &&
	       a->flow_deadline_ms == b->flow_deadline_ms;
}

/* Each pool's RoutingConfig, where what the file and the flags make of it
 * changed since the last reading (a PUT /routing lasts until then). */
static void routing(struct report *r, const int *map)
{
	struct pg_config *cfg = r->gw->cfg;
	const struct pg_config *nc = r->nc;
	char why[256];

	snprintf(why, sizeof(why), "%s re-read", cfg->conf_path);
	for (unsigned q = 0; q < nc->pools.n; q++) {
		struct pg_pool_cfg *pc;
		const struct pg_pool_cfg *np = &nc->pools.pool[q];

		if (map[q] < 0)
			continue;
		pc = &cfg->pools.pool[map[q]];
		if (!same_route(&pc->route, &np->route)) {
			pg_control_set_routing_pool(r->gw, (unsigned)map[q], &np->route, why);
			if (r->gw->pools)
				say(&r->applied, "pool %s's routing", pc->name);
			else
				say(&r->applied, "routing");
		}
		pc->route = np->route;
		pc->own = np->own;
		pc->route_set = np->route_set;
	}
	cfg->route = nc->route;
	cfg->route_flags = nc->route_flags;
	cfg->route_flags_set = nc->route_flags_set;
	cfg->flow.on = nc->flow.on;
	if ((cfg->routing_config || nc->routing_config) &&
	    (!cfg->routing_config || !nc->routing_config ||
	     strcmp(cfg->routing_config, nc->routing_config)))
		cfg->routing_config = pg_config_keep(cfg, nc->routing_config);
}

/* The tenants' weights and priorities, into the live table (a tenant no
 * longer listed gets weight 1 and no class, as an unlisted one has). */
static void tenants(struct report *r)
{
	struct pg_flow_cfg *fc = &r->gw->cfg->flow;
	const struct pg_flow_cfg *nf = &r->nc->flow;
	struct pg_flowctl *f = r->gw->flow;
	bool same = fc->ntenants == nf->ntenants;

	for (size_t i = 0; same && i < nf->ntenants; i++)
		same = !strcmp(fc->tenants[i].name, nf->tenants[i].name) &&
		       fc->tenants[i].weight == nf->tenants[i].weight &&
		       fc->tenants[i].prio == nf->tenants[i].prio &&
		       fc->tenants[i].quota_set == nf->tenants[i].quota_set &&
		       !memcmp(&fc->tenants[i].quota, &nf->tenants[i].quota,
		               sizeof(fc->tenants[i].quota));
	if (same)
		return;
	for (int pass = 0; f && pass < 2; pass++) {
		const struct pg_flow_cfg *c = pass ? nf : fc;

		for (size_t i = 0; i < c->ntenants; i++) {
			const struct pg_tenant_cfg *tc = &c->tenants[i];
			char label[PG_FLOW_LABEL_MAX + 1];
			uint64_t key = pg_flow_label(tc->name, strlen(tc->name), false, label);
			struct pg_flow_tenant *t =
			    &f->tenants.t[pg_flow_tenant(&f->tenants, key, label)];

			/* first every running one back to the defaults, then
			 * the file's (slot 0, "other", when the table is full) */
			STORE(&t->prio, (int8_t)(pass ? tc->prio : -1));
			STORE(&t->weight, pass ? tc->weight : 1);
		}
	}
	memcpy(fc->tenants, nf->tenants, sizeof(fc->tenants));
	fc->ntenants = nf->ntenants;
	fc->from_file = nf->from_file;
	if (r->gw->quotas && f) /* their quotas too (state/quotas.h) */
		pg_quotas_apply(r->gw->quotas, f, fc);
	say(&r->applied, "tenants (%zu)", nf->ntenants);
}

int pg_control_reload_conf(struct pg_gateway *gw)
{
	struct pg_config *cfg = gw->cfg, *nc = calloc(1, sizeof(*nc));
	struct pg_conf_errs errs = {0};
	struct report r = {.gw = gw, .nc = nc};
	int map[PG_MAX_POOLS];

	if (!nc) {
		pg_error("reload: %s: out of memory; the running configuration is kept",
		         cfg->conf_path);
		return -1;
	}
	if (pg_config_reparse(cfg, nc, &errs)) {
		for (size_t i = 0; i < pg_conf_errs_kept(&errs); i++)
			if (errs.v[i].line)
				pg_error("reload: %s:%u: %s", cfg->conf_path, errs.v[i].line,
				         errs.v[i].msg);
			else
				pg_error("reload: %s", errs.v[i].msg);
		pg_error("reload: %s refused (%zu error%s): the running configuration is kept",
		         cfg->conf_path, errs.n, errs.n == 1 ? "" : "s");
		pg_conf_errs_free(&errs);
		free(nc);
		return -1;
	}
	pg_config_diff(cfg, nc, option, &r);
	pools(&r, map);
	backends(&r, map);
	routing(&r, map);
	tenants(&r);
	/* what did not take effect is a warning: the file says otherwise */
	if (!r.applied.len && !r.restart.len)
		pg_info("reload: %s: nothing changed", cfg->conf_path);
	else
		pg_log(r.restart.len ? PG_LOG_WARN : PG_LOG_INFO,
		       "reload: %s: applied: %s; needs a restart: %s", cfg->conf_path,
		       r.applied.len ? r.applied.p : "nothing",
		       r.restart.len ? r.restart.p : "nothing");
	STORE(&pg_log_level, cfg->log_level);
	pg_buf_free(&r.applied);
	pg_buf_free(&r.restart);
	pg_config_free(nc);
	free(nc);
	return 0;
}
