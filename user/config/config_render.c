// SPDX-License-Identifier: MIT
/*
 * A configuration written back as a configuration file (config.h
 * pg_config_render: GET /config, prefixgatectl config), and the options
 * two configurations differ in (pg_config_diff: what a reload tells).
 * Both go by the table of flags, so every option is written by the one
 * value function below. Pure: text into a buffer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "config/config_opts.h"
#include "lib/buf.h"
#include "lib/conf.h"
#include "lib/pd.h"

/* Room for one option's value as the file writes it. */
#define VALUE_MAX 2048

/* The string at a const char * field of cfg, or NULL. */
static const char *str_at(const struct pg_config *cfg, size_t off)
{
	return *(const char *const *)(const void *)((const char *)cfg + off);
}

/* w[0, n) as the file writes a directive's values into buf, or NULL when
 * there are none. */
static const char *words(const char *const *w, size_t n, char *buf, size_t cap)
{
	char q[VALUE_MAX];
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < n && used < cap; i++) {
		int k = snprintf(buf + used, cap - used, "%s%s", i ? " " : "",
		                 pg_conf_word(w[i], q, sizeof(q)) ? q : "\"?\"");

		used += k > 0 ? (size_t)k : 0;
	}
	return n ? buf : NULL;
}

/*
 * Option id's value in cfg, quoted as the file needs, into buf: the value
 * text, or NULL when the option is not set (no default, nothing given) or
 * is not one value (backend, pool, tenant, and the command line's own).
 * A routing option's value is cfg->route's (the gateway's).
 */
static const char *value(const struct pg_config *cfg, enum opt_id id, char *buf, size_t cap)
{
	const struct pg_opt *o = &pg_opts[id];
	char tmp[VALUE_MAX];
	const char *s = NULL;

	if (o->cli || id == O_BACKEND || id == O_POOL || id == O_TENANT)
		return NULL;
	if (o->max) {
		const char *base = o->route ? (const char *)&cfg->route : (const char *)cfg;
		const uint32_t v = *(const uint32_t *)(const void *)(base + o->field);

		/* past the flag's range: a value only what set it can give (flow
		 * control's automatic room, from --flow-control): written there */
		if ((int64_t)v > o->max)
			return NULL;
		snprintf(buf, cap, "%" PRIu32, v);
		return buf;
	}
	if (o->flag)
		return snprintf(buf, cap, "%s",
		                *(const bool *)(const void *)((const char *)cfg + o->field)
		                    ? "on"
		                    : "off"),
		       buf;
	if (o->str)
		s = str_at(cfg, o->field);
	if (id == O_TLS_CERT || id == O_TLS_KEY) /* each quoted, a space between */
		return words(id == O_TLS_CERT ? cfg->tls.certs : cfg->tls.keys,
		             id == O_TLS_CERT ? cfg->tls.ncerts : cfg->tls.nkeys, buf, cap);
	switch (id) {
	case O_TLS_LISTEN:
		s = cfg->tls.on ? pg_addr_format(&cfg->tls.listen, tmp) : NULL;
		break;
	case O_TLS_MIN_VERSION:
		s = pg_tls_versions[cfg->tls.min_version];
		break;
	case O_LISTEN:
	case O_ADMIN:
		s = pg_addr_format(id == O_LISTEN ? &cfg->listen : &cfg->admin, tmp);
		break;
	case O_BACKENDS_FILE:
		s = cfg->backends_file;
		break;
	case O_RESOLVER:
		s = cfg->resolver;
		break;
	case O_STRATEGY:
		s = pg_strategy_flag(cfg->route.strategy);
		break;
	case O_ROUTING_CONFIG:
		s = cfg->routing_config;
		break;
	case O_DATA_PATH:
		s = pg_data_paths[cfg->data_path];
		break;
	case O_PIN_PATH:
		s = cfg->pin_path;
		break;
	case O_BPF_CGROUP:
		s = cfg->bpf_cgroup;
		break;
	case O_HC_PATH:
		s = cfg->health.path ? cfg->health.path : "none";
		break;
	case O_LOAD_SIGNAL:
		s = pg_load_signal_name(cfg->load_signal);
		break;
	case O_FLOW_TENANT:
		if (cfg->flow.tenant_src == PG_TENANT_HEADER)
			snprintf(tmp, sizeof(tmp), "header:%s", cfg->flow.tenant_header);
		s = cfg->flow.tenant_src == PG_TENANT_HEADER ? tmp
		    : cfg->flow.tenant_src == PG_TENANT_USER ? "user"
		    : cfg->flow.tenant_src == PG_TENANT_CERT ? "cert"
		                                             : "bearer";
		break;
	case O_USER:
		s = cfg->user;
		break;
	case O_QUOTA:
		if (cfg->flow.quota.max[PG_QUOTA_REQUESTS] || cfg->flow.quota.max[PG_QUOTA_TOKENS])
			snprintf(tmp, sizeof(tmp), "rpm=%" PRIu32 ",tpm=%" PRIu32,
			         cfg->flow.quota.max[PG_QUOTA_REQUESTS],
			         cfg->flow.quota.max[PG_QUOTA_TOKENS]);
		s = cfg->flow.quota.max[PG_QUOTA_REQUESTS] || cfg->flow.quota.max[PG_QUOTA_TOKENS]
		        ? tmp
		        : NULL;
		break;
	case O_ADMIN_TOKEN:
		/* never written: the file that gave it, or nothing */
		s = cfg->admin_token && !cfg->admin_token_file ? cfg->admin_token : NULL;
		break;
	case O_ADMIN_TOKEN_FILE:
		s = cfg->admin_token_file;
		break;
	case O_ACCESS_LOG:
		s = cfg->access_log;
		break;
	case O_ROUTE_JOURNAL:
		s = cfg->route_journal;
		break;
	case O_OTLP_ENDPOINT:
		s = cfg->otlp.endpoint;
		break;
	case O_OTLP_SAMPLE:
		s = cfg->otlp.sample;
		break;
	case O_LOG_LEVEL:
		s = cfg->log_level >= 0 && cfg->log_level < PG_NLOG_LEVELS
		        ? pg_log_levels[cfg->log_level]
		        : "info";
		break;
	case O_NATS:
		s = cfg->nats_url;
		break;
	case O_NATS_CLUSTER:
		s = cfg->nats_cluster;
		break;
	case O_GATEWAY_ID:
		s = cfg->gateway_id;
		break;
	default:
		break;
	}
	if (!s)
		return NULL;
	if (!pg_conf_word(s, buf, cap))
		snprintf(buf, cap, "\"(a value the file cannot hold)\"");
	return buf;
}

void pg_config_diff(const struct pg_config *a, const struct pg_config *b,
                    void (*fn)(void *arg, const char *name, bool live, const char *was,
                               const char *now),
                    void *arg)
{
	char va[VALUE_MAX], vb[VALUE_MAX];

	for (size_t id = 0; id < PG_NOPTS; id++) {
		const char *x, *y;

		if (pg_opts[id].route)
			continue;
		x = value(a, (enum opt_id)id, va, sizeof(va));
		y = value(b, (enum opt_id)id, vb, sizeof(vb));
		if (!x && !y)
			continue;
		if (x && y && !strcmp(x, y))
			continue;
		if (id == O_ADMIN_TOKEN)
			x = x ? "(a token)" : NULL, y = y ? "(another token)" : NULL;
		fn(arg, pg_opts[id].name, pg_opts[id].live, x ? x : "(none)", y ? y : "(none)");
	}
}

/* "    name word word;\n", each word quoted as needed. */
static void line(struct pg_buf *out, const char *indent, const char *name, char *const *w, size_t n)
{
	char q[VALUE_MAX];

	pg_buf_printf(out, "%s%s", indent, name);
	for (size_t i = 0; i < n; i++)
		pg_buf_printf(out, " %s", pg_conf_word(w[i], q, sizeof(q)) ? q : "\"?\"");
	pg_buf_puts(out, ";\n");
}

/* The RoutingConfig fields a pool block or the top of the file writes
 * (PG_POOL_SET_* bits; PG_POOL_SET_FLOW_ON is the flow-control key), the
 * numbers by the flag of the same name. */
#define ROUTE_FIELDS                                                                               \
	(PG_POOL_SET_STRATEGY | PG_POOL_SET_PREFIX | PG_POOL_SET_THRESHOLD | PG_POOL_SET_CHOICES | \
	 PG_POOL_SET_FLOW_QUEUE | PG_POOL_SET_FLOW_DEADLINE)
static const struct {
	enum opt_id id;
	unsigned bit;
} route_nums[] = {
    {O_PREFIX_LENGTH, PG_POOL_SET_PREFIX},        {O_CONCURRENCY, PG_POOL_SET_THRESHOLD},
    {O_CA_CHOICES, PG_POOL_SET_CHOICES},          {O_FLOW_QUEUE_MS, PG_POOL_SET_FLOW_QUEUE},
    {O_FLOW_DEADLINE, PG_POOL_SET_FLOW_DEADLINE},
};

static uint32_t route_num(const struct pg_route_cfg *rc, enum opt_id id)
{
	return *(const uint32_t *)(const void *)((const char *)rc + pg_opts[id].field);
}

/* The fields in which rc differs from base, as PG_POOL_SET_* bits. */
static unsigned route_differ(const struct pg_route_cfg *rc, const struct pg_route_cfg *base)
{
	unsigned set = rc->strategy != base->strategy ? PG_POOL_SET_STRATEGY : 0;

	for (size_t i = 0; i < sizeof(route_nums) / sizeof(route_nums[0]); i++)
		if (route_num(rc, route_nums[i].id) != route_num(base, route_nums[i].id))
			set |= route_nums[i].bit;
	return set;
}

/* The fields of rc in set, one directive a line. Flow control's automatic
 * room (PG_FLOW_QUEUE_AUTO) is no number: it is what flow-control turns
 * on where no InstanceQueueMs is set. */
static void routing(struct pg_buf *out, const char *indent, const struct pg_route_cfg *rc,
                    unsigned set)
{
	bool on = set & PG_POOL_SET_FLOW_ON;

	if (set & PG_POOL_SET_STRATEGY)
		pg_buf_printf(out, "%sstrategy %s;\n", indent, pg_strategy_flag(rc->strategy));
	for (size_t i = 0; i < sizeof(route_nums) / sizeof(route_nums[0]); i++) {
		uint32_t v = route_num(rc, route_nums[i].id);

		if (!(set & route_nums[i].bit))
			continue;
		if (route_nums[i].id == O_FLOW_QUEUE_MS && v == PG_FLOW_QUEUE_AUTO)
			on = true;
		else
			pg_buf_printf(out, "%s%s %" PRIu32 ";\n", indent,
			              pg_opts[route_nums[i].id].name, v);
	}
	if (on)
		pg_buf_printf(out, "%s%s on;\n", indent, pg_opts[O_FLOW_CONTROL].name);
}

/*
 * What a pool's block writes of its routing (rc, as it runs): what it set
 * itself, and whatever differs from what it would inherit from the top of
 * the file written (top) -- a live change (PUT /routing) is its own once
 * saved. What it inherits is left out, so that an edit of the top reaches
 * it as it would the file written by hand. A pool with a routing-config=
 * file of its own inherits nothing: all of it.
 */
static unsigned pool_fields(const struct pg_pool_cfg *pc, const struct pg_route_cfg *rc,
                            const struct pg_route_cfg *top)
{
	unsigned set = pc->route_set & (ROUTE_FIELDS | PG_POOL_SET_FLOW_ON);
	struct pg_route_cfg got = *top;

	if (pc->route_set & PG_POOL_SET_FILE)
		return ROUTE_FIELDS;
	pg_route_overlay(&got, rc, set); /* as the file written reads back */
	return set | route_differ(rc, &got);
}

/* A prefill/decode pool's own keys: its members as prefill (each with its
 * bootstrap port), its decode set's as decode. */
static void pd_keys(struct pg_buf *out, const struct pg_pool_table *t, const struct pg_pool_cfg *pc)
{
	const struct pg_pool_cfg *dc = &t->pool[pc->decode];
	char q[VALUE_MAX];

	pg_buf_printf(out, "    pd %s;\n", pg_pd_name((enum pg_pd)pc->pd));
	if (pc->nbackends) {
		pg_buf_puts(out, "    prefill");
		for (size_t i = 0; i < pc->nbackends; i++) {
			char w[VALUE_MAX];

			snprintf(w, sizeof(w), "%s", pc->backends[i]);
			for (size_t b = 0; b < pc->nbootstraps; b++)
				if (!strcmp(pc->bootstraps[b].addr, pc->backends[i]))
					snprintf(w, sizeof(w), "%s@%u", pc->backends[i],
					         pc->bootstraps[b].port);
			pg_buf_printf(out, " %s", pg_conf_word(w, q, sizeof(q)) ? q : "\"?\"");
		}
		pg_buf_puts(out, ";\n");
	}
	if (pc->decode && dc->nbackends)
		line(out, "    ", "decode", dc->backends, dc->nbackends);
	pg_buf_printf(out, "    pd-min-tokens %" PRIu32 ";\n", pc->pd_min_tokens);
	if (pc->bootstrap_port)
		pg_buf_printf(out, "    bootstrap-port %u;\n", pc->bootstrap_port);
}

static void pool_block(struct pg_buf *out, const struct pg_pool_table *t,
                       const struct pg_pool_cfg *pc, const struct pg_route_cfg *rc,
                       const struct pg_route_cfg *top)
{
	char q[VALUE_MAX];

	pg_buf_printf(out, "\npool %s {\n", pg_conf_word(pc->name, q, sizeof(q)) ? q : "?");
	if (pc->nmodels)
		line(out, "    ", "model", pc->models, pc->nmodels);
	if (pc->npaths)
		line(out, "    ", "path", pc->paths, pc->npaths);
	if (pc->pd)
		pd_keys(out, t, pc);
	else if (pc->nbackends && !pc->decode_set) /* (a decode set's: its pool's decode) */
		line(out, "    ", "backend", pc->backends, pc->nbackends);
	routing(out, "    ", rc, pool_fields(pc, rc, top));
	pg_buf_puts(out, "}\n");
}

void pg_config_render(const struct pg_config *cfg, const struct pg_route_cfg *live,
                      struct pg_buf *out)
{
	struct pg_config *def = malloc(sizeof(*def));
	const struct pg_pool_table *t = &cfg->pools;
	const struct pg_pool_cfg *p0 = t->n ? &t->pool[0] : NULL;
	/* the default pool's block, when it has one, says how it differs from
	 * the gateway's routing at the top; else the top is the pool's */
	const bool block0 = p0 && (p0->declared || p0->nmodels || p0->npaths || p0->nbackends);
	const struct pg_route_cfg *top = block0 ? &cfg->route
	                                 : live ? &live[0]
	                                 : p0   ? &p0->route
	                                        : &cfg->route;
	struct pg_route_cfg base;
	char v[VALUE_MAX], d[VALUE_MAX], e[256];

	pg_buf_puts(out, "# prefixgate's configuration as it runs (GET /config): the file and the "
	                 "flags\n# merged, each pool's routing as it is live; options at their "
	                 "defaults\n# are left out (prefixgate --help lists them).\n");
	if (!def || pg_config_defaults(def, e, sizeof(e))) {
		pg_buf_puts(out, "# out of memory\n");
		free(def);
		return;
	}
	for (size_t id = 0; id < PG_NOPTS; id++) {
		const struct pg_opt *o = &pg_opts[id];
		const char *x = value(cfg, (enum opt_id)id, v, sizeof(v)), *y;

		if (id == O_BACKEND && cfg->nbackends)
			line(out, "", "backend", cfg->backends, cfg->nbackends);
		if (id == O_STRATEGY) {
			/* what the top's fields are without their lines: the
			 * defaults, InstanceQueueMs's under flow-control */
			base = def->route;
			pg_route_overlay(&base, &base, cfg->flow.on ? PG_POOL_SET_FLOW_ON : 0);
			routing(out, "", top, route_differ(top, &base));
		}
		if (id == O_ADMIN_TOKEN && x) {
			pg_buf_puts(out,
			            "# admin-token: given, not shown (admin-token-file keeps it "
			            "out of sight)\n");
			continue;
		}
		if (!x || (o->route && id != O_FLOW_CONTROL))
			continue; /* routing-config: its values are written above */
		y = value(def, (enum opt_id)id, d, sizeof(d));
		if (!y || strcmp(x, y))
			pg_buf_printf(out, "%s %s;\n", o->name, x);
	}
	for (unsigned p = 0; p < t->n; p++)
		if (p || block0)
			pool_block(out, t, &t->pool[p], live ? &live[p] : &t->pool[p].route, top);
	for (size_t i = 0; i < cfg->flow.ntenants; i++) {
		const struct pg_tenant_cfg *tc = &cfg->flow.tenants[i];

		pg_buf_printf(out, "\ntenant %s {", pg_conf_word(tc->name, v, sizeof(v)) ? v : "?");
		if (tc->weight != 1)
			pg_buf_printf(out, " weight %" PRIu32 ";", tc->weight);
		if (tc->prio >= 0 && tc->prio < PG_PRIO_COUNT)
			pg_buf_printf(out, " priority %s;", pg_prio_names[tc->prio]);
		if (tc->quota_set & (1u << PG_QUOTA_REQUESTS))
			pg_buf_printf(out, " rpm %" PRIu32 ";", tc->quota.max[PG_QUOTA_REQUESTS]);
		if (tc->quota_set & (1u << PG_QUOTA_TOKENS))
			pg_buf_printf(out, " tpm %" PRIu32 ";", tc->quota.max[PG_QUOTA_TOKENS]);
		pg_buf_puts(out, " }\n");
	}
	pg_config_free(def);
	free(def);
}
