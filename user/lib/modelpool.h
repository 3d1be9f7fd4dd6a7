/* SPDX-License-Identifier: MIT */
/*
 * Model pools, pure: the pool table as configured, and which pool a request
 * goes to. Each pool has its own members, ring and RoutingConfig (the way
 * SageMaker has one RoutingConfig per production variant); pool 0 is
 * "default", and a gateway configured without pools has it alone.
 *
 * Which pool serves a request:
 *   1. a pool whose path= prefix matches the request path (the longest
 *      such prefix; for APIs that carry no model, e.g. /invocations);
 *   2. else, for POST requests under /v1/ while some pool lists models: the
 *      pool listing the body's top-level "model" string (exact, after JSON
 *      unescaping);
 *   3. else the default pool, if it is the catch-all (pg_pool_table);
 *   4. else none: the gateway answers 404 (an unknown model: the OpenAI
 *      model_not_found error).
 * No allocation, no I/O: this runs on every request.
 */
#ifndef PG_MODELPOOL_H
#define PG_MODELPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "router/strategy.h"
#include "prefixgate.h"

#define PG_POOL_DEFAULT    0   /* index of the default pool */
#define PG_POOL_MODELS_MAX 64  /* model names per pool */
#define PG_POOL_PATHS_MAX  8   /* path prefixes per pool */
#define PG_MODEL_NAME_MAX  256 /* longer model names match no pool */

/* pg_pool_cfg.route_set: the RoutingConfig fields a pool sets itself (the
 * others follow the gateway's --strategy/--prefix-length/... and
 * --routing-config). */
#define PG_POOL_SET_STRATEGY  0x1
#define PG_POOL_SET_PREFIX    0x2
#define PG_POOL_SET_THRESHOLD 0x4
#define PG_POOL_SET_FILE      0x10 /* routing-config=FILE: all of them */
#define PG_POOL_SET_CHOICES   0x20
/* the gateway's flags only: --flow-instance-queue-ms, --flow-deadline-ms,
 * and --flow-control (InstanceQueueMs's default where none is set) */
#define PG_POOL_SET_FLOW_QUEUE    0x40
#define PG_POOL_SET_FLOW_DEADLINE 0x80
#define PG_POOL_SET_FLOW_ON       0x100

struct pg_pool_cfg {
	char name[PG_POOL_NAME_MAX];
	char **models; /* owned */
	size_t nmodels;
	char **paths; /* owned, each starts with '/' */
	size_t npaths;
	char **backends; /* owned, canonical addresses (config.h) */
	size_t nbackends;
	struct pg_route_cfg route; /* its RoutingConfig (complete once parsed) */
	unsigned route_set;        /* PG_POOL_SET_* */
	struct pg_route_cfg own;   /* the values of the fields it sets */
	char *routing_file;        /* routing-config=FILE (read again at each reload), owned */
	bool declared;             /* named by a --pool flag */
	/* Prefill/decode disaggregation (lib/pd.h): the protocol (its own
	 * members are then the prefill instances) and the pool of its decode
	 * instances (0: none; never the default pool); or, for such a decode
	 * set (decode_set), the pool it serves (prefill), which alone leads
	 * requests to it. Prompts under pd_min_tokens go to the decode instance
	 * alone; SGLang: the prefill members' bootstrap port, and the addresses
	 * given another one. */
	uint8_t pd; /* enum pg_pd */
	unsigned decode;
	bool decode_set;
	unsigned prefill;
	uint32_t pd_min_tokens;
	bool pd_min_set; /* pd_min_tokens given (else PG_PD_MIN_TOKENS_DEFAULT) */
	uint16_t bootstrap_port;
	struct pg_bootstrap {
		char *addr; /* canonical (config.h) */
		uint16_t port;
	} * bootstraps;
	size_t nbootstraps;
};

/*
 * The pools. n >= 1; pool[0] is "default". catch_all: the default pool takes
 * every request no other pool claims (rule 3 above) — true when no pool is
 * configured, when --pool default... declares it, or when it was given
 * backends at start-up (plain --backend or --backends-file lines without a
 * pool); otherwise unclaimed requests get 404.
 */
struct pg_pool_table {
	struct pg_pool_cfg pool[PG_MAX_POOLS];
	unsigned n;
	bool catch_all;
	bool by_model; /* some pool lists models: read the model of /v1/ bodies */
	bool by_path;  /* some pool has a path prefix */
};

/* What pg_pool_by_path/pg_pool_select return besides a pool index. */
#define PG_POOL_BY_MODEL (-1) /* decided by the body's model */
#define PG_POOL_UNKNOWN  (-2) /* no pool serves it: 404 */

/* Whether name[0..len) is a pool name: 1 to PG_POOL_NAME_MAX - 1 of
 * A-Z a-z 0-9 _ . - */
bool pg_pool_name_ok(const char *name, size_t len);

/* Whether requests can reach pool p of t: it lists models or paths, or it
 * is the default pool and the catch-all (an empty table: the default pool
 * alone, which takes everything). */
bool pg_pool_reachable(const struct pg_pool_table *t, unsigned p);

/* The names of t's pools, "a, b, c" (with_default: from the default pool
 * on), into buf; "default" / "(none)" when there are none. Returns buf. */
const char *pg_pool_table_names(const struct pg_pool_table *t, bool with_default, char *buf,
                                size_t cap);

/* The first items of v[0..n) that fit in buf[0..cap), comma-separated and
 * NUL-terminated (as the pg_pools map holds a pool's models and paths;
 * prefixgatectl shows them alike from the admin API). Returns how many. */
size_t pg_pool_list_join(char *const *v, size_t n, char *buf, size_t cap);

/* Pool of name[0..len), or -1. */
int pg_pool_find(const struct pg_pool_table *t, const char *name, size_t len);

/* Pool listing model[0..len), or -1. */
int pg_pool_by_model_name(const struct pg_pool_table *t, const char *model, size_t len);

/*
 * Rule 1, from the request head: the pool whose path prefix is the longest
 * matching one (a prefix matches the path itself, or the path followed by
 * '/' or anything when the prefix ends with '/'); else PG_POOL_BY_MODEL
 * for a POST under /v1/ while t->by_model; else the catch-all or
 * PG_POOL_UNKNOWN.
 */
int pg_pool_by_path(const struct pg_pool_table *t, bool post, const char *path, size_t len);

/*
 * The top-level string member "model" of the JSON object body[0..len),
 * unescaped into buf (PG_MODEL_NAME_MAX bytes): its length, or -1 when the
 * body has none (not an object, no such member, not a string, longer than
 * the buffer, or malformed before it is found). When the member appears
 * more than once the last counts, as in the JSON parser (json.h). The body
 * may be a prefix of the whole one (a large body): what it holds is used.
 * One pass, no allocation.
 */
int pg_json_model(const char *body, size_t len, char *buf);

/* Rules 2-4 for a body: the pool of its model, else the catch-all, else
 * PG_POOL_UNKNOWN. model/mlen: what pg_json_model found (mlen < 0: none). */
int pg_pool_by_model(const struct pg_pool_table *t, const char *model, int mlen);

/* Free what the table owns; it is then empty. */
void pg_pool_table_free(struct pg_pool_table *t);

#endif /* PG_MODELPOOL_H */
