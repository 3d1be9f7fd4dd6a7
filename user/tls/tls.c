// SPDX-License-Identifier: MIT
/* TLS, gateway-wide (tls.h): the current generation, reloads, the ticket
 * keys' rotation, the backends' names, the counters' labels. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/x509v3.h>
#include "lib/addr.h"
#include "tls/tls.h"
#include "sys/log.h"

const char *const pg_tls_fail_names[PG_TLS_F_N] = {
    [PG_TLS_F_TIMEOUT] = "timeout",
    [PG_TLS_F_CLOSED] = "closed",
    [PG_TLS_F_NOT_TLS] = "not_tls",
    [PG_TLS_F_PLAIN_HTTP] = "plain_http",
    [PG_TLS_F_VERSION] = "version",
    [PG_TLS_F_CIPHER] = "cipher",
    [PG_TLS_F_ALPN] = "alpn",
    [PG_TLS_F_CLIENT_CERT] = "client_cert",
    [PG_TLS_F_VERIFY] = "verify",
    [PG_TLS_F_PEER_ALERT] = "peer_alert",
    [PG_TLS_F_RENEGOTIATION] = "renegotiation",
    [PG_TLS_F_OVERLOAD] = "overload",
    [PG_TLS_F_OTHER] = "other",
};

/* Log what a generation holds: each certificate's names and expiry. */
static void log_set(const struct pg_tls_set *s, const char *why)
{
	char when[40];

	for (size_t i = 0; i < s->ncerts; i++) {
		const struct pg_tls_cert *c = &s->certs[i];

		pg_info("tls (%s): certificate %s: %s, %zu name%s%s%s, expires %s", why,
		        c->cert_file, c->subject, c->nnames, c->nnames == 1 ? "" : "s",
		        c->nnames ? " from " : "", c->nnames ? c->names[0] : "",
		        pg_tls_time_text(c->chain_not_after, when, sizeof(when)));
	}
}

int pg_tls_init(struct pg_gateway *gw, char *err, size_t errlen)
{
	struct pg_tls *t = calloc(1, sizeof(*t));

	gw->tls = NULL;
	if (!t || pthread_mutex_init(&t->lock, NULL)) {
		free(t);
		snprintf(err, errlen, "tls: out of memory");
		return -1;
	}
	t->gw = gw;
	t->stats = aligned_alloc(64, sizeof(*t->stats) * gw->nworkers);
	t->backend_names = calloc(PG_MAX_BACKENDS, sizeof(*t->backend_names));
	if (gw->cfg->tls.ticket_s)
		t->tickets = pg_tls_tickets_new(gw->cfg->tls.ticket_s);
	if (!t->stats || !t->backend_names || (gw->cfg->tls.ticket_s && !t->tickets)) {
		snprintf(err, errlen, "tls: out of memory");
		goto fail;
	}
	memset(t->stats, 0, sizeof(*t->stats) * gw->nworkers);
	t->set = pg_tls_set_build(gw->cfg, t->tickets, err, errlen);
	if (!t->set)
		goto fail;
	t->set->gen = t->gen = 1;
	gw->tls = t;
	if (gw->cfg->tls.on)
		log_set(t->set, "start");
	return 0;
fail:
	pg_tls_tickets_free(t->tickets);
	free(t->stats);
	free(t->backend_names);
	pthread_mutex_destroy(&t->lock);
	free(t);
	return -1;
}

void pg_tls_free(struct pg_gateway *gw)
{
	struct pg_tls *t = gw->tls;

	if (!t)
		return;
	pg_tls_set_put(t->set);
	pg_tls_tickets_free(t->tickets);
	free(t->stats);
	for (size_t i = 0; i < t->ninterned; i++)
		free(t->interned[i]);
	free(t->interned);
	free(t->backend_names);
	pthread_mutex_destroy(&t->lock);
	free(t);
	gw->tls = NULL;
}

int pg_tls_reload(struct pg_gateway *gw, const char *why, char *err, size_t errlen)
{
	struct pg_tls *t = gw->tls;
	struct pg_tls_set *s, *old;

	if (!t) {
		snprintf(err, errlen, "TLS is not set up");
		return -1;
	}
	s = pg_tls_set_build(gw->cfg, t->tickets, err, errlen);
	pthread_mutex_lock(&t->lock);
	t->reloads++;
	if (!s) {
		t->refused++;
		snprintf(t->last_error, sizeof(t->last_error), "%s", err);
		pthread_mutex_unlock(&t->lock);
		pg_error("tls reload (%s) refused: %s; the running certificates stay", why, err);
		return -1;
	}
	old = t->set;
	s->gen = old->gen + 1;
	t->set = s;
	t->last_error[0] = 0;
	__atomic_store_n(&t->gen, s->gen, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&t->lock);
	pg_tls_set_put(old); /* freed by the last connection that holds it */
	if (gw->cfg->tls.on)
		log_set(s, why);
	pg_info("tls reload (%s): generation %llu", why, (unsigned long long)s->gen);
	return 0;
}

void pg_tls_tick(struct pg_gateway *gw, uint64_t now_ms)
{
	if (gw->tls)
		pg_tls_tickets_tick(gw->tls->tickets, now_ms);
}

struct pg_tls_set *pg_tls_set_get(struct pg_tls *t)
{
	struct pg_tls_set *s;

	pthread_mutex_lock(&t->lock);
	s = t->set;
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->lock);
	return s;
}

void pg_tls_backend_name_set(struct pg_gateway *gw, unsigned id, const char *name)
{
	struct pg_tls *t = gw->tls;
	const char *n = NULL;

	if (!t || !id || id >= PG_MAX_BACKENDS)
		return;
	/* interned: a slot that changes hands between the same few names
	 * allocates nothing, and a worker still reading an old one reads a
	 * string that lives as long as the gateway */
	for (size_t i = 0; name && !n && i < t->ninterned; i++)
		if (!strcmp(t->interned[i], name))
			n = t->interned[i];
	if (name && !n) {
		char **v = realloc(t->interned, (t->ninterned + 1) * sizeof(*v));
		char *d = strdup(name);

		if (!v || !d) {
			free(d);
			if (v)
				t->interned = v;
			pg_error(
			    "tls: out of memory for backend %u's name: it is checked by address",
			    id);
		} else {
			t->interned = v;
			t->interned[t->ninterned++] = d;
			n = d;
		}
	}
	__atomic_store_n(&t->backend_names[id], n, __ATOMIC_RELEASE);
}

unsigned pg_tls_cipher_slot(struct pg_tls *t, const char *name)
{
	for (unsigned i = 0; i < PG_TLS_CIPHER_SLOTS; i++) {
		const char *cur = __atomic_load_n(&t->cipher_names[i], __ATOMIC_ACQUIRE),
		           *none = NULL;

		if (cur == name || (cur && !strcmp(cur, name)))
			return i;
		if (!cur && __atomic_compare_exchange_n(&t->cipher_names[i], &none, name, false,
		                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
			return i;
		if (none == name || (none && !strcmp(none, name)))
			return i;
	}
	return PG_TLS_CIPHER_SLOTS;
}

SSL *pg_tls_backend_ssl(struct pg_tls *t, struct pg_tls_set *set, unsigned id)
{
	const struct pg_backend *b = &t->gw->maps.backends[id];
	const char *name = __atomic_load_n(&t->backend_names[id], __ATOMIC_ACQUIRE);
	SSL *ssl = SSL_new(set->client);

	if (!ssl)
		return NULL;
	SSL_set_connect_state(ssl);
	if (name) { /* a DNS name: sent as SNI, and the certificate must carry it */
		SSL_set_tlsext_host_name(ssl, name);
		SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
		SSL_set1_host(ssl, name);
	} else { /* an address: no SNI (RFC 6066), the certificate must carry the IP */
		union pg_sockaddr sa;
		char a[PG_ADDR_STRLEN], *ip = a;

		pg_backend_addr_get(b, &sa);
		pg_addr_format(&sa, a);
		if (a[0] == '[') { /* "[v6]:port" -> "v6" */
			*strrchr(a, ']') = 0;
			ip++;
		} else {
			*strrchr(a, ':') = 0;
		}
		X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip);
	}
	return ssl;
}
