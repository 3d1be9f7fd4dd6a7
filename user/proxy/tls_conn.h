/* SPDX-License-Identifier: MIT */
/*
 * A TLS connection's state and the steps tls.c (set-up, handshake) and
 * tls_io.c (bytes in and out) share. Only for those two (proxy/tls.h is
 * the API).
 */
#ifndef PG_PROXY_TLS_CONN_H
#define PG_PROXY_TLS_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <openssl/ssl.h>
#include "lib/flow.h"
#include "proxy/worker_state.h"
#include "tls/tls.h"

/* Plain bytes decrypted at once, at most: a receive's worth (a provided
 * buffer's) and one record more, so one delivery takes most receives. */
#define PG_TLS_SCRATCH (PG_BUFSZ + 16 * 1024)
/* Plain bytes encrypted into one send, at most (then the next send). */
#define PG_TLS_WRITE_MAX (64 * 1024)
/* Queued segments shorter than this are gathered into one record rather
 * than sent as a record each (a response head and its first body bytes). */
#define PG_TLS_GATHER 4096
/* A ciphertext buffer that grew past this is freed once empty. */
#define PG_TLS_OUT_KEEP (128 * 1024)

/* Ciphertext to send: p[off, len). */
struct tls_out {
	char *p;
	size_t len, off, cap;
};

struct pg_tls_conn {
	SSL *ssl;
	struct pg_sock *s;
	struct pg_tls_set *set; /* the generation it was made from (SNI's names) */
	/* the receive OpenSSL reads now (bio_read): in[in_off, in_len) */
	const char *in;
	size_t in_len, in_off;
	struct tls_out pend;                   /* written by OpenSSL, not yet sent */
	struct tls_out fly;                    /* named by the outstanding send */
	struct pg_tls_conn *hs_prev, *hs_next; /* on the worker's handshaking list */
	uint64_t deadline_ms;
	uint32_t epoch; /* backend side: its member's (the session kept for it) */
	uint16_t backend;
	bool server;
	bool on_list;
	bool hs_done;
	bool dead;     /* failed or closing: OpenSSL is not called again */
	bool failed;   /* a handshake or record failed: its session is not kept */
	bool notified; /* close_notify queued */
	bool closing;  /* our side is done: close_notify goes behind the queued bytes */
	bool saved;    /* backend side: its session kept for resumption */
	const char *version, *cipher;
	uint64_t tenant_key; /* the client certificate's subject (flow control) */
	char tenant_label[PG_FLOW_LABEL_MAX + 1];
};

/* A worker's TLS state. */
struct pg_tls_worker {
	struct pg_tls_conn *hs_head; /* handshakes in progress */
	unsigned handshaking;        /* on that list */
	unsigned accepting;          /* of them, clients' (--tls-max-handshakes bounds) */
	struct pg_tls_set *set;      /* the generation new connections take */
	struct pg_tls_stats *st;
	uint64_t warned_ms; /* the last backend handshake failure logged */
	/* Per backend id: the last session its server gave (resumption on
	 * the next connection), for the member of that epoch. */
	struct {
		SSL_SESSION *sess;
		uint32_t epoch;
	} * sessions;
	char scratch[PG_TLS_SCRATCH];
};

/* The handshaking list: t joins it with a deadline ms from now / leaves it. */
void pg_tls_hs_add(struct pg_worker *w, struct pg_tls_conn *t, uint64_t ms);
void pg_tls_hs_remove(struct pg_worker *w, struct pg_tls_conn *t);
/* One more of a counter. */
void pg_tls_count(uint64_t *c);
/* One step of the handshake: 1 done, 0 in progress, -1 failed (told). */
int pg_tls_handshake(struct pg_worker *w, struct pg_tls_conn *t);
/* The handshake failed (why); the socket's table is told res. */
void pg_tls_fail(struct pg_worker *w, struct pg_tls_conn *t, enum pg_tls_fail why, int res);
/* Backend side: keep its session for the next connection, once resumable. */
void pg_tls_save_session(struct pg_worker *w, struct pg_tls_conn *t);

#endif /* PG_PROXY_TLS_CONN_H */
