// SPDX-License-Identifier: MIT
/*
 * Session ticket keys (tls.h): resumption without a server-side cache.
 * A ticket is the session encrypted (AES-256-CBC) and authenticated
 * (HMAC-SHA256) under a key only this process knows, named by 16 random
 * bytes. The key changes every --tls-ticket-rotate seconds; the one
 * before stays accepted for one more period (its tickets renewed), so a
 * ticket lives one to two periods and a stolen key opens little. The keys
 * survive certificate reloads: a reload does not cost every client a full
 * handshake.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include "tls/tls.h"

/* The current key and the previous one. */
#define PG_TICKET_KEYS 2

struct ticket_key {
	unsigned char name[16], aes[32], hmac[32];
};

struct pg_tls_tickets {
	pthread_rwlock_t lock;
	struct ticket_key keys[PG_TICKET_KEYS]; /* [0]: current */
	unsigned nkeys;
	uint64_t rotate_ms, born_ms, rotations;
	EVP_CIPHER *aes; /* fetched once, not at each handshake */
};

/* The contexts' ex_data index of their keys (allocated once, at start). */
static int keys_idx = -1;

static int make_key(struct ticket_key *k)
{
	return RAND_bytes(k->name, sizeof(k->name)) == 1 &&
	       RAND_bytes(k->aes, sizeof(k->aes)) == 1 && RAND_bytes(k->hmac, sizeof(k->hmac)) == 1;
}

struct pg_tls_tickets *pg_tls_tickets_new(unsigned rotate_s)
{
	struct pg_tls_tickets *k = calloc(1, sizeof(*k));

	if (!k)
		return NULL;
	if (keys_idx < 0)
		keys_idx = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
	k->aes = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL);
	if (!k->aes || pthread_rwlock_init(&k->lock, NULL) || !make_key(&k->keys[0])) {
		EVP_CIPHER_free(k->aes);
		free(k);
		return NULL;
	}
	k->nkeys = 1;
	k->rotate_ms = (uint64_t)rotate_s * 1000;
	k->born_ms = pg_now_ms();
	return k;
}

void pg_tls_tickets_free(struct pg_tls_tickets *k)
{
	if (!k)
		return;
	pthread_rwlock_destroy(&k->lock);
	EVP_CIPHER_free(k->aes);
	OPENSSL_cleanse(k->keys, sizeof(k->keys));
	free(k);
}

void pg_tls_tickets_tick(struct pg_tls_tickets *k, uint64_t now_ms)
{
	struct ticket_key fresh;

	if (!k || now_ms - k->born_ms < k->rotate_ms || !make_key(&fresh))
		return;
	pthread_rwlock_wrlock(&k->lock);
	k->keys[1] = k->keys[0];
	k->keys[0] = fresh;
	k->nkeys = PG_TICKET_KEYS;
	k->born_ms = now_ms;
	k->rotations++;
	pthread_rwlock_unlock(&k->lock);
	OPENSSL_cleanse(&fresh, sizeof(fresh));
}

void pg_tls_tickets_info(struct pg_tls_tickets *k, uint64_t now_ms, uint64_t *rotations,
                         uint64_t *age_ms)
{
	pthread_rwlock_rdlock(&k->lock);
	*rotations = k->rotations;
	*age_ms = now_ms - k->born_ms;
	pthread_rwlock_unlock(&k->lock);
}

static int mac_key(EVP_MAC_CTX *hctx, unsigned char *key)
{
	OSSL_PARAM p[3];

	p[0] = OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key, 32);
	p[1] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0);
	p[2] = OSSL_PARAM_construct_end();
	return EVP_MAC_CTX_set_params(hctx, p);
}

/* OpenSSL's ticket callback: enc, a new ticket under the current key (1);
 * else the key named name: 1 accepted, 2 accepted and renewed (the
 * previous key's, or any in TLS 1.3), 0 none (a full handshake), -1 an
 * error. */
static int ticket_cb(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *ctx,
                     EVP_MAC_CTX *hctx, int enc)
{
	struct pg_tls_tickets *k = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), keys_idx);
	int rc = 0;

	if (!k)
		return -1;
	pthread_rwlock_rdlock(&k->lock);
	if (enc) {
		struct ticket_key *key = &k->keys[0];

		memcpy(name, key->name, 16);
		rc = RAND_bytes(iv, 16) == 1 &&
		             EVP_EncryptInit_ex(ctx, k->aes, NULL, key->aes, iv) &&
		             mac_key(hctx, key->hmac)
		         ? 1
		         : -1;
	} else {
		for (unsigned i = 0; i < k->nkeys; i++) {
			struct ticket_key *key = &k->keys[i];

			if (memcmp(name, key->name, 16))
				continue;
			/* TLS 1.3: a fresh ticket after every resumption (a client
			 * should not use one twice, RFC 8446 C.4); TLS 1.2: only
			 * when the previous key sealed it */
			rc = EVP_DecryptInit_ex(ctx, k->aes, NULL, key->aes, iv) &&
			             mac_key(hctx, key->hmac)
			         ? (i || SSL_version(ssl) >= TLS1_3_VERSION ? 2 : 1)
			         : -1;
			break;
		}
	}
	pthread_rwlock_unlock(&k->lock);
	return rc;
}

void pg_tls_tickets_use(struct pg_tls_tickets *k, SSL_CTX *ctx)
{
	SSL_CTX_set_ex_data(ctx, keys_idx, k);
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb);
}
