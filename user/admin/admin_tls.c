// SPDX-License-Identifier: MIT
/*
 * GET /tls and POST /tls/reload (admin.c dispatches to them; doc/security.md):
 * the TLS listener, the certificates it shows now and when they expire,
 * the backends' CA and certificate, the ticket keys, the reloads; and a
 * reload of every certificate file, refused whole when one is wrong.
 * Control thread only.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "admin/admin_pools.h"
#include "config/config_opts.h"
#include "lib/buf.h"
#include "tls/tls.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* "name":"value" (a JSON string, or null), after sep. */
static void str_field(struct pg_buf *o, const char *sep, const char *name, const char *v)
{
	pg_buf_printf(o, "%s\"%s\":", sep, name);
	if (v)
		pg_buf_json_str(o, v, strlen(v));
	else
		pg_buf_puts(o, "null");
}

/* "name":{"at":"TIME","unix":T,"in_s":S} of time t. */
static void time_field(struct pg_buf *o, const char *name, int64_t t, int64_t now)
{
	char when[40];

	pg_buf_printf(o, ",\"%s\":{\"at\":\"%s\",\"unix\":%lld,\"in_s\":%lld}", name,
	              pg_tls_time_text(t, when, sizeof(when)), (long long)t, (long long)(t - now));
}

static void cert_json(struct pg_buf *o, const struct pg_tls_cert *c, int64_t now)
{
	str_field(o, "{", "cert", c->cert_file);
	str_field(o, ",", "key", c->key_file);
	str_field(o, ",", "subject", c->subject);
	str_field(o, ",", "issuer", c->issuer);
	pg_buf_puts(o, ",\"names\":[");
	for (size_t k = 0; k < c->nnames; k++) {
		pg_buf_puts(o, k ? "," : "");
		pg_buf_json_str(o, c->names[k], strlen(c->names[k]));
	}
	pg_buf_puts(o, "]");
	time_field(o, "not_after", c->not_after, now);
	time_field(o, "chain_not_after", c->chain_not_after, now);
	pg_buf_puts(o, "}");
}

int pg_admin_tls_get(struct pg_gateway *gw, struct pg_admin_reply *r)
{
	const struct pg_config *cfg = gw->cfg;
	struct pg_tls *t = gw->tls;
	struct pg_tls_set *s = t ? pg_tls_set_get(t) : NULL;
	const int64_t now = (int64_t)time(NULL);
	struct pg_buf *o = &r->body;
	char a[PG_ADDR_STRLEN], when[40];
	uint64_t rotations = 0, age_ms = 0, in_progress = 0;

	if (!s)
		return pg_admin_reply_error(r, 503, "TLS is not set up");
	for (unsigned w = 0; w < gw->nworkers; w++)
		in_progress += LOAD(&t->stats[w].in_progress);
	pg_buf_printf(o, "{\"listeners\":[{\"address\":\"%s\",\"scheme\":\"http\"}",
	              pg_addr_format(&cfg->listen, a));
	if (cfg->tls.on)
		pg_buf_printf(o, ",{\"address\":\"%s\",\"scheme\":\"https\"}",
		              pg_addr_format(&cfg->tls.listen, a));
	pg_buf_printf(o, "],\"generation\":%llu,\"loaded\":\"%s\"", (unsigned long long)s->gen,
	              pg_tls_time_text((int64_t)(s->loaded_ms / 1000), when, sizeof(when)));
	pg_buf_puts(o, ",\"certificates\":[");
	for (size_t i = 0; i < s->ncerts; i++) {
		if (i)
			pg_buf_puts(o, ",");
		cert_json(o, &s->certs[i], now);
	}
	pg_buf_puts(o, "]");
	str_field(o, ",", "min_version", pg_tls_versions[cfg->tls.min_version]);
	str_field(o, ",", "ciphers", pg_tls_ciphers(&cfg->tls));
	str_field(o, ",", "ciphersuites", pg_tls_suites(&cfg->tls));
	str_field(o, ",", "client_ca", cfg->tls.client_ca);
	pg_buf_printf(o, ",\"handshakes_in_progress\":%llu,\"max_handshakes\":%u",
	              (unsigned long long)in_progress, cfg->tls.max_handshakes);
	if (t->tickets)
		pg_tls_tickets_info(t->tickets, pg_now_ms(), &rotations, &age_ms);
	pg_buf_printf(o,
	              ",\"tickets\":{\"on\":%s,\"rotate_s\":%u,\"rotations\":%llu,"
	              "\"key_age_s\":%llu}",
	              t->tickets ? "true" : "false", cfg->tls.ticket_s,
	              (unsigned long long)rotations, (unsigned long long)(age_ms / 1000));
	str_field(o, ",\"backends\":{", "ca", cfg->tls.backend_ca ? cfg->tls.backend_ca : "system");
	str_field(o, ",", "cert", cfg->tls.backend_cert);
	str_field(o, ",", "subject", cfg->tls.backend_cert ? s->client_subject : NULL);
	if (cfg->tls.backend_cert)
		time_field(o, "not_after", s->client_not_after, now);
	pthread_mutex_lock(&t->lock);
	pg_buf_printf(o, "},\"reloads\":%llu,\"refused\":%llu", (unsigned long long)t->reloads,
	              (unsigned long long)t->refused);
	str_field(o, ",", "last_error", t->last_error[0] ? t->last_error : NULL);
	pthread_mutex_unlock(&t->lock);
	pg_buf_puts(o, "}\n");
	pg_tls_set_put(s);
	return r->status = 200;
}

int pg_admin_tls_reload(struct pg_gateway *gw, struct pg_admin_reply *r)
{
	char err[1024];

	if (!gw->tls)
		return pg_admin_reply_error(r, 503, "TLS is not set up");
	if (pg_tls_reload(gw, "POST /tls/reload", err, sizeof(err)))
		return pg_admin_reply_error(r, 422, err);
	pg_buf_printf(&r->body, "{\"reloaded\":true,\"generation\":%llu}\n",
	              (unsigned long long)__atomic_load_n(&gw->tls->gen, __ATOMIC_ACQUIRE));
	return r->status = 200;
}
