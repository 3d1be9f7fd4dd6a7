// SPDX-License-Identifier: MIT
/*
 * The command line (config.h): parsed by one loop over the table of flags
 * (config_opts.c), which also produces the --help text, so a flag cannot be
 * accepted without being documented; apply() is also what the file's
 * directives go through (config_file.c). The whole parse, the file then the
 * flags, is config_load.c's. No global state: unit tests call
 * pg_config_parse() many times.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "config/config_opts.h"
#include "lib/otlp.h"
#include "lib/trace.h"

/* apply() marks the flags that override a --routing-config file in a
 * 32-bit set */
_Static_assert(O_STRATEGY < 32 && O_PREFIX_LENGTH < 32 && O_CONCURRENCY < 32 && O_CA_CHOICES < 32 &&
                   O_FLOW_QUEUE_MS < 32 && O_FLOW_DEADLINE < 32,
               "set bits");
_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "numeric flags are stored as uint32_t");

/* Decimal number in min..max for flag name; errors name the flag. */
static int flag_uint(const char *name, const char *v, unsigned long min, unsigned long max,
                     uint32_t *out, char *err, size_t errlen)
{
	unsigned long x = 0;
	const char *p = v;

	for (; *p >= '0' && *p <= '9'; p++)
		if (x <= max)
			x = x * 10 + (unsigned long)(*p - '0');
	if (p == v || *p) {
		pg_errf(err, errlen, "--%s: \"%s\" is not a decimal number", name, v);
		return -1;
	}
	if (x < min || x > max) {
		pg_errf(err, errlen, "--%s: %s is out of range %lu-%lu", name, v, min, max);
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

/* Refuse v, not one of o's names: "--data-path: "x" is not one of auto, ...". */
static int not_one_of(const struct pg_opt *o, const char *v, char *err, size_t errlen)
{
	char names[160];

	pg_errf(err, errlen, "--%s: \"%s\" is not one of %s", o->name, v,
	        o->list(names, sizeof(names), ", "));
	return -1;
}

/* --resolver: a comma-separated list of IP literals with ports. */
static int resolver_check(const char *v, char *err, size_t errlen)
{
	char one[PG_ADDR_STRLEN + 8], e[160];
	union pg_sockaddr a;

	for (const char *p = v;; p++) {
		size_t l = strcspn(p, ",");

		if (l < sizeof(one)) {
			memcpy(one, p, l);
			one[l] = 0;
		}
		/* 0.0.0.0 (":PORT") is no server */
		if (l >= sizeof(one) || pg_addr_parse(one, &a, e, sizeof(e)) ||
		    (a.sa.sa_family == AF_INET && !a.in.sin_addr.s_addr)) {
			pg_errf(err, errlen,
			        "--resolver: \"%.*s\" is not an IP:PORT of a DNS server", (int)l,
			        p);
			return -1;
		}
		p += l;
		if (!*p)
			return 0;
	}
}

/* One --tls-cert or --tls-key: added to the list (the command line's
 * first replaces the file's). */
static int tls_file_add(struct pg_config *cfg, enum opt_id id, const char *v, struct pg_parse *ps,
                        char *err, size_t errlen)
{
	bool cert = id == O_TLS_CERT;
	const char **list = cert ? cfg->tls.certs : cfg->tls.keys;
	size_t *n = cert ? &cfg->tls.ncerts : &cfg->tls.nkeys;
	bool *cli = cert ? &ps->cli_certs : &ps->cli_keys;

	if (!*v) {
		pg_errf(err, errlen, "--%s: empty value", pg_opts[id].name);
		return -1;
	}
	if (ps->merge && !*cli) {
		*cli = true;
		*n = 0;
	}
	if (*n == PG_TLS_CERTS_MAX) {
		pg_errf(err, errlen, "--%s: more than %d", pg_opts[id].name, PG_TLS_CERTS_MAX);
		return -1;
	}
	list[(*n)++] = v;
	return 0;
}

int pg_config_apply(struct pg_config *cfg, enum opt_id id, const char *v, struct pg_parse *ps,
                    char *err, size_t errlen)
{
	struct pg_route_cfg *flags = &ps->flags;
	unsigned *set = &ps->set;
	const struct pg_opt *o = &pg_opts[id];
	const char *name = o->name;
	struct pg_hostport a;
	char e[PG_HOSTPORT_STRLEN + 100];
	size_t dup;
	int rc;

	if (o->max) { /* a number, stored by the table */
		uint32_t *dst = (uint32_t *)((o->route ? (char *)flags : (char *)cfg) + o->field);

		if (o->route)
			*set |= 1u << id;
		if (o->zero_off && !strcmp(v, "0")) {
			*dst = 0;
			return 0;
		}
		return flag_uint(name, v, o->min, o->max, dst, err, errlen);
	}
	if (o->str) {
		if (!*v) {
			pg_errf(err, errlen, "--%s: empty value", name);
			return -1;
		}
		*(const char **)((char *)cfg + o->field) = v;
		return 0;
	}
	if (o->flag) {
		*(bool *)((char *)cfg + o->field) = true;
		return 0;
	}
	switch (id) {
	case O_LISTEN:
	case O_ADMIN:
	case O_BACKEND:
		if (id != O_BACKEND) {
			if (pg_addr_parse(v, id == O_LISTEN ? &cfg->listen : &cfg->admin, e,
			                  sizeof(e))) {
				pg_errf(err, errlen, "--%s: %s", name, e);
				return -1;
			}
			return 0;
		}
		if (pg_hostport_parse(v, &a, false, e, sizeof(e))) {
			pg_errf(err, errlen, "--%s: %s", name, e);
			return -1;
		}
		rc = pg_backend_add(&cfg->backends, &cfg->nbackends, &a, &dup);
		if (rc == 1 && ps->merge && dup < ps->file_backends)
			return 0; /* the file has it too */
		if (rc == 1)
			pg_errf(err, errlen, "--backend %s: given twice", v);
		else if (rc == 2)
			pg_errf(err, errlen, "--backend: more than %d backends",
			        PG_MAX_BACKENDS - 1);
		else if (rc)
			pg_errf(err, errlen, "out of memory");
		return rc ? -1 : 0;
	case O_BACKENDS_FILE:
		cfg->backends_file = v;
		return 0;
	case O_TLS_LISTEN:
		if (pg_addr_parse(v, &cfg->tls.listen, e, sizeof(e))) {
			pg_errf(err, errlen, "--%s: %s", name, e);
			return -1;
		}
		cfg->tls.on = true;
		return 0;
	case O_TLS_CERT:
	case O_TLS_KEY:
		return tls_file_add(cfg, id, v, ps, err, errlen);
	case O_TLS_MIN_VERSION:
		for (size_t i = 0; i < PG_NTLS_VERSIONS; i++) {
			if (!strcmp(v, pg_tls_versions[i])) {
				cfg->tls.min_version = (enum pg_tls_version)i;
				return 0;
			}
		}
		return not_one_of(o, v, err, errlen);
	case O_RESOLVER:
		return resolver_check(v, err, errlen) ? -1 : (cfg->resolver = v, 0);
	case O_ROUTING_CONFIG:
		cfg->routing_config = v;
		return 0;
	case O_PIN_PATH:
		if (!*v) {
			pg_errf(err, errlen, "--%s: empty directory", name);
			return -1;
		}
		cfg->pin_path = v;
		return 0;
	case O_BPF_CGROUP:
		if (!*v) {
			pg_errf(err, errlen, "--%s: empty path", name);
			return -1;
		}
		cfg->bpf_cgroup = v;
		return 0;
	case O_STRATEGY:
		if (pg_strategy_parse(v, strlen(v), &flags->strategy))
			return not_one_of(o, v, err, errlen);
		*set |= 1u << id;
		return 0;
	case O_DATA_PATH:
		for (size_t i = 0; i < PG_NDATA_PATHS; i++) {
			if (!strcasecmp(v, pg_data_paths[i])) {
				cfg->data_path = (enum pg_data_path)i;
				return 0;
			}
		}
		return not_one_of(o, v, err, errlen);
	case O_HC_PATH:
		if (!strcmp(v, "none")) {
			cfg->health.path = NULL;
			return 0;
		}
		if (v[0] != '/' || strpbrk(v, " \t\r\n")) {
			pg_errf(err, errlen, "--%s: \"%s\" is not an absolute path (or none)", name,
			        v);
			return -1;
		}
		cfg->health.path = v;
		return 0;
	case O_LOAD_SIGNAL:
		if (pg_load_signal_parse(v, &cfg->load_signal))
			return not_one_of(o, v, err, errlen);
		return 0;
	case O_LOG_LEVEL:
		for (size_t i = 0; i < PG_NLOG_LEVELS; i++) {
			if (!strcasecmp(v, pg_log_levels[i])) {
				cfg->log_level = (int)i;
				return 0;
			}
		}
		return not_one_of(o, v, err, errlen);
	case O_FLOW_TENANT:
		return pg_flow_tenant_src_parse(&cfg->flow, v, err, errlen);
	case O_TENANT:
		return pg_tenant_spec_parse(&cfg->flow, v, ps->merge, err, errlen);
	case O_QUOTA: {
		char why[160];

		if (!pg_quota_spec(v, strlen(v), &cfg->flow.quota, why, sizeof(why)))
			return 0;
		pg_errf(err, errlen, "--quota: %s", why);
		return -1;
	}
	case O_NATS:
	case O_NATS_CLUSTER:
	case O_GATEWAY_ID:
		if (!*v || strlen(v) > (id == O_NATS ? 1024 : PG_FLEET_ID_MAX) ||
		    (id == O_NATS_CLUSTER && strpbrk(v, ". *>\t\r\n"))) {
			pg_errf(err, errlen, "--%s: \"%s\" is not usable", name, v);
			return -1;
		}
		*(id == O_NATS         ? &cfg->nats_url
		  : id == O_GATEWAY_ID ? &cfg->gateway_id
		                       : &cfg->nats_cluster) = v;
		return 0;
	case O_POOL:
		return pg_pool_spec_parse(&cfg->pools, v, ps->merge, err, errlen);
	case O_USER:
		cfg->user = v;
		return 0;
	case O_ADMIN_TOKEN:
		free(cfg->admin_token);
		cfg->admin_token = strdup(v);
		cfg->admin_token_file = NULL;
		return cfg->admin_token ? 0 : (pg_errf(err, errlen, "out of memory"), -1);
	case O_ADMIN_TOKEN_FILE:
		cfg->admin_token_file = v;
		return 0;
	case O_ACCESS_LOG:
		cfg->access_log = v;
		return 0;
	case O_ROUTE_JOURNAL:
		cfg->route_journal = v;
		return 0;
	case O_OTLP_ENDPOINT: {
		struct pg_otlp_url u;
		char e[200];

		if (pg_otlp_url_parse(v, &u, e, sizeof(e))) {
			pg_errf(err, errlen, "--otlp-endpoint: %s", e);
			return -1;
		}
		cfg->otlp.endpoint = v;
		return 0;
	}
	case O_OTLP_SAMPLE:
		if (pg_trace_ratio_parse(v, &cfg->otlp.threshold)) {
			pg_errf(err, errlen, "--otlp-sample: \"%s\" is not a ratio from 0 to 1", v);
			return -1;
		}
		cfg->otlp.sample = v;
		return 0;
	default:
		return 0;
	}
}

/* Every default of the table, applied as if given on the command line (so
 * it is checked against its range too). Fails only if the table is wrong. */
int pg_config_defaults(struct pg_config *cfg, char *err, size_t errlen)
{
	struct pg_parse ps = {0};
	char e[256];

	memset(cfg, 0, sizeof(*cfg));
	for (size_t id = 0; id < PG_NOPTS; id++) {
		if (pg_opts[id].def &&
		    pg_config_apply(cfg, (enum opt_id)id, pg_opts[id].def, &ps, e, sizeof(e))) {
			pg_errf(err, errlen, "internal error: the default of --%s: %s",
			        pg_opts[id].name, e);
			return -1;
		}
	}
	/* the routing flags' defaults are the gateway's routing config */
	cfg->route = ps.flags;
	return 0;
}

int pg_opt_find(const char *name, size_t len, bool cli)
{
	for (size_t id = 0; id < PG_NOPTS; id++)
		if (strlen(pg_opts[id].name) == len && !memcmp(pg_opts[id].name, name, len) &&
		    (cli || !pg_opts[id].cli))
			return (int)id;
	return -1;
}

int pg_config_argv(struct pg_config *cfg, int argc, char **argv, FILE *out, struct pg_parse *ps,
                   char *err, size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *v = NULL;
		size_t nlen;
		int id;

		if (!strcmp(a, "-c")) {
			id = O_CONFIG;
			eq = NULL;
		} else if (strncmp(a, "--", 2) || !a[2]) {
			pg_errf(err, errlen, "unexpected argument \"%s\"", a);
			return 2;
		} else {
			eq = strchr(a + 2, '=');
			nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
			id = pg_opt_find(a + 2, nlen, true);
			if (id < 0) {
				pg_errf(err, errlen, "unknown option --%.*s", (int)nlen, a + 2);
				return 2;
			}
		}
		if (pg_opts[id].arg || pg_opts[id].list) {
			char names[160];

			v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (!v) {
				pg_errf(err, errlen, "--%s: missing value %s", pg_opts[id].name,
				        pg_opts[id].arg
				            ? pg_opts[id].arg
				            : pg_opts[id].list(names, sizeof(names), "|"));
				return 2;
			}
		} else if (eq) {
			pg_errf(err, errlen, "--%s takes no value", pg_opts[id].name);
			return 2;
		}
		if (id == O_HELP || id == O_VERSION) {
			if (id == O_HELP)
				pg_config_usage(out);
			else
				fprintf(out, "prefixgate %s\n", PG_VERSION);
			return 1;
		}
		if (id == O_CONFIG)
			continue; /* read before the flags (config_load.c) */
		if (pg_config_apply(cfg, (enum opt_id)id, v, ps, err, errlen))
			return 2;
		ps->line[id] = 0; /* the flag, not the file, says it now */
	}
	return 0;
}

void pg_config_free(struct pg_config *cfg)
{
	pg_backends_free(cfg->backends, cfg->nbackends);
	cfg->backends = NULL;
	cfg->nbackends = 0;
	free(cfg->admin_token);
	cfg->admin_token = NULL;
	pg_pool_table_free(&cfg->pools);
	if (cfg->conf) {
		pg_conf_free(cfg->conf);
		free(cfg->conf);
		cfg->conf = NULL;
	}
	for (size_t i = 0; i < cfg->nkept; i++)
		free(cfg->kept[i]);
	free(cfg->kept);
	cfg->kept = NULL;
	cfg->nkept = 0;
}
