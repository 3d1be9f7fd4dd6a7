// SPDX-License-Identifier: MIT
/*
 * A TLS socket's bytes (tls.h): ciphertext received is decrypted and
 * handed on as plain bytes; plain bytes queued are encrypted when the
 * socket flushes; the handshake's deadlines; the connection's end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>
#include "proxy/sock.h"
#include "proxy/tls.h"
#include "proxy/tls_conn.h"

/* Plain bytes in[0, n) to the socket's table (no provided buffer: they
 * are copied if kept). */
static void deliver(struct pg_worker *w, struct pg_sock *s, size_t n)
{
	if (n && !s->closed)
		s->ops->data(w, s, w->tls->scratch, n, -1);
}

/* Decrypt what the receive in hand completes and hand it on; then the
 * peer's close_notify, an error or a renegotiation end the connection. */
static void read_plain(struct pg_worker *w, struct pg_tls_conn *t)
{
	struct pg_sock *s = t->s;
	char *buf = w->tls->scratch;
	size_t n = 0, got;
	int e = SSL_ERROR_WANT_READ;

	for (;;) {
		if (SSL_read_ex(t->ssl, buf + n, PG_TLS_SCRATCH - n, &got)) {
			n += got;
			if (n == PG_TLS_SCRATCH) {
				deliver(w, s, n);
				n = 0;
				if (s->closed)
					return;
			}
			continue;
		}
		e = SSL_get_error(t->ssl, 0);
		break;
	}
	deliver(w, s, n);
	if (s->closed)
		return;
	if (!t->saved)
		pg_tls_save_session(w, t); /* TLS 1.3: the ticket came after the handshake */
	if (pg_tls_renegotiated(t->ssl)) {
		pg_tls_count(&w->tls->st->failures[t->server ? PG_TLS_CLIENTS : PG_TLS_BACKENDS]
		                                  [PG_TLS_F_RENEGOTIATION]);
		e = SSL_ERROR_SSL;
	}
	if (e == SSL_ERROR_WANT_READ) {
		if (t->pend.len) /* an alert, a ticket, a key update's answer */
			pg_sock_flush_soon(w, s);
		return;
	}
	ERR_clear_error();
	t->dead = true;
	t->failed = e != SSL_ERROR_ZERO_RETURN;
	s->ops->eof(w, s, e == SSL_ERROR_ZERO_RETURN ? 0 : -EPROTO);
}

bool pg_tls_on_data(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid)
{
	struct pg_tls_conn *t = s->tls;
	int rc;

	(void)bid; /* given back by the caller: OpenSSL copied what it read */
	if (t->dead)
		return false;
	t->in = data;
	t->in_len = len;
	t->in_off = 0;
	if (!t->hs_done) {
		rc = pg_tls_handshake(w, t);
		if (rc == 0 && t->pend.len)
			pg_sock_flush_soon(w, s);
		if (rc <= 0)
			goto out;
		if (!t->server) /* the backend connection is ready for the request */
			s->ops->connected(w, s, 0);
		if (s->closed)
			goto out;
	}
	read_plain(w, t);
out:
	t->in = NULL;
	t->in_len = t->in_off = 0;
	return false;
}

void pg_tls_on_eof(struct pg_worker *w, struct pg_sock *s, int err)
{
	struct pg_tls_conn *t = s->tls;

	if (t->hs_done || t->dead) {
		s->ops->eof(w, s, err);
		return;
	}
	pg_tls_fail(w, t, PG_TLS_F_CLOSED, err ? err : -ECONNRESET);
}

void pg_tls_on_connected(struct pg_worker *w, struct pg_sock *s, int res)
{
	struct pg_tls_conn *t = s->tls;

	if (res) { /* TCP failed: as any connect */
		s->ops->connected(w, s, res);
		return;
	}
	/* the connect's budget again for the handshake */
	pg_tls_hs_add(w, t, w->gw->cfg->timeouts.connect_ms);
	if (!s->want_recv)
		pg_sock_recv(w, s);
	if (pg_tls_handshake(w, t) == 0) /* the ClientHello */
		pg_sock_flush_soon(w, s);
}

/* Send fly[off, len): one send names it until it completes. */
static void send_fly(struct pg_worker *w, struct pg_sock *s, struct pg_tls_conn *t)
{
	s->iov[0].iov_base = t->fly.p + t->fly.off;
	s->iov[0].iov_len = t->fly.len - t->fly.off;
	memset(&s->msg, 0, sizeof(s->msg));
	s->msg.msg_iov = s->iov;
	s->msg.msg_iovlen = 1;
	s->nsending = 0; /* no queued segment: they were encrypted */
	s->send_busy = true;
	w->io->send(w, s, &s->msg);
}

/* Our close_notify, into pend (the peer knows nothing was cut off). */
static void notify(struct pg_tls_conn *t)
{
	t->notified = true;
	SSL_shutdown(t->ssl);
	ERR_clear_error();
}

/* Encrypt up to PG_TLS_WRITE_MAX queued plain bytes into pend, releasing
 * their segments: small ones gathered into one record. */
static void encrypt(struct pg_worker *w, struct pg_sock *s, struct pg_tls_conn *t)
{
	char stage[PG_TLS_GATHER * 4];
	size_t budget = PG_TLS_WRITE_MAX, done;

	while (s->qhead && budget && !t->dead) {
		struct pg_seg *g = s->qhead;
		size_t n = g->len - g->off, k = 0;

		if (n >= PG_TLS_GATHER || !g->next) {
			if (n > budget)
				n = budget;
			if (n && !SSL_write_ex(t->ssl, g->data + g->off, n, &done))
				t->dead = t->failed = true;
			pg_sock_consume(w, s, n);
			budget -= n < budget ? n : budget;
			continue;
		}
		/* short ones in a row: one record */
		for (g = s->qhead; g && k < sizeof(stage); g = g->next) {
			size_t m = g->len - g->off;

			if (m >= PG_TLS_GATHER || k + m > sizeof(stage))
				break;
			memcpy(stage + k, g->data + g->off, m);
			k += m;
		}
		if (k && !SSL_write_ex(t->ssl, stage, k, &done))
			t->dead = t->failed = true;
		pg_sock_consume(w, s, k);
		budget -= k < budget ? k : budget;
	}
	if (t->dead) { /* OpenSSL failed: the connection's end is coming */
		ERR_clear_error();
		pg_sock_consume(w, s, s->qbytes - t->pend.len - (t->fly.len - t->fly.off));
	} else if (t->closing && !s->qhead && !t->notified) {
		notify(t);
	}
}

void pg_tls_flush(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_tls_conn *t = s->tls;
	struct tls_out swap;

	if (s->send_busy || s->closed)
		return;
	if (t->fly.off < t->fly.len) { /* the rest of a short send */
		send_fly(w, s, t);
		return;
	}
	if (t->hs_done && s->can_send && s->qhead)
		encrypt(w, s, t);
	if (!t->pend.len)
		return;
	swap = t->fly;
	t->fly = t->pend;
	t->pend = swap;
	t->pend.len = t->pend.off = 0;
	send_fly(w, s, t);
}

void pg_tls_sent(struct pg_worker *w, struct pg_sock *s, int res)
{
	struct pg_tls_conn *t = s->tls;

	t->fly.off += (size_t)res;
	s->qbytes -= (size_t)res;
	if (t->fly.off == t->fly.len) {
		t->fly.off = t->fly.len = 0;
		if (t->fly.cap > PG_TLS_OUT_KEEP) {
			free(t->fly.p);
			t->fly = (struct tls_out){0};
		}
	}
	pg_tls_flush(w, s);
}

bool pg_tls_shutdown(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_tls_conn *t = s->tls;

	if (t->notified || !t->hs_done || t->dead)
		return false;
	if (s->qhead) {
		/* bytes still to encrypt: the close_notify goes in the same send
		 * (encrypt), so the peer sees the end with them, not one send
		 * later */
		t->closing = true;
		return true;
	}
	notify(t);
	if (!t->pend.len)
		return false;
	pg_sock_flush_soon(w, s);
	return true;
}

void pg_tls_closing(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_tls_conn *t = s->tls;

	t->dead = true;
	pg_tls_hs_remove(w, t);
}

void pg_tls_conn_free(struct pg_sock *s)
{
	struct pg_tls_conn *t = s->tls;

	/* A connection that ended cleanly keeps its session resumable: OpenSSL
	 * takes a session freed without a shutdown for a failed one (the
	 * backends' kept sessions are the same objects). A failed handshake
	 * or a fatal error leaves it as OpenSSL set it. */
	if (t->hs_done && !t->failed)
		SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
	SSL_free(t->ssl);
	pg_tls_set_put(t->set);
	free(t->pend.p);
	free(t->fly.p);
	free(t);
	s->tls = NULL;
}

void pg_tls_worker_tick(struct pg_worker *w)
{
	struct pg_tls_conn *t;

	if (!w->tls)
		return;
	/* from the head again after each failure: what it closes (a client's
	 * backend connection) may leave the list too */
	for (t = w->tls->hs_head; t;) {
		if (w->now_ms < t->deadline_ms) {
			t = t->hs_next;
			continue;
		}
		pg_tls_fail(w, t, PG_TLS_F_TIMEOUT, -ETIMEDOUT);
		t = w->tls->hs_head;
	}
}

const char *pg_tls_version(const struct pg_sock *s)
{
	return s->tls && s->tls->hs_done ? s->tls->version : NULL;
}

const char *pg_tls_cipher(const struct pg_sock *s)
{
	return s->tls && s->tls->hs_done ? s->tls->cipher : NULL;
}

uint64_t pg_tls_tenant(const struct pg_sock *s, char *label)
{
	if (!s->tls || !s->tls->tenant_key)
		return 0;
	memcpy(label, s->tls->tenant_label, sizeof(s->tls->tenant_label));
	return s->tls->tenant_key;
}
