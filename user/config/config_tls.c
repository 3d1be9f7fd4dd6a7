// SPDX-License-Identifier: MIT
/*
 * The TLS options once everything is read (config.h pg_config_check_tls):
 * the certificates and keys are read and checked as a listener would use
 * them (lib/tls_pem.h), the CA files parse, the cipher lists name
 * ciphers, and the options that need each other are all there. What
 * --check reports, and what start-up and a reload refuse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/err.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "config/config_opts.h"
#include "lib/tls_pem.h"

/* A certificate or CA file is no larger (a chain of a few KiB is usual). */
#define PG_TLS_FILE_MAX (1024 * 1024)

int pg_tls_files_load(const char *cert, const char *key, int64_t now, struct pg_tls_pem *out,
                      char *err, size_t errlen)
{
	char *cb = NULL, *kb = NULL, e[512];
	size_t cl = 0, kl = 0;
	enum pg_tls_pem_rc rc;

	if (pg_read_file(cert, PG_TLS_FILE_MAX, &cb, &cl, e, sizeof(e))) {
		pg_errf(err, errlen, "%s: cannot be read: %s", cert, e);
		return -1;
	}
	if (key && pg_read_file(key, PG_TLS_FILE_MAX, &kb, &kl, e, sizeof(e))) {
		pg_errf(err, errlen, "%s: cannot be read: %s", key, e);
		free(cb);
		return -1;
	}
	rc = pg_tls_pem_load(out, cb, cl, kb, kl, now, e, sizeof(e));
	/* the key's bytes are not left in freed memory */
	if (kb)
		memset(kb, 0, kl);
	memset(cb, 0, cl);
	free(cb);
	free(kb);
	if (rc == PG_TLS_PEM_OK)
		return 0;
	pg_errf(err, errlen, "%s: %s", rc == PG_TLS_PEM_KEY && key ? key : cert, e);
	return -1;
}

struct stack_st_X509 *pg_tls_ca_file(const char *path, int64_t now, char *err, size_t errlen)
{
	char *b = NULL, e[512];
	size_t l = 0;
	STACK_OF(X509) * sk;

	if (pg_read_file(path, PG_TLS_FILE_MAX, &b, &l, e, sizeof(e))) {
		pg_errf(err, errlen, "%s: cannot be read: %s", path, e);
		return NULL;
	}
	sk = pg_tls_pem_ca(b, l, now, e, sizeof(e));
	free(b);
	if (!sk)
		pg_errf(err, errlen, "%s: %s", path, e);
	return sk;
}

/* err at the line of option opt (the file's; 0: a flag's). */
static void at(struct pg_parse *ps, enum opt_id opt, const char *err)
{
	pg_parse_err(ps, ps->line[opt], err);
}

/* A cipher list (suites: TLS 1.3's) that OpenSSL takes; 0, or -1 with err set. */
static int ciphers_ok(const char *list, bool suites, char *err, size_t errlen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	int ok;

	if (!ctx) {
		pg_errf(err, errlen, "out of memory");
		return -1;
	}
	ok = suites ? SSL_CTX_set_ciphersuites(ctx, list) : SSL_CTX_set_cipher_list(ctx, list);
	SSL_CTX_free(ctx);
	ERR_clear_error();
	if (!ok)
		pg_errf(err, errlen, "--%s: \"%s\" names no cipher%s OpenSSL has",
		        pg_opts[suites ? O_TLS_SUITES : O_TLS_CIPHERS].name, list,
		        suites ? " suite" : "");
	return ok ? 0 : -1;
}

/* The file-naming checks of a certificate and its key. */
static void check_pair(struct pg_parse *ps, const char *cert, const char *key, enum opt_id copt,
                       enum opt_id kopt, int64_t now)
{
	struct pg_tls_pem pem;
	char e[1024], msg[1200];

	if (pg_tls_files_load(cert, key, now, &pem, e, sizeof(e))) {
		bool key_file = key && !strncmp(e, key, strlen(key)) && e[strlen(key)] == ':';

		snprintf(msg, sizeof(msg), "--%s: %s", pg_opts[key_file ? kopt : copt].name, e);
		at(ps, key_file ? kopt : copt, msg);
		return;
	}
	pg_tls_pem_free(&pem);
}

void pg_config_check_tls(struct pg_config *cfg, struct pg_parse *ps)
{
	const struct pg_tls_cfg *t = &cfg->tls;
	int64_t now = (int64_t)time(NULL);
	char e[1024];
	STACK_OF(X509) * sk;

	if (t->on && !t->ncerts)
		at(ps, O_TLS_LISTEN, "--tls-listen: needs a certificate (--tls-cert FILE)");
	if (!t->on && t->ncerts)
		at(ps, O_TLS_CERT, "--tls-cert: no --tls-listen to serve it on");
	if (t->nkeys > t->ncerts)
		at(ps, O_TLS_KEY,
		   "--tls-key: more keys than certificates (the i-th --tls-key is "
		   "the i-th --tls-cert's)");
	if (t->on && pg_sockaddr_equal(&t->listen, &cfg->listen))
		at(ps, O_TLS_LISTEN, "--tls-listen: the same address as --listen");
	for (size_t i = 0; i < t->ncerts; i++)
		check_pair(ps, t->certs[i], i < t->nkeys ? t->keys[i] : NULL, O_TLS_CERT, O_TLS_KEY,
		           now);
	if (ciphers_ok(pg_tls_ciphers(t), false, e, sizeof(e)))
		at(ps, O_TLS_CIPHERS, e);
	if (ciphers_ok(pg_tls_suites(t), true, e, sizeof(e)))
		at(ps, O_TLS_SUITES, e);
	if (t->client_ca) {
		if (!(sk = pg_tls_ca_file(t->client_ca, now, e, sizeof(e)))) {
			char msg[1100];

			snprintf(msg, sizeof(msg), "--tls-client-ca: %s", e);
			at(ps, O_TLS_CLIENT_CA, msg);
		}
		sk_X509_pop_free(sk, X509_free);
	}
	if (cfg->flow.tenant_src == PG_TENANT_CERT && !t->client_ca)
		at(ps, O_FLOW_TENANT,
		   "--flow-tenant cert: needs client certificates (--tls-client-ca FILE)");
	if (t->backend_ca) {
		if (!(sk = pg_tls_ca_file(t->backend_ca, now, e, sizeof(e)))) {
			char msg[1100];

			snprintf(msg, sizeof(msg), "--backend-tls-ca: %s", e);
			at(ps, O_BACKEND_TLS_CA, msg);
		}
		sk_X509_pop_free(sk, X509_free);
	}
	if (t->backend_key && !t->backend_cert)
		at(ps, O_BACKEND_TLS_KEY, "--backend-tls-key: no --backend-tls-cert to go with");
	if (t->backend_cert)
		check_pair(ps, t->backend_cert, t->backend_key, O_BACKEND_TLS_CERT,
		           O_BACKEND_TLS_KEY, now);
}
