/* SPDX-License-Identifier: MIT */
/*
 * etcd v3 through its JSON gateway (grpc-gateway, etcd 3.4+), pure: request
 * bodies, response and watch-event parsing, and the prefix's key-value view
 * with the decisions taken on it (apply a watch response, re-list, what the
 * gateway should route on). No I/O: fleet/etcd_client.c sends the bodies.
 *
 * The gateway's JSON conventions: keys and values are base64; every int64
 * comes back as a JSON string ("revision":"3"), which the parser also
 * accepts as a number. A watch answers with a stream of JSON objects, one a
 * line, each wrapped in "result".
 *
 * Key layout under the prefix P (see doc/fleets.md "Running a fleet"; the
 * quotas' are read by state/quotas.c):
 *   P/config/routing   RoutingConfig JSON (as PUT /routing takes)
 *   P/config/quota     every tenant's quota: {"rpm":N,"tpm":N} (lib/quota.h)
 *   P/tenants/<name>   a tenant's own quota, the same JSON
 *   P/backends/<id>    {"address":"host:port","state":"active"|"draining",
 *                      "pool":"NAME"} (state and pool optional)
 *   P/gateways/<id>    lease-bound: {"address","version","revision","digest"}
 */
#ifndef PG_ETCD_H
#define PG_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/buf.h"

#define PG_ETCD_ROUTING_KEY  "config/routing"
#define PG_ETCD_QUOTA_KEY    "config/quota"
#define PG_ETCD_TENANTS_DIR  "tenants/"
#define PG_ETCD_BACKENDS_DIR "backends/"
#define PG_ETCD_GATEWAYS_DIR "gateways/"
/* Watch cancel reasons and range errors carry grpc codes; 11 is
 * OUT_OF_RANGE (a compacted revision), 16 UNAUTHENTICATED. */
#define PG_ETCD_CODE_COMPACTED 11
#define PG_ETCD_CODE_UNAUTH    16

/* Base64 (RFC 4648, padded) of src[0..len) appended to o. */
void pg_b64_encode(struct pg_buf *o, const void *src, size_t len);
/* Decode src[0..len) into out (room for len / 4 * 3 bytes); *outlen gets
 * the byte count. -1 on a character outside the alphabet or bad padding. */
int pg_b64_decode(const char *src, size_t len, char *out, size_t *outlen);

/* Request bodies (appended to o). A prefix range covers every key starting
 * with key: range_end is key with its last byte + 1. */
void pg_etcd_body_range(struct pg_buf *o, const char *key, bool prefix, bool serializable,
                        bool count_only);
/* The newest key under prefix by mod_revision, key only: what the watch
 * must have delivered by now. */
void pg_etcd_body_range_newest(struct pg_buf *o, const char *prefix);
void pg_etcd_body_put(struct pg_buf *o, const char *key, const char *val, size_t vlen,
                      int64_t lease);
void pg_etcd_body_delete(struct pg_buf *o, const char *key);
void pg_etcd_body_watch(struct pg_buf *o, const char *prefix, int64_t start_revision);
void pg_etcd_body_lease_grant(struct pg_buf *o, unsigned ttl_s);
/* keepalive and revoke take {"ID": id}: one body for both. */
void pg_etcd_body_lease_id(struct pg_buf *o, int64_t id);
void pg_etcd_body_auth(struct pg_buf *o, const char *user, const char *password);

/* One key (or watch event), decoded. */
struct pg_etcd_kv {
	char *key, *val; /* NUL-terminated copies (val "" for a DELETE) */
	size_t vlen;
	int64_t mod_revision;
	bool deleted; /* watch: a DELETE event (a lease expiry is one too) */
};

/* A parsed response of any call; fields absent from it are 0 / NULL. */
struct pg_etcd_resp {
	int64_t revision;         /* header.revision */
	bool created, canceled;   /* watch */
	int64_t compact_revision; /* watch cancelled for compaction: > 0 */
	int64_t lease_id, ttl;    /* lease grant / keepalive */
	int64_t count;            /* range */
	char *token;              /* auth/authenticate */
	int code;                 /* error: grpc code (0: none) */
	char error[160];          /* error text, or the cancel reason */
	struct pg_etcd_kv *kv;    /* range: kvs; watch: events, in order */
	size_t nkv;
};

/* Parse one JSON response (or one watch line). 0, or -1 with err set when
 * it is not JSON of the expected shape (an error answer parses fine: code
 * and error are set). *r must be zeroed or freed before. */
int pg_etcd_parse(const char *json, size_t len, struct pg_etcd_resp *r, char *err, size_t errlen);
void pg_etcd_resp_free(struct pg_etcd_resp *r);

/*
 * The keys under the prefix, as last read: key suffix (without the prefix)
 * -> value, sorted by key, at revision (the store's revision the view
 * reflects). The gateways' records (gateways/) are left out: they route
 * nothing. Zeroed: empty, revision 0.
 */
struct pg_etcd_view {
	int64_t revision;
	size_t n, cap;
	struct pg_etcd_kv *e; /* key is the suffix */
};

void pg_etcd_view_free(struct pg_etcd_view *v);
/* Set (val non-NULL) or delete suffix key. 0, or -1 out of memory. */
int pg_etcd_view_set(struct pg_etcd_view *v, const char *key, const char *val, size_t vlen);
/* The value of suffix key, or NULL. */
const struct pg_etcd_kv *pg_etcd_view_get(const struct pg_etcd_view *v, const char *key);

/* A range response for prefix as a new view (keys outside the prefix are
 * ignored). 0, or -1 with err set (an error answer: nothing is replaced). */
int pg_etcd_view_from_range(struct pg_etcd_view *out, const char *prefix,
                            const struct pg_etcd_resp *r, char *err, size_t errlen);

enum pg_etcd_step {
	PG_ETCD_NOTHING = 0, /* nothing that changes the view (created, progress, replay) */
	PG_ETCD_CHANGED = 1, /* events applied: the view changed, rebuild */
	PG_ETCD_RELIST = 2,  /* cancelled (compaction), or the revision went back: re-list */
};

/* Apply one watch response for prefix to v. Events at or below v->revision
 * are replays and skipped; a header revision below it means the store went
 * back (a restore from a snapshot); cancel means compaction (or another
 * reason): the watch is gone, and the view may have missed events. On
 * RELIST v is left as it was. -1 is out of memory (v may be partly
 * updated: re-list). */
int pg_etcd_view_step(struct pg_etcd_view *v, const char *prefix, const struct pg_etcd_resp *r);

/*
 * What the gateway routes on, derived from a view: the addresses of the
 * backends/ entries whose state is active (or absent), in key order, as a
 * backends file lists them ("HOST:PORT", "HOST:PORT pool=NAME" for a pool
 * other than default), malloc'ed strings (free with pg_etcd_list_free);
 * entries that do not parse are skipped and counted in *bad.
 */
int pg_etcd_view_backends(const struct pg_etcd_view *v, char ***list, size_t *n, size_t *bad);
void pg_etcd_list_free(char **list, size_t n);

/* A backend's value: {"address":"host:port","state":"active"|"draining",
 * "pool":"NAME"} (state optional: active; pool optional: default). addr
 * gets the address (cap bytes), pool (PG_ETCD_POOL_MAX bytes; may be NULL)
 * the pool's name, "" for none. 0, or -1 with err set. */
#define PG_ETCD_POOL_MAX 32
int pg_etcd_backend_parse(const char *val, size_t len, char *addr, size_t cap, char *pool,
                          bool *active, char *err, size_t errlen);
/* The value written for a backend (pool: NULL or "" for none). */
void pg_etcd_backend_json(struct pg_buf *o, const char *addr, const char *pool, bool active);

/* A gateway's record (P/gateways/<id>). */
struct pg_etcd_gateway {
	char id[128], address[64], version[32];
	int64_t revision;
	uint64_t digest;
	unsigned backends;
};
void pg_etcd_gateway_json(struct pg_buf *o, const struct pg_etcd_gateway *g);
int pg_etcd_gateway_parse(const char *val, size_t len, struct pg_etcd_gateway *g, char *err,
                          size_t errlen);

/* The state file: the view's entries other than gateways/, and its
 * revision, as JSON; load replaces *v (untouched on error). */
void pg_etcd_view_dump(const struct pg_etcd_view *v, struct pg_buf *o);
int pg_etcd_view_load(struct pg_etcd_view *v, const char *text, size_t len, char *err,
                      size_t errlen);

/* "http://host:port" (or host:port) -> "host:port" into hp (cap bytes). 0,
 * or -1 with err set (https and paths are refused). */
int pg_etcd_endpoint_parse(const char *url, char *hp, size_t cap, char *err, size_t errlen);

#endif /* PG_ETCD_H */
