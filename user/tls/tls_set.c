// SPDX-License-Identifier: MIT
/*
 * One generation of certificates (tls.h struct pg_tls_set): a server
 * context per listener certificate, all alike but for the certificate
 * (versions, ciphers, ALPN, tickets, mTLS), the first picking the others
 * by SNI; and the client context https:// backends are spoken to with.
 * Built from the files as they are now, every one checked
 * (config.h pg_tls_files_load), or not at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include "config/config.h"
#include "tls/tls.h"

/* The one protocol spoken: HTTP/1.1, in ALPN's wire form. */
static const unsigned char alpn_http11[] = "\x08http/1.1";
#define ALPN_LEN (sizeof(alpn_http11) - 1)

/* ALPN (server): http/1.1 when offered; a client offering only others
 * (h2 alone) is refused, as RFC 7301 asks, not served a protocol it did
 * not ask for. */
static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
	(void)ssl;
	(void)arg;
	for (unsigned i = 0; i < inlen;) {
		unsigned l = in[i];

		if (i + 1 + l > inlen)
			break;
		if (l == ALPN_LEN - 1 && !memcmp(in + i + 1, alpn_http11 + 1, l)) {
			*out = in + i + 1;
			*outlen = (unsigned char)l;
			return SSL_TLSEXT_ERR_OK;
		}
		i += 1 + l;
	}
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* SNI: the certificate whose names match (lib/tls_name.h), set before the
 * version and cipher are chosen. */
static int servername(SSL *ssl, int *alert, void *arg)
{
	struct pg_tls_set *set = arg;
	const char *host = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
	unsigned i;

	(void)alert;
	if (!host || set->ncerts < 2)
		return SSL_TLSEXT_ERR_OK;
	i = pg_tls_sni_pick(set->sni, set->nsni, host, strlen(host));
	if (i && !SSL_set_SSL_CTX(ssl, set->certs[i].ctx))
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	return SSL_TLSEXT_ERR_OK;
}

/* Counts each handshake that starts on a connection: a second one on TLS
 * 1.2 is a renegotiation (refused by SSL_OP_NO_RENEGOTIATION, and the
 * connection closed by proxy/tls.c: pg_tls_renegotiated); so is a refusal
 * OpenSSL sent itself. */
static int hs_idx = -1;

static void info(const SSL *ssl, int where, int ret)
{
	uintptr_t add = 0;

	if ((where & SSL_CB_HANDSHAKE_START) && SSL_version(ssl) < TLS1_3_VERSION)
		add = 1;
	/* a ClientHello after the handshake that OpenSSL refused by itself
	 * (SSL_OP_NO_RENEGOTIATION: a no_renegotiation alert, no new handshake) */
	else if ((where & SSL_CB_WRITE_ALERT) && (ret & 0xff) == SSL_AD_NO_RENEGOTIATION)
		add = 2;
	if (add) /* called at every state of every handshake: nothing else then */
		SSL_set_ex_data((SSL *)ssl, hs_idx,
		                (void *)((uintptr_t)SSL_get_ex_data(ssl, hs_idx) + add));
}

bool pg_tls_renegotiated(const SSL *ssl)
{
	return (uintptr_t)SSL_get_ex_data(ssl, hs_idx) > 1;
}

/* The settings every context of the listener shares. */
static int server_common(SSL_CTX *ctx, const struct pg_tls_cfg *t, struct pg_tls_tickets *tickets,
                         X509_STORE *ca, STACK_OF(X509_NAME) * ca_names)
{
	static const unsigned char sid[] = "prefixgate";

	SSL_CTX_set_min_proto_version(ctx, t->min_version == PG_TLS_1_3 ? TLS1_3_VERSION
	                                                                : TLS1_2_VERSION);
	/* no renegotiation (a client's costs us a handshake each); our
	 * cipher order (theirs could pick a slower one); no compression (CRIME) */
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
	                             SSL_OP_NO_COMPRESSION);
	/* OpenSSL's read and write buffers (~34 KiB) given back between
	 * records: an idle keep-alive connection holds none */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (!SSL_CTX_set_cipher_list(ctx, pg_tls_ciphers(t)) ||
	    !SSL_CTX_set_ciphersuites(ctx, pg_tls_suites(t)))
		return -1;
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	SSL_CTX_set_info_callback(ctx, info);
	/* resumption by tickets alone: no session cache to lock or bound */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	if (tickets) {
		SSL_CTX_set_num_tickets(ctx, 1); /* TLS 1.3: one ticket, not two */
		/* the lifetime clients are told: the longest a ticket is taken */
		SSL_CTX_set_timeout(ctx, (long)t->ticket_s * 2);
		pg_tls_tickets_use(tickets, ctx);
	} else {
		SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
		SSL_CTX_set_num_tickets(ctx, 0);
	}
	if (ca) {
		X509_STORE_up_ref(ca);
		SSL_CTX_set_cert_store(ctx, ca);
		SSL_CTX_set_client_CA_list(ctx, SSL_dup_CA_list(ca_names));
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	}
	return 0;
}

/* A context's certificate and key from a checked chain. */
static int use_pem(SSL_CTX *ctx, struct pg_tls_pem *pem)
{
	if (SSL_CTX_use_certificate(ctx, pem->leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, pem->key) != 1)
		return -1;
	for (int i = 0; i < sk_X509_num(pem->chain); i++)
		if (!SSL_CTX_add1_chain_cert(ctx, sk_X509_value(pem->chain, i)))
			return -1;
	return 0;
}

/* A store of the CA file's certificates (and their names, for the
 * CertificateRequest), or NULL with err set. */
static X509_STORE *ca_store(const char *path, int64_t now, STACK_OF(X509_NAME) * *names, char *err,
                            size_t errlen)
{
	STACK_OF(X509) *sk = pg_tls_ca_file(path, now, err, errlen);
	X509_STORE *st = sk ? X509_STORE_new() : NULL;

	if (names)
		*names = sk_X509_NAME_new_null();
	for (int i = 0; st && i < sk_X509_num(sk); i++) {
		X509 *x = sk_X509_value(sk, i);

		X509_STORE_add_cert(st, x);
		if (names && *names)
			sk_X509_NAME_push(*names, X509_NAME_dup(X509_get_subject_name(x)));
	}
	if (sk && !st)
		snprintf(err, errlen, "out of memory");
	sk_X509_pop_free(sk, X509_free);
	return st;
}

/* The system's bundle of CAs: OpenSSL's file (Debian's, from
 * ca-certificates), or the one SSL_CERT_FILE names as for OpenSSL's other
 * users (curl, Python); not its directory, whose files would be read
 * during handshakes. */
static const char *system_bundle(void)
{
	const char *env = secure_getenv(X509_get_default_cert_file_env());

	return env && *env ? env : X509_get_default_cert_file();
}

/* The backends' context: TLS 1.2+, their certificate checked (the CA
 * file, or the system's bundle, read now so that no check reads a disk),
 * our certificate if one is given, sessions kept for resumption by the
 * workers (proxy/tls.c). */
static SSL_CTX *client_ctx(const struct pg_tls_cfg *t, int64_t now, struct pg_tls_set *set,
                           char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	X509_STORE *st;

	if (!ctx) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_alpn_protos(ctx, alpn_http11, ALPN_LEN);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (t->backend_ca) {
		st = ca_store(t->backend_ca, now, NULL, err, errlen);
		if (!st)
			goto fail;
		SSL_CTX_set_cert_store(ctx, st);
	} else if (!X509_STORE_load_file(SSL_CTX_get_cert_store(ctx), system_bundle())) {
		/* no system bundle: backends can only be checked with a CA file */
		ERR_clear_error();
	}
	if (t->backend_cert) {
		struct pg_tls_pem pem;

		if (pg_tls_files_load(t->backend_cert, t->backend_key, now, &pem, err, errlen))
			goto fail;
		if (use_pem(ctx, &pem)) {
			snprintf(err, errlen, "%s: OpenSSL refused it", t->backend_cert);
			pg_tls_pem_free(&pem);
			goto fail;
		}
		snprintf(set->client_subject, sizeof(set->client_subject), "%s", pem.subject);
		set->client_not_after = pem.not_after;
		pg_tls_pem_free(&pem);
	}
	/* sessions are kept by the workers, per backend (proxy/tls.c) */
	SSL_CTX_set_session_cache_mode(ctx,
	                               SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

struct pg_tls_set *pg_tls_set_build(const struct pg_config *cfg, struct pg_tls_tickets *tickets,
                                    char *err, size_t errlen)
{
	const struct pg_tls_cfg *t = &cfg->tls;
	int64_t now = (int64_t)time(NULL);
	struct pg_tls_set *set = calloc(1, sizeof(*set));
	STACK_OF(X509_NAME) *ca_names = NULL;
	X509_STORE *ca = NULL;
	size_t nsni = 0;

	if (hs_idx < 0)
		hs_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	if (!set || (t->ncerts && !(set->certs = calloc(t->ncerts, sizeof(*set->certs))))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	set->refs = 1;
	set->loaded_ms = pg_wall_ms();
	if (t->on && t->client_ca && !(ca = ca_store(t->client_ca, now, &ca_names, err, errlen)))
		goto fail;
	for (size_t i = 0; t->on && i < t->ncerts; i++) {
		struct pg_tls_cert *c = &set->certs[i];
		struct pg_tls_pem pem;

		if (pg_tls_files_load(t->certs[i], i < t->nkeys ? t->keys[i] : NULL, now, &pem, err,
		                      errlen))
			goto fail;
		c->cert_file = t->certs[i];
		c->key_file = i < t->nkeys ? t->keys[i] : NULL;
		c->ctx = SSL_CTX_new(TLS_server_method());
		set->ncerts++; /* freed with the set from here */
		if (!c->ctx ||
		    server_common(c->ctx, t, t->ticket_s ? tickets : NULL, ca, ca_names) ||
		    use_pem(c->ctx, &pem)) {
			snprintf(err, errlen, "%s: OpenSSL refused it", t->certs[i]);
			pg_tls_pem_free(&pem);
			goto fail;
		}
		memcpy(c->subject, pem.subject, sizeof(c->subject));
		memcpy(c->issuer, pem.issuer, sizeof(c->issuer));
		memcpy(c->names, pem.names, sizeof(c->names));
		c->nnames = pem.nnames;
		nsni += pem.nnames;
		c->not_after = pem.not_after;
		c->chain_not_after = pem.chain_not_after;
		pg_tls_pem_free(&pem);
	}
	if (nsni && !(set->sni = calloc(nsni, sizeof(*set->sni)))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < set->ncerts; i++)
		for (size_t k = 0; k < set->certs[i].nnames; k++)
			set->sni[set->nsni++] = (struct pg_tls_sni){.name = set->certs[i].names[k],
			                                            .cert = (uint16_t)i};
	if (set->ncerts) {
		SSL_CTX_set_tlsext_servername_callback(set->certs[0].ctx, servername);
		SSL_CTX_set_tlsext_servername_arg(set->certs[0].ctx, set);
	}
	set->client = client_ctx(t, now, set, err, errlen);
	if (!set->client)
		goto fail;
	X509_STORE_free(ca);
	sk_X509_NAME_pop_free(ca_names, X509_NAME_free);
	ERR_clear_error();
	return set;
fail:
	X509_STORE_free(ca);
	sk_X509_NAME_pop_free(ca_names, X509_NAME_free);
	ERR_clear_error();
	pg_tls_set_put(set);
	return NULL;
}

void pg_tls_set_put(struct pg_tls_set *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (size_t i = 0; i < s->ncerts; i++)
		SSL_CTX_free(s->certs[i].ctx);
	free(s->certs);
	free(s->sni);
	SSL_CTX_free(s->client);
	free(s);
}
