/* SPDX-License-Identifier: MIT */
/*
 * prefixgatectl: the operator's command line for a running prefixgate.
 *
 * Two sources of truth, in this order:
 *   - the BPF maps prefixgate pins under --pin-path (struct pg_backend,
 *     pg_ring, pg_state, pg_pool from include/prefixgate.h), opened
 *     read-only and mmapped, while a live gateway writes them: status works
 *     even when the admin API is unreachable;
 *   - the admin HTTP API (user/admin/admin.h) on --admin: changes (backends
 *     add/remove/drain), the /route dry run, and the fallback when no maps
 *     are pinned (--no-bpf, another pin path, not running) or they are
 *     stale.
 * A snapshot holds the same from either, so every view prints the same.
 *
 * Files: main.c (command line, help, dispatch), http.c (blocking HTTP/1.1
 * client), source.c (which source; names from the API), source_maps.c and
 * source_api.c (snapshots from each), view.c (status, list and top
 * output), view_pools.c (the pools' lines, pools output), cmds.c (status,
 * top, route), pools.c, backends.c (backends add/remove/drain), fleet.c.
 */
#ifndef PG_CTL_H
#define PG_CTL_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "lib/addr.h"
#include "prefixgate.h"

#define CTL_VERSION               "0.1.0"
#define CTL_PIN_PATH_DEFAULT      "/sys/fs/bpf/prefixgate"
#define CTL_ADMIN_DEFAULT         "127.0.0.1:9090"
#define CTL_TIMEOUT_DEFAULT       10.0                /* seconds, any command but drain */
#define CTL_DRAIN_TIMEOUT_DEFAULT 300.0               /* seconds, backends drain */
#define CTL_BODY_MAX              (16u * 1024 * 1024) /* a /route body: the API's limit */

/* Exit statuses. */
/* CTL_STALE: status read maps no live gateway writes (prefixgate.h). */
enum { CTL_OK = 0, CTL_ERR = 1, CTL_USAGE = 2, CTL_STALE = 3 };

enum ctl_source_kind {
	CTL_SRC_AUTO = 0, /* maps if a live gateway writes them, else the admin API */
	CTL_SRC_MAPS = 1,
	CTL_SRC_API = 2,
};

struct ctl_opts {
	const char *pin_path;
	const char *admin; /* as given, for messages */
	union pg_sockaddr admin_sa;
	bool json;
	enum ctl_source_kind source;
	double timeout;    /* seconds; <= 0: the command's default */
	double interval;   /* top */
	long count;        /* top: refreshes, 0 = until Ctrl-C */
	const char *path;  /* route --path */
	const char *key;   /* route --key */
	const char *pool;  /* backends add --pool */
	const char *token; /* admin API bearer token, or NULL */
	/* register, fleet */
	const char *etcd, *prefix, *address, *id, *etcd_user, *etcd_password_file;
	unsigned ttl;
	char token_buf[4097]; /* --admin-token-file's content */
};

/* ---- http.c ------------------------------------------------------------ */

struct ctl_http_resp {
	int status;
	char *body; /* NUL-terminated (the NUL is not counted in len); free() it */
	size_t len;
};

/*
 * One request to the admin API: connect to o->admin_sa, send method target
 * (already percent-encoded) with body[0..len) (content type ctype, if body),
 * read the whole response (Content-Length, chunked or until close), skipping
 * 1xx. Every step is bounded by timeout_s seconds (connect with poll(), the
 * rest with SO_SNDTIMEO/SO_RCVTIMEO). 0 with *r filled (any status), or -1
 * with err naming what failed ("admin API 127.0.0.1:9090: connect: ...").
 */
/* ---- pools.c ------------------------------------------------------------- */
/* prefixgatectl pools: the model pools (maps, else GET /pools), as status
 * reads them. */
int ctl_cmd_pools(const struct ctl_opts *o);

/* ---- config.c ------------------------------------------------------------ */
/* prefixgatectl config: GET /config, the configuration as a file. */
int ctl_cmd_config(const struct ctl_opts *o);

int ctl_http(const struct ctl_opts *o, const char *method, const char *target, const char *ctype,
             const char *body, size_t len, double timeout_s, struct ctl_http_resp *r, char *err,
             size_t errlen);
void ctl_http_resp_free(struct ctl_http_resp *r);

/* The bound of one admin request: --timeout, else dflt (CTL_TIMEOUT_DEFAULT
 * for every command but drain). */
static inline double ctl_timeout(const struct ctl_opts *o, double dflt)
{
	return o->timeout > 0 ? o->timeout : dflt;
}

/* Append s percent-encoded (RFC 3986 unreserved kept) to out[0..cap) at *n;
 * false if it does not fit. */
bool ctl_url_encode(const char *s, char *out, size_t cap, size_t *n);

/* The "error" member of a JSON error reply, or the body's first line, into
 * buf (printable ASCII only). */
const char *ctl_api_error(const struct ctl_http_resp *r, char *buf, size_t cap);

struct pg_json;

/* The string member name of obj into buf (cap bytes, NUL-terminated; ""
 * if absent or not a string). */
const char *ctl_json_get_str(const struct pg_json *js, uint32_t obj, const char *name, char *buf,
                             size_t cap);

/* ---- source.c ------------------------------------------------------------ */

struct ctl_backend {
	unsigned id;                   /* 0: a DNS name that stands for no address */
	char addr[PG_ADDR_STRLEN];     /* "" for such a name */
	char name[PG_HOSTPORT_STRLEN]; /* the DNS name it came from ("" none; admin API) */
	/* pg_backend_health's word (up, down, unhealthy, draining), the same
	 * from either source; a name's "resolving" or "unresolved" */
	char health[16];
	bool healthy;  /* not down nor unhealthy (pg_backend_healthy), draining or not */
	unsigned pool; /* index in the snapshot's pools */
	int32_t in_flight;
	uint32_t epoch;
	uint64_t failures;
	uint64_t requests[PG_DEC_MAX];
	int64_t ring_slots; /* slots of its pool's ring whose first candidate it is; -1 unknown */
};

/* A model pool (the default pool alone without --pool). */
struct ctl_pool {
	char name[PG_POOL_NAME_MAX];
	bool catch_all;
	uint32_t nmodels, npaths;
	/* the first models and paths that fit, comma-separated, as the pg_pools
	 * map holds them (pg_pool_list_join), whichever source read them */
	char models[248], paths[128];
	uint32_t strategy, prefix_length, concurrency_threshold, new_choices;
	uint64_t ring_generation;
	double remapped;  /* share of keys moved by its ring's last change, 0..1 */
	uint32_t members; /* members taking requests (pg_state.nbackends) */
};

/* A consistent view of the gateway at one instant. */
struct ctl_snapshot {
	enum ctl_source_kind source; /* MAPS or API */
	double taken;                /* CLOCK_MONOTONIC seconds */
	bool have_flow;              /* flow control's queue known (flow, flow_queue_ms) */
	uint32_t flow_queue_ms;      /* the default pool's InstanceQueueMs (0: off) */
	struct pg_flow_stats flow;   /* summed over the pools */
	bool stale;                  /* maps: no live gateway writes them (stale_why) */
	char stale_why[160];
	unsigned npools;
	struct ctl_pool pool[PG_MAX_POOLS];
	size_t n;
	struct ctl_backend b[PG_MAX_BACKENDS];
};

/* Whether the gateway has model pools (more than the default pool, or a
 * default pool serving models or paths): the views then show them. */
static inline bool ctl_has_pools(const struct ctl_snapshot *s)
{
	return s->npools > 1 || s->pool[0].nmodels || s->pool[0].npaths;
}

static inline bool ctl_draining(const struct ctl_backend *b)
{
	return !strcmp(b->health, "draining");
}

/* Up: takes requests (not draining, down, unhealthy, nor a bare name). */
static inline bool ctl_up(const struct ctl_backend *b)
{
	return !strcmp(b->health, "up");
}

struct ctl_maps;

/* Where snapshots come from: opened once, read many times (top). */
struct ctl_source {
	enum ctl_source_kind kind;
	struct ctl_maps *maps; /* kind MAPS */
	const struct ctl_opts *o;
	bool stale; /* the maps are read though no live gateway writes them */
	char stale_why[160];
};

/*
 * Open o->source: AUTO tries the maps and, if they are not pinned, not
 * readable or stale (no live gateway writes them, prefixgate.h), says why
 * on stderr and uses the admin API (checked with GET /health); stale maps
 * are still read (s->stale) when the API does not answer either. -1 with
 * err naming every cause when nothing is usable.
 */
int ctl_source_open(struct ctl_source *s, const struct ctl_opts *o, char *err, size_t errlen);
/* The admin API side (source_api.c): a snapshot from GET /pools and GET
 * /backends; whether GET /health answers at all (503, no healthy backend,
 * still means a gateway): 0 or -1 with err. */
int ctl_api_snapshot(const struct ctl_opts *o, struct ctl_snapshot *s, char *err, size_t errlen);
int ctl_api_check(const struct ctl_opts *o, char *err, size_t errlen);
/* The maps side (source_maps.c): open the maps pinned at pin, one
 * snapshot of them (names and health as the maps know them: no DNS
 * names), whether a live gateway writes them (else why not), close. */
int ctl_maps_open(struct ctl_maps **m, const char *pin, char *err, size_t errlen);
int ctl_maps_snapshot(struct ctl_maps *m, struct ctl_snapshot *s, char *err, size_t errlen);
bool ctl_maps_live(struct ctl_maps *m, char *why, size_t len);
void ctl_maps_close(struct ctl_maps *m);
/* The kernel id of the open pg_state (it identifies the gateway run) and
 * the pin path. */
uint32_t ctl_maps_state_id(const struct ctl_maps *m);
const char *ctl_maps_pin(const struct ctl_maps *m);
void ctl_source_close(struct ctl_source *s);
/* Maps: fails if the gateway whose maps are open stopped or restarted
 * (what is mapped would be frozen or stale). API: always 0. */
int ctl_source_check(struct ctl_source *s, char *err, size_t errlen);
/* Fill *snap (large: allocate it) from s. 0, or -1 with err set. */
int ctl_snapshot_take(struct ctl_source *s, struct ctl_snapshot *snap, char *err, size_t errlen);

/* The pools of a GET /pools reply into snap->pool. 0, or -1 with err set.
 * Pure: unit-testable. */
int ctl_parse_pools_json(const char *body, size_t len, struct ctl_snapshot *snap, char *err,
                         size_t errlen);
/* The backends of a GET /backends reply into snap->b (their pool by name
 * among snap->pool; ring_slots -1 when the reply has none). 0, or -1 with
 * err set. Pure: unit-testable. */
int ctl_parse_backends_json(const char *body, size_t len, struct ctl_snapshot *snap, char *err,
                            size_t errlen);
/* The DNS names of a GET /backends reply (snap2, parsed) onto the members
 * of snap with the same address, and its names standing for no address
 * appended: the maps do not know them. */
void ctl_merge_names(struct ctl_snapshot *snap, const struct ctl_snapshot *snap2);

double ctl_now(void);

/* ---- view.c, view_pools.c ------------------------------------------------ */

/* status and backends list (backends_only: just the table); tls: GET
 * /tls's answer for status's listeners and certificates (NULL: none). */
void ctl_view_status(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s,
                     bool backends_only, const struct ctl_http_resp *tls);
/* status's TLS part (view_tls.c) from GET /tls's answer (NULL, or not 200:
 * nothing): the listeners, the certificates with their names and expiry,
 * the backends' CA; --json: ,"tls":DOCUMENT inside status's object. */
void ctl_view_tls(FILE *out, const struct ctl_opts *o, const struct ctl_http_resp *tls);
/* One refresh of top: rates from the counters' change between prev and cur. */
void ctl_view_top(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *prev,
                  const struct ctl_snapshot *cur);
/* pools: the model pools, a table or a JSON array. */
void ctl_view_pools(FILE *out, const struct ctl_opts *o, const struct ctl_snapshot *s);
/* The header lines of status and top: the default pool's "routing" and
 * "ring" lines without pools, else a "pool" line each. */
void ctl_view_pool_lines(FILE *out, const struct ctl_snapshot *s);
/* Pool p as a JSON object (the elements of pools --json and of status
 * --json's "pools"); its RoutingConfig alone. */
void ctl_json_pool(FILE *out, const struct ctl_snapshot *s, unsigned p);
void ctl_json_routing(FILE *out, const struct ctl_pool *p);
/* The backend's health word ("up", "down", "unhealthy", "draining", or a
 * name's "resolving" / "unresolved"). */
const char *ctl_health(const struct ctl_backend *b);
uint64_t ctl_requests_total(const struct ctl_backend *b);
/* s[0..n) as a JSON string literal. */
void ctl_json_str(FILE *out, const char *s, size_t n);

/* ---- commands (cmds.c, main.c) --------------------------------------------- */

int ctl_cmd_status(const struct ctl_opts *o, bool backends_only);
int ctl_cmd_top(const struct ctl_opts *o);
int ctl_cmd_route(const struct ctl_opts *o, const char *file);
int ctl_cmd_backends_add(const struct ctl_opts *o, const char *addr);
/* wait: drain (poll until removed, bounded by the timeout), else remove. */
int ctl_cmd_backends_remove(const struct ctl_opts *o, const char *addr, bool wait);

/* fleet.c: register (runs until SIGTERM/SIGINT) and fleet. */
int ctl_cmd_register(const struct ctl_opts *o);
int ctl_cmd_fleet(const struct ctl_opts *o);

/* "prefixgatectl: " + message on stderr. */
void ctl_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- view_flow.c: flow control's queue (status, top) --------------------- */
void ctl_view_queue_line(FILE *out, const struct ctl_snapshot *s);
/* ,"queue":{...} (or null when unknown) */
void ctl_json_queue(FILE *out, const struct ctl_snapshot *s);

#endif /* PG_CTL_H */
