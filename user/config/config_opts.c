// SPDX-License-Identifier: MIT
/*
 * The table of the command line's flags (config_opts.h): one entry per flag,
 * and --help printed from it. config_flags.c parses by it.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "config/config.h"
#include "config/config_opts.h"
#include "sys/log.h"

const char *const pg_data_paths[PG_NDATA_PATHS] = {
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
	for (size_t i = 0; i < PG_NDATA_PATHS && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%s%s", i ? sep : "", pg_data_paths[i]);

		used += k > 0 ? (size_t)k : 0;
	}
	return buf;
}

const char *const pg_tls_versions[PG_NTLS_VERSIONS] = {
    [PG_TLS_1_2] = "1.2",
    [PG_TLS_1_3] = "1.3",
};

static const char *tls_version_list(char *buf, size_t len, const char *sep)
{
	snprintf(buf, len, "%s%s%s", pg_tls_versions[0], sep, pg_tls_versions[1]);
	return buf;
}

static const char *strategy_list(char *buf, size_t len, const char *sep)
{
	return pg_strategy_list(buf, len, false, sep, sep);
}

/* --log-level values, by enum pg_log_level (sys/log.h). */
const char *const pg_log_levels[PG_NLOG_LEVELS] = {
    [PG_LOG_ERROR] = "error",
    [PG_LOG_WARN] = "warn",
    [PG_LOG_INFO] = "info",
    [PG_LOG_DEBUG] = "debug",
};

static const char *log_level_list(char *buf, size_t len, const char *sep)
{
	size_t used = 0;

	if (len)
		buf[0] = '\0';
	for (size_t i = 0; i < PG_NLOG_LEVELS && used < len; i++) {
		int k = snprintf(buf + used, len - used, "%s%s", i ? sep : "", pg_log_levels[i]);

		used += k > 0 ? (size_t)k : 0;
	}
	return buf;
}

const struct pg_opt pg_opts[] = {
#define OPT(n, a, h)  .name = (n), .arg = (a), .help = (h)
#define CFG(f)        .field = offsetof(struct pg_config, f)
#define ROUTE(f)      .field = offsetof(struct pg_route_cfg, f), .route = true
#define RANGE(lo, hi) .min = (lo), .max = (hi)
#define STR(f)        CFG(f), .str = true
#define FLAG(f)       CFG(f), .flag = true
#define TOKEN_LEN     PG_STR(PG_ADMIN_TOKEN_MIN) "-" PG_STR(PG_ADMIN_TOKEN_MAX)
#define TOKEN_CHARS   PG_STR(PG_CA_CHARS_PER_TOKEN)
    [O_CONFIG] = {OPT("config", "FILE",
                      "the configuration file: these flags' directives and pool and tenant "
                      "blocks (doc/configuration.md); flags given override it"),
                  .short_name = 'c', .cli = true, .def_text = PG_CONF_DEFAULT " if it exists"},
    [O_CHECK] = {OPT("check", NULL,
                     "check the configuration and what starting it needs (files, --user, "
                     "addresses) and exit, 0 if valid, else 1 with every error as "
                     "FILE:LINE: ...; nothing is started"),
                 FLAG(check), .cli = true},
    [O_LISTEN] = {OPT("listen", "ADDR:PORT", "client listener (A.B.C.D, [IPV6], localhost)"),
                  .def = PG_LISTEN_DEFAULT},
    [O_ADMIN] = {OPT("admin", "ADDR:PORT", "admin API and metrics"), .def = PG_ADMIN_DEFAULT},
    [O_BACKEND] = {OPT("backend", "HOST:PORT",
                       "an inference instance (A.B.C.D, [IPV6], or a DNS name standing for "
                       "every address it resolves to); repeat for each (default none)"),
                   .live = true},
    [O_BACKENDS_FILE] = {OPT(
        "backends-file", "FILE",
        "more backends, one HOST:PORT a line, '#' comments; re-read on SIGHUP")},
    [O_RESOLVER] = {OPT("resolver", "IP:PORT[,...]", "DNS servers for backend names"),
                    .def_text = "/etc/resolv.conf"},
    [O_RESOLVE_INTERVAL] = {OPT("resolve-interval", "MS",
                                "backend names are looked up again every MS"),
                            .def = PG_STR(PG_RESOLVE_MS_DEFAULT), CFG(resolve_ms),
                            RANGE(100, 3600000)},
    [O_STRATEGY] = {OPT("strategy", "S", NULL), .list = strategy_list, .def = "prefix_aware",
                    .route = true, .live = true},
    [O_PREFIX_LENGTH] = {OPT("prefix-length", "N",
                             "prefix key length, characters (bytes for non-OpenAI paths)"),
                         .def = PG_STR(PG_PREFIX_LENGTH_DEFAULT), ROUTE(prefix_length),
                         RANGE(PG_PREFIX_LENGTH_MIN, PG_PREFIX_LENGTH_MAX), .live = true},
    [O_CONCURRENCY] = {OPT("concurrency-threshold", "N",
                           "in-flight requests per backend before prefix_aware overflows"),
                       .def = PG_STR(PG_CONCURRENCY_DEFAULT), ROUTE(concurrency_threshold),
                       RANGE(PG_CONCURRENCY_MIN, PG_CONCURRENCY_MAX), .live = true},
    [O_CA_CHOICES] = {OPT("new-conversation-choices", "N",
                          "cache_aware: a new conversation goes to the least recently sent of "
                          "its first N ring candidates (CacheAwareConfig.NewConversationChoices)"),
                      .def = PG_STR(PG_CA_CHOICES_DEFAULT), ROUTE(new_choices),
                      RANGE(1, PG_RING_CANDIDATES), .live = true},
    [O_ROUTING_CONFIG] = {OPT("routing-config", "FILE",
                              "SageMaker RoutingConfig JSON; the four flags above and "
                              "--flow-instance-queue-ms, --flow-deadline-ms override it"),
                          .route = true, .live = true},
    [O_FLOW_CONTROL] = {OPT("flow-control", NULL,
                            "flow control: past the instances' room requests wait in the "
                            "gateway, fairly between tenants, by class, up to a deadline "
                            "(doc/routing.md, Flow control)"),
                        FLAG(flow.on), .route = true, .live = true},
    [O_FLOW_QUEUE_MS] = {OPT("flow-instance-queue-ms", "MS",
                             "flow control: an instance takes requests while its queued "
                             "prefill is predicted under MS (FlowControlConfig.InstanceQueueMs)"),
                         .def_text = "each instance's own service time with --flow-control",
                         ROUTE(flow_queue_ms), RANGE(1, PG_FLOW_QUEUE_MS_MAX), .zero_off = true,
                         .live = true},
    [O_FLOW_DEADLINE] = {OPT("flow-deadline-ms", "MS",
                             "flow control: a request without X-Prefixgate-Deadline-Ms gets 429 "
                             "if not sent on within MS (FlowControlConfig.DeadlineMs)"),
                         .def = "0", ROUTE(flow_deadline_ms), RANGE(1, PG_FLOW_DEADLINE_MAX),
                         .zero_off = true, .live = true},
    [O_FLOW_MAX_QUEUED] = {OPT("flow-max-queued", "N",
                               "flow control: requests waiting at most; past it a sheddable one "
                               "makes room, else 429"),
                           .def = PG_STR(PG_FLOW_MAX_QUEUED_DEFAULT), CFG(flow.max_queued),
                           RANGE(1, 10000000)},
    [O_FLOW_MAX_BYTES] = {OPT("flow-max-queued-bytes", "BYTES",
                              "flow control: memory the waiting requests hold at most"),
                          .def = PG_STR(PG_FLOW_MAX_BYTES_DEFAULT), CFG(flow.max_bytes),
                          RANGE(1u << 20, UINT32_MAX)},
    [O_FLOW_STARVE] = {OPT("flow-starve-ms", "MS",
                           "flow control: a lower class's request that has waited MS goes "
                           "before higher classes, one such request each MS"),
                       .def = PG_STR(PG_FLOW_STARVE_MS), CFG(flow.starve_ms), RANGE(1, 3600000)},
    [O_FLOW_TENANT] = {OPT("flow-tenant", "SRC",
                           "flow control: a request's tenant: bearer (Authorization's token, "
                           "hashed), header:NAME (that header's value), user (the body's "
                           "\"user\") or cert (the TLS client certificate's subject)"),
                       .def = "bearer"},
    [O_TENANT] = {OPT("tenant", "NAME[:KEY=V]",
                      "a tenant's weight=W (1-" PG_STR(PG_TENANT_WEIGHT_MAX) ", default 1) and "
                                                                             "priority=P (its "
                                                                             "default class and "
                                                                             "the highest it may "
                                                                             "ask), its quota "
                                                                             "rpm=N and tpm=N "
                                                                             "(requests, tokens a "
                                                                             "minute; 0: none); "
                                                                             "repeat"),
                  .live = true},
    [O_QUOTA] = {OPT("quota", "rpm=N,tpm=N",
                     "every tenant's quota without its own (--tenant): requests and tokens a "
                     "minute, 0 to " PG_STR(PG_QUOTA_MAX) ", 0: none"),
                 .def_text = "none", .live = true},
    [O_EXACT_USAGE] = {OPT("exact-usage", NULL,
                           "usage accounting reads the engine's usage from every answer the "
                           "gateway carries, not only while a quota is in force (about 5 ns a "
                           "byte of each answer; doc/operations.md, Usage accounting)"),
                       FLAG(exact_usage)},
    [O_WORKERS] = {OPT("workers", "N", "worker threads"), .def_text = "one per CPU", CFG(workers),
                   RANGE(1, PG_WORKERS_MAX)},
    [O_DATA_PATH] = {OPT("data-path", NULL, "how response bytes reach the client"),
                     .list = data_path_list, .def = "auto"},
    [O_NO_BPF] = {OPT("no-bpf", NULL, "no BPF at all: unprivileged, copy data path"), FLAG(no_bpf)},
    [O_PIN_PATH] = {OPT("bpf-pin-path", "DIR", "where BPF maps are pinned"),
                    .def = PG_PIN_PATH_DEFAULT},
    [O_BPF_CGROUP] = {OPT("bpf-cgroup", "PATH", "cgroup v2 directory the sockmsg path attaches to"),
                      .def_text = "the first cgroup2 mount of /sys/fs/cgroup/unified, "
                                  "/sys/fs/cgroup"},
    [O_HC_PATH] = {OPT("health-check-path", "PATH",
                       "active health check: GET PATH on each backend; none: off"),
                   .def = "/health", .live = true},
    [O_HC_INTERVAL] = {OPT("health-check-interval", "MS", "time between checks"), .def = "2000",
                       CFG(health.interval_ms), RANGE(100, 600000), .live = true},
    [O_HC_TIMEOUT] = {OPT("health-check-timeout", "MS", "a check not answered 2xx within MS fails"),
                      .def = "1000", CFG(health.timeout_ms), RANGE(10, 60000), .live = true},
    [O_HC_RISE] = {OPT("health-rise", "N", "passed checks in a row that bring a backend back"),
                   .def = "2", CFG(health.rise), RANGE(1, 100), .live = true},
    [O_HC_FALL] = {OPT("health-fall", "N", "failed checks in a row that take a backend out"),
                   .def = "3", CFG(health.fall), RANGE(1, 100), .live = true},
    [O_SCRAPE] = {OPT("metrics-scrape-interval", "MS",
                      "GET /metrics of each backend (vLLM KV hits, queue) every MS; a fifth "
                      "of it (50 at least) while only its report shows its queue drain"),
                  .def = "250", CFG(metrics_scrape_ms), RANGE(PG_SCRAPE_MIN_MS, 600000),
                  .zero_off = true, .live = true},
    [O_LOAD_SIGNAL] = {OPT("load-signal", NULL,
                           "least-outstanding compares in_flight, the backend's running+waiting, "
                           "or in_flight+waiting"),
                       .list = pg_load_signal_list, .def = "inflight"},
    [O_SHADOW] = {OPT("shadow", NULL,
                      "also compute what prefix_aware would choose: prefixgate_shadow_* metrics"),
                  FLAG(shadow)},
    [O_PREDICT_WINDOW] = {OPT("predict-window", "MS",
                              "a request is a predicted KV hit if its key went to the same backend "
                              "within MS"),
                          .def = "60000", CFG(predict_window_ms), RANGE(1000, 3600000)},
    [O_POOL] = {OPT("pool", "NAME[:KEY=V]",
                    "a model pool; KEY: model=M,.. path=/P,.. backend=ADDR:PORT,.. strategy "
                    "prefix-length concurrency-threshold new-conversation-choices "
                    "flow-control flow-instance-queue-ms flow-deadline-ms routing-config=FILE; "
                    "prefill/decode: pd=vllm|sglang prefill=ADDR[@PORT],.. decode=ADDR,.. "
                    "pd-min-tokens bootstrap-port; repeat (default: one pool, default)"),
                .live = true},
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
                              " characters each), unless it reports vllm:cache_config_info; "
                              "sizes and ages the block index"),
                          .def = PG_STR(PG_CA_CAPACITY_DEFAULT), CFG(cache_capacity),
                          RANGE(1024, 1000000000)},
    [O_ROUTE_HEADER] = {OPT("route-header", NULL,
                            "add X-Prefixgate-Route: backend=...; reason=...; matched=N to every "
                            "response (cache_aware: and its estimates: wait, prefill, saved, TTFT, "
                            "the runner-up's)"),
                        FLAG(route_header)},
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
    [O_ROUTE_JOURNAL] = {OPT("route-journal", "FILE",
                             "write every input of the routing core and each decision to "
                             "FILE, for tracesim --replay (tests: each event takes a lock)"),
                         .def_text = "none"},
    [O_OTLP_ENDPOINT] = {OPT("otlp-endpoint", "URL",
                             "export OpenTelemetry traces over OTLP/HTTP (JSON) to the "
                             "collector at http://HOST:PORT (path /v1/traces) or "
                             "http://HOST:PORT/PATH; W3C traceparent passed on to the instance"),
                         .def_text = "off"},
    [O_OTLP_SAMPLE] = {OPT("otlp-sample", "RATIO",
                           "traces: the share of requests without a sampled parent that are "
                           "traced, 0 to 1; a traceparent's sampled flag decides for its request"),
                       .def = "1"},
    [O_OTLP_TIMEOUT] = {OPT("otlp-timeout", "MS",
                            "traces: each POST to the collector; past it its spans are dropped"),
                        .def = "2000", CFG(otlp.timeout_ms), RANGE(10, 60000)},
    [O_LOG_LEVEL] = {OPT("log-level", NULL, "what the log (stderr) tells: errors only, and up"),
                     .list = log_level_list, .def = "info", .live = true},
    [O_TLS_LISTEN] = {OPT("tls-listen", "ADDR:PORT",
                          "HTTPS listener beside --listen's (TLS terminated here; "
                          "doc/security.md)"),
                      .def_text = "none"},
    [O_TLS_CERT] = {OPT("tls-cert", "FILE",
                        "its certificate chain (PEM, the leaf first); repeat: the one whose "
                        "names match the client's SNI is shown, the first by default; "
                        "reloaded on SIGHUP and POST /tls/reload")},
    [O_TLS_KEY] = {OPT("tls-key", "FILE",
                       "the private key (PEM) of the --tls-cert of the same rank"),
                   .def_text = "in the certificate's file"},
    [O_TLS_CIPHERS] = {OPT("tls-ciphers", "LIST", "TLS 1.2 ciphers (OpenSSL's syntax)"),
                       STR(tls.ciphers),
                       .def_text = "ECDHE with AES-GCM or ChaCha20-Poly1305, AES-128 first"},
    [O_TLS_SUITES] = {OPT("tls-ciphersuites", "LIST", "TLS 1.3 cipher suites"), STR(tls.suites),
                      .def_text = "TLS_AES_128_GCM_SHA256, then AES-256-GCM, ChaCha20-Poly1305"},
    [O_TLS_MIN_VERSION] = {OPT("tls-min-version", NULL, "the oldest TLS version accepted"),
                           .list = tls_version_list, .def = "1.2"},
    [O_TLS_CLIENT_CA] = {OPT("tls-client-ca", "FILE",
                             "mTLS: clients must show a certificate issued by a CA of FILE "
                             "(PEM); --flow-tenant cert makes its subject the tenant"),
                         STR(tls.client_ca), .def_text = "none"},
    [O_TLS_HS_TIMEOUT] = {OPT("tls-handshake-timeout", "MS",
                              "a client's TLS handshake not done within MS: closed"),
                          .def = "10000", CFG(tls.handshake_ms), RANGE(100, 600000)},
    [O_TLS_MAX_HS] = {OPT("tls-max-handshakes", "N",
                          "TLS handshakes in progress per worker; beyond it new TLS "
                          "connections are closed"),
                      .def = "1024", CFG(tls.max_handshakes), RANGE(1, 1000000)},
    [O_TLS_TICKETS] = {OPT("tls-ticket-rotate", "SECONDS",
                           "session tickets (resumption): their key changes every SECONDS, a "
                           "ticket is taken for two"),
                       .def = "3600", CFG(tls.ticket_s), RANGE(60, 86400), .zero_off = true},
    [O_BACKEND_TLS_CA] = {OPT("backend-tls-ca", "FILE",
                              "https:// backends' certificates are checked against the CAs of "
                              "FILE (PEM)"),
                          STR(tls.backend_ca), .def_text = "the system's store"},
    [O_BACKEND_TLS_CERT] = {OPT("backend-tls-cert", "FILE",
                                "a client certificate (PEM chain) shown to https:// backends"),
                            STR(tls.backend_cert), .def_text = "none"},
    [O_BACKEND_TLS_KEY] = {OPT("backend-tls-key", "FILE", "its private key (PEM)"),
                           STR(tls.backend_key), .def_text = "in its file"},
    [O_NATS] = {OPT("nats", "URL",
                    "fleet: share in-flight counts and cache_aware decisions with the other "
                    "gateways over NATS at URL (nats://HOST:PORT)"),
                .def_text = "none"},
    [O_NATS_CLUSTER] =
        {OPT("nats-cluster", "NAME",
             "fleet: the gateways sharing subjects prefixgate.NAME.load|cache|fit|flow"),
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
    [O_ETCD_PREFIX] = {OPT("etcd-prefix", "P", "etcd key prefix (doc/fleets.md)"), STR(etcd.prefix),
                       .def = PG_ETCD_PREFIX_DEFAULT},
    [O_ETCD_TIMEOUT] = {OPT("etcd-timeout", "MS", "each etcd call, and its liveness check"),
                        .def = "1000", CFG(etcd.timeout_ms), RANGE(50, 60000)},
    [O_ETCD_USER] = {OPT("etcd-user", "NAME", "etcd authentication user"), STR(etcd.user)},
    [O_ETCD_PASSWORD] = {OPT("etcd-password-file", "FILE", "that user's password, from FILE"),
                         STR(etcd.password_file)},
    [O_ETCD_STATE] = {OPT("etcd-state-file", "FILE",
                          "last state read from etcd, kept to start on while etcd is down"),
                      STR(etcd.state_file), .def_text = "none"},
    [O_HELP] = {OPT("help", NULL, "print this help and exit"), .cli = true},
    [O_VERSION] = {OPT("version", NULL, "print the version and exit"), .cli = true},
#undef OPT
#undef CFG
#undef ROUTE
#undef RANGE
#undef STR
#undef FLAG
#undef TOKEN_LEN
#undef TOKEN_CHARS
};
_Static_assert(sizeof(pg_opts) / sizeof(pg_opts[0]) == PG_NOPTS, "one entry per flag");

/* The help of o: what it does, then its range and default from the table. */
static void help_line(const struct pg_opt *o, char *buf, size_t len)
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
	for (size_t i = 0; i < PG_NOPTS; i++) {
		const char *arg = pg_opts[i].arg;
		char sh[5] = "";

		if (!arg && pg_opts[i].list)
			arg = pg_opts[i].list(names, sizeof(names), "|");
		if (pg_opts[i].short_name)
			snprintf(sh, sizeof(sh), "-%c, ", pg_opts[i].short_name);
		snprintf(left, sizeof(left), "%s--%s%s%s", sh, pg_opts[i].name, arg ? " " : "",
		         arg ? arg : "");
		help_line(&pg_opts[i], help, sizeof(help));
		if (strlen(left) > 28)
			fprintf(out, "  %s\n  %-28s  %s\n", left, "", help);
		else
			fprintf(out, "  %-28s  %s\n", left, help);
	}
	fprintf(out, "\nFlags take \"--flag value\" or \"--flag=value\". Each flag but --config, "
	             "--check, --help\nand --version is also a directive of the configuration "
	             "file: \"flag value;\".\n"
	             "Admin API on --admin: GET /metrics /backends /routing /health /fleet, "
	             "POST /backends /route,\n"
	             "DELETE /backends/ADDR:PORT, PUT /routing (RoutingConfig JSON), GET /pools "
	             "/config /tls,\n"
	             "POST /tls/reload; /backends and /routing take ?pool=NAME.\n");
}
