/* SPDX-License-Identifier: MIT */
/*
 * Certificates made at test time for the TLS unit tests: EC P-256 keys,
 * a CA, leaves it signs (names, validity from now), all as PEM text.
 * Nothing read from disk, nothing that expires in the tree.
 */
#ifndef PG_TLS_FIXTURE_H
#define PG_TLS_FIXTURE_H

#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

static inline EVP_PKEY *fx_key(void)
{
	return EVP_EC_gen("P-256");
}

static inline void fx_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	X509_add_ext(x, e, -1);
	X509_EXTENSION_free(e);
}

/* A certificate for cn (sans: "DNS:a,DNS:b" or NULL) valid from from_s to
 * to_s seconds from now, signed by issuer/ikey (NULL: self-signed with
 * key); a CA if ca. */
static inline X509 *fx_cert(const char *cn, const char *sans, EVP_PKEY *key, X509 *issuer,
                            EVP_PKEY *ikey, long from_s, long to_s, int ca)
{
	static long serial = 1;
	X509 *x = X509_new();
	X509_NAME *n = X509_NAME_new();

	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), from_s);
	X509_gmtime_adj(X509_getm_notAfter(x), to_s);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_subject_name(x, n);
	X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
	X509_NAME_free(n);
	X509_set_pubkey(x, key);
	fx_ext(x, issuer ? issuer : x, NID_basic_constraints, ca ? "critical,CA:TRUE" : "CA:FALSE");
	if (sans)
		fx_ext(x, issuer ? issuer : x, NID_subject_alt_name, sans);
	X509_sign(x, issuer ? ikey : key, EVP_sha256());
	return x;
}

/* PEM of x and/or k appended to a malloc'ed string *s. */
static inline void fx_pem(char **s, X509 *x, EVP_PKEY *k)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long l;
	size_t old = *s ? strlen(*s) : 0;

	if (x)
		PEM_write_bio_X509(b, x);
	if (k)
		PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
	l = BIO_get_mem_data(b, &p);
	*s = realloc(*s, old + (size_t)l + 1);
	memcpy(*s + old, p, (size_t)l);
	(*s)[old + (size_t)l] = 0;
	BIO_free(b);
}

#endif /* PG_TLS_FIXTURE_H */
