// SPDX-License-Identifier: MIT
/*
 * TLS on the proxy's sockets (tls.h): OpenSSL reads and writes through a
 * BIO of ours that reads the receive being handled and writes into the
 * connection's pending ciphertext; nothing here waits. The handshake's
 * progress, the decrypted bytes and the connection's end reach the
 * socket's own table of events as on a plain socket.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include "lib/flow.h"
#include "proxy/sock.h"
#include "proxy/tls.h"
#include "proxy/tls_conn.h"
#include "proxy/worker_state.h"
#include "sys/log.h"
#include "tls/tls.h"

/* --- the BIO: reads the receive in hand, writes into pend ------------------- */

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void out_append(struct tls_out *o, const char *d, size_t n)
{
	if (o->len + n > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		char *p;

		while (cap < o->len + n)
			cap *= 2;
		p = realloc(o->p, cap);
		if (!p) /* out of memory: nothing sane is left to do (as sock.c) */
			abort();
		o->p = p;
		o->cap = cap;
	}
	memcpy(o->p + o->len, d, n);
	o->len += n;
}

static int bio_write(BIO *b, const char *d, int n)
{
	struct pg_tls_conn *t = BIO_get_data(b);

	if (n <= 0)
		return 0;
	out_append(&t->pend, d, (size_t)n);
	t->s->qbytes += (size_t)n;
	return n;
}

static int bio_read(BIO *b, char *buf, int len)
{
	struct pg_tls_conn *t = BIO_get_data(b);
	size_t n = t->in_len - t->in_off;

	BIO_clear_retry_flags(b);
	if (!n || len <= 0) {
		BIO_set_retry_read(b); /* WANT_READ: the next receive brings more */
		return -1;
	}
	if (n > (size_t)len)
		n = (size_t)len;
	memcpy(buf, t->in + t->in_off, n);
	t->in_off += n;
	return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	(void)b;
	(void)num;
	(void)ptr;
	return cmd == BIO_CTRL_FLUSH; /* written is as good as flushed */
}

static int bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void bio_setup(void)
{
	bio_method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "prefixgate");
	if (!bio_method || !BIO_meth_set_write(bio_method, bio_write) ||
	    !BIO_meth_set_read(bio_method, bio_read) || !BIO_meth_set_ctrl(bio_method, bio_ctrl) ||
	    !BIO_meth_set_create(bio_method, bio_create))
		bio_method = NULL;
}

/* --- the worker's state --------------------------------------------------- */

int pg_tls_worker_init(struct pg_worker *w)
{
	w->tls = NULL;
	if (!w->gw->tls)
		return 0;
	pthread_once(&bio_once, bio_setup);
	w->tls = calloc(1, sizeof(*w->tls));
	if (!w->tls || !bio_method) {
		free(w->tls);
		w->tls = NULL;
		return -ENOMEM;
	}
	w->tls->st = &w->gw->tls->stats[w->id];
	return 0;
}

void pg_tls_worker_free(struct pg_worker *w)
{
	struct pg_tls_worker *wt = w->tls;

	if (!wt)
		return;
	for (unsigned id = 0; wt->sessions && id < PG_MAX_BACKENDS; id++)
		SSL_SESSION_free(wt->sessions[id].sess);
	free(wt->sessions);
	pg_tls_set_put(wt->set);
	free(wt);
	w->tls = NULL;
}

/* The current generation, as this worker holds it (one reference). */
static struct pg_tls_set *current_set(struct pg_worker *w)
{
	struct pg_tls_worker *wt = w->tls;

	if (!pg_tls_set_current(w->gw->tls, wt->set)) {
		pg_tls_set_put(wt->set);
		wt->set = pg_tls_set_get(w->gw->tls);
	}
	return wt->set;
}

void pg_tls_hs_add(struct pg_worker *w, struct pg_tls_conn *t, uint64_t ms)
{
	struct pg_tls_worker *wt = w->tls;

	t->deadline_ms = w->now_ms + ms;
	t->hs_prev = NULL;
	t->hs_next = wt->hs_head;
	if (wt->hs_head)
		wt->hs_head->hs_prev = t;
	wt->hs_head = t;
	t->on_list = true;
	wt->handshaking++;
	wt->accepting += t->server;
	__atomic_store_n(&wt->st->in_progress, wt->handshaking, __ATOMIC_RELAXED);
}

void pg_tls_hs_remove(struct pg_worker *w, struct pg_tls_conn *t)
{
	struct pg_tls_worker *wt = w->tls;

	if (!t->on_list)
		return;
	if (t->hs_prev)
		t->hs_prev->hs_next = t->hs_next;
	else
		wt->hs_head = t->hs_next;
	if (t->hs_next)
		t->hs_next->hs_prev = t->hs_prev;
	t->on_list = false;
	wt->handshaking--;
	wt->accepting -= t->server;
	__atomic_store_n(&wt->st->in_progress, wt->handshaking, __ATOMIC_RELAXED);
}

void pg_tls_count(uint64_t *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

/* A new connection of ssl (taken over) over our BIO; NULL when out of
 * memory (ssl then still the caller's). */
static struct pg_tls_conn *conn_new(struct pg_sock *s, SSL *ssl)
{
	struct pg_tls_conn *t = calloc(1, sizeof(*t));
	BIO *b = BIO_new(bio_method);

	if (!t || !b) {
		BIO_free(b);
		free(t);
		return NULL;
	}
	t->ssl = ssl;
	BIO_set_data(b, t);
	SSL_set_bio(ssl, b, b);
	/* reads as much as a receive holds at once, not a record header then
	 * its body: fewer calls, and what is left is OpenSSL's to keep */
	SSL_set_read_ahead(ssl, 1);
	t->s = s;
	return t;
}

int pg_tls_accept(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_tls_worker *wt = w->tls;
	struct pg_tls_set *set;
	struct pg_tls_conn *t;
	SSL *ssl;

	if (!wt || !(set = current_set(w)) || !set->ncerts)
		return -1;
	if (wt->accepting >= w->gw->cfg->tls.max_handshakes) {
		pg_tls_count(&wt->st->failures[PG_TLS_CLIENTS][PG_TLS_F_OVERLOAD]);
		return -1;
	}
	ssl = SSL_new(set->certs[0].ctx);
	t = ssl ? conn_new(s, ssl) : NULL;
	if (!t) {
		SSL_free(ssl);
		return -1;
	}
	SSL_set_accept_state(t->ssl);
	__atomic_add_fetch(&set->refs, 1, __ATOMIC_RELAXED);
	t->set = set;
	t->server = true;
	s->tls = t;
	pg_tls_hs_add(w, t, w->gw->cfg->tls.handshake_ms);
	return 0;
}

int pg_tls_connect(struct pg_worker *w, struct pg_sock *s, uint16_t id)
{
	struct pg_tls_worker *wt = w->tls;
	struct pg_tls_set *set;
	struct pg_tls_conn *t;
	SSL *ssl;

	if (!wt || !(set = current_set(w)))
		return -ENOTSUP;
	ssl = pg_tls_backend_ssl(w->gw->tls, set, id);
	t = ssl ? conn_new(s, ssl) : NULL;
	if (!t) {
		SSL_free(ssl);
		return -ENOMEM;
	}
	__atomic_add_fetch(&set->refs, 1, __ATOMIC_RELAXED);
	t->set = set;
	t->backend = id;
	t->epoch = w->gw->maps.backends[id].epoch;
	if (wt->sessions && wt->sessions[id].sess && wt->sessions[id].epoch == t->epoch)
		SSL_set_session(t->ssl, wt->sessions[id].sess);
	s->tls = t;
	return 0;
}

/* Keep the backend's session for the next connection to it, once it is
 * one that resumes (TLS 1.3's arrives after the handshake). */
void pg_tls_save_session(struct pg_worker *w, struct pg_tls_conn *t)
{
	struct pg_tls_worker *wt = w->tls;
	SSL_SESSION *sess;

	if (t->saved || t->server)
		return;
	sess = SSL_get1_session(t->ssl);
	if (!sess || !SSL_SESSION_is_resumable(sess)) {
		SSL_SESSION_free(sess);
		return;
	}
	if (!wt->sessions && !(wt->sessions = calloc(PG_MAX_BACKENDS, sizeof(*wt->sessions)))) {
		SSL_SESSION_free(sess);
		return;
	}
	SSL_SESSION_free(wt->sessions[t->backend].sess);
	wt->sessions[t->backend].sess = sess;
	wt->sessions[t->backend].epoch = t->epoch;
	t->saved = true;
}

/* The client certificate's subject as a tenant: its common name, else the
 * whole subject. */
static void peer_tenant(struct pg_tls_conn *t)
{
	X509 *peer = SSL_get0_peer_certificate(t->ssl);
	char v[PG_TLS_SUBJECT_LEN];
	int n;

	if (!peer)
		return;
	n = X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, v, sizeof(v));
	if (n <= 0 || (size_t)n >= sizeof(v)) {
		X509_NAME_oneline(X509_get_subject_name(peer), v, sizeof(v));
		n = (int)strlen(v);
	}
	t->tenant_key = pg_flow_label(v, (size_t)n, false, t->tenant_label);
}

static void hs_done(struct pg_worker *w, struct pg_tls_conn *t)
{
	struct pg_tls_stats *st = w->tls->st;
	const int side = t->server ? PG_TLS_CLIENTS : PG_TLS_BACKENDS;
	unsigned slot;

	t->hs_done = true;
	pg_tls_hs_remove(w, t);
	t->version = SSL_get_version(t->ssl);
	t->cipher = SSL_get_cipher_name(t->ssl);
	pg_tls_count(&st->handshakes[side][SSL_session_reused(t->ssl) ? 1 : 0]);
	pg_tls_count(&st->versions[side][SSL_version(t->ssl) >= TLS1_3_VERSION ? 1 : 0]);
	slot = pg_tls_cipher_slot(w->gw->tls, t->cipher);
	if (slot < PG_TLS_CIPHER_SLOTS)
		pg_tls_count(&st->ciphers[side][slot]);
	if (t->server)
		peer_tenant(t);
	else
		pg_tls_save_session(w, t);
}

/* Why a handshake failed, from OpenSSL's error (sslerr: SSL_get_error's). */
static enum pg_tls_fail classify(const struct pg_tls_conn *t, int sslerr)
{
	int r = ERR_GET_REASON(ERR_peek_last_error());

	switch (r) {
	case SSL_R_HTTP_REQUEST:
	case SSL_R_HTTPS_PROXY_REQUEST:
		return PG_TLS_F_PLAIN_HTTP;
	case SSL_R_WRONG_VERSION_NUMBER:
	case SSL_R_PACKET_LENGTH_TOO_LONG:
	case SSL_R_RECORD_LENGTH_MISMATCH:
	case SSL_R_UNEXPECTED_MESSAGE:
	case SSL_R_UNEXPECTED_RECORD:
	case SSL_R_LENGTH_MISMATCH:
	case SSL_R_BAD_PACKET_LENGTH:
	case SSL_R_ENCRYPTED_LENGTH_TOO_LONG:
		return PG_TLS_F_NOT_TLS;
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_VERSION_TOO_LOW:
	case SSL_R_NO_PROTOCOLS_AVAILABLE:
		return PG_TLS_F_VERSION;
	case SSL_R_NO_SHARED_CIPHER:
	case SSL_R_NO_SHARED_GROUPS:
	case SSL_R_NO_SUITABLE_KEY_SHARE:
		return PG_TLS_F_CIPHER;
	case SSL_R_NO_APPLICATION_PROTOCOL:
		return PG_TLS_F_ALPN;
	case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
		return PG_TLS_F_CLIENT_CERT;
	case SSL_R_CERTIFICATE_VERIFY_FAILED:
		return t->server ? PG_TLS_F_CLIENT_CERT : PG_TLS_F_VERIFY;
	case SSL_R_NO_RENEGOTIATION:
	case SSL_R_UNSAFE_LEGACY_RENEGOTIATION_DISABLED:
		return PG_TLS_F_RENEGOTIATION;
	default:
		if (r >= SSL_AD_REASON_OFFSET) /* an alert the peer sent */
			return r == SSL_AD_REASON_OFFSET + SSL_AD_PROTOCOL_VERSION
			           ? PG_TLS_F_VERSION
			           : PG_TLS_F_PEER_ALERT;
		return sslerr == SSL_ERROR_SYSCALL ? PG_TLS_F_CLOSED : PG_TLS_F_OTHER;
	}
}

/* Send what OpenSSL wrote last (an alert) if the socket takes it now: a
 * best effort before the close, which does not wait. */
static void send_last(struct pg_sock *s, struct pg_tls_conn *t)
{
	if (t->pend.len && !s->send_busy && !s->closed &&
	    send(s->fd, t->pend.p, t->pend.len, MSG_DONTWAIT | MSG_NOSIGNAL) == -1)
		pg_debug("tls: alert not sent: %s", strerror(errno));
	s->qbytes -= t->pend.len;
	t->pend.len = 0;
}

/* The handshake failed (why; res: what the socket's table is told). */
void pg_tls_fail(struct pg_worker *w, struct pg_tls_conn *t, enum pg_tls_fail why, int res)
{
	struct pg_sock *s = t->s;

	pg_tls_count(&w->tls->st->failures[t->server ? PG_TLS_CLIENTS : PG_TLS_BACKENDS][why]);
	if (!t->server && w->now_ms - w->tls->warned_ms >= 1000) {
		char name[PG_ADDR_STRLEN], e[256] = "";
		long v = SSL_get_verify_result(t->ssl);

		ERR_error_string_n(ERR_peek_last_error(), e, sizeof(e));
		pg_warn("backend %s: TLS handshake failed (%s): %s%s%s",
		        pg_backend_name(&w->gw->maps.backends[t->backend], name, sizeof(name)),
		        pg_tls_fail_names[why], why == PG_TLS_F_VERIFY ? "" : e,
		        why == PG_TLS_F_VERIFY ? "certificate: " : "",
		        why == PG_TLS_F_VERIFY ? X509_verify_cert_error_string(v) : "");
		w->tls->warned_ms = w->now_ms;
	} else if (t->server) {
		char e[256] = "";

		ERR_error_string_n(ERR_peek_last_error(), e, sizeof(e));
		pg_debug("worker %u: a client's TLS handshake failed (%s): %s", w->id,
		         pg_tls_fail_names[why], e);
	}
	ERR_clear_error();
	t->dead = t->failed = true;
	pg_tls_hs_remove(w, t);
	send_last(s, t);
	if (t->server)
		s->ops->eof(w, s, res);
	else
		s->ops->connected(w, s, res);
}

/* One step of the handshake: 1 done, 0 in progress, -1 failed (told). */
int pg_tls_handshake(struct pg_worker *w, struct pg_tls_conn *t)
{
	int r = SSL_do_handshake(t->ssl), e;

	if (r == 1) {
		hs_done(w, t);
		return 1;
	}
	e = SSL_get_error(t->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	pg_tls_fail(w, t, classify(t, e), -EPROTO);
	return -1;
}
