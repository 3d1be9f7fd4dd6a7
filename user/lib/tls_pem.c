// SPDX-License-Identifier: MIT
/* Certificate chains and keys from PEM text, checked (tls_pem.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include "lib/tls_pem.h"

/* Never asks for a pass phrase: an encrypted key is refused, not prompted
 * for on a terminal the daemon may not have. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	*(int *)u = 1;
	return -1;
}

static int64_t asn1_seconds(const ASN1_TIME *t)
{
	struct tm tm;

	if (!t || !ASN1_TIME_to_tm(t, &tm))
		return 0;
	return (int64_t)timegm(&tm);
}

const char *pg_tls_time_text(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!gmtime_r(&tt, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, len, "%lld", (long long)t);
	return buf;
}

static void name_text(const X509_NAME *n, char *buf, size_t len)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p = NULL;
	long l;

	buf[0] = 0;
	if (!b)
		return;
	X509_NAME_print_ex(b, n, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
	l = BIO_get_mem_data(b, &p);
	snprintf(buf, len, "%.*s", (int)(l > 0 ? l : 0), p ? p : "");
	BIO_free(b);
}

/* Every certificate of pem[0, len), in order, into a new stack; NULL with
 * err set when none parses or one is broken. */
static STACK_OF(X509) * read_certs(const char *pem, size_t len, char *err, size_t errlen)
{
	BIO *b = BIO_new_mem_buf(pem, (int)len);
	STACK_OF(X509) *sk = sk_X509_new_null();
	X509 *x;

	if (!b || !sk || len > INT32_MAX) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	ERR_clear_error();
	while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
		if (!sk_X509_push(sk, x)) {
			X509_free(x);
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
	/* the loop ends at the end of the text (no start line) or at a
	 * certificate that does not parse */
	if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE) {
		snprintf(err, errlen, "certificate %d is not a valid PEM certificate",
		         sk_X509_num(sk) + 1);
		goto fail;
	}
	ERR_clear_error();
	if (!sk_X509_num(sk)) {
		snprintf(err, errlen, "no certificate in it (-----BEGIN CERTIFICATE-----)");
		goto fail;
	}
	BIO_free(b);
	return sk;
fail:
	ERR_clear_error();
	BIO_free(b);
	sk_X509_pop_free(sk, X509_free);
	return NULL;
}

/* The validity of certificate x at now; num: its number as told (0: the
 * leaf, told without one). */
static int check_time(X509 *x, int num, int64_t now, char *err, size_t errlen)
{
	char when[40], who[PG_TLS_SUBJECT_LEN + 32] = "";
	int64_t nb = asn1_seconds(X509_get0_notBefore(x)), na = asn1_seconds(X509_get0_notAfter(x));

	if (num) {
		char subj[PG_TLS_SUBJECT_LEN];

		name_text(X509_get_subject_name(x), subj, sizeof(subj));
		snprintf(who, sizeof(who), "certificate %d (%s) ", num, subj);
	}
	if (na < now) {
		snprintf(err, errlen, "%sexpired on %s", who,
		         pg_tls_time_text(na, when, sizeof(when)));
		return -1;
	}
	if (nb > now) {
		snprintf(err, errlen, "%snot valid before %s", who,
		         pg_tls_time_text(nb, when, sizeof(when)));
		return -1;
	}
	return 0;
}

/* The private key in pem[0, len): a new key, or NULL with err set. */
static EVP_PKEY *read_key(const char *pem, size_t len, bool in_cert, char *err, size_t errlen)
{
	BIO *b = BIO_new_mem_buf(pem, (int)len);
	int asked = 0;
	EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, &asked) : NULL;

	BIO_free(b);
	ERR_clear_error();
	if (k)
		return k;
	if (asked)
		snprintf(err, errlen,
		         "the private key is encrypted (a pass phrase cannot be given): "
		         "decrypt it (openssl pkey -in KEY -out KEY.plain)");
	else if (in_cert)
		snprintf(err, errlen,
		         "no private key in it (-----BEGIN PRIVATE KEY-----): give its "
		         "key file (--tls-key)");
	else
		snprintf(err, errlen, "no valid private key in it (-----BEGIN PRIVATE KEY-----)");
	return NULL;
}

/* The names leaf serves, into p. */
static void leaf_names(struct pg_tls_pem *p)
{
	GENERAL_NAMES *gens = X509_get_ext_d2i(p->leaf, NID_subject_alt_name, NULL, NULL);
	int n = gens ? sk_GENERAL_NAME_num(gens) : 0;

	for (int i = 0; i < n && p->nnames < PG_TLS_NAMES_MAX; i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
		const unsigned char *d;
		int l;

		if (g->type != GEN_DNS)
			continue;
		d = ASN1_STRING_get0_data(g->d.dNSName);
		l = ASN1_STRING_length(g->d.dNSName);
		if (l <= 0 || l >= PG_TLS_NAME_LEN || memchr(d, 0, (size_t)l))
			continue;
		for (int k = 0; k < l; k++)
			p->names[p->nnames][k] =
			    (char)(d[k] >= 'A' && d[k] <= 'Z' ? d[k] + 32 : d[k]);
		p->names[p->nnames++][l] = 0;
	}
	GENERAL_NAMES_free(gens);
	if (!p->nnames) {
		char cn[PG_TLS_NAME_LEN];
		int l = X509_NAME_get_text_by_NID(X509_get_subject_name(p->leaf), NID_commonName,
		                                  cn, sizeof(cn));

		if (l > 0 && (size_t)l < sizeof(cn)) {
			for (int k = 0; k < l; k++)
				p->names[0][k] =
				    (char)(cn[k] >= 'A' && cn[k] <= 'Z' ? cn[k] + 32 : cn[k]);
			p->names[0][l] = 0;
			p->nnames = 1;
		}
	}
}

enum pg_tls_pem_rc pg_tls_pem_load(struct pg_tls_pem *out, const char *cert, size_t clen,
                                   const char *key, size_t klen, int64_t now, char *err,
                                   size_t errlen)
{
	STACK_OF(X509) * sk;
	enum pg_tls_pem_rc rc = PG_TLS_PEM_CERT;
	int n;

	memset(out, 0, sizeof(*out));
	sk = read_certs(cert, clen, err, errlen);
	if (!sk)
		return PG_TLS_PEM_CERT;
	n = sk_X509_num(sk);
	out->key = read_key(key ? key : cert, key ? klen : clen, !key, err, errlen);
	if (!out->key) {
		rc = PG_TLS_PEM_KEY;
		goto fail;
	}
	if (X509_check_private_key(sk_X509_value(sk, 0), out->key) != 1) {
		int owner = -1;

		for (int i = 1; i < n && owner < 0; i++)
			if (X509_check_private_key(sk_X509_value(sk, i), out->key) == 1)
				owner = i;
		ERR_clear_error();
		if (owner > 0) {
			snprintf(err, errlen,
			         "wrong chain order: the key is certificate %d's; the leaf (the "
			         "key's certificate) must come first, then each issuer",
			         owner + 1);
			goto fail;
		}
		snprintf(err, errlen, "key does not match the certificate (%s)",
		         key ? "a different key" : "the key in the file is another one's");
		rc = PG_TLS_PEM_KEY;
		goto fail;
	}
	for (int i = 0; i + 1 < n; i++) {
		X509 *x = sk_X509_value(sk, i), *up = sk_X509_value(sk, i + 1);

		if (X509_check_issued(up, x) != X509_V_OK) {
			char a[PG_TLS_SUBJECT_LEN], b[PG_TLS_SUBJECT_LEN];

			name_text(X509_get_issuer_name(x), a, sizeof(a));
			name_text(X509_get_subject_name(up), b, sizeof(b));
			snprintf(
			    err, errlen,
			    "wrong chain order: certificate %d is issued by %s, but certificate "
			    "%d is %s (the leaf first, then each issuer)",
			    i + 1, a, i + 2, b);
			goto fail;
		}
	}
	out->chain_not_after = INT64_MAX;
	for (int i = 0; i < n; i++) {
		int64_t na = asn1_seconds(X509_get0_notAfter(sk_X509_value(sk, i)));

		if (check_time(sk_X509_value(sk, i), i ? i + 1 : 0, now, err, errlen))
			goto fail;
		if (na < out->chain_not_after)
			out->chain_not_after = na;
	}
	out->leaf = sk_X509_shift(sk);
	out->chain = sk;
	out->not_before = asn1_seconds(X509_get0_notBefore(out->leaf));
	out->not_after = asn1_seconds(X509_get0_notAfter(out->leaf));
	name_text(X509_get_subject_name(out->leaf), out->subject, sizeof(out->subject));
	name_text(X509_get_issuer_name(out->leaf), out->issuer, sizeof(out->issuer));
	leaf_names(out);
	return PG_TLS_PEM_OK;
fail:
	EVP_PKEY_free(out->key);
	out->key = NULL;
	sk_X509_pop_free(sk, X509_free);
	return rc;
}

void pg_tls_pem_free(struct pg_tls_pem *p)
{
	X509_free(p->leaf);
	sk_X509_pop_free(p->chain, X509_free);
	EVP_PKEY_free(p->key);
	memset(p, 0, sizeof(*p));
}

STACK_OF(X509) * pg_tls_pem_ca(const char *pem, size_t len, int64_t now, char *err, size_t errlen)
{
	STACK_OF(X509) *sk = read_certs(pem, len, err, errlen);

	for (int i = 0; sk && i < sk_X509_num(sk); i++)
		if (check_time(sk_X509_value(sk, i), i + 1, now, err, errlen)) {
			sk_X509_pop_free(sk, X509_free);
			return NULL;
		}
	return sk;
}
