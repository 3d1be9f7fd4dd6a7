/* SPDX-License-Identifier: MIT */
/*
 * A certificate chain and its private key, from PEM text, checked the way
 * a listener would use them: the certificates parse, the key parses (not
 * encrypted: nothing could type its pass phrase) and matches the first
 * certificate, each certificate is issued by the one after it (the leaf
 * first, as TLS sends them), and each is valid now. Pure: the caller reads
 * the files (and says which file an error is in); OpenSSL parses.
 *
 * What a reload or --check refuses is told as one line: "expired on
 * 2025-01-01 00:00:00 UTC", "key does not match the certificate",
 * "wrong chain order: ...". The caller puts the file's name before it.
 */
#ifndef PG_TLS_PEM_H
#define PG_TLS_PEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <openssl/ssl.h>

/* Names a certificate serves (SNI), at most. */
#define PG_TLS_NAMES_MAX 64
/* One name: a DNS name (253) or "*." + one, + NUL. */
#define PG_TLS_NAME_LEN 256
/* A subject as shown (GET /tls, logs), cut to this. */
#define PG_TLS_SUBJECT_LEN 256

/* Which file an error is in. */
enum pg_tls_pem_rc {
	PG_TLS_PEM_OK = 0,
	PG_TLS_PEM_CERT = 1, /* the certificate file */
	PG_TLS_PEM_KEY = 2,  /* the key file (or the certificate file, holding the key) */
};

struct pg_tls_pem {
	X509 *leaf;
	STACK_OF(X509) * chain; /* the certificates after the leaf, in order */
	EVP_PKEY *key;
	int64_t not_before, not_after; /* the leaf's, seconds since the epoch */
	int64_t chain_not_after;       /* the earliest notAfter of the whole chain */
	char subject[PG_TLS_SUBJECT_LEN];
	char issuer[PG_TLS_SUBJECT_LEN];
	/* The names it serves: its subjectAltName DNS names, or without any,
	 * its subject's common name; lower case. */
	char names[PG_TLS_NAMES_MAX][PG_TLS_NAME_LEN];
	size_t nnames;
};

/*
 * Parse cert[0, clen) (PEM certificates, leaf first; it may hold the key
 * too) and key[0, klen) (the private key's PEM; NULL: the key is in cert)
 * into *out and check them at time now (seconds since the epoch).
 * PG_TLS_PEM_OK, or which file is wrong with err saying what; *out then
 * holds nothing to free. pg_tls_pem_free() frees what a success made.
 */
enum pg_tls_pem_rc pg_tls_pem_load(struct pg_tls_pem *out, const char *cert, size_t clen,
                                   const char *key, size_t klen, int64_t now, char *err,
                                   size_t errlen);
void pg_tls_pem_free(struct pg_tls_pem *p);

/*
 * Certificates that check peers (the CA of mTLS clients, of backends)
 * from PEM text: at least one, each valid now. A new stack of them (free
 * with sk_X509_pop_free(s, X509_free)), or NULL with err set.
 */
STACK_OF(X509) * pg_tls_pem_ca(const char *pem, size_t len, int64_t now, char *err, size_t errlen);

/* time t as "2025-01-01 00:00:00 UTC" into buf (32 bytes). */
const char *pg_tls_time_text(int64_t t, char *buf, size_t len);

#endif /* PG_TLS_PEM_H */
