// SPDX-License-Identifier: MIT
/*
 * The configuration file's directives (doc/configuration.md "Configuration file"; its
 * syntax is lib/conf.c's): a top-level directive is a flag of the table
 * (config_opts.c) by its name without "--", taking the same values through
 * the same apply(), so the file and the flags cannot drift; a flag without
 * a value takes none, or on / off. Blocks say what flags say awkwardly:
 *
 *   pool NAME { model M...; path /P...; backend HOST:PORT...; strategy S;
 *               prefix-length N; ... }          the --pool NAME:KEY=V keys
 *   tenant NAME { weight W; priority P; rpm N; tpm N; }
 *                                             --tenant NAME:weight=W,...
 *
 * Every error is added with its line and the next directive is read, so
 * that one pass tells all of them. A directive given twice is an error
 * (but the lists: backend, a pool's model, path and backend).
 */
#include <string.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "config/config_opts.h"
#include "lib/conf.h"

/* Edit distance of a and b, at most 3 (enough to tell a typo). */
static unsigned distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned row[65], prev, cur;

	if (la > 64 || lb > 64)
		return 3;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			cur = row[j];
			row[j] = a[i - 1] == b[j - 1] ? prev : 1 + (prev < row[j] ? prev : row[j]);
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			prev = cur;
		}
	}
	return row[lb] < 3 ? row[lb] : 3;
}

/* The directive closest to name, if a typo away; NULL otherwise. */
static const char *closest(const char *name, bool pool)
{
	const char *best = NULL, *k;
	unsigned bd = 3, d;

	if (pool) {
		for (size_t i = 0; (k = pg_pool_key_name(i)); i++)
			if ((d = distance(name, k)) < bd) {
				bd = d;
				best = k;
			}
		return best;
	}
	for (size_t i = 0; i < PG_NOPTS; i++)
		if (!pg_opts[i].cli && (d = distance(name, pg_opts[i].name)) < bd) {
			bd = d;
			best = pg_opts[i].name;
		}
	return best;
}

static void unknown(struct pg_parse *ps, unsigned line, const char *name)
{
	const char *eq = strchr(name, '='), *near;
	char shown[80];

	pg_conf_shown(name, shown, sizeof(shown));
	if (!strncmp(name, "--", 2) && pg_opt_find(name + 2, strlen(name + 2), false) >= 0) {
		pg_conf_err_add(ps->errs, line,
		                "unknown directive \"%s\": a directive is its flag's name without "
		                "--: %s",
		                shown, name + 2);
	} else if (eq && pg_opt_find(name, (size_t)(eq - name), false) >= 0) {
		pg_conf_err_add(ps->errs, line,
		                "unknown directive \"%s\": a directive's value follows its name "
		                "after a space: %.*s %s",
		                shown, (int)(eq - name), name, eq + 1);
	} else if (pg_opt_find(name, strlen(name), true) >= 0) {
		pg_conf_err_add(ps->errs, line,
		                "\"%s\" is a flag of the command line only (--%s), not a directive",
		                shown, shown);
	} else if (pg_pool_key_kind(name, NULL) != PG_PK_NONE) {
		pg_conf_err_add(ps->errs, line,
		                "\"%s\" belongs in a pool block (pool NAME { %s ...; })", shown,
		                shown);
	} else if ((near = closest(name, false))) {
		pg_conf_err_add(ps->errs, line, "unknown directive \"%s\" (did you mean %s?)",
		                shown, near);
	} else {
		pg_conf_err_add(ps->errs, line,
		                "unknown directive \"%s\": the directives are prefixgate's flags "
		                "without their -- (prefixgate --help), and the blocks pool NAME "
		                "{ ... } and tenant NAME { ... }",
		                shown);
	}
}

/* A flag's value in the file: none or "on" (true), "off" (false); -1 for
 * anything else, said. */
static int on_off(struct pg_parse *ps, const struct pg_conf_dir *d, const char *what)
{
	char shown[80];

	if (d->nw == 1 || (d->nw == 2 && !strcmp(d->w[1], "on")))
		return 1;
	if (d->nw == 2 && !strcmp(d->w[1], "off"))
		return 0;
	pg_conf_err_add(ps->errs, d->line, "%s: takes no value, or on or off (not \"%s\")", what,
	                pg_conf_shown(d->w[1], shown, sizeof(shown)));
	return -1;
}

/* The index past the block at i and everything in it. */
static size_t block_end(const struct pg_conf *c, size_t i)
{
	size_t j = i + 1;

	while (j < c->n && c->d[j].parent >= (int)i)
		j++;
	return j;
}

static void tenant_block(struct pg_config *cfg, const struct pg_conf *c, size_t i,
                         struct pg_parse *ps)
{
	static const char *const keys[] = {"weight", "priority", "rpm", "tpm"};
	const struct pg_conf_dir *d = &c->d[i];
	unsigned seen[4] = {0, 0, 0, 0};
	struct pg_tenant_cfg *t;
	char err[512];

	if (d->nw != 2) {
		pg_conf_err_add(
		    ps->errs, d->line,
		    "tenant: expected tenant NAME { weight W; priority P; rpm N; tpm N; }");
		return;
	}
	t = pg_tenant_add(&cfg->flow, d->w[1], strlen(d->w[1]), err, sizeof(err));
	if (!t) {
		pg_parse_err(ps, d->line, err);
		return;
	}
	for (size_t j = i + 1, end = block_end(c, i); j < end; j++) {
		const struct pg_conf_dir *k = &c->d[j];
		size_t key = 0;
		char shown[80];

		if (k->parent != (int)i)
			continue;
		while (key < 4 && strcmp(k->w[0], keys[key]))
			key++;
		if (k->block || key == 4 || k->nw != 2) {
			pg_conf_err_add(
			    ps->errs, k->line,
			    "tenant %s: \"%s\" is not weight W, priority P, rpm N or tpm N "
			    "(one value each)",
			    t->name, pg_conf_shown(k->w[0], shown, sizeof(shown)));
		} else if (seen[key]) {
			pg_conf_err_add(ps->errs, k->line,
			                "tenant %s: %s given twice (first at line %u)", t->name,
			                k->w[0], seen[key]);
		} else {
			seen[key] = k->line;
			if (pg_tenant_key(t, k->w[0], strlen(k->w[0]), k->w[1], strlen(k->w[1]),
			                  err, sizeof(err)))
				pg_parse_err(ps, k->line, err);
		}
	}
}

/* One directive of pool p's block. seen: the line of each key given. */
static void pool_key(struct pg_config *cfg, unsigned p, const struct pg_conf_dir *k,
                     struct pg_parse *ps, unsigned *seen)
{
	const char *pool = cfg->pools.pool[p].name;
	char err[512], names[PG_POOL_KEYS_LEN], shown[80];
	int idx = -1;
	enum pg_pool_key_kind kind = pg_pool_key_kind(k->w[0], &idx);

	pg_conf_shown(k->w[0], shown, sizeof(shown));
	if (kind == PG_PK_NONE && strcmp(k->w[0], "max-load-gap")) {
		const char *near = closest(k->w[0], true);

		pg_conf_err_add(ps->errs, k->line, "pool %s: unknown directive \"%s\" (%s%s%s)",
		                pool, shown, near ? "did you mean " : "a pool's are ",
		                near ? near : pg_pool_keys(names, sizeof(names)), near ? "?" : "");
		return;
	}
	if (kind != PG_PK_LIST && idx >= 0 && seen[idx]) {
		pg_conf_err_add(ps->errs, k->line, "pool %s: %s given twice (first at line %u)",
		                pool, shown, seen[idx]);
		return;
	}
	if (idx >= 0)
		seen[idx] = k->line;
	if (kind == PG_PK_FLAG) {
		char what[120];
		int on;

		snprintf(what, sizeof(what), "pool %s: %s", pool, shown);
		on = on_off(ps, k, what);

		if (on >= 0)
			pg_pool_key(&cfg->pools, p, k->w[0], on ? NULL : "off", ' ', false, err,
			            sizeof(err));
		return;
	}
	if (k->nw < 2 || (kind != PG_PK_LIST && k->nw != 2)) {
		pg_conf_err_add(ps->errs, k->line, "pool %s: %s takes %s", pool, shown,
		                kind == PG_PK_ONE ? "one value" : "one value or more");
		return;
	}
	for (size_t v = 1; v < k->nw; v++) {
		if (kind == PG_PK_LIST && strchr(k->w[v], ',')) {
			pg_conf_err_add(ps->errs, k->line,
			                "pool %s: %s \"%s\": one item a word, without commas "
			                "(%s A B ...)",
			                pool, shown, pg_conf_shown(k->w[v], err, sizeof(err)),
			                shown);
			return;
		}
		if (pg_pool_key(&cfg->pools, p, k->w[0], k->w[v], ' ', false, err, sizeof(err))) {
			char msg[700];

			snprintf(msg, sizeof(msg), "pool %s: %s", pool, err);
			pg_parse_err(ps, k->line, msg);
			return;
		}
	}
}

static void pool_block(struct pg_config *cfg, const struct pg_conf *c, size_t i,
                       struct pg_parse *ps)
{
	const struct pg_conf_dir *d = &c->d[i];
	const size_t end = block_end(c, i), before = ps->errs->n;
	const unsigned last = end < c->n ? c->d[end].line : ~0u;
	unsigned seen[32] = {0};
	char err[512];
	int p;

	if (d->nw != 2) {
		pg_conf_err_add(ps->errs, d->line,
		                "pool: expected pool NAME { model M; backend HOST:PORT; ... }");
		return;
	}
	p = pg_pool_declare(&cfg->pools, d->w[1], strlen(d->w[1]), err, sizeof(err));
	if (p < 0) {
		pg_parse_err(ps, d->line, err);
		return;
	}
	if (ps->pool_line[p]) {
		pg_conf_err_add(ps->errs, d->line,
		                "pool %s: given twice (first at line %u): one block a pool",
		                cfg->pools.pool[p].name, ps->pool_line[p]);
		return;
	}
	ps->pool_line[p] = d->line;
	for (size_t j = i + 1; j < end; j++) {
		const struct pg_conf_dir *k = &c->d[j];

		if (k->parent != (int)i)
			continue;
		if (k->block)
			pg_conf_err_add(ps->errs, k->line, "pool %s: no block inside a pool block",
			                cfg->pools.pool[p].name);
		else
			pool_key(cfg, (unsigned)p, k, ps, seen);
	}
	/* an error in the block (its syntax's too) is the pool's: what the
	 * checks of every pool would say of it follows from it */
	for (size_t k = 0; k < pg_conf_errs_kept(ps->errs); k++)
		if (k >= before || (ps->errs->v[k].line > d->line && ps->errs->v[k].line < last))
			ps->pool_errs |= 1u << p;
}

/* A top-level directive that is not a block: a flag of the table. */
static void directive(struct pg_config *cfg, const struct pg_conf_dir *d, struct pg_parse *ps)
{
	const char *name = d->w[0];
	int id = pg_opt_find(name, strlen(name), false);
	const struct pg_opt *o;
	char err[1024], names[160];

	if (id < 0) {
		unknown(ps, d->line, name);
		return;
	}
	o = &pg_opts[id];
	if (id == O_POOL) {
		pg_conf_err_add(ps->errs, d->line,
		                "pool: a pool is a block: pool NAME { model M; backend HOST:PORT; "
		                "... }");
		return;
	}
	if (ps->line[id] && id != O_BACKEND && id != O_TENANT && id != O_TLS_CERT &&
	    id != O_TLS_KEY) {
		pg_conf_err_add(ps->errs, d->line, "%s: given twice (first at line %u)", name,
		                ps->line[id]);
		return;
	}
	ps->line[id] = d->line;
	if (o->flag) {
		int on = on_off(ps, d, name);

		if (on >= 0)
			*(bool *)((char *)cfg + o->field) = on;
		return;
	}
	if (id == O_TENANT) {
		if (d->nw != 2)
			pg_conf_err_add(
			    ps->errs, d->line,
			    "tenant: expected tenant NAME { weight W; priority P; rpm N; tpm N; }");
		else if (!pg_tenant_add(&cfg->flow, d->w[1], strlen(d->w[1]), err, sizeof(err)))
			pg_parse_err(ps, d->line, err);
		return;
	}
	if (d->nw < 2 || (!pg_opt_is_list((enum opt_id)id) && d->nw != 2)) {
		pg_conf_err_add(ps->errs, d->line, "%s: takes %s %s", name,
		                pg_opt_is_list((enum opt_id)id) ? "one value or more,"
		                                                : "one value,",
		                o->arg ? o->arg : o->list(names, sizeof(names), " | "));
		return;
	}
	for (size_t v = 1; v < d->nw; v++)
		if (pg_config_apply(cfg, (enum opt_id)id, d->w[v], ps, err, sizeof(err)))
			pg_parse_err(ps, d->line, err);
}

void pg_config_apply_file(struct pg_config *cfg, const struct pg_conf *c, struct pg_parse *ps)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct pg_conf_dir *d = &c->d[i];
		char shown[80];

		if (d->parent >= 0)
			continue;
		if (!d->block)
			directive(cfg, d, ps);
		else if (!strcmp(d->w[0], "pool"))
			pool_block(cfg, c, i, ps);
		else if (!strcmp(d->w[0], "tenant"))
			tenant_block(cfg, c, i, ps);
		else if (pg_opt_find(d->w[0], strlen(d->w[0]), false) < 0)
			unknown(ps, d->line, d->w[0]);
		else
			pg_conf_err_add(ps->errs, d->line,
			                "%s: not a block (only pool and tenant open one)",
			                pg_conf_shown(d->w[0], shown, sizeof(shown)));
	}
}
