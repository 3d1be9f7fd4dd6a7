/* SPDX-License-Identifier: MIT */
/*
 * Configuration: the command line over the configuration file (-c FILE),
 * SageMaker RoutingConfig JSON, listen / backend addresses and the backends
 * file. Pure parsing; the only I/O is printing --help / --version and
 * errors to the FILE * given and pg_read_file().
 *
 * Addresses are parsed by lib/addr.h and never resolved here, so parsing
 * cannot block: a backend given by DNS name stays a name ("NAME:PORT") until
 * the control thread resolves it.
 */
#ifndef PG_CONFIG_H
#define PG_CONFIG_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "lib/addr.h"
#include "router/strategy.h"
#include "lib/flow.h"
#include "lib/quota.h"
#include "lib/fleet_msg.h" /* PG_FLEET_ID_MAX */
#include "lib/names.h"     /* strategy names */
#include "lib/modelpool.h"
#include "prefixgate.h"

#define PG_VERSION            "0.1.0"
#define PG_LISTEN_DEFAULT     "127.0.0.1:8080"
#define PG_ADMIN_DEFAULT      "127.0.0.1:9090"
#define PG_PIN_PATH_DEFAULT   "/sys/fs/bpf/prefixgate"
#define PG_WORKERS_MAX        64
#define PG_RESOLVE_MS_DEFAULT 5000          /* --resolve-interval: Envoy's dns_refresh_rate */
#define PG_CONFIG_FILE_MAX    (1024 * 1024) /* larger config files are refused */
#define PG_SCRAPE_MIN_MS      50            /* --metrics-scrape-interval's least */
/* The configuration file read when no -c FILE is given, if it exists. */
#define PG_CONF_DEFAULT "/etc/prefixgate/prefixgate.conf"
/* --max-body-size default: 64 MiB, past any prompt a context window holds
 * (a 1M-token prompt is ~4 MiB of text), short of a memory-filling upload. */
#define PG_MAX_BODY_DEFAULT 67108864
/* --admin-token: its length in characters (config_ops.c checks it, config_opts.c
 * states it in --help). */
#define PG_ADMIN_TOKEN_MIN 16
#define PG_ADMIN_TOKEN_MAX 256

enum pg_data_path {
	PG_DATA_AUTO = 0,    /* best the kernel and privileges allow */
	PG_DATA_COPY = 1,    /* responses copied through userspace */
	PG_DATA_SOCKMAP = 2, /* sk_skb verdict redirect backend -> client */
	PG_DATA_SOCKMSG = 3, /* sk_msg on same-host backends' sockets */
};

/* Active health checks (health.h). */
struct pg_health_cfg {
	const char *path;     /* GET this on each backend; NULL: checks off */
	unsigned interval_ms; /* between rounds */
	unsigned timeout_ms;  /* per check */
	unsigned rise, fall;  /* results in a row that change a backend's state */
};

/* Client and backend timeouts, milliseconds. */
struct pg_timeouts {
	unsigned header_ms;     /* first byte of a request head -> head complete */
	unsigned body_ms;       /* between request body bytes */
	unsigned idle_ms;       /* keep-alive client with no request */
	unsigned connect_ms;    /* backend connect */
	unsigned first_byte_ms; /* request dispatched -> first response byte */
};

/* OpenTelemetry traces (sys/otel.h); strings point into argv or the file. */
struct pg_otlp_cfg {
	const char *endpoint; /* --otlp-endpoint URL; NULL: off */
	const char *sample;   /* --otlp-sample as given */
	uint64_t threshold;   /* ... as lib/trace.h's pg_trace_sample takes it */
	unsigned timeout_ms;  /* --otlp-timeout: each POST to the collector */
};

/* etcd as the source of membership and routing config (fleet/etcd.h). */
#define PG_ETCD_PREFIX_DEFAULT "/prefixgate"
struct pg_etcd_cfg {
	const char *endpoints; /* --etcd-endpoints (points into argv); NULL: off */
	const char *prefix;    /* keys under it (no trailing '/') */
	unsigned timeout_ms;
	const char *user, *password_file, *state_file; /* NULL: none */
};

/* Flow control's gateway-wide settings (lib/flow.h; doc/routing.md "Flow
 * control"); a pool's own are FlowControlConfig in its struct pg_route_cfg. */
enum pg_tenant_src {
	PG_TENANT_BEARER = 0, /* Authorization: Bearer TOKEN, hashed (the default) */
	PG_TENANT_HEADER = 1, /* a header's value (--flow-tenant header:NAME) */
	PG_TENANT_USER = 2,   /* the JSON body's "user" */
	PG_TENANT_CERT = 3,   /* the TLS client certificate's subject (--tls-client-ca) */
};
/* --tenant NAME:weight=W,priority=P,rpm=N,tpm=N, as given. */
struct pg_tenant_cfg {
	char name[PG_FLOW_LABEL_MAX + 1]; /* its label (lib/flow.h pg_flow_label) */
	uint32_t weight;                  /* 1 unless given */
	int prio;                         /* enum pg_prio it is held to; -1: any the request asks */
	struct pg_quota_lim quota;        /* its own limits (lib/quota.h; 0: none) */
	uint8_t quota_set;                /* bit k: quota.max[k] given (else --quota's) */
};
#define PG_TENANTS_CFG_MAX   64
#define PG_TENANT_WEIGHT_MAX 1000
struct pg_flow_cfg {
	bool on; /* --flow-control: InstanceQueueMs's default where none is set */
	/* tenants[0..from_file) came from the configuration file: a --tenant
	 * of the same name replaces one, and a reload compares them */
	size_t from_file;
	unsigned max_queued; /* requests waiting at most, the whole gateway */
	unsigned max_bytes;  /* bytes they hold at most */
	unsigned starve_ms;  /* a lower class's request waits no longer behind higher ones */
	enum pg_tenant_src tenant_src;
	const char *tenant_header; /* PG_TENANT_HEADER: its name (argv) */
	struct pg_tenant_cfg tenants[PG_TENANTS_CFG_MAX];
	size_t ntenants;
	struct pg_quota_lim quota; /* --quota: every tenant's without its own (0: none) */
};

/* TLS: the HTTPS listener, its certificates, and https:// backends
 * (doc/security.md). Strings point into argv or the file's directives. */
#define PG_TLS_CERTS_MAX 64 /* --tls-cert: certificates for SNI, at most */
/* TLS 1.2's ciphers by default: forward secret, AEAD only (Mozilla's
 * "intermediate" list without DHE); TLS 1.3's suites, AES-128 first (the
 * fastest with AES-NI, as strong as the handshake). pg_tls_ciphers() and
 * pg_tls_suites() give the ones in use. */
#define PG_TLS_CIPHERS_DEFAULT                                                                     \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:" \
	"ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define PG_TLS_SUITES_DEFAULT                                                                      \
	"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
enum pg_tls_version { PG_TLS_1_2 = 0, PG_TLS_1_3 = 1 };
struct pg_tls_cfg {
	bool on; /* --tls-listen given */
	union pg_sockaddr listen;
	/* The certificate chains (the first: the default), and the keys: the
	 * i-th key is the i-th certificate's; a certificate without one holds
	 * its key in its own file. */
	const char *certs[PG_TLS_CERTS_MAX], *keys[PG_TLS_CERTS_MAX];
	size_t ncerts, nkeys;
	const char
	    *ciphers;       /* TLS 1.2 cipher list (OpenSSL syntax); NULL: PG_TLS_CIPHERS_DEFAULT */
	const char *suites; /* TLS 1.3 cipher suites; NULL: PG_TLS_SUITES_DEFAULT */
	enum pg_tls_version min_version;
	const char *client_ca; /* mTLS: clients must show a certificate this CA issued; NULL: off */
	unsigned handshake_ms; /* a client's handshake not done within MS: closed */
	unsigned max_handshakes; /* handshakes in progress per worker, at most */
	unsigned ticket_s;       /* session ticket keys rotated every S; 0: no tickets */
	/* https:// backends: the CA their certificates are checked against
	 * (NULL: the system's store), and the gateway's own certificate */
	const char *backend_ca, *backend_cert, *backend_key;
};

/*
 * What a configuration needs of the system (pg_config.needs), checked before
 * anything starts and by --check (sys/preflight.h): the files it reads and
 * writes, the user it becomes, the addresses it binds.
 */
enum pg_need_kind {
	PG_NEED_USER,   /* --user NAME: becomes that user once started */
	PG_NEED_BIND,   /* --listen, --admin, --tls-listen: bound at start-up */
	PG_NEED_APPEND, /* --access-log: opened for appending at start-up, before --user */
	PG_NEED_READ,   /* read at start-up only (--etcd-password-file) */
	PG_NEED_RELOAD, /* read at start-up and again at each reload, as --user's user */
	PG_NEED_STATE,  /* a file written at run time, as --user's user (--etcd-state-file;
	                 * one at most: preflight.c keeps one directory) */
};
struct pg_need {
	enum pg_need_kind kind;
	char name[PG_POOL_NAME_MAX +
	          24];     /* its directive ("access-log", "pool NAME routing-config") */
	const char *value; /* the path, or the user's name (lives as long as the configuration) */
	union pg_sockaddr addr; /* PG_NEED_BIND: the address */
	unsigned line;          /* the file's line of its directive (0: a flag) */
};
/* the flags' (config_load.c needs()), a pool's routing-config each, the
 * TLS certificates and keys */
#define PG_NEEDS_MAX (16 + PG_MAX_POOLS + 2 * PG_TLS_CERTS_MAX)

struct pg_conf;

struct pg_config {
	/* The configuration file (doc/configuration.md "Configuration file"): its path (-c,
	 * or PG_CONF_DEFAULT when it exists; NULL: none) and its directives,
	 * which the string fields it set point into (owned). */
	const char *conf_path;
	struct pg_conf *conf;
	/* The command line, read again over the file at each reload. */
	int argc;
	char **argv;
	bool check;    /* --check: validate and exit */
	int log_level; /* --log-level: enum pg_log_level (sys/log.h) */
	union pg_sockaddr listen, admin;
	char **backends; /* --backend values, canonical (pg_hostport_format), owned */
	size_t nbackends;
	const char *backends_file;  /* --backends-file (points into argv), or NULL */
	const char *resolver;       /* --resolver servers, "IP:PORT,..." (argv), or NULL */
	unsigned resolve_ms;        /* --resolve-interval: names looked up again every MS */
	const char *routing_config; /* --routing-config (points into argv), or NULL */
	struct pg_route_cfg route;  /* routing config file, then explicit flags */
	/* The explicit --strategy / --prefix-length / --concurrency-threshold,
	 * which override --routing-config at start-up and at each re-read:
	 * their values, and which were given (PG_POOL_SET_* bits). */
	struct pg_route_cfg route_flags;
	unsigned route_flags_set;
	struct pg_pool_table pools; /* --pool: model pools (pool 0 "default"; n >= 1 once parsed) */
	unsigned workers;           /* 0: one per CPU */
	enum pg_data_path data_path;
	bool no_bpf;
	const char *pin_path;   /* points into argv, or PG_PIN_PATH_DEFAULT */
	const char *bpf_cgroup; /* --bpf-cgroup (points into argv); NULL: probe */
	struct pg_health_cfg health;
	/* Operations (privilege.h, lifecycle.h). */
	const char *user;             /* --user: drop to it after start-up, or NULL */
	const char *admin_token_file; /* --admin-token-file (points into argv), or NULL */
	char *admin_token;            /* --admin-token or the file's; owned; NULL: none */
	unsigned shutdown_timeout_s;  /* drain at SIGTERM at most this long */
	unsigned max_in_flight;       /* gateway-wide request cap; 0: off */
	unsigned max_connections;     /* client connections per worker; 0: off */
	unsigned max_body;            /* request body bytes at most (413 beyond) */
	unsigned cache_capacity;      /* cache_aware: tokens of KV cache per instance */
	bool route_header;            /* X-Prefixgate-Route on every response */
	bool exact_usage;             /* read every answer's usage (proxy/quota.h) */
	struct pg_timeouts timeouts;
	unsigned splice_budget;     /* in-kernel paths: bytes in flight per client */
	const char *access_log;     /* --access-log FILE, or NULL */
	const char *route_journal;  /* --route-journal FILE, or NULL */
	unsigned metrics_scrape_ms; /* GET /metrics of each backend every MS (at least
	                             * PG_SCRAPE_MIN_MS); 0: off */
	unsigned predict_window_ms; /* predicted hit: same backend within this long */
	bool shadow;                /* also compute what prefix_aware would choose */
	enum pg_load_signal load_signal;
	/* Fleets (fleet/fleet.h); strings point into argv. */
	const char *nats_url;       /* --nats, or NULL: no NATS */
	const char *nats_cluster;   /* --nats-cluster */
	const char *gateway_id;     /* --gateway-id, or NULL: HOSTNAME:ADMIN-PORT */
	unsigned fleet_interval_ms; /* --fleet-interval */
	unsigned fleet_size;        /* --fleet-size; 0: not given */
	struct pg_etcd_cfg etcd;
	struct pg_otlp_cfg otlp;
	struct pg_flow_cfg flow;
	struct pg_tls_cfg tls;
	/* Strings a reload took in (pg_config_keep): owned, freed with it. */
	char **kept;
	size_t nkept;
	/* What it needs of the system, each with its directive's line. */
	struct pg_need needs[PG_NEEDS_MAX];
	size_t nneeds;
};

/*
 * Parse the command line (see --help, or tools/packaging/prefixgate.8). Both
 * "--flag value" and "--flag=value"; repeating a flag other than --backend
 * keeps the last value. --routing-config and --backends-file are read and
 * checked here (the backends file is only validated: the caller reads it
 * again, e.g. on SIGHUP); explicit --strategy / --prefix-length /
 * --concurrency-threshold override the routing config file in any order.
 *
 * Returns 0: run; 1: --help or --version was printed to out, exit 0;
 * 2: usage error, err holds one line naming the flag, e.g.
 * "--prefix-length: 100 is out of range 1024-65536". cfg is always left in
 * a state pg_config_free() accepts; on 1 and 2 it holds nothing to free.
 * Keeps no state between calls.
 */
int pg_config_parse(struct pg_config *cfg, int argc, char **argv, FILE *out, char *err,
                    size_t errlen);
void pg_config_free(struct pg_config *cfg);

/*
 * The whole configuration: the file of -c FILE (--config; without it
 * PG_CONF_DEFAULT if that exists), then the command line over it (a flag
 * overrides the file's directive; --backend, --pool and --tenant add to
 * the file's, naming the same item again being no error). Every error
 * of the file is added to errs with its line ("FILE:LINE: what and what
 * is allowed" once printed); the command line still stops at its first
 * (line 0). As pg_config_parse returns: 0 run (or, with cfg->check, only
 * report success), 1 help or version printed, 2 errors; on 2 cfg holds
 * nothing to free but cfg->check, which says whether --check was given.
 */
struct pg_conf_errs;
int pg_config_parse_all(struct pg_config *cfg, int argc, char **argv, FILE *out,
                        struct pg_conf_errs *errs);

/*
 * The same from the file's text (name: how messages call it), for the
 * tests, and for a reload (the running configuration's file and command
 * line, the file's text just read): no -c of argv is read.
 */
int pg_config_parse_text(struct pg_config *cfg, const char *name, const char *text, size_t len,
                         int argc, char **argv, struct pg_conf_errs *errs);

/* Read cfg's file and command line again into *out, as at start-up (a
 * reload). As pg_config_parse_all, without printing. */
int pg_config_reparse(const struct pg_config *cfg, struct pg_config *out,
                      struct pg_conf_errs *errs);

/* Print errs to out: "FILE:LINE: what" for the file's (file: its name),
 * "prefixgate: what" for the command line's, then "(see prefixgate
 * --help)" once if there were any of those. */
void pg_config_errs_print(FILE *out, const struct pg_conf_errs *errs, const char *file);

/*
 * cfg written as a configuration file (doc/configuration.md "Configuration file") to
 * out, which parses back to the same configuration: every option that is
 * not at its default, each pool's block, each tenant's. live[p]: pool p's
 * RoutingConfig as it runs (NULL: as configured). The gateway's routing is
 * written at the top (the default pool's, when it has no block); a pool's
 * block holds what the pool set itself and where it runs otherwise than
 * it would inherit, never what it inherits, so that an edit of the top
 * reaches it; routing-config is not written (its values are). A token
 * given directly is not written.
 */
struct pg_buf;
void pg_config_render(const struct pg_config *cfg, const struct pg_route_cfg *live,
                      struct pg_buf *out);

/*
 * Each option of the table that differs between a and b, by its name
 * (without "--"), with whether a reload applies it at once (the table's
 * live) and both values as the file writes them ("(none)": not set; a
 * token is not shown): into fn. Not told: the routing options, backend,
 * pool and tenant, which whoever applies them compares itself.
 */
void pg_config_diff(const struct pg_config *a, const struct pg_config *b,
                    void (*fn)(void *arg, const char *name, bool live, const char *was,
                               const char *now),
                    void *arg);

/* A copy of s that lives as long as cfg (a reload's new value of a
 * string). NULL stays NULL; NULL too when out of memory. */
const char *pg_config_keep(struct pg_config *cfg, const char *s);

/* Print the usage text (every flag, its default and meaning) to out. */
void pg_config_usage(FILE *out);

/*
 * SageMaker RoutingConfig, e.g.
 *   {"RoutingStrategy":"PREFIX_AWARE",
 *    "PrefixAwareRoutingConfig":{"PrefixLength":4096,"ConcurrencyThreshold":10}}
 * or the same wrapped as {"RoutingConfig":{...}}. The document is the whole
 * routing config: RoutingStrategy is required (any pg_strategy_parse name:
 * RANDOM, LEAST_OUTSTANDING_REQUESTS, PREFIX_AWARE, CACHE_AWARE, any case);
 * missing PrefixAwareRoutingConfig fields take PG_PREFIX_LENGTH_DEFAULT /
 * PG_CONCURRENCY_DEFAULT, a missing CacheAwareConfig.NewConversationChoices
 * PG_CA_CHOICES_DEFAULT. Unknown
 * fields, wrong types and out-of-range values are errors naming the field
 * ("PrefixAwareRoutingConfig.ConcurrencyThreshold: 0 is out of range
 * 1-1024"). Returns 0 and replaces *io, or -1 with err set and *io untouched.
 */
int pg_routing_config_parse(const char *json, size_t len, struct pg_route_cfg *io, char *err,
                            size_t errlen);

/*
 * PUT /routing: the fields json sets written over *io, those it omits
 * keeping their value (a partial document changes what it names). The
 * document is otherwise read as pg_routing_config_parse reads it
 * (RoutingStrategy required, the same checks). 0, or -1 with err set and
 * *io untouched.
 */
int pg_routing_config_update(const char *json, size_t len, struct pg_route_cfg *io, char *err,
                             size_t errlen);

/* The fields of own that set names (PG_POOL_SET_* bits) written over *rc. */
void pg_route_overlay(struct pg_route_cfg *rc, const struct pg_route_cfg *own, unsigned set);

/*
 * Pool p's RoutingConfig were the gateway's --routing-config to read as
 * *file (NULL: no file, the defaults): the file, the explicit --strategy /
 * --prefix-length / --concurrency-threshold over it, then the fields the
 * pool sets itself. False (out untouched) for a pool with a
 * routing-config= of its own, which the gateway's file does not reach.
 * What start-up computes, and what a re-read of the file applies.
 */
bool pg_route_of_pool(const struct pg_config *cfg, unsigned p, const struct pg_route_cfg *file,
                      struct pg_route_cfg *out);

/*
 * Backends file: one HOST:PORT a line (any backend form of lib/addr.h),
 * optionally followed by "pool=NAME" (the model pool it serves;
 * lib/modelpool.h); nothing else may follow the address. '#' starts a
 * comment (whole line or after the address); blank lines and surrounding
 * whitespace are ignored. On success *out is a malloc'ed array of *n
 * canonical strings (pg_hostport_format), "HOST:PORT pool=NAME" for a line
 * naming a pool other than default (free with pg_backends_free). Errors
 * name the line ("line 3: ..."); the same address twice, or more than
 * PG_MAX_BACKENDS - 1 addresses, is an error.
 */
int pg_backends_parse(const char *text, size_t len, char ***out, size_t *n, char *err,
                      size_t errlen);

/* What the pools of a gateway allow in its backends file, checked line by
 * line so that an error names the line. */
struct pg_backends_rules {
	const struct pg_pool_table *pools; /* pool=NAME must name one of them */
	bool need_pool; /* the default pool takes no requests: a line must name another */
};
/* pg_backends_parse, and the rules (NULL: none) of each line. */
int pg_backends_parse_in(const char *text, size_t len, const struct pg_backends_rules *rules,
                         char ***out, size_t *n, char *err, size_t errlen);
void pg_backends_free(char **v, size_t n);

/* The parsers' helpers (config.c), for user/config/ alone. pg_errf:
 * printf-format one error message into err (errlen bytes, always
 * NUL-terminated, truncated if longer); errlen 0 means the caller does not
 * want the message: nothing is written and err may be NULL. pg_backend_add:
 * append canonical h to the backend list *v (*n entries) unless already
 * there; *dup gets the index of the earlier copy. 0, -1 out of memory, 1
 * duplicate, 2 too many (PG_MAX_BACKENDS - 1 already). */
__attribute__((format(printf, 3, 4))) void pg_errf(char *err, size_t errlen, const char *fmt, ...);
int pg_backend_add(char ***v, size_t *n, const struct pg_hostport *h, size_t *dup);

/* Read a whole file of at most max bytes into a malloc'ed, NUL-terminated
 * buffer. 0, or -1 with err saying what failed (errno text). */
int pg_read_file(const char *path, size_t max, char **buf, size_t *len, char *err, size_t errlen);

static inline const char *pg_tls_ciphers(const struct pg_tls_cfg *t)
{
	return t->ciphers ? t->ciphers : PG_TLS_CIPHERS_DEFAULT;
}
static inline const char *pg_tls_suites(const struct pg_tls_cfg *t)
{
	return t->suites ? t->suites : PG_TLS_SUITES_DEFAULT;
}

/* A certificate chain file and its key file (NULL: the key is in cert),
 * read and checked at now as a listener uses them (lib/tls_pem.h) into
 * *out (pg_tls_pem_free): 0, or -1 with err "FILE: what is wrong", FILE
 * the one at fault (unreadable, key does not match, expired, wrong chain
 * order, ...). */
struct pg_tls_pem;
int pg_tls_files_load(const char *cert, const char *key, int64_t now, struct pg_tls_pem *out,
                      char *err, size_t errlen);
/* The certificates of CA file path (PEM), each valid at now: a new stack
 * (sk_X509_pop_free), or NULL with err "FILE: what is wrong". */
struct stack_st_X509;
struct stack_st_X509 *pg_tls_ca_file(const char *path, int64_t now, char *err, size_t errlen);

/* FlowControlConfig (lib/flow.h; doc/routing.md "Flow control"): InstanceQueueMs
 * 0 (off) to a minute, DeadlineMs 0 (none) to an hour. When --flow-control
 * or a FlowControlConfig without InstanceQueueMs turns flow control on,
 * each instance's room is its own service time (PG_FLOW_QUEUE_AUTO,
 * router/strategy.h): the prefill that keeps its engine busy across the
 * gateway's dispatch and the model's error, in that instance's units (a
 * fixed time is several of a fast fleet's requests long, and held a quiet
 * tenant's p99 at 4.2x its own alone), and no more, since everything
 * queued past it waits where the gateway can no longer reorder it. */
#define PG_FLOW_QUEUE_MS_MAX 60000
#define PG_FLOW_DEADLINE_MAX 3600000
/* Flow control's gateway-wide bounds (--flow-max-queued,
 * --flow-max-queued-bytes): requests waiting, and the bytes they hold. */
#define PG_FLOW_MAX_QUEUED_DEFAULT 10000
#define PG_FLOW_MAX_BYTES_DEFAULT  268435456 /* 256 MiB */

/* What a configuration that still sets CacheAwareConfig.MaxLoadGap (a pool's
 * max-load-gap) is told: the rule it tuned is gone. */
#define PG_CA_GAP_REMOVED                                                                          \
	"no longer used: CACHE_AWARE weighs each instance's queue in prefill work instead of "     \
	"counting requests (doc/routing.md, Routing under load); remove it"

#endif /* PG_CONFIG_H */
