// SPDX-License-Identifier: MIT
/*
 * Unit tests of the session ticket keys (tls/tls_tickets.c): a client and
 * a listener's context joined by memory BIOs, the keys' clock driven by
 * the test. A ticket resumes under the key that sealed it; after one
 * rotation it still does and is renewed under the new key; after two it
 * is refused (a full handshake); nothing rotates before its period. TLS
 * 1.2 and 1.3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "tls/tls.h"
#include "tls_fixture.h"

#define DAY      (24 * 3600L)
#define ROTATE_S 60

struct fx {
	SSL_CTX *server;
	X509 *ca;
	EVP_PKEY *ca_key, *key;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	X509 *leaf;

	f->ca_key = fx_key();
	f->key = fx_key();
	f->ca = fx_cert("Test Root", NULL, f->ca_key, NULL, NULL, -DAY, 30 * DAY, 1);
	leaf = fx_cert("gw.test", "DNS:gw.test", f->key, f->ca, f->ca_key, -DAY, 30 * DAY, 0);
	f->server = SSL_CTX_new(TLS_server_method());
	assert_int_equal(SSL_CTX_use_certificate(f->server, leaf), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey(f->server, f->key), 1);
	X509_free(leaf);
	/* as the listener's contexts (tls_set.c): tickets only, one each */
	SSL_CTX_set_session_cache_mode(f->server, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_session_id_context(f->server, (const unsigned char *)"t", 1);
	SSL_CTX_set_num_tickets(f->server, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	SSL_CTX_free(f->server);
	X509_free(f->ca);
	EVP_PKEY_free(f->ca_key);
	EVP_PKEY_free(f->key);
	free(f);
	return 0;
}

/* One connection offering sess (NULL: none) at version v: whether it was
 * resumed; *fresh the session the client holds after it (the ticket the
 * server sent, if any). */
static bool connect_once(struct fx *f, int v, SSL_SESSION *sess, SSL_SESSION **fresh)
{
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL *c, *s;
	BIO *cb, *sb;
	char byte;
	bool resumed;

	SSL_CTX_set_min_proto_version(cctx, v);
	SSL_CTX_set_max_proto_version(cctx, v);
	c = SSL_new(cctx);
	s = SSL_new(f->server);
	assert_int_equal(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
	SSL_set_bio(c, cb, cb);
	SSL_set_bio(s, sb, sb);
	SSL_set_connect_state(c);
	SSL_set_accept_state(s);
	if (sess)
		assert_int_equal(SSL_set_session(c, sess), 1);
	/* bounded: a handshake is a handful of flights */
	for (int i = 0; i < 20 && !(SSL_is_init_finished(c) && SSL_is_init_finished(s)); i++) {
		SSL_do_handshake(c);
		SSL_do_handshake(s);
	}
	assert_true(SSL_is_init_finished(c) && SSL_is_init_finished(s));
	/* TLS 1.3's ticket follows the handshake: a byte the client reads
	 * brings it */
	assert_int_equal(SSL_write(s, "x", 1), 1);
	assert_int_equal(SSL_read(c, &byte, 1), 1);
	resumed = SSL_session_reused(c) == 1;
	assert_int_equal(SSL_session_reused(s), SSL_session_reused(c));
	*fresh = SSL_get1_session(c);
	/* closed cleanly: a session freed mid-connection is not resumable */
	SSL_shutdown(c);
	SSL_shutdown(s);
	SSL_free(c);
	SSL_free(s);
	SSL_CTX_free(cctx);
	return resumed;
}

/* The ticket a session carries, for comparing two. */
static int same_ticket(const SSL_SESSION *a, const SSL_SESSION *b)
{
	const unsigned char *ta, *tb;
	size_t la, lb;

	SSL_SESSION_get0_ticket(a, &ta, &la);
	SSL_SESSION_get0_ticket(b, &tb, &lb);
	assert_true(la > 0 && lb > 0);
	return la == lb && !memcmp(ta, tb, la);
}

static void rotation_at(struct fx *f, int v)
{
	struct pg_tls_tickets *k = pg_tls_tickets_new(ROTATE_S);
	uint64_t t0 = pg_now_ms(), rotations, age;
	SSL_SESSION *first, *again, *renewed, *after, *last;

	assert_non_null(k);
	pg_tls_tickets_use(k, f->server);
	assert_false(connect_once(f, v, NULL, &first));
	assert_true(connect_once(f, v, first, &again));

	/* before its period: the same key */
	pg_tls_tickets_tick(k, t0 + ROTATE_S * 1000 / 2);
	pg_tls_tickets_info(k, t0 + ROTATE_S * 1000 / 2, &rotations, &age);
	assert_int_equal(rotations, 0);

	/* one rotation: the previous key's ticket resumes and is renewed
	 * under the new key */
	pg_tls_tickets_tick(k, t0 + ROTATE_S * 1000 + 1);
	pg_tls_tickets_info(k, t0 + ROTATE_S * 1000 + 1, &rotations, &age);
	assert_int_equal(rotations, 1);
	assert_int_equal(age, 0);
	assert_true(connect_once(f, v, first, &renewed));
	assert_false(same_ticket(first, renewed));

	/* two: the first key is gone, its ticket buys a full handshake; the
	 * renewed one (sealed by the key now previous) still resumes */
	pg_tls_tickets_tick(k, t0 + 2 * ROTATE_S * 1000 + 2);
	pg_tls_tickets_info(k, t0 + 2 * ROTATE_S * 1000 + 2, &rotations, &age);
	assert_int_equal(rotations, 2);
	assert_false(connect_once(f, v, first, &after));
	assert_true(connect_once(f, v, renewed, &last));

	SSL_SESSION_free(first);
	SSL_SESSION_free(again);
	SSL_SESSION_free(renewed);
	SSL_SESSION_free(after);
	SSL_SESSION_free(last);
	SSL_CTX_set_tlsext_ticket_key_evp_cb(f->server, NULL);
	pg_tls_tickets_free(k);
}

static void test_rotation_tls12(void **state)
{
	rotation_at(*state, TLS1_2_VERSION);
}

static void test_rotation_tls13(void **state)
{
	rotation_at(*state, TLS1_3_VERSION);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rotation_tls12),
	    cmocka_unit_test(test_rotation_tls13),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
