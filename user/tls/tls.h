/* SPDX-License-Identifier: MIT */
/*
 * TLS, gateway-wide (gw->tls; doc/security.md): the certificates the HTTPS
 * listener shows and the context https:// backends are spoken to with,
 * built together into one generation (struct pg_tls_set) from the files
 * the configuration names; the session ticket keys; the counters.
 *
 * Reloads (SIGHUP, POST /tls/reload) build a new generation from the
 * files as they are now and publish it whole, or refuse it whole ("FILE:
 * what is wrong") and keep the running one. Workers take the current
 * generation when they accept or connect (a reference each connection
 * holds for its life), so a reload never touches a handshake in progress
 * and an old generation is freed by its last connection.
 *
 * The connections themselves (OpenSSL over the io_uring buffers) are
 * proxy/tls.h's.
 */
#ifndef PG_TLS_H
#define PG_TLS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include "gateway.h"
#include "lib/tls_name.h"
#include "lib/tls_pem.h"

/* Why a handshake failed (prefixgate_tls_handshake_failures_total{reason}). */
enum pg_tls_fail {
	PG_TLS_F_TIMEOUT = 0,   /* not done within --tls-handshake-timeout (--connect-timeout) */
	PG_TLS_F_CLOSED,        /* the peer closed or reset mid-handshake */
	PG_TLS_F_NOT_TLS,       /* bytes that are no TLS record */
	PG_TLS_F_PLAIN_HTTP,    /* a plain HTTP request on the TLS port */
	PG_TLS_F_VERSION,       /* no TLS version in common */
	PG_TLS_F_CIPHER,        /* no cipher (or group) in common */
	PG_TLS_F_ALPN,          /* the client offers no protocol we speak */
	PG_TLS_F_CLIENT_CERT,   /* mTLS: no client certificate, or one our CA did not issue */
	PG_TLS_F_VERIFY,        /* a backend's certificate did not verify */
	PG_TLS_F_PEER_ALERT,    /* the peer refused us (an alert: our certificate, ...) */
	PG_TLS_F_RENEGOTIATION, /* a renegotiation was attempted (closed) */
	PG_TLS_F_OVERLOAD,      /* --tls-max-handshakes in progress already */
	PG_TLS_F_OTHER,
	PG_TLS_F_N,
};
extern const char *const pg_tls_fail_names[PG_TLS_F_N];

/* Which side of the gateway a connection is on. */
enum pg_tls_side { PG_TLS_CLIENTS = 0, PG_TLS_BACKENDS = 1, PG_TLS_SIDES = 2 };
/* TLS versions counted (1.2, 1.3). */
#define PG_TLS_VERSIONS 2
/* Cipher names counted, at most (the lists allow a handful). */
#define PG_TLS_CIPHER_SLOTS 16

/* A worker's counters (each worker writes its own, relaxed atomics). */
struct pg_tls_stats {
	uint64_t handshakes[PG_TLS_SIDES][2]; /* [side][resumed] */
	uint64_t failures[PG_TLS_SIDES][PG_TLS_F_N];
	uint64_t versions[PG_TLS_SIDES][PG_TLS_VERSIONS];
	uint64_t ciphers[PG_TLS_SIDES][PG_TLS_CIPHER_SLOTS];
	uint64_t in_progress; /* handshakes in progress now (the worker's gauge) */
} __attribute__((aligned(64)));

/* One certificate of the listener, as loaded. */
struct pg_tls_cert {
	SSL_CTX *ctx;
	const char *cert_file, *key_file; /* as configured (key NULL: in cert) */
	char subject[PG_TLS_SUBJECT_LEN], issuer[PG_TLS_SUBJECT_LEN];
	char names[PG_TLS_NAMES_MAX][PG_TLS_NAME_LEN];
	size_t nnames;
	int64_t not_after, chain_not_after; /* seconds since the epoch */
};

/* One generation of certificates: the listener's (ctx 0 the default) and
 * the backends' client context. Reference counted: freed by the last of
 * gw->tls, the workers and the connections that hold it. */
struct pg_tls_set {
	int refs;
	uint64_t gen;
	uint64_t loaded_ms; /* wall clock, when it was built */
	struct pg_tls_cert *certs;
	size_t ncerts;
	struct pg_tls_sni *sni; /* every certificate's names, in order */
	size_t nsni;
	SSL_CTX *client; /* https:// backends */
	/* the backends' own client certificate, if any (GET /tls) */
	char client_subject[PG_TLS_SUBJECT_LEN];
	int64_t client_not_after;
};

/* Session ticket keys (tls_tickets.c). */
struct pg_tls_tickets;

struct pg_tls {
	struct pg_gateway *gw;
	pthread_mutex_t lock; /* set (and its publication) */
	struct pg_tls_set *set;
	uint64_t gen;     /* set->gen, read without the lock */
	uint64_t reloads; /* applied, and refused */
	uint64_t refused;
	char last_error[512]; /* the last refused reload's reason ("" none) */
	struct pg_tls_tickets *tickets;
	struct pg_tls_stats *stats; /* one per worker */
	/* cipher names by slot (claimed once, never changed): the counters' labels */
	const char *cipher_names[PG_TLS_CIPHER_SLOTS];
	/* https:// backends' names, for SNI and the certificate check: by
	 * backend id, written by the control thread before the member is
	 * published (never freed while the gateway runs); NULL: an address */
	const char **backend_names;
	char **interned; /* every name backend_names ever held, each once */
	size_t ninterned;
};

/* Build gw->tls from gw->cfg: the listener's certificates (with
 * --tls-listen) and the backends' client context (always: a backend may
 * be named https:// at any time), the files read and checked again. 0,
 * or -1 with err "FILE: what is wrong". */
int pg_tls_init(struct pg_gateway *gw, char *err, size_t errlen);
void pg_tls_free(struct pg_gateway *gw);

/* Read every certificate, key and CA file again and publish them whole:
 * 0, or -1 with err saying which file is wrong (the running ones stay).
 * why: what asked ("SIGHUP", "POST /tls/reload"), for the log. */
int pg_tls_reload(struct pg_gateway *gw, const char *why, char *err, size_t errlen);

/* The control thread's periodic work: rotate the ticket keys when due. */
void pg_tls_tick(struct pg_gateway *gw, uint64_t now_ms);

/* A generation built from cfg's files as they are now (tls_set.c), one
 * reference held; NULL with err "FILE: what is wrong". */
struct pg_tls_set *pg_tls_set_build(const struct pg_config *cfg, struct pg_tls_tickets *tickets,
                                    char *err, size_t errlen);
/* Whether a second handshake (TLS 1.2's renegotiation) began on ssl. */
bool pg_tls_renegotiated(const SSL *ssl);

/* The current generation, with a reference (pg_tls_set_put), or NULL. */
struct pg_tls_set *pg_tls_set_get(struct pg_tls *t);
void pg_tls_set_put(struct pg_tls_set *s);
/* Whether s is still the current generation (no lock). */
static inline bool pg_tls_set_current(const struct pg_tls *t, const struct pg_tls_set *s)
{
	return s && s->gen == __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
}

/* Backend id is (name: its DNS name for SNI and the check; NULL: an
 * address, checked by its IP) about to be published. Control thread. */
void pg_tls_backend_name_set(struct pg_gateway *gw, unsigned id, const char *name);

/* A client SSL for backend id from generation set's context: its DNS
 * name sent as SNI and required of its certificate, or, for an address,
 * the IP required. NULL when out of memory. The caller sets its BIO. */
SSL *pg_tls_backend_ssl(struct pg_tls *t, struct pg_tls_set *set, unsigned id);

/* The counter slot of cipher name (static OpenSSL string), claimed on
 * first sight; PG_TLS_CIPHER_SLOTS when all are taken. */
unsigned pg_tls_cipher_slot(struct pg_tls *t, const char *name);

/* The ticket keys (tls_tickets.c): made at init, rotated by pg_tls_tick,
 * used by every context's ticket callback. */
struct pg_tls_tickets *pg_tls_tickets_new(unsigned rotate_s);
void pg_tls_tickets_free(struct pg_tls_tickets *k);
void pg_tls_tickets_tick(struct pg_tls_tickets *k, uint64_t now_ms);
/* Install the ticket callback (keys k) on a server context. */
void pg_tls_tickets_use(struct pg_tls_tickets *k, SSL_CTX *ctx);
/* Rotations so far, and the current key's age in ms (GET /tls). */
void pg_tls_tickets_info(struct pg_tls_tickets *k, uint64_t now_ms, uint64_t *rotations,
                         uint64_t *age_ms);

#endif /* PG_TLS_H */
