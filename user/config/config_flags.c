// SPDX-License-Identifier: MIT
/*
 * The command line (config.h): parsed by one loop over a table of options,
 * which also produces the --help text, so a flag cannot be accepted without
 * being documented. No global state: unit tests call pg_config_parse() many
 * times.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "config/config.h"
#include "config/config_internal.h"

/* ---- command line -------------------------------------------------------- */

/* clang-format off */
enum opt_id {
	O_LISTEN, O_ADMIN, O_BACKEND, O_BACKENDS_FILE, O_STRATEGY, O_PREFIX_LENGTH, O_CONCURRENCY,
	O_ROUTING_CONFIG, O_WORKERS, O_DATA_PATH, O_NO_BPF, O_PIN_PATH, O_BPF_CGROUP, O_HC_PATH,
	O_HC_INTERVAL, O_HC_TIMEOUT, O_HC_RISE, O_HC_FALL, O_SCRAPE, O_LOAD_SIGNAL, O_SHADOW,
	O_PREDICT_WINDOW,
	O_USER, O_ADMIN_TOKEN, O_ADMIN_TOKEN_FILE, O_SHUTDOWN_TIMEOUT, O_MAX_IN_FLIGHT, O_MAX_CONNS,
	O_MAX_BODY, O_CACHE_CAPACITY, O_ROUTE_HEADER,
	O_T_HEADER, O_T_BODY, O_T_IDLE, O_T_CONNECT, O_T_FIRST_BYTE, O_SPLICE_BUDGET, O_ACCESS_LOG,
	O_HELP, O_VERSION,
};
/* clang-format on */

static const struct opt {
	const char *name; /* without "--" */
	const char *arg;  /* value placeholder, NULL: takes no value */
	const char *help; /* one line: meaning and default */
} opts[] = {
    [O_LISTEN] = {"listen", "ADDR:PORT", "client listener (default " PG_LISTEN_DEFAULT ")"},
    [O_ADMIN] = {"admin", "ADDR:PORT", "admin API and metrics (default " PG_ADMIN_DEFAULT ")"},
    [O_BACKEND] = {"backend", "ADDR:PORT", "an inference instance; repeat for each (default none)"},
    [O_BACKENDS_FILE] = {"backends-file", "FILE",
                         "more backends, one ADDR:PORT a line, '#' comments; re-read on SIGHUP"},
    [O_STRATEGY] = {"strategy", "S",
                    "random | least_outstanding_requests | prefix_aware | cache_aware "
                    "(default prefix_aware)"},
    [O_PREFIX_LENGTH] = {"prefix-length", "N",
                         "prefix key length, characters (bytes for non-OpenAI paths), 1024-65536 "
                         "(default 4096)"},
    [O_CONCURRENCY] = {"concurrency-threshold", "N",
                       "in-flight requests per backend before prefix_aware overflows, 1-1024 "
                       "(default 10)"},
    [O_ROUTING_CONFIG] = {"routing-config", "FILE",
                          "SageMaker RoutingConfig JSON; the three flags above override it"},
    [O_WORKERS] = {"workers", "N", "worker threads, 1-64 (default: one per CPU)"},
    [O_DATA_PATH] = {"data-path", "auto|copy|sockmap|sockmsg",
                     "how response bytes reach the client (default auto)"},
    [O_NO_BPF] = {"no-bpf", NULL, "no BPF at all: unprivileged, copy data path"},
    [O_PIN_PATH] = {"bpf-pin-path", "DIR",
                    "where BPF maps are pinned (default " PG_PIN_PATH_DEFAULT ")"},
    [O_BPF_CGROUP] = {"bpf-cgroup", "PATH",
                      "cgroup v2 directory the sockmsg path attaches to (default: the first "
                      "cgroup2 mount of /sys/fs/cgroup/unified, /sys/fs/cgroup)"},
    [O_HC_PATH] = {"health-check-path", "PATH",
                   "active health check: GET PATH on each backend; none: off (default /health)"},
    [O_HC_INTERVAL] = {"health-check-interval", "MS",
                       "time between checks, 100-600000 (default 2000)"},
    [O_HC_TIMEOUT] = {"health-check-timeout", "MS",
                      "a check not answered 2xx within MS fails, 10-60000 (default 1000)"},
    [O_HC_RISE] = {"health-rise", "N",
                   "passed checks in a row that bring a backend back, 1-100 (default 2)"},
    [O_HC_FALL] = {"health-fall", "N",
                   "failed checks in a row that take a backend out, 1-100 (default 3)"},
    [O_SCRAPE] = {"metrics-scrape-interval", "MS",
                  "GET /metrics of each backend (vLLM KV hits, queue) every MS, 0 or "
                  "100-600000; 0: off (default 5000)"},
    [O_LOAD_SIGNAL] = {"load-signal", "inflight|backend|both",
                       "least-outstanding compares in_flight, the backend's running+waiting, "
                       "or in_flight+waiting (default inflight)"},
    [O_SHADOW] = {"shadow", NULL,
                  "also compute what prefix_aware would choose: prefixgate_shadow_* metrics"},
    [O_PREDICT_WINDOW] = {"predict-window", "MS",
                          "a request is a predicted KV hit if its key went to the same backend "
                          "within MS, 1000-3600000 (default 60000)"},
    [O_USER] = {"user", "NAME",
                "after start-up run as NAME (uid, gid, groups), keeping no capability the "
                "gateway does not use (default: stay as started)"},
    [O_ADMIN_TOKEN] = {"admin-token", "TOKEN",
                       "every admin request needs \"Authorization: Bearer TOKEN\" (16-256 "
                       "chars); required for a non-loopback --admin"},
    [O_ADMIN_TOKEN_FILE] = {"admin-token-file", "FILE",
                            "the same, read from FILE (keeps the token out of ps)"},
    [O_SHUTDOWN_TIMEOUT] = {"shutdown-timeout", "SECONDS",
                            "SIGTERM/SIGINT: stop accepting, let in-flight requests finish "
                            "for at most SECONDS, 0-3600 (default 10)"},
    [O_MAX_IN_FLIGHT] = {"max-in-flight", "N",
                         "gateway-wide cap on requests in flight; beyond it 503 with "
                         "Retry-After, 0-10000000; 0: off (default 0)"},
    [O_MAX_CONNS] = {"max-connections", "N",
                     "client connections per worker; beyond it 503, 1-10000000 "
                     "(default 65536)"},
    [O_MAX_BODY] = {"max-body-size", "BYTES",
                    "larger request bodies get 413, on every path, 1024-4294967295 "
                    "(default " PG_STR(PG_MAX_BODY_DEFAULT) ")"},
    [O_CACHE_CAPACITY] = {"cache-capacity", "TOKENS",
                          "cache_aware: KV cache of each instance, in tokens (4 characters "
                          "each); sizes and ages the block index, 1024-1000000000 (default "
                          PG_STR(PG_CA_CAPACITY_DEFAULT) ")"},
    [O_ROUTE_HEADER] = {"route-header", NULL,
                        "add X-Prefixgate-Route: backend=...; reason=...; matched=N to every "
                        "response"},
    [O_T_HEADER] = {"header-timeout", "MS",
                    "a request head not complete MS after its first byte: 408, 100-3600000 "
                    "(default 10000)"},
    [O_T_BODY] = {"body-timeout", "MS",
                  "no request body byte for MS: 408, 100-3600000 (default 30000)"},
    [O_T_IDLE] = {"idle-timeout", "MS",
                  "idle keep-alive client connections closed after MS, 100-3600000 "
                  "(default 60000)"},
    [O_T_CONNECT] = {"connect-timeout", "MS",
                     "backend connect; then the next candidate, 100-600000 (default 3000)"},
    [O_T_FIRST_BYTE] = {"first-byte-timeout", "MS",
                        "request sent, no response byte for MS: 504 (prefill can take long), "
                        "100-3600000 (default 300000)"},
    [O_SPLICE_BUDGET] = {"splice-budget", "BYTES",
                         "in-kernel data paths: response bytes in flight to one slow client "
                         "before falling back, 65536-1073741824 (default 4194304)"},
    [O_ACCESS_LOG] = {"access-log", "FILE",
                      "append one JSON line per request to FILE, written off the request path "
                      "(default: none)"},
    [O_HELP] = {"help", NULL, "print this help and exit"},
    [O_VERSION] = {"version", NULL, "print the version and exit"},
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

void pg_config_usage(FILE *out)
{
	char left[64];

	fprintf(out, "Usage: prefixgate [OPTION]...\n"
	             "Prefix-aware HTTP/1.1 router for LLM inference servers.\n\n");
	for (size_t i = 0; i < NOPTS; i++) {
		snprintf(left, sizeof(left), "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
		         opts[i].arg ? opts[i].arg : "");
		if (strlen(left) > 28)
			fprintf(out, "  %s\n  %-28s  %s\n", left, "", opts[i].help);
		else
			fprintf(out, "  %-28s  %s\n", left, opts[i].help);
	}
	fprintf(out, "\nFlags take \"--flag value\" or \"--flag=value\".\n"
	             "Admin API on --admin: GET /metrics /backends /routing /health, "
	             "POST /backends /route,\n"
	             "DELETE /backends/ADDR:PORT, PUT /routing (RoutingConfig JSON).\n");
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
		pg_backends_free(v, n);
	}
	return 0;
}

static int apply(struct pg_config *cfg, enum opt_id id, const char *v, struct pg_route_cfg *flags,
                 unsigned *set, char *err, size_t errlen)
{
	static const char *const paths[] = {"auto", "copy", "sockmap", "sockmsg"};
	const char *name = opts[id].name;
	struct sockaddr_in a;
	char e[160];
	size_t dup;
	int rc;

	switch (id) {
	case O_LISTEN:
	case O_ADMIN:
	case O_BACKEND:
		if (pg_addr_parse(v, &a, e, sizeof(e))) {
			pg_errf(err, errlen, "--%s: %s", name, e);
			return -1;
		}
		if (id != O_BACKEND) {
			*(id == O_LISTEN ? &cfg->listen : &cfg->admin) = a;
			return 0;
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
		if (pg_strategy_parse(v, strlen(v), &flags->strategy)) {
			pg_errf(err, errlen,
			        "--strategy: \"%s\" is not one of random, "
			        "least_outstanding_requests, prefix_aware, cache_aware",
			        v);
			return -1;
		}
		*set |= 1u << id;
		return 0;
	case O_PREFIX_LENGTH:
		*set |= 1u << id;
		return flag_uint(name, v, PG_PREFIX_LENGTH_MIN, PG_PREFIX_LENGTH_MAX,
		                 &flags->prefix_length, err, errlen);
	case O_CONCURRENCY:
		*set |= 1u << id;
		return flag_uint(name, v, PG_CONCURRENCY_MIN, PG_CONCURRENCY_MAX,
		                 &flags->concurrency_threshold, err, errlen);
	case O_WORKERS:
		return flag_uint(name, v, 1, PG_WORKERS_MAX, &cfg->workers, err, errlen);
	case O_DATA_PATH:
		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
			if (!strcasecmp(v, paths[i])) {
				cfg->data_path = (enum pg_data_path)i;
				return 0;
			}
		}
		pg_errf(err, errlen,
		        "--data-path: \"%s\" is not one of auto, copy, sockmap, sockmsg", v);
		return -1;
	case O_NO_BPF:
		cfg->no_bpf = true;
		return 0;
	case O_HC_PATH:
		if (!strcmp(v, "none")) {
			cfg->health.path = NULL;
			return 0;
		}
		if (v[0] != '/' || strpbrk(v, " \t\r\n")) {
			pg_errf(err, errlen, "--%s: \"%s\" is not an absolute path (or none)", name, v);
			return -1;
		}
		cfg->health.path = v;
		return 0;
	case O_HC_INTERVAL:
		return flag_uint(name, v, 100, 600000, &cfg->health.interval_ms, err, errlen);
	case O_HC_TIMEOUT:
		return flag_uint(name, v, 10, 60000, &cfg->health.timeout_ms, err, errlen);
	case O_HC_RISE:
		return flag_uint(name, v, 1, 100, &cfg->health.rise, err, errlen);
	case O_HC_FALL:
		return flag_uint(name, v, 1, 100, &cfg->health.fall, err, errlen);
	case O_SCRAPE:
		if (!strcmp(v, "0")) {
			cfg->metrics_scrape_ms = 0;
			return 0;
		}
		return flag_uint(name, v, 100, 600000, &cfg->metrics_scrape_ms, err, errlen);
	case O_LOAD_SIGNAL: {
		static const char *const signals[] = {"inflight", "backend", "both"};

		for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++) {
			if (!strcasecmp(v, signals[i])) {
				cfg->load_signal = (enum pg_load_signal)i;
				return 0;
			}
		}
		pg_errf(err, errlen, "--load-signal: \"%s\" is not one of inflight, backend, both",
		        v);
		return -1;
	}
	case O_SHADOW:
		cfg->shadow = true;
		return 0;
	case O_PREDICT_WINDOW:
		return flag_uint(name, v, 1000, 3600000, &cfg->predict_window_ms, err, errlen);
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
	case O_SHUTDOWN_TIMEOUT:
		return flag_uint(name, v, 0, 3600, &cfg->shutdown_timeout_s, err, errlen);
	case O_MAX_IN_FLIGHT:
		return flag_uint(name, v, 0, 10000000, &cfg->max_in_flight, err, errlen);
	case O_MAX_CONNS:
		return flag_uint(name, v, 1, 10000000, &cfg->max_connections, err, errlen);
	case O_CACHE_CAPACITY:
		return flag_uint(name, v, 1024, 1000000000, &cfg->cache_capacity, err, errlen);
	case O_ROUTE_HEADER:
		cfg->route_header = true;
		return 0;
	case O_MAX_BODY:
		return flag_uint(name, v, 1024, UINT32_MAX, &cfg->max_body, err, errlen);
	case O_T_HEADER:
		return flag_uint(name, v, 100, 3600000, &cfg->timeouts.header_ms, err, errlen);
	case O_T_BODY:
		return flag_uint(name, v, 100, 3600000, &cfg->timeouts.body_ms, err, errlen);
	case O_T_IDLE:
		return flag_uint(name, v, 100, 3600000, &cfg->timeouts.idle_ms, err, errlen);
	case O_T_CONNECT:
		return flag_uint(name, v, 100, 600000, &cfg->timeouts.connect_ms, err, errlen);
	case O_T_FIRST_BYTE:
		return flag_uint(name, v, 100, 3600000, &cfg->timeouts.first_byte_ms, err, errlen);
	case O_ACCESS_LOG:
		cfg->access_log = v;
		return 0;
	case O_SPLICE_BUDGET:
		return flag_uint(name, v, 65536, 1u << 30, &cfg->splice_budget, err, errlen);
	default:
		return 0;
	}
}

static void config_defaults(struct pg_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	pg_addr_parse(PG_LISTEN_DEFAULT, &cfg->listen, NULL, 0);
	pg_addr_parse(PG_ADMIN_DEFAULT, &cfg->admin, NULL, 0);
	cfg->route.strategy = PG_STRATEGY_PREFIX_AWARE;
	cfg->health.path = "/health";
	cfg->health.interval_ms = 2000;
	cfg->health.timeout_ms = 1000;
	cfg->health.rise = 2;
	cfg->health.fall = 3;
	cfg->metrics_scrape_ms = 5000;
	cfg->predict_window_ms = 60000;
	cfg->load_signal = PG_LOAD_INFLIGHT;
	cfg->route.prefix_length = PG_PREFIX_LENGTH_DEFAULT;
	cfg->route.concurrency_threshold = PG_CONCURRENCY_DEFAULT;
	cfg->route.max_load_gap = PG_CA_GAP_DEFAULT;
	cfg->cache_capacity = PG_CA_CAPACITY_DEFAULT;
	cfg->data_path = PG_DATA_AUTO;
	cfg->pin_path = PG_PIN_PATH_DEFAULT;
	cfg->shutdown_timeout_s = 10;
	cfg->max_connections = 65536;
	cfg->max_body = PG_MAX_BODY_DEFAULT;
	cfg->timeouts = (struct pg_timeouts){.header_ms = 10000, .body_ms = 30000, .idle_ms = 60000,
	                                     .connect_ms = 3000, .first_byte_ms = 300000};
	cfg->splice_budget = 4u << 20;
}

int pg_config_parse(struct pg_config *cfg, int argc, char **argv, FILE *out, char *err,
                    size_t errlen)
{
	struct pg_route_cfg flags = {0};
	unsigned set = 0;
	int ret = 2;

	config_defaults(cfg);
	if (errlen)
		err[0] = 0;
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
		if (opts[id].arg) {
			v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (!v) {
				pg_errf(err, errlen, "--%s: missing value %s", opts[id].name,
				        opts[id].arg);
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
	if (cfg->no_bpf &&
	    (cfg->data_path == PG_DATA_SOCKMAP || cfg->data_path == PG_DATA_SOCKMSG)) {
		pg_errf(err, errlen, "--data-path %s needs BPF: drop --no-bpf or use copy",
		        cfg->data_path == PG_DATA_SOCKMAP ? "sockmap" : "sockmsg");
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
}
