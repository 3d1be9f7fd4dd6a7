// SPDX-License-Identifier: MIT
/*
 * Unit tests of what a TLS listener accepts as its certificate
 * (lib/tls_pem.h: key match, chain order, validity, encrypted keys, the
 * names served), of which certificate a server name picks
 * (lib/tls_name.h), and of https:// backend addresses (lib/addr.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include "lib/addr.h"
#include "lib/tls_name.h"
#include "lib/tls_pem.h"
#include "tls_fixture.h"

#define DAY (24 * 3600L)

struct pki {
	EVP_PKEY *ca_key, *int_key, *leaf_key, *other_key;
	X509 *ca, *inter, *leaf;
};

static int pki_setup(void **state)
{
	struct pki *p = calloc(1, sizeof(*p));

	p->ca_key = fx_key();
	p->int_key = fx_key();
	p->leaf_key = fx_key();
	p->other_key = fx_key();
	p->ca = fx_cert("Test Root", NULL, p->ca_key, NULL, NULL, -DAY, 3650 * DAY, 1);
	p->inter =
	    fx_cert("Test Intermediate", NULL, p->int_key, p->ca, p->ca_key, -DAY, 365 * DAY, 1);
	p->leaf = fx_cert("gw.example", "DNS:gw.example,DNS:*.gw.example,IP:127.0.0.1", p->leaf_key,
	                  p->inter, p->int_key, -DAY, 30 * DAY, 0);
	*state = p;
	return 0;
}

static int pki_teardown(void **state)
{
	struct pki *p = *state;

	EVP_PKEY_free(p->ca_key);
	EVP_PKEY_free(p->int_key);
	EVP_PKEY_free(p->leaf_key);
	EVP_PKEY_free(p->other_key);
	X509_free(p->ca);
	X509_free(p->inter);
	X509_free(p->leaf);
	free(p);
	return 0;
}

/* Load cert (and key, NULL: in cert): the rc, err filled. */
static enum pg_tls_pem_rc load(const char *cert, const char *key, char *err, size_t errlen)
{
	struct pg_tls_pem pem;
	enum pg_tls_pem_rc rc = pg_tls_pem_load(&pem, cert, strlen(cert), key,
	                                        key ? strlen(key) : 0, time(NULL), err, errlen);

	if (rc == PG_TLS_PEM_OK)
		pg_tls_pem_free(&pem);
	return rc;
}

static void test_good_chain(void **state)
{
	struct pki *p = *state;
	char *chain = NULL, *key = NULL, *both = NULL, err[512];
	struct pg_tls_pem pem;

	fx_pem(&chain, p->leaf, NULL);
	fx_pem(&chain, p->inter, NULL);
	fx_pem(&key, NULL, p->leaf_key);
	assert_int_equal(pg_tls_pem_load(&pem, chain, strlen(chain), key, strlen(key), time(NULL),
	                                 err, sizeof(err)),
	                 PG_TLS_PEM_OK);
	assert_non_null(pem.leaf);
	assert_int_equal(sk_X509_num(pem.chain), 1);
	assert_int_equal(pem.nnames, 2); /* DNS names only */
	assert_string_equal(pem.names[0], "gw.example");
	assert_string_equal(pem.names[1], "*.gw.example");
	assert_string_equal(pem.subject, "CN=gw.example");
	assert_string_equal(pem.issuer, "CN=Test Intermediate");
	assert_true(pem.not_after > time(NULL) + 29 * DAY);
	assert_true(pem.chain_not_after == pem.not_after); /* the leaf expires first */
	pg_tls_pem_free(&pem);
	/* the key in the certificate file, before or after the certificates */
	fx_pem(&both, NULL, p->leaf_key);
	fx_pem(&both, p->leaf, NULL);
	fx_pem(&both, p->inter, NULL);
	assert_int_equal(load(both, NULL, err, sizeof(err)), PG_TLS_PEM_OK);
	free(chain);
	free(key);
	free(both);
}

static void test_refusals(void **state)
{
	struct pki *p = *state;
	char *chain = NULL, *wrong_order = NULL, *other = NULL, *key = NULL, *expired = NULL,
	     *future = NULL, err[512];
	X509 *old =
	    fx_cert("old.example", NULL, p->leaf_key, p->inter, p->int_key, -10 * DAY, -DAY, 0);
	X509 *later =
	    fx_cert("later.example", NULL, p->leaf_key, p->inter, p->int_key, DAY, 10 * DAY, 0);
	X509 *stale_ca = fx_cert("Test Intermediate", NULL, p->int_key, p->ca, p->ca_key, -10 * DAY,
	                         -2 * DAY, 1);
	char *stale = NULL;

	fx_pem(&chain, p->leaf, NULL);
	fx_pem(&chain, p->inter, NULL);
	fx_pem(&key, NULL, p->leaf_key);
	fx_pem(&other, NULL, p->other_key);
	/* the key of another certificate */
	assert_int_equal(load(chain, other, err, sizeof(err)), PG_TLS_PEM_KEY);
	assert_non_null(strstr(err, "key does not match the certificate"));
	/* no key anywhere */
	assert_int_equal(load(chain, NULL, err, sizeof(err)), PG_TLS_PEM_KEY);
	assert_non_null(strstr(err, "no private key"));
	/* the intermediate first */
	fx_pem(&wrong_order, p->inter, NULL);
	fx_pem(&wrong_order, p->leaf, NULL);
	assert_int_equal(load(wrong_order, key, err, sizeof(err)), PG_TLS_PEM_CERT);
	assert_non_null(strstr(err, "wrong chain order"));
	free(wrong_order);
	/* leaf, then a certificate that did not issue it */
	wrong_order = NULL;
	fx_pem(&wrong_order, p->leaf, NULL);
	fx_pem(&wrong_order, p->ca, NULL);
	assert_int_equal(load(wrong_order, key, err, sizeof(err)), PG_TLS_PEM_CERT);
	assert_non_null(strstr(err, "wrong chain order: certificate 1 is issued by "
	                            "CN=Test Intermediate, but certificate 2 is CN=Test Root"));
	/* expired, not yet valid, an expired intermediate */
	fx_pem(&expired, old, NULL);
	assert_int_equal(load(expired, key, err, sizeof(err)), PG_TLS_PEM_CERT);
	assert_non_null(strstr(err, "expired on "));
	fx_pem(&future, later, NULL);
	assert_int_equal(load(future, key, err, sizeof(err)), PG_TLS_PEM_CERT);
	assert_non_null(strstr(err, "not valid before "));
	fx_pem(&stale, p->leaf, NULL);
	fx_pem(&stale, stale_ca, NULL);
	assert_int_equal(load(stale, key, err, sizeof(err)), PG_TLS_PEM_CERT);
	assert_non_null(strstr(err, "certificate 2 (CN=Test Intermediate) expired on "));
	/* not PEM; an empty file; a broken certificate after a good one */
	assert_int_equal(load("hello\n", key, err, sizeof(err)), PG_TLS_PEM_CERT);
	assert_non_null(strstr(err, "no certificate"));
	assert_int_equal(load("", key, err, sizeof(err)), PG_TLS_PEM_CERT);
	{
		char *broken = NULL;

		fx_pem(&broken, p->leaf, NULL);
		broken = realloc(broken, strlen(broken) + 200);
		strcat(broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
		assert_int_equal(load(broken, key, err, sizeof(err)), PG_TLS_PEM_CERT);
		assert_non_null(strstr(err, "certificate 2 is not a valid PEM certificate"));
		free(broken);
	}
	X509_free(old);
	X509_free(later);
	X509_free(stale_ca);
	free(chain);
	free(other);
	free(key);
	free(wrong_order);
	free(expired);
	free(future);
	free(stale);
}

static void test_encrypted_key(void **state)
{
	struct pki *p = *state;
	char *chain = NULL, err[512], *enc;
	BIO *b = BIO_new(BIO_s_mem());
	long l;

	fx_pem(&chain, p->leaf, NULL);
	PEM_write_bio_PKCS8PrivateKey(b, p->leaf_key, EVP_aes_128_cbc(), "secret", 6, NULL, NULL);
	l = BIO_get_mem_data(b, &enc);
	enc = strndup(enc, (size_t)l);
	assert_int_equal(load(chain, enc, err, sizeof(err)), PG_TLS_PEM_KEY);
	assert_non_null(strstr(err, "encrypted"));
	free(enc);
	free(chain);
	BIO_free(b);
}

static void test_ca(void **state)
{
	struct pki *p = *state;
	char *ca = NULL, err[256];
	STACK_OF(X509) * sk;
	X509 *old = fx_cert("Old Root", NULL, p->ca_key, NULL, NULL, -10 * DAY, -DAY, 1);

	fx_pem(&ca, p->ca, NULL);
	fx_pem(&ca, p->inter, NULL);
	sk = pg_tls_pem_ca(ca, strlen(ca), time(NULL), err, sizeof(err));
	assert_non_null(sk);
	assert_int_equal(sk_X509_num(sk), 2);
	sk_X509_pop_free(sk, X509_free);
	fx_pem(&ca, old, NULL);
	assert_null(pg_tls_pem_ca(ca, strlen(ca), time(NULL), err, sizeof(err)));
	assert_non_null(strstr(err, "certificate 3 (CN=Old Root) expired on"));
	assert_null(pg_tls_pem_ca("x", 1, time(NULL), err, sizeof(err)));
	X509_free(old);
	free(ca);
}

static void test_sni(void **state)
{
	static const struct pg_tls_sni t[] = {
	    {"default.example", 0}, {"*.api.example", 1}, {"a.api.example", 2},
	    {"*.api.example", 3},   {"other.example", 3},
	};
	(void)state;
	assert_true(pg_tls_name_match("a.example", "A.Example", 9));
	assert_true(pg_tls_name_match("a.example", "a.example.", 10));
	assert_false(pg_tls_name_match("a.example", "b.example", 9));
	assert_true(pg_tls_name_match("*.example", "x.example", 9));
	assert_false(pg_tls_name_match("*.example", "example", 7));
	assert_false(pg_tls_name_match("*.example", ".example", 8));
	assert_false(pg_tls_name_match("*.example", "x.y.example", 11)); /* one label */
	assert_false(pg_tls_name_match("*x.example", "ax.example", 10));
	assert_false(pg_tls_name_match("a.example", "", 0));
	/* exact first, then the first wildcard; else the default */
	assert_int_equal(pg_tls_sni_pick(t, 5, "a.api.example", 13), 2);
	assert_int_equal(pg_tls_sni_pick(t, 5, "b.api.example", 13), 1);
	assert_int_equal(pg_tls_sni_pick(t, 5, "OTHER.example", 13), 3);
	assert_int_equal(pg_tls_sni_pick(t, 5, "nobody.example", 14), 0);
	assert_int_equal(pg_tls_sni_pick(t, 5, "", 0), 0);
}

static void test_backend_scheme(void **state)
{
	static const struct {
		const char *in, *out;
		bool tls;
	} cases[] = {
	    {"https://127.0.0.1:8443", "https://127.0.0.1:8443", true},
	    {"HTTPS://api.Example.com", "https://api.example.com:443", true},
	    {"https://[::1]", "https://[::1]:443", true},
	    {"https://[::1]:9", "https://[::1]:9", true},
	    {"http://10.0.0.1", "10.0.0.1:80", false},
	    {"http://localhost:8000", "127.0.0.1:8000", false},
	    {"https://", NULL, false},
	    {"https://https://x:1", NULL, false},
	    {"https://x:1/v1", NULL, false},
	    {"ftp://x:1", NULL, false},
	};
	struct pg_hostport h;
	char err[200], buf[PG_HOSTPORT_STRLEN];
	union pg_sockaddr a;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = pg_hostport_parse(cases[i].in, &h, false, err, sizeof(err));

		if (!cases[i].out) {
			assert_int_equal(rc, -1);
			continue;
		}
		assert_int_equal(rc, 0);
		assert_int_equal(h.tls, cases[i].tls);
		assert_string_equal(pg_hostport_format(&h, buf), cases[i].out);
	}
	/* never a listener's */
	assert_int_equal(pg_addr_parse("https://127.0.0.1:1", &a, err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good_chain),    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_encrypted_key), cmocka_unit_test(test_ca),
	    cmocka_unit_test(test_sni),           cmocka_unit_test(test_backend_scheme),
	};

	return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
