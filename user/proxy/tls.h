/* SPDX-License-Identifier: MIT */
/*
 * TLS on a proxy socket (struct pg_sock's tls; doc/security.md): OpenSSL
 * over the bytes the io_uring loop receives and sends, with no call that
 * can block. The socket's table of events (client.c, upstream.c) sees
 * plain bytes, as on any socket; sock.c hands this file what comes and
 * goes on a TLS socket, at the marked hooks:
 *
 *  - received ciphertext (a provided buffer) is read by OpenSSL through a
 *    BIO that reads that buffer, which goes back at once; the plain bytes
 *    are decrypted into the worker's scratch and given to the socket's
 *    data event as bytes of no provided buffer (its consumers copy them);
 *  - queued plain bytes are encrypted when the socket flushes, their
 *    segments then released; the ciphertext (written by the BIO straight
 *    into the connection's pending buffer) goes out one send at a time,
 *    swapped with the buffer the previous send named, so nothing a send
 *    names is moved. s->qbytes counts plain bytes queued plus ciphertext
 *    not yet sent: 0 still means everything went;
 *  - the handshake runs on the events: an accepted socket is told no data
 *    until it is done; a backend socket is told "connected" once it is
 *    (or fails: a failed connect, retried elsewhere);
 *  - a handshake not done in time (--tls-handshake-timeout for clients,
 *    --connect-timeout for backends) fails; at most --tls-max-handshakes
 *    are in progress per worker; a renegotiation closes the connection.
 *
 * The response bodies of TLS connections take the copy path (the kernel
 * paths cannot encrypt: doc/datapaths.md).
 */
#ifndef PG_PROXY_TLS_H
#define PG_PROXY_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "proxy/io.h"

struct pg_worker;
struct pg_tls_conn;
struct pg_tls_worker;

/* A worker's TLS state: made when it starts, freed when it ends. */
int pg_tls_worker_init(struct pg_worker *w);
void pg_tls_worker_free(struct pg_worker *w);
/* Every 100 ms: handshakes past their deadline fail. */
void pg_tls_worker_tick(struct pg_worker *w);

/* TLS on an accepted client socket: 0, or -1 (over --tls-max-handshakes,
 * or out of memory; counted): the caller closes it. */
int pg_tls_accept(struct pg_worker *w, struct pg_sock *s);
/* TLS on a new socket to backend id (before it connects): 0, or -errno. */
int pg_tls_connect(struct pg_worker *w, struct pg_sock *s, uint16_t id);

/* --- sock.c's hooks, for a socket with s->tls ------------------------------ */
/* Ciphertext received in provided buffer bid: always given back (false). */
bool pg_tls_on_data(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid);
void pg_tls_on_eof(struct pg_worker *w, struct pg_sock *s, int err);
void pg_tls_on_connected(struct pg_worker *w, struct pg_sock *s, int res);
/* Encrypt what is queued and send (pg_sock_flush). */
void pg_tls_flush(struct pg_worker *w, struct pg_sock *s);
/* A send of ciphertext completed with res > 0 bytes. */
void pg_tls_sent(struct pg_worker *w, struct pg_sock *s, int res);
/* Our side is done (pg_sock_shutdown_when_sent): true while a
 * close_notify is still to be sent, after which the caller shuts the
 * socket down. */
bool pg_tls_shutdown(struct pg_worker *w, struct pg_sock *s);
/* The socket closes (its handshake, if any, no longer counted). */
void pg_tls_closing(struct pg_worker *w, struct pg_sock *s);
/* Freed with the socket (nothing names the ciphertext any more). */
void pg_tls_conn_free(struct pg_sock *s);

/* --- what a request sees of its connection ---------------------------------- */
/* The TLS version and cipher ("TLSv1.3", "TLS_AES_128_GCM_SHA256") of a
 * socket whose handshake is done; NULL for a plain one. */
const char *pg_tls_version(const struct pg_sock *s);
const char *pg_tls_cipher(const struct pg_sock *s);
/* The client certificate's subject as flow control's tenant (lib/flow.h
 * pg_flow_label: its common name, else the whole subject, into label):
 * its key, or 0 when the connection showed none. */
uint64_t pg_tls_tenant(const struct pg_sock *s, char *label);

#endif /* PG_PROXY_TLS_H */
