/* SPDX-License-Identifier: MIT */
/*
 * The table of flags (config_opts.c), which are also the configuration
 * file's directives, and what the parsers need of it. Not part of the
 * public API: include only from user/config/.
 */
#ifndef PG_CONFIG_OPTS_H
#define PG_CONFIG_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* clang-format off */
enum opt_id {
	O_CONFIG, O_CHECK,
	O_LISTEN, O_ADMIN, O_BACKEND, O_BACKENDS_FILE, O_RESOLVER, O_RESOLVE_INTERVAL, O_STRATEGY, O_PREFIX_LENGTH, O_CONCURRENCY,
	O_CA_CHOICES, O_ROUTING_CONFIG, O_FLOW_CONTROL, O_FLOW_QUEUE_MS, O_FLOW_DEADLINE, O_FLOW_MAX_QUEUED,
	O_FLOW_MAX_BYTES, O_FLOW_STARVE, O_FLOW_TENANT, O_TENANT, O_QUOTA, O_EXACT_USAGE, O_WORKERS, O_DATA_PATH, O_NO_BPF, O_PIN_PATH, O_BPF_CGROUP, O_HC_PATH,
	O_HC_INTERVAL, O_HC_TIMEOUT, O_HC_RISE, O_HC_FALL, O_SCRAPE, O_LOAD_SIGNAL, O_SHADOW,
	O_PREDICT_WINDOW, O_POOL,
	O_USER, O_ADMIN_TOKEN, O_ADMIN_TOKEN_FILE, O_SHUTDOWN_TIMEOUT, O_MAX_IN_FLIGHT, O_MAX_CONNS,
	O_MAX_BODY, O_CACHE_CAPACITY, O_ROUTE_HEADER,
	O_T_HEADER, O_T_BODY, O_T_IDLE, O_T_CONNECT, O_T_FIRST_BYTE, O_SPLICE_BUDGET, O_ACCESS_LOG, O_ROUTE_JOURNAL, O_LOG_LEVEL,
	O_OTLP_ENDPOINT, O_OTLP_SAMPLE, O_OTLP_TIMEOUT,
	O_TLS_LISTEN, O_TLS_CERT, O_TLS_KEY, O_TLS_CIPHERS, O_TLS_SUITES, O_TLS_MIN_VERSION, O_TLS_CLIENT_CA,
	O_TLS_HS_TIMEOUT, O_TLS_MAX_HS, O_TLS_TICKETS, O_BACKEND_TLS_CA, O_BACKEND_TLS_CERT, O_BACKEND_TLS_KEY,
	O_NATS, O_NATS_CLUSTER, O_GATEWAY_ID, O_FLEET_INTERVAL, O_FLEET_SIZE,
	O_ETCD, O_ETCD_PREFIX, O_ETCD_TIMEOUT, O_ETCD_USER, O_ETCD_PASSWORD, O_ETCD_STATE,
	O_HELP, O_VERSION,
};
/* clang-format on */

/*
 * One entry per flag, and every fact about it: its name, what it means, its
 * default and its range. --help prints them (help_line), apply() parses a
 * value by them, config_defaults() applies each default through apply() as
 * if it had been given, and the man page is checked against --help
 * (tests/e2e/test_ctl.py), so a default or a range is written once, in the
 * table (config_opts.c). Every flag but the cli ones is also a directive
 * of the configuration file (config_file.c), by the same name, taking the
 * same values; the configuration printed back (config_render.c) and a
 * reload's comparison (config_diff.c) go by the table too.
 * Constants other parsers share (the RoutingConfig ranges in prefixgate.h,
 * PG_*_DEFAULT in config.h) are used by name.
 */
struct pg_opt {
	const char *name; /* without "--" */
	const char *arg;  /* value placeholder, NULL: takes no value (or see list) */
	const char *help; /* one line: what it does (--help appends range, default) */
	/* A choice of names: list() joins them with sep into buf. They are the
	 * placeholder when arg is NULL, the help when help is NULL, and are
	 * listed in the message that refuses a value. */
	const char *(*list)(char *buf, size_t len, const char *sep);
	const char *def;      /* the default, spelt as a value of the flag; NULL: none */
	const char *def_text; /* or the default in words, for --help only */
	/* A number (max > 0): apply() stores it at field, an unsigned of
	 * struct pg_config (route: of struct pg_route_cfg, whose flags
	 * override a --routing-config file). */
	size_t field;
	uint32_t min, max;
	bool zero_off; /* 0 is accepted too (outside min-max) and means off */
	bool route;
	bool str;  /* a non-empty string: apply() stores the const char * at field */
	bool flag; /* takes no value: apply() sets the bool at field (a file's off clears it) */
	char short_name; /* also -C (-c for --config) */
	bool cli;        /* the command line's only: no directive of the file */
	/* A reload of the configuration file applies a change of it at once
	 * (doc/configuration.md "Configuration file"); the others need a restart. */
	bool live;
};

extern const struct pg_opt pg_opts[];

/* An option the file takes several values of on one line (backend,
 * tls-cert, tls-key), each as if given by one flag. */
static inline bool pg_opt_is_list(enum opt_id id)
{
	return id == O_BACKEND || id == O_TLS_CERT || id == O_TLS_KEY;
}
#define PG_NOPTS ((size_t)O_VERSION + 1)

/* --log-level values, by enum pg_log_level (sys/log.h). */
extern const char *const pg_log_levels[];
#define PG_NLOG_LEVELS 4

/* --tls-min-version values, by enum pg_tls_version. */
extern const char *const pg_tls_versions[];
#define PG_NTLS_VERSIONS 2

/* --data-path values, by enum pg_data_path. */
extern const char *const pg_data_paths[];
#define PG_NDATA_PATHS 4

#endif /* PG_CONFIG_OPTS_H */
