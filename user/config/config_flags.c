// SPDX-License-Identifier: MIT
/*
 * The command line (config.h): parsed by one loop over a table of options,
 * which also produces the --help text, so a flag cannot be accepted without
 * being documented. No global state: unit tests call pg_config_parse() many
 * times.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "config/config.h"
#include "config/config_internal.h"

/* ---- command line -------------------------------------------------------- */

/* clang-format off */
enum opt_id {
	O_LISTEN, O_ADMIN, O_BACKEND, O_BACKENDS_FILE, O_RESOLVER, O_RESOLVE_INTERVAL, O_STRATEGY, O_PREFIX_LENGTH, O_CONCURRENCY,
	O_ROUTING_CONFIG, O_WORKERS, O_DATA_PATH, O_NO_BPF, O_PIN_PATH, O_BPF_CGROUP, O_HC_PATH,
	O_HC_INTERVAL, O_HC_TIMEOUT, O_HC_RISE, O_HC_FALL, O_SCRAPE, O_LOAD_SIGNAL, O_SHADOW,
	O_PREDICT_WINDOW, O_POOL,
	O_USER, O_ADMIN_TOKEN, O_ADMIN_TOKEN_FILE, O_SHUTDOWN_TIMEOUT, O_MAX_IN_FLIGHT, O_MAX_CONNS,
	O_MAX_BODY, O_CACHE_CAPACITY, O_ROUTE_HEADER,
	O_T_HEADER, O_T_BODY, O_T_IDLE, O_T_CONNECT, O_T_FIRST_BYTE, O_SPLICE_BUDGET, O_ACCESS_LOG,
	O_NATS, O_NATS_CLUSTER, O_GATEWAY_ID, O_FLEET_INTERVAL, O_FLEET_SIZE,
	O_ETCD, O_ETCD_PREFIX, O_ETCD_TIMEOUT, O_ETCD_USER, O_ETCD_PASSWORD, O_ETCD_STATE,
	O_HELP, O_VERSION,
};
/* clang-format on */

/* --data-path values, by enum pg_data_path. */
static const char *const data_paths[] = {
    [PG_DATA_AUTO] = "auto",
    [PG_DATA_COPY] = "copy",
    [PG_DATA_SOCKMAP] = "sockmap",
    [PG_DATA_SOCKMSG] = "sockmsg",
};

static const char *data_path_list(char *buf, size_t len, const char *sep)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < sizeof(data_paths) / sizeof(data_paths[0]) && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%s%s", i ? sep : "", data_paths[i]);

		used += k > 0 ? (size_t)k : 0;
	}
	return buf;
}

static const char *strategy_list(char *buf, size_t len, const char *sep)
{
	return pg_strategy_list(buf, len, false, sep, sep);
}

/*
 * One entry per flag, and every fact about it: its name, what it means, its
 * default and its range. --help prints them (help_line), apply() parses a
 * value by them, config_defaults() applies each default through apply() as
 * if it had been given, and the man page is checked against --help
 * (tests/e2e/test_ctl.py), so a default or a range is written once, here.
 * Constants other parsers share (the RoutingConfig ranges in prefixgate.h,
 * PG_*_DEFAULT in config.h) are used by name.
 */
static const struct opt {
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
	bool str; /* a non-empty string: apply() stores the const char * at field */
} opts[] = {
#define OPT(n, a, h)  .name = (n), .arg = (a), .help = (h)
#define CFG(f)        .field = offsetof(struct pg_config, f)
#define ROUTE(f)      .field = offsetof(struct pg_route_cfg, f), .route = true
#define RANGE(lo, hi) .min = (lo), .max = (hi)
#define STR(f)        CFG(f), .str = true
#define TOKEN_LEN     PG_STR(PG_ADMIN_TOKEN_MIN) "-" PG_STR(PG_ADMIN_TOKEN_MAX)
#define TOKEN_CHARS   PG_STR(PG_CA_CHARS_PER_TOKEN)
    [O_LISTEN] = {OPT("listen", "ADDR:PORT", "client listener (A.B.C.D, [IPV6], localhost)"),
                  .def = PG_LISTEN_DEFAULT},
    [O_ADMIN] = {OPT("admin", "ADDR:PORT", "admin API and metrics"), .def = PG_ADMIN_DEFAULT},
    [O_BACKEND] = {OPT("backend", "HOST:PORT",
                       "an inference instance (A.B.C.D, [IPV6], or a DNS name standing for "
                       "every address it resolves to); repeat for each (default none)")},
    [O_BACKENDS_FILE] = {OPT(
        "backends-file", "FILE",
        "more backends, one HOST:PORT a line, '#' comments; re-read on SIGHUP")},
    [O_RESOLVER] = {OPT("resolver", "IP:PORT[,...]", "DNS servers for backend names"),
                    .def_text = "/etc/resolv.conf"},
    [O_RESOLVE_INTERVAL] = {OPT("resolve-interval", "MS",
                                "backend names are looked up again every MS"),
                            .def = PG_STR(PG_RESOLVE_MS_DEFAULT), CFG(resolve_ms),
                            RANGE(100, 3600000)},
    [O_STRATEGY] = {OPT("strategy", "S", NULL), .list = strategy_list, .def = "prefix_aware"},
    [O_PREFIX_LENGTH] = {OPT("prefix-length", "N",
                             "prefix key length, characters (bytes for non-OpenAI paths)"),
                         .def = PG_STR(PG_PREFIX_LENGTH_DEFAULT), ROUTE(prefix_length),
                         RANGE(PG_PREFIX_LENGTH_MIN, PG_PREFIX_LENGTH_MAX)},
    [O_CONCURRENCY] = {OPT("concurrency-threshold", "N",
                           "in-flight requests per backend before prefix_aware overflows"),
                       .def = PG_STR(PG_CONCURRENCY_DEFAULT), ROUTE(concurrency_threshold),
                       RANGE(PG_CONCURRENCY_MIN, PG_CONCURRENCY_MAX)},
    [O_ROUTING_CONFIG] = {OPT("routing-config", "FILE",
                              "SageMaker RoutingConfig JSON; the three flags above override it")},
    [O_WORKERS] = {OPT("workers", "N", "worker threads"), .def_text = "one per CPU", CFG(workers),
                   RANGE(1, PG_WORKERS_MAX)},
    [O_DATA_PATH] = {OPT("data-path", NULL, "how response bytes reach the client"),
                     .list = data_path_list, .def = "auto"},
    [O_NO_BPF] = {OPT("no-bpf", NULL, "no BPF at all: unprivileged, copy data path")},
    [O_PIN_PATH] = {OPT("bpf-pin-path", "DIR", "where BPF maps are pinned"),
                    .def = PG_PIN_PATH_DEFAULT},
    [O_BPF_CGROUP] = {OPT("bpf-cgroup", "PATH", "cgroup v2 directory the sockmsg path attaches to"),
                      .def_text = "the first cgroup2 mount of /sys/fs/cgroup/unified, "
                                  "/sys/fs/cgroup"},
    [O_HC_PATH] = {OPT("health-check-path", "PATH",
                       "active health check: GET PATH on each backend; none: off"),
                   .def = "/health"},
    [O_HC_INTERVAL] = {OPT("health-check-interval", "MS", "time between checks"), .def = "2000",
                       CFG(health.interval_ms), RANGE(100, 600000)},
    [O_HC_TIMEOUT] = {OPT("health-check-timeout", "MS", "a check not answered 2xx within MS fails"),
                      .def = "1000", CFG(health.timeout_ms), RANGE(10, 60000)},
    [O_HC_RISE] = {OPT("health-rise", "N", "passed checks in a row that bring a backend back"),
                   .def = "2", CFG(health.rise), RANGE(1, 100)},
    [O_HC_FALL] = {OPT("health-fall", "N", "failed checks in a row that take a backend out"),
                   .def = "3", CFG(health.fall), RANGE(1, 100)},
    [O_SCRAPE] = {OPT("metrics-scrape-interval", "MS",
                      "GET /metrics of each backend (vLLM KV hits, queue) every MS"),
                  .def = "5000", CFG(metrics_scrape_ms), RANGE(100, 600000), .zero_off = true},
    [O_LOAD_SIGNAL] = {OPT("load-signal", NULL,
                           "least-outstanding compares in_flight, the backend's running+waiting, "
                           "or in_flight+waiting"),
                       .list = pg_load_signal_list, .def = "inflight"},
    [O_SHADOW] = {OPT("shadow", NULL,
                      "also compute what prefix_aware would choose: prefixgate_shadow_* metrics")},
    [O_PREDICT_WINDOW] = {OPT("predict-window", "MS",
                              "a request is a predicted KV hit if its key went to the same backend "
                              "within MS"),
                          .def = "60000", CFG(predict_window_ms), RANGE(1000, 3600000)},
    [O_POOL] = {OPT("pool", "NAME[:KEY=V]",
                    "a model pool; KEY: model=M,.. path=/P,.. backend=ADDR:PORT,.. strategy "
                    "prefix-length concurrency-threshold max-load-gap routing-config=FILE; "
                    "repeat (default: one pool, default)")},
    [O_USER] = {OPT("user", "NAME",
                    "after start-up run as NAME (uid, gid, groups), keeping no capability the "
                    "gateway does not use"),
                .def_text = "stay as started"},
    [O_ADMIN_TOKEN] = {OPT("admin-token", "TOKEN",
                           "every admin request needs \"Authorization: Bearer TOKEN\" "
                           "(" TOKEN_LEN " chars); required for a non-loopback --admin")},
    [O_ADMIN_TOKEN_FILE] = {OPT("admin-token-file", "FILE",
                                "the same, read from FILE (keeps the token out of ps)")},
    [O_SHUTDOWN_TIMEOUT] = {OPT("shutdown-timeout", "SECONDS",
                                "SIGTERM/SIGINT: stop accepting, let in-flight requests finish "
                                "for at most SECONDS"),
                            .def = "10", CFG(shutdown_timeout_s), RANGE(0, 3600)},
    [O_MAX_IN_FLIGHT] = {OPT("max-in-flight", "N",
                             "gateway-wide cap on requests in flight; beyond it 503 with "
                             "Retry-After"),
                         .def = "0", CFG(max_in_flight), RANGE(0, 10000000), .zero_off = true},
    [O_MAX_CONNS] = {OPT("max-connections", "N", "client connections per worker; beyond it 503"),
                     .def = "65536", CFG(max_connections), RANGE(1, 10000000)},
    [O_MAX_BODY] = {OPT("max-body-size", "BYTES", "larger request bodies get 413, on every path"),
                    .def = PG_STR(PG_MAX_BODY_DEFAULT), CFG(max_body), RANGE(1024, UINT32_MAX)},
    [O_CACHE_CAPACITY] = {OPT("cache-capacity", "TOKENS",
                              "cache_aware: KV cache of each instance, in tokens (" TOKEN_CHARS
                              " characters each); sizes and ages the block index"),
                          .def = PG_STR(PG_CA_CAPACITY_DEFAULT), CFG(cache_capacity),
                          RANGE(1024, 1000000000)},
    [O_ROUTE_HEADER] = {OPT("route-header", NULL,
                            "add X-Prefixgate-Route: backend=...; reason=...; matched=N to every "
                            "response")},
    [O_T_HEADER] = {OPT("header-timeout", "MS",
                        "a request head not complete MS after its first byte: 408"),
                    .def = "10000", CFG(timeouts.header_ms), RANGE(100, 3600000)},
    [O_T_BODY] = {OPT("body-timeout", "MS", "no request body byte for MS: 408"), .def = "30000",
                  CFG(timeouts.body_ms), RANGE(100, 3600000)},
    [O_T_IDLE] = {OPT("idle-timeout", "MS", "idle keep-alive client connections closed after MS"),
                  .def = "60000", CFG(timeouts.idle_ms), RANGE(100, 3600000)},
    [O_T_CONNECT] = {OPT("connect-timeout", "MS", "backend connect; then the next candidate"),
                     .def = "3000", CFG(timeouts.connect_ms), RANGE(100, 600000)},
    [O_T_FIRST_BYTE] = {OPT("first-byte-timeout", "MS",
                            "request sent, no response byte for MS: 504 (prefill can take long)"),
                        .def = "300000", CFG(timeouts.first_byte_ms), RANGE(100, 3600000)},
    [O_SPLICE_BUDGET] = {OPT("splice-budget", "BYTES",
                             "in-kernel data paths: response bytes in flight to one slow client "
                             "before falling back"),
                         .def = "4194304", CFG(splice_budget), RANGE(65536, 1u << 30)},
    [O_ACCESS_LOG] = {OPT("access-log", "FILE",
                          "append one JSON line per request to FILE, written off the request path"),
                      .def_text = "none"},
    [O_NATS] = {OPT("nats", "URL",
                    "fleet: share in-flight counts and cache_aware decisions with the other "
                    "gateways over NATS at URL (nats://HOST:PORT)"),
                .def_text = "none"},
    [O_NATS_CLUSTER] = {OPT("nats-cluster", "NAME",
                            "fleet: the gateways sharing subjects prefixgate.NAME.load|cache"),
                        .def = "default"},
    [O_GATEWAY_ID] = {OPT("gateway-id", "ID",
                          "fleet: this gateway's name among its peers (NATS) and under "
                          "P/gateways/ (etcd)"),
                      .def_text = "HOSTNAME:ADMIN-PORT"},
    [O_FLEET_INTERVAL] = {OPT("fleet-interval", "MS",
                              "fleet: publish the in-flight vector at least every MS (and at "
                              "once on a change); a peer silent 3 x its MS is dropped"),
                          .def = "200", CFG(fleet_interval_ms), RANGE(10, 10000)},
    [O_FLEET_SIZE] = {OPT("fleet-size", "N",
                          "fleet: gateways in all; without NATS each routes on "
                          "ConcurrencyThreshold / N unless the backends report their load"),
                      .def = "0", CFG(fleet_size), RANGE(2, 1024), .zero_off = true},
    [O_ETCD] = {OPT("etcd-endpoints", "URL,...",
                    "take backends and the routing config from etcd (http://host:port, "
                    "tried in turn)"),
                STR(etcd.endpoints), .def_text = "off"},
    [O_ETCD_PREFIX] = {OPT("etcd-prefix", "P", "etcd key prefix (README: Running a fleet)"),
                       STR(etcd.prefix), .def = PG_ETCD_PREFIX_DEFAULT},
    [O_ETCD_TIMEOUT] = {OPT("etcd-timeout", "MS", "each etcd call, and its liveness check"),
                        .def = "1000", CFG(etcd.timeout_ms), RANGE(50, 60000)},
    [O_ETCD_USER] = {OPT("etcd-user", "NAME", "etcd authentication user"), STR(etcd.user)},
    [O_ETCD_PASSWORD] = {OPT("etcd-password-file", "FILE", "that user's password, from FILE"),
                         STR(etcd.password_file)},
    [O_ETCD_STATE] = {OPT("etcd-state-file", "FILE",
                          "last state read from etcd, kept to start on while etcd is down"),
                      STR(etcd.state_file), .def_text = "none"},
    [O_HELP] = {OPT("help", NULL, "print this help and exit")},
    [O_VERSION] = {OPT("version", NULL, "print the version and exit")},
#undef OPT
#undef CFG
#undef ROUTE
#undef RANGE
#undef STR
#undef TOKEN_LEN
#undef TOKEN_CHARS
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))
/* apply() marks the flags that override a --routing-config file in a
 * 32-bit set */
_Static_assert(O_STRATEGY < 32 && O_PREFIX_LENGTH < 32 && O_CONCURRENCY < 32, "set bits");
_Static_assert(sizeof(unsigned) == sizeof(uint32_t), "numeric flags are stored as uint32_t");

/* The help of o: what it does, then its range and default from the table. */
static void help_line(const struct opt *o, char *buf, size_t len)
{
	char names[160];
	int n = snprintf(buf, len, "%s", o->help ? o->help : o->list(names, sizeof(names), " | "));

	if (o->max && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ", %s%" PRIu32 "-%" PRIu32 "%s",
		              o->zero_off && o->min ? "0 or " : "", o->min, o->max,
		              o->zero_off ? "; 0: off" : "");
	if (o->def && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " (default %s)", o->def);
	else if (o->def_text && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " (default: %s)", o->def_text);
}

void pg_config_usage(FILE *out)
{
	char left[64], help[512], names[160];

	fprintf(out, "Usage: prefixgate [OPTION]...\n"
	             "Prefix-aware HTTP/1.1 router for LLM inference servers.\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		const char *arg = opts[i].arg;

		if (!arg && opts[i].list)
			arg = opts[i].list(names, sizeof(names), "|");
		snprintf(left, sizeof(left), "--%s%s%s", opts[i].name, arg ? " " : "",
		         arg ? arg : "");
		help_line(&opts[i], help, sizeof(help));
		if (strlen(left) > 28)
			fprintf(out, "  %s\n  %-28s  %s\n", left, "", help);
		else
			fprintf(out, "  %-28s  %s\n", left, help);
	}
	fprintf(out, "\nFlags take \"--flag value\" or \"--flag=value\".\n"
	             "Admin API on --admin: GET /metrics /backends /routing /health /fleet, "
	             "POST /backends /route,\n"
	             "DELETE /backends/ADDR:PORT, PUT /routing (RoutingConfig JSON), GET /pools;\n"
	             "/backends and /routing take ?pool=NAME.\n");
}

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

static int load_files(struct pg_config *cfg, char *err, size_t errlen)
{
	char *buf, e[256], **v;
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
			pg_errf(err, errlen, "--routing-config %s: %s", cfg->routing_config, e);
			return -1;
		}
	}
	if (cfg->backends_file) {
		rc = pg_read_file(cfg->backends_file, PG_CONFIG_FILE_MAX, &buf, &len, e, sizeof(e));
		if (!rc) {
			rc = pg_backends_parse(buf, len, &v, &n, e, sizeof(e));
			free(buf);
		}
		if (rc) {
			pg_errf(err, errlen, "--backends-file %s: %s", cfg->backends_file, e);
			return -1;
		}
		rc = pg_pools_check_file(&cfg->pools, v, n, e, sizeof(e));
		pg_backends_free(v, n);
		if (rc) {
			pg_errf(err, errlen, "--backends-file %s: %s", cfg->backends_file, e);
			return -1;
		}
	}
	return 0;
}

/* Refuse v, not one of o's names: "--data-path: "x" is not one of auto, ...". */
static int not_one_of(const struct opt *o, const char *v, char *err, size_t errlen)
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

static int apply(struct pg_config *cfg, enum opt_id id, const char *v, struct pg_route_cfg *flags,
                 unsigned *set, char *err, size_t errlen)
{
	const struct opt *o = &opts[id];
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
		for (size_t i = 0; i < sizeof(data_paths) / sizeof(data_paths[0]); i++) {
			if (!strcasecmp(v, data_paths[i])) {
				cfg->data_path = (enum pg_data_path)i;
				return 0;
			}
		}
		return not_one_of(o, v, err, errlen);
	case O_NO_BPF:
		cfg->no_bpf = true;
		return 0;
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
	case O_SHADOW:
		cfg->shadow = true;
		return 0;
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
		return pg_pool_spec_parse(&cfg->pools, v, err, errlen);
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
	case O_ROUTE_HEADER:
		cfg->route_header = true;
		return 0;
	case O_ACCESS_LOG:
		cfg->access_log = v;
		return 0;
	default:
		return 0;
	}
}

/* Every default of the table, applied as if given on the command line (so
 * it is checked against its range too), and the one routing field with no
 * flag. Fails only if the table is wrong. */
static int config_defaults(struct pg_config *cfg, char *err, size_t errlen)
{
	unsigned set = 0;
	char e[256];

	memset(cfg, 0, sizeof(*cfg));
	cfg->route.max_load_gap = PG_CA_GAP_DEFAULT; /* CacheAwareConfig.MaxLoadGap */
	for (size_t id = 0; id < NOPTS; id++) {
		if (opts[id].def &&
		    apply(cfg, (enum opt_id)id, opts[id].def, &cfg->route, &set, e, sizeof(e))) {
			pg_errf(err, errlen, "internal error: the default of --%s: %s",
			        opts[id].name, e);
			return -1;
		}
	}
	return 0;
}

int pg_config_parse(struct pg_config *cfg, int argc, char **argv, FILE *out, char *err,
                    size_t errlen)
{
	struct pg_route_cfg flags = {0};
	unsigned set = 0;
	int ret = 2;

	if (errlen)
		err[0] = 0;
	if (config_defaults(cfg, err, errlen))
		goto out;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *v = NULL;
		size_t nlen, id;

		if (strncmp(a, "--", 2) || !a[2]) {
			pg_errf(err, errlen, "unexpected argument \"%s\" (see --help)", a);
			goto out;
		}
		eq = strchr(a + 2, '=');
		nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		for (id = 0; id < NOPTS; id++)
			if (strlen(opts[id].name) == nlen && !memcmp(opts[id].name, a + 2, nlen))
				break;
		if (id == NOPTS) {
			pg_errf(err, errlen, "unknown option --%.*s (see --help)", (int)nlen,
			        a + 2);
			goto out;
		}
		if (opts[id].arg || opts[id].list) {
			char names[160];

			v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (!v) {
				pg_errf(err, errlen, "--%s: missing value %s", opts[id].name,
				        opts[id].arg ? opts[id].arg
				                     : opts[id].list(names, sizeof(names), "|"));
				goto out;
			}
		} else if (eq) {
			pg_errf(err, errlen, "--%s takes no value", opts[id].name);
			goto out;
		}
		if (id == O_HELP || id == O_VERSION) {
			if (id == O_HELP)
				pg_config_usage(out);
			else
				fprintf(out, "prefixgate %s\n", PG_VERSION);
			ret = 1;
			goto out;
		}
		if (apply(cfg, (enum opt_id)id, v, &flags, &set, err, errlen))
			goto out;
	}
	if (load_files(cfg, err, errlen) || pg_config_check_ops(cfg, err, errlen))
		goto out;
	if (set & 1u << O_STRATEGY)
		cfg->route.strategy = flags.strategy;
	if (set & 1u << O_PREFIX_LENGTH)
		cfg->route.prefix_length = flags.prefix_length;
	if (set & 1u << O_CONCURRENCY)
		cfg->route.concurrency_threshold = flags.concurrency_threshold;
	if (pg_pools_finish(cfg, err, errlen))
		goto out;
	if (cfg->no_bpf &&
	    (cfg->data_path == PG_DATA_SOCKMAP || cfg->data_path == PG_DATA_SOCKMSG)) {
		pg_errf(err, errlen, "--data-path %s needs BPF: drop --no-bpf or use copy",
		        data_paths[cfg->data_path]);
		goto out;
	}
	if (cfg->etcd.endpoints && cfg->backends_file) {
		pg_errf(err, errlen, "--etcd-endpoints and --backends-file: choose one source");
		goto out;
	}
	return 0;
out:
	pg_config_free(cfg);
	return ret;
}

void pg_config_free(struct pg_config *cfg)
{
	pg_backends_free(cfg->backends, cfg->nbackends);
	cfg->backends = NULL;
	cfg->nbackends = 0;
	free(cfg->admin_token);
	cfg->admin_token = NULL;
	pg_pool_table_free(&cfg->pools);
}
