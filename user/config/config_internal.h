/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the configuration parsers (config.c, config_flags.c,
 * config_ops.c, routing_config.c).
 * Not part of the public API: include only from those files.
 */
#ifndef PG_CONFIG_INTERNAL_H
#define PG_CONFIG_INTERNAL_H

#include <stddef.h>

/*
 * printf-format one error message into err (errlen bytes, always
 * NUL-terminated, truncated if longer). errlen 0 means the caller does not
 * want the message: nothing is written and err may be NULL.
 */
__attribute__((format(printf, 3, 4))) void pg_errf(char *err, size_t errlen, const char *fmt, ...);

/* --admin-token: its length in characters (config_ops.c checks it). */
#define PG_ADMIN_TOKEN_MIN 16
#define PG_ADMIN_TOKEN_MAX 256

struct pg_config;
struct pg_hostport;

/* Append canonical h to the backend list *v (*n entries) unless already
 * there; *dup gets the index of the earlier copy. 0, -1 out of memory, 1
 * duplicate, 2 too many (PG_MAX_BACKENDS - 1 already). */
int pg_backend_add(char ***v, size_t *n, const struct pg_hostport *h, size_t *dup);

/*
 * Checks of the operations flags once the command line is parsed
 * (config_ops.c): read --admin-token-file into cfg->admin_token (surrounding
 * whitespace stripped); the token must be PG_ADMIN_TOKEN_MIN-MAX visible ASCII characters
 * without spaces; a non-loopback --admin needs a token. 0, or -1 with err
 * naming the flag.
 */
int pg_config_check_ops(struct pg_config *cfg, char *err, size_t errlen);

/* One --pool value, NAME[:KEY=VALUE], into t (config_pools.c). 0, or -1
 * with err naming the flag. */
struct pg_pool_table;
int pg_pool_spec_parse(struct pg_pool_table *t, const char *v, char *err, size_t errlen);

/* The backends file's entries (pg_backends_parse_in, its pools checked):
 * one without a pool makes the default pool the catch-all. */
void pg_pools_file_catch_all(struct pg_pool_table *t, char *const *v, size_t n);

/* Once the command line is parsed: each pool's RoutingConfig (the
 * gateway's, then its own fields), the table's flags and catch-all, and
 * the checks that span pools (a backend in two pools; a pool no request
 * can reach). 0, or -1 with err set. */
int pg_pools_finish(struct pg_config *cfg, char *err, size_t errlen);

/* --flow-tenant SRC and one --tenant NAME[:weight=W,priority=P] into fc
 * (config_flow.c). 0, or -1 with err
 * naming the flag. */
struct pg_flow_cfg;
int pg_flow_tenant_src_parse(struct pg_flow_cfg *fc, const char *v, char *err, size_t errlen);
int pg_tenant_spec_parse(struct pg_flow_cfg *fc, const char *v, char *err, size_t errlen);

/* One model=, path= or backend= item it[0..len) into pool pc of t
 * (config_pools.c). 0, or -1 with err naming the problem. */
struct pg_pool_cfg;
int pg_pool_add_item(struct pg_pool_table *t, struct pg_pool_cfg *pc, const char *key,
                     const char *it, size_t len, char *err, size_t errlen);

/* A prefill/decode key of pool p (config_pd.c): 0 taken, 1 not one of
 * them, -1 an error in err. Then, once all are given, the checks that
 * span a pool and its decode set: 0, or -1 with err. */
int pg_pool_pd_key(struct pg_pool_table *t, unsigned p, const char *key, const char *val, char *err,
                   size_t errlen);
int pg_pools_pd_finish(struct pg_pool_table *t, char *err, size_t errlen);

#endif /* PG_CONFIG_INTERNAL_H */
