/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the configuration parsers (user/config/).
 * Not part of the public API: include only from those files.
 */
#ifndef PG_CONFIG_INTERNAL_H
#define PG_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "config/config_opts.h"
#include "router/strategy.h"
#include "lib/conf.h"
#include "prefixgate.h"

struct pg_config;
struct pg_hostport;

/*
 * Checks of the operations flags once the command line is parsed
 * (config_ops.c): read --admin-token-file into cfg->admin_token (surrounding
 * whitespace stripped); the token must be PG_ADMIN_TOKEN_MIN-MAX visible ASCII characters
 * without spaces; a non-loopback --admin needs a token. 0, or -1 with err
 * naming the flag and *opt (enum opt_id) the one at fault.
 */
int pg_config_check_ops(struct pg_config *cfg, int *opt, char *err, size_t errlen);

/*
 * One parse of a configuration (config_flags.c): the file's directives
 * (config_file.c), then the command line's flags over them, through the
 * one apply() of the table.
 */
struct pg_parse {
	struct pg_route_cfg flags; /* routing values given (file or flag): over --routing-config */
	unsigned set;              /* which: 1 << enum opt_id */
	bool merge;                /* flags over a file: naming its items again is no error */
	const char *file;          /* the file's name for messages, or NULL */
	/* The file's line that set each option (0: none, or a flag
	 * overrode it), each pool's block and each tenant's: where a check
	 * made once everything is read places its error. */
	unsigned line[PG_NOPTS];
	unsigned pool_line[PG_MAX_POOLS];
	unsigned pool_errs;   /* 1 << pool: its block had an error */
	size_t file_backends; /* cfg->backends[0..file_backends) are the file's */
	/* A --tls-cert / --tls-key of the command line was applied: the
	 * file's are replaced, not added to (the pairs go by rank). */
	bool cli_certs, cli_keys;
	struct pg_conf_errs *errs;
};

/* cfg zeroed, then every default of the table applied. 0, or -1 (the
 * table is wrong). */
int pg_config_defaults(struct pg_config *cfg, char *err, size_t errlen);

/* The command line over cfg (config_flags.c): 0, 1 (--help or --version
 * printed to out), 2 (err says why: the first error). */
int pg_config_argv(struct pg_config *cfg, int argc, char **argv, FILE *out, struct pg_parse *ps,
                   char *err, size_t errlen);

/* Apply one value v of flag id (NULL for one without a value) to cfg. 0,
 * or -1 with err naming the flag ("--prefix-length: 100 is out of range
 * 1024-65536"). */
int pg_config_apply(struct pg_config *cfg, enum opt_id id, const char *v, struct pg_parse *ps,
                    char *err, size_t errlen);

/* Add err, found at line of ps's file, to its errors: a message naming a
 * flag names the directive ("--workers: ..." is "FILE:LINE: workers: ...");
 * line 0: a command line's error, as it is. */
void pg_parse_err(struct pg_parse *ps, unsigned line, const char *err);

/* The file's directives over cfg (config_file.c); errors added to ps. */
void pg_config_apply_file(struct pg_config *cfg, const struct pg_conf *conf, struct pg_parse *ps);

/* The option named name (a flag without "--"), or -1. cli: flags the file
 * does not take count too. */
int pg_opt_find(const char *name, size_t len, bool cli);

/* The TLS options once all are read (config_tls.c): the certificate,
 * key and CA files read and checked, errors at the lines at fault. */
void pg_config_check_tls(struct pg_config *cfg, struct pg_parse *ps);

/* One --pool value, NAME[:KEY=VALUE], into t (config_pools.c). 0, or -1
 * with err naming the flag. merge: a model, path or backend the pool
 * already has is no error (flags over a file). */
struct pg_pool_table;
int pg_pool_spec_parse(struct pg_pool_table *t, const char *v, bool merge, char *err,
                       size_t errlen);

/* Pool name (made, and declared, if new): its index, or -1 with err set
 * (not a pool name, too many pools). */
int pg_pool_declare(struct pg_pool_table *t, const char *name, size_t len, char *err,
                    size_t errlen);

/* A pool's keys (the --pool KEY=, a pool block's directives). */
enum pg_pool_key_kind {
	PG_PK_NONE = 0, /* not a key */
	PG_PK_LIST,     /* model, path, backend: one item a call */
	PG_PK_ONE,      /* routing: one value */
	PG_PK_FLAG,     /* flow-control: no value (on), or on / off */
};
/* key's kind, and *index (may be NULL) its index among the keys (-1: none). */
enum pg_pool_key_kind pg_pool_key_kind(const char *key, int *index);
/* The name of key i, NULL past the last. */
const char *pg_pool_key_name(size_t i);
/* Every key's name, ", " between, into buf (cap: PG_POOL_KEYS_LEN holds
 * them all). Returns buf. */
#define PG_POOL_KEYS_LEN 256
const char *pg_pool_keys(char *buf, size_t cap);

/* Set key of pool p to val (one item of a list key; NULL: a flag key's
 * "on"). Errors say "KEY<sep>VALUE: ..." (sep: '=' for --pool, ' ' for
 * the file). 0, or -1 with err set. */
int pg_pool_key(struct pg_pool_table *t, unsigned p, const char *key, const char *val, char sep,
                bool merge, char *err, size_t errlen);

/* The backends file's entries (pg_backends_parse_in, its pools checked):
 * one without a pool makes the default pool the catch-all. */
void pg_pools_file_catch_all(struct pg_pool_table *t, char *const *v, size_t n);

/* Once the command line is parsed: each pool's RoutingConfig (the
 * gateway's, then its own fields), the table's flags and catch-all, and
 * the checks that span pools (a backend in two pools; a pool no request
 * can reach), but of the pools in skip (1 << pool: whose errors are told
 * already). 0, or -1 with err set and *pool the pool at fault. */
int pg_pools_finish(struct pg_config *cfg, unsigned skip, unsigned *pool, char *err, size_t errlen);

/* --flow-tenant SRC and one --tenant NAME[:weight=W,priority=P] into fc
 * (config_flow.c). 0, or -1 with err naming the flag. merge: a tenant
 * the file gave (fc->from_file) is replaced. */
struct pg_flow_cfg;
struct pg_tenant_cfg;
int pg_flow_tenant_src_parse(struct pg_flow_cfg *fc, const char *v, char *err, size_t errlen);
int pg_tenant_spec_parse(struct pg_flow_cfg *fc, const char *v, bool merge, char *err,
                         size_t errlen);
/* Tenant name[0..len), new (weight 1, any priority): it, or NULL with err
 * set (not a tenant's name, given twice, too many). */
struct pg_tenant_cfg *pg_tenant_add(struct pg_flow_cfg *fc, const char *name, size_t len, char *err,
                                    size_t errlen);
/* Its key ("weight", "priority") = val[0..vlen). 0, or -1 with err set. */
int pg_tenant_key(struct pg_tenant_cfg *t, const char *key, size_t klen, const char *val,
                  size_t vlen, char *err, size_t errlen);

/* One model=, path= or backend= item it[0..len) into pool p of t
 * (config_pools.c). 0, or -1 with err naming the problem. */
int pg_pool_add_item(struct pg_pool_table *t, unsigned p, const char *key, const char *it,
                     size_t len, bool merge, char *err, size_t errlen);

/* Whether key is one of prefill/decode's (pd, prefill, decode,
 * pd-min-tokens, bootstrap-port), which config_pd.c takes. */
bool pg_pool_pd_key_is(const char *key);
/* Such a key of pool p = val (prefill, decode: one item or a
 * comma-separated list), as pg_pool_key: 0, or -1 with err set. Then,
 * once all are given, the checks that span a pool and its decode set (but
 * of the pools in skip): 0, or -1 with err set and *pool the pool at
 * fault. */
int pg_pool_pd_key(struct pg_pool_table *t, unsigned p, const char *key, const char *val, char sep,
                   bool merge, char *err, size_t errlen);
int pg_pools_pd_finish(struct pg_pool_table *t, unsigned skip, unsigned *pool, char *err,
                       size_t errlen);

#endif /* PG_CONFIG_INTERNAL_H */
