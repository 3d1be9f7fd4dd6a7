// SPDX-License-Identifier: MIT
/*
 * TLS's families (metrics.h; doc/security.md): handshakes on each side
 * (clients', backends'), resumed or full, by version and by cipher, the
 * failures by reason, the handshakes in progress, the certificates'
 * expiry, the reloads.
 */
#include <string.h>
#include "admin/metrics.h"
#include "tls/tls.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

static const char *const side_names[PG_TLS_SIDES] = {"clients", "backends"};
static const char *const version_names[PG_TLS_VERSIONS] = {"TLSv1.2", "TLSv1.3"};

/* Sum of one counter over the workers (off: its offset in the stats). */
static uint64_t sum(const struct pg_gateway *gw, size_t off)
{
	uint64_t n = 0;

	for (unsigned w = 0; w < gw->nworkers; w++)
		n += LOAD((const uint64_t *)(const void *)((const char *)&gw->tls->stats[w] + off));
	return n;
}

#define SUM(field) sum(gw, offsetof(struct pg_tls_stats, field))

static void expiry(struct pg_buf *o, const char *role, const char *file, const char *subject,
                   int64_t t)
{
	pg_buf_printf(o, "prefixgate_tls_certificate_expiry_seconds{role=\"%s\",file=", role);
	pg_buf_json_str(o, file, strlen(file));
	pg_buf_puts(o, ",subject=");
	pg_buf_json_str(o, subject, strlen(subject));
	pg_buf_printf(o, "} %lld\n", (long long)t);
}

void pg_metrics_tls_render(const struct pg_gateway *gw, struct pg_buf *o)
{
	struct pg_tls *t = gw->tls;
	struct pg_tls_set *s;

	if (!t)
		return;
	pg_metrics_family(o, "prefixgate_tls_handshakes_total", "counter",
	                  "TLS handshakes completed, by side (clients: the HTTPS listener's; "
	                  "backends: to https:// backends) and whether the session was resumed");
	for (int d = 0; d < PG_TLS_SIDES; d++)
		for (int r = 0; r < 2; r++)
			pg_buf_printf(o,
			              "prefixgate_tls_handshakes_total{side=\"%s\",resumed=\"%s\"} "
			              "%llu\n",
			              side_names[d], r ? "true" : "false",
			              (unsigned long long)SUM(handshakes[d][r]));
	pg_metrics_family(o, "prefixgate_tls_handshake_failures_total", "counter",
	                  "TLS handshakes that failed, by side and reason");
	for (int d = 0; d < PG_TLS_SIDES; d++)
		for (int r = 0; r < PG_TLS_F_N; r++)
			pg_buf_printf(o,
			              "prefixgate_tls_handshake_failures_total{side=\"%s\",reason="
			              "\"%s\"} %llu\n",
			              side_names[d], pg_tls_fail_names[r],
			              (unsigned long long)SUM(failures[d][r]));
	pg_metrics_family(o, "prefixgate_tls_version_handshakes_total", "counter",
	                  "TLS handshakes completed, by side and protocol version");
	for (int d = 0; d < PG_TLS_SIDES; d++)
		for (int v = 0; v < PG_TLS_VERSIONS; v++)
			pg_buf_printf(o,
			              "prefixgate_tls_version_handshakes_total{side=\"%s\",version="
			              "\"%s\"} %llu\n",
			              side_names[d], version_names[v],
			              (unsigned long long)SUM(versions[d][v]));
	pg_metrics_family(o, "prefixgate_tls_cipher_handshakes_total", "counter",
	                  "TLS handshakes completed, by side and cipher");
	for (int c = 0; c < PG_TLS_CIPHER_SLOTS; c++) {
		const char *name = __atomic_load_n(&t->cipher_names[c], __ATOMIC_ACQUIRE);

		for (int d = 0; name && d < PG_TLS_SIDES; d++)
			pg_buf_printf(o,
			              "prefixgate_tls_cipher_handshakes_total{side=\"%s\",cipher="
			              "\"%s\"} %llu\n",
			              side_names[d], name, (unsigned long long)SUM(ciphers[d][c]));
	}
	pg_metrics_family(o, "prefixgate_tls_handshakes_in_progress", "gauge",
	                  "TLS handshakes in progress, every worker's (--tls-max-handshakes bounds "
	                  "each worker's)");
	pg_buf_printf(o, "prefixgate_tls_handshakes_in_progress %llu\n",
	              (unsigned long long)SUM(in_progress));
	s = pg_tls_set_get(t);
	pg_metrics_family(o, "prefixgate_tls_certificate_expiry_seconds", "gauge",
	                  "When a certificate in use stops being valid (the earliest notAfter of "
	                  "its chain), seconds since the epoch; role: listener or backend_client");
	for (size_t i = 0; s && i < s->ncerts; i++)
		expiry(o, "listener", s->certs[i].cert_file, s->certs[i].subject,
		       s->certs[i].chain_not_after);
	if (s && gw->cfg->tls.backend_cert)
		expiry(o, "backend_client", gw->cfg->tls.backend_cert, s->client_subject,
		       s->client_not_after);
	pg_tls_set_put(s);
	pthread_mutex_lock(&t->lock);
	pg_metrics_family(o, "prefixgate_tls_reloads_total", "counter",
	                  "Certificate reloads (SIGHUP, POST /tls/reload), by result");
	pg_buf_printf(o, "prefixgate_tls_reloads_total{result=\"applied\"} %llu\n",
	              (unsigned long long)(t->reloads - t->refused));
	pg_buf_printf(o, "prefixgate_tls_reloads_total{result=\"refused\"} %llu\n",
	              (unsigned long long)t->refused);
	pthread_mutex_unlock(&t->lock);
}
