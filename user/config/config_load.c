// SPDX-License-Identifier: MIT
/*
 * The whole configuration (config.h pg_config_parse_all): the table's
 * defaults, the configuration file's directives (config_file.c), the
 * command line's flags over them (config_flags.c), then the files they
 * name and the checks that span options, each error placed at the file's
 * line that caused it. No global state.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "config/config_opts.h"
#include "lib/conf.h"

void pg_parse_err(struct pg_parse *ps, unsigned line, const char *err)
{
	if (line && !strncmp(err, "--", 2))
		err += 2;
	pg_conf_err_add(ps->errs, line, "%s", err);
}

/* An error of a check made once everything is read, at the line of the
 * option at fault (0: a flag's, or none). */
static void check_err(struct pg_parse *ps, int opt, const char *err)
{
	pg_parse_err(ps, opt >= 0 ? ps->line[opt] : 0, err);
}

/* --routing-config and --backends-file: read and checked. */
static void load_files(struct pg_config *cfg, struct pg_parse *ps)
{
	char *buf, e[256], msg[600], **v;
	size_t len, n;
	int rc;

	if (cfg->routing_config) {
		rc =
		    pg_read_file(cfg->routing_config, PG_CONFIG_FILE_MAX, &buf, &len, e, sizeof(e));
		if (!rc) {
			rc = pg_routing_config_parse(buf, len, &cfg->route, e, sizeof(e));
			free(buf);
		}
		if (rc) {
			snprintf(msg, sizeof(msg), "--routing-config %s: %s", cfg->routing_config,
			         e);
			check_err(ps, O_ROUTING_CONFIG, msg);
		}
	}
	if (cfg->backends_file) {
		/* the pools are all declared: pool= must name one */
		struct pg_backends_rules rules = {.pools = &cfg->pools};

		rc = pg_read_file(cfg->backends_file, PG_CONFIG_FILE_MAX, &buf, &len, e, sizeof(e));
		if (!rc) {
			rc = pg_backends_parse_in(buf, len, &rules, &v, &n, e, sizeof(e));
			free(buf);
		}
		if (rc) {
			snprintf(msg, sizeof(msg), "--backends-file %s: %s", cfg->backends_file, e);
			check_err(ps, O_BACKENDS_FILE, msg);
			return;
		}
		pg_pools_file_catch_all(&cfg->pools, v, n);
		pg_backends_free(v, n);
	}
}

/* One more of cfg's needs (config.h struct pg_need). */
static struct pg_need *need(struct pg_config *cfg, enum pg_need_kind kind, const char *name,
                            const char *value, unsigned line)
{
	struct pg_need *n = &cfg->needs[cfg->nneeds++];

	*n = (struct pg_need){.kind = kind, .value = value, .line = line};
	snprintf(n->name, sizeof(n->name), "%s", name);
	return n;
}

/* What the configuration needs of the system, each at its directive's
 * line: what start-up's checks (sys/preflight.h) look at. */
static void needs(struct pg_config *cfg, const struct pg_parse *ps)
{
	const struct {
		enum pg_need_kind kind;
		enum opt_id opt;
		const char *value;
	} opts[] = {
	    {PG_NEED_USER, O_USER, cfg->user},
	    {PG_NEED_RELOAD, O_CONFIG, cfg->conf_path},
	    {PG_NEED_RELOAD, O_BACKENDS_FILE, cfg->backends_file},
	    {PG_NEED_RELOAD, O_ROUTING_CONFIG, cfg->routing_config},
	    {PG_NEED_RELOAD, O_ADMIN_TOKEN_FILE, cfg->admin_token_file},
	    {PG_NEED_APPEND, O_ACCESS_LOG, cfg->access_log},
	    {PG_NEED_READ, O_ETCD_PASSWORD, cfg->etcd.password_file},
	    {PG_NEED_STATE, O_ETCD_STATE, cfg->etcd.state_file},
	    /* TLS: SIGHUP and POST /tls/reload read every file again */
	    {PG_NEED_RELOAD, O_TLS_CLIENT_CA, cfg->tls.client_ca},
	    {PG_NEED_RELOAD, O_BACKEND_TLS_CA, cfg->tls.backend_ca},
	    {PG_NEED_RELOAD, O_BACKEND_TLS_CERT, cfg->tls.backend_cert},
	    {PG_NEED_RELOAD, O_BACKEND_TLS_KEY, cfg->tls.backend_key},
	};
	char name[PG_POOL_NAME_MAX + 24];

	_Static_assert(sizeof(opts) / sizeof(opts[0]) + 2 * PG_TLS_CERTS_MAX + PG_MAX_POOLS + 3 <=
	                   PG_NEEDS_MAX,
	               "room for every need");
	cfg->nneeds = 0;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (opts[i].value) /* (the file itself has no line of its own) */
			need(cfg, opts[i].kind, pg_opts[opts[i].opt].name, opts[i].value,
			     opts[i].opt == O_CONFIG ? 0 : ps->line[opts[i].opt]);
	for (size_t i = 0; i < cfg->tls.ncerts && i < PG_TLS_CERTS_MAX; i++)
		need(cfg, PG_NEED_RELOAD, pg_opts[O_TLS_CERT].name, cfg->tls.certs[i],
		     ps->line[O_TLS_CERT]);
	for (size_t i = 0; i < cfg->tls.nkeys && i < PG_TLS_CERTS_MAX; i++)
		need(cfg, PG_NEED_RELOAD, pg_opts[O_TLS_KEY].name, cfg->tls.keys[i],
		     ps->line[O_TLS_KEY]);
	for (unsigned p = 0; p < cfg->pools.n && p < PG_MAX_POOLS; p++)
		if (cfg->pools.pool[p].routing_file) {
			snprintf(name, sizeof(name), "pool %s routing-config",
			         cfg->pools.pool[p].name);
			need(cfg, PG_NEED_RELOAD, name, cfg->pools.pool[p].routing_file,
			     ps->pool_line[p]);
		}
	need(cfg, PG_NEED_BIND, pg_opts[O_LISTEN].name, NULL, ps->line[O_LISTEN])->addr =
	    cfg->listen;
	need(cfg, PG_NEED_BIND, pg_opts[O_ADMIN].name, NULL, ps->line[O_ADMIN])->addr = cfg->admin;
	if (cfg->tls.on)
		need(cfg, PG_NEED_BIND, pg_opts[O_TLS_LISTEN].name, NULL, ps->line[O_TLS_LISTEN])
		    ->addr = cfg->tls.listen;
}

/* Everything read: the files named, each pool's RoutingConfig, and the
 * checks that span options. */
static void finish(struct pg_config *cfg, struct pg_parse *ps)
{
	char e[512];
	unsigned pool = 0;
	int opt;

	load_files(cfg, ps);
	if (pg_config_check_ops(cfg, &opt, e, sizeof(e)))
		check_err(ps, opt, e);
	pg_config_check_tls(cfg, ps);
	/* Kept: a re-read of the file applies them again (pg_route_of_pool). */
	cfg->route_flags = ps->flags;
	cfg->route_flags_set = (ps->set & 1u << O_STRATEGY ? PG_POOL_SET_STRATEGY : 0) |
	                       (ps->set & 1u << O_PREFIX_LENGTH ? PG_POOL_SET_PREFIX : 0) |
	                       (ps->set & 1u << O_CONCURRENCY ? PG_POOL_SET_THRESHOLD : 0) |
	                       (ps->set & 1u << O_CA_CHOICES ? PG_POOL_SET_CHOICES : 0) |
	                       (ps->set & 1u << O_FLOW_QUEUE_MS ? PG_POOL_SET_FLOW_QUEUE : 0) |
	                       (ps->set & 1u << O_FLOW_DEADLINE ? PG_POOL_SET_FLOW_DEADLINE : 0) |
	                       (cfg->flow.on ? PG_POOL_SET_FLOW_ON : 0);
	pg_route_overlay(&cfg->route, &cfg->route_flags, cfg->route_flags_set);
	if (pg_pools_finish(cfg, ps->pool_errs, &pool, e, sizeof(e)))
		pg_parse_err(ps, pool < PG_MAX_POOLS ? ps->pool_line[pool] : 0, e);
	if (cfg->no_bpf &&
	    (cfg->data_path == PG_DATA_SOCKMAP || cfg->data_path == PG_DATA_SOCKMSG)) {
		snprintf(e, sizeof(e), "--data-path %s needs BPF: drop --no-bpf or use copy",
		         pg_data_paths[cfg->data_path]);
		check_err(ps, ps->line[O_DATA_PATH] ? O_DATA_PATH : O_NO_BPF, e);
	}
	if (pg_sockaddr_overlap(&cfg->listen, &cfg->admin)) {
		char a[PG_ADDR_STRLEN], l[PG_ADDR_STRLEN];

		snprintf(e, sizeof(e),
		         "--admin %s: --listen %s takes the same port: give each its own",
		         pg_addr_format(&cfg->admin, a), pg_addr_format(&cfg->listen, l));
		check_err(ps, ps->line[O_ADMIN] ? O_ADMIN : O_LISTEN, e);
	}
	if (cfg->etcd.endpoints && cfg->backends_file)
		check_err(ps, ps->line[O_ETCD] ? O_ETCD : O_BACKENDS_FILE,
		          "--etcd-endpoints and --backends-file: choose one source");
	needs(cfg, ps);
}

/* The file (its text, NULL: none) then argv over it. */
static int parse(struct pg_config *cfg, const char *name, const char *text, size_t len, int argc,
                 char **argv, FILE *out, struct pg_conf_errs *errs)
{
	struct pg_parse *ps = calloc(1, sizeof(*ps));
	size_t before = errs->n;
	char err[1024];
	bool check = false;
	int rc;

	if (pg_config_defaults(cfg, err, sizeof(err)) || !ps) {
		pg_conf_err_add(errs, 0, "%s", ps ? err : "out of memory");
		free(ps);
		return 2;
	}
	ps->errs = errs;
	ps->file = name;
	cfg->argc = argc;
	cfg->argv = argv;
	cfg->conf_path = name;
	if (text) {
		cfg->conf = calloc(1, sizeof(*cfg->conf));
		if (!cfg->conf) {
			pg_conf_err_add(errs, 0, "out of memory");
		} else {
			/* what parsed is read even after a syntax error: more is told */
			pg_conf_parse(text, len, cfg->conf, errs);
			pg_config_apply_file(cfg, cfg->conf, ps);
		}
		ps->file_backends = cfg->nbackends;
		cfg->flow.from_file = cfg->flow.ntenants;
		ps->merge = true;
	}
	rc = pg_config_argv(cfg, argc, argv, out, ps, err, sizeof(err));
	check = cfg->check;
	if (rc == 2)
		pg_conf_err_add(errs, 0, "%s", err);
	else if (rc == 0)
		finish(cfg, ps);
	free(ps);
	if (rc == 0 && errs->n == before)
		return 0;
	pg_config_free(cfg);
	cfg->check = check;
	return rc == 1 ? 1 : 2; /* --help answers whatever the file says */
}

int pg_config_parse_text(struct pg_config *cfg, const char *name, const char *text, size_t len,
                         int argc, char **argv, struct pg_conf_errs *errs)
{
	return parse(cfg, name, text, len, argc, argv, NULL, errs);
}

/* What must be known of argv before it is parsed, since a parse stops at
 * its first error: the file to read (*conf: the last -c / --config, else
 * the default when it exists; NULL: none), and whether --check is given
 * (the exit status of an error depends on it, wherever it stands). A
 * flag's value is skipped: "--backend -c" is no -c. */
static void scan_argv(int argc, char **argv, const char **conf, bool *check)
{
	const char *path = NULL;

	*check = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config"))
			path = i + 1 < argc ? argv[++i] : NULL;
		else if (!strncmp(argv[i], "--config=", 9))
			path = argv[i] + 9;
		else if (!strcmp(argv[i], "--check"))
			*check = true;
		else if (i + 1 < argc && argv[i][0] == '-' && argv[i][1] == '-' &&
		         !strchr(argv[i], '=')) {
			int id = pg_opt_find(argv[i] + 2, strlen(argv[i] + 2), true);

			i += id >= 0 && (pg_opts[id].arg || pg_opts[id].list);
		}
	}
	if (!path && access(PG_CONF_DEFAULT, F_OK) == 0)
		path = PG_CONF_DEFAULT;
	*conf = path;
}

/* Parse with the file at path (NULL: none) read. */
static int parse_path(struct pg_config *cfg, const char *path, int argc, char **argv, FILE *out,
                      struct pg_conf_errs *errs)
{
	char *text = NULL, e[256];
	size_t len = 0;
	int rc;

	if (path && pg_read_file(path, PG_CONFIG_FILE_MAX, &text, &len, e, sizeof(e))) {
		pg_conf_err_add(errs, 0, "--config %s: %s", path, e);
		/* --help still answers, and --check is known */
		rc = parse(cfg, NULL, NULL, 0, argc, argv, out, errs);
		if (rc == 0)
			pg_config_free(cfg);
		return rc == 1 ? 1 : 2;
	}
	rc = parse(cfg, path, text, len, argc, argv, out, errs);
	free(text);
	return rc;
}

int pg_config_parse_all(struct pg_config *cfg, int argc, char **argv, FILE *out,
                        struct pg_conf_errs *errs)
{
	const char *path;
	bool check;
	int rc;

	scan_argv(argc, argv, &path, &check);
	rc = parse_path(cfg, path, argc, argv, out, errs);
	cfg->check |= check;
	return rc;
}

int pg_config_reparse(const struct pg_config *cfg, struct pg_config *out, struct pg_conf_errs *errs)
{
	return parse_path(out, cfg->conf_path, cfg->argc, cfg->argv, NULL, errs);
}

int pg_config_parse(struct pg_config *cfg, int argc, char **argv, FILE *out, char *err,
                    size_t errlen)
{
	struct pg_conf_errs errs = {0};
	int rc = pg_config_parse_all(cfg, argc, argv, out, &errs);

	if (errlen)
		err[0] = 0;
	if (rc == 2 && errs.n && errs.v && errs.v[0].line)
		pg_errf(err, errlen, "%s:%u: %s", cfg->conf_path ? cfg->conf_path : "",
		        errs.v[0].line, errs.v[0].msg);
	else if (rc == 2)
		pg_errf(err, errlen, "%s", errs.n && errs.v ? errs.v[0].msg : "out of memory");
	pg_conf_errs_free(&errs);
	return rc;
}

void pg_config_errs_print(FILE *out, const struct pg_conf_errs *errs, const char *file)
{
	size_t order[PG_CONF_ERRS_MAX], n = pg_conf_errs_kept(errs);
	bool flags = false;

	/* in the file's order (the checks made at the end come last), then
	 * the command line's */
	for (size_t i = 0; i < n; i++) {
		unsigned li = errs->v[i].line ? errs->v[i].line : ~0u;
		size_t k = i;

		for (;
		     k > 0 && (errs->v[order[k - 1]].line ? errs->v[order[k - 1]].line : ~0u) > li;
		     k--)
			order[k] = order[k - 1];
		order[k] = i;
	}
	for (size_t j = 0; j < n; j++) {
		const struct pg_conf_err *e = &errs->v[order[j]];

		if (e->line)
			fprintf(out, "%s:%u: %s\n", file ? file : "", e->line, e->msg);
		else
			fprintf(out, "prefixgate: %s\n", e->msg);
		flags |= !e->line;
	}
	if (errs->n > pg_conf_errs_kept(errs))
		fprintf(out, "prefixgate: %zu more errors not shown\n",
		        errs->n - pg_conf_errs_kept(errs));
	if (errs->oom)
		fprintf(out, "prefixgate: out of memory: not every error is shown\n");
	if (flags)
		fprintf(out, "(see prefixgate --help)\n");
}

const char *pg_config_keep(struct pg_config *cfg, const char *s)
{
	char **nv, *c;

	if (!s)
		return NULL;
	nv = realloc(cfg->kept, (cfg->nkept + 1) * sizeof(*nv));
	if (!nv)
		return NULL;
	cfg->kept = nv;
	c = strdup(s);
	if (!c)
		return NULL;
	nv[cfg->nkept++] = c;
	return c;
}
