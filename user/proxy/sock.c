// SPDX-License-Identifier: MIT
/*
 * Send queues, receive arming and closing (sock.h), over the I/O actions of
 * struct pg_io; the events of the loop reach the socket's own table of
 * functions through pg_sock_on_*().
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "proxy/sock.h"
#include "proxy/tls.h"
#include "proxy/worker_state.h"

void pg_sock_init(struct pg_sock *s, int fd, const struct pg_sock_ops *ops)
{
	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->ops = ops;
}

void pg_sock_recv(struct pg_worker *w, struct pg_sock *s)
{
	s->want_recv = true;
	if (!s->closed)
		w->io->recv(w, s);
}

void pg_sock_pause(struct pg_worker *w, struct pg_sock *s)
{
	s->want_recv = false;
	if (!s->closed)
		w->io->pause(w, s);
}

void pg_sock_flush(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_seg *g = s->qhead;
	unsigned n = 0;

	if (s->tls) { /* TLS hook: encrypted first (proxy/tls.h) */
		pg_tls_flush(w, s);
		return;
	}
	if (!g || !s->can_send || s->send_busy || s->closed)
		return;
	for (; g && n < PG_SOCK_IOV; g = g->next, n++) {
		s->iov[n].iov_base = g->data + g->off;
		s->iov[n].iov_len = g->len - g->off;
	}
	memset(&s->msg, 0, sizeof(s->msg));
	s->msg.msg_iov = s->iov;
	s->msg.msg_iovlen = n;
	s->nsending = (uint8_t)n;
	s->send_busy = true;
	w->io->send(w, s, &s->msg);
}

static void seg_release(struct pg_worker *w, struct pg_seg *g)
{
	if (g->bid >= 0)
		w->io->buf_return(w, g->bid);
	if (g->owned)
		free(g->data);
	free(g);
}

void pg_sock_queue(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid,
                   bool owned)
{
	struct pg_seg *g = malloc(sizeof(*g));

	if (!g) /* out of memory for 32 bytes: nothing sane is left to do */
		abort();
	g->next = NULL;
	g->data = data;
	g->len = (uint32_t)len;
	g->off = 0;
	g->bid = bid;
	g->owned = owned;
	if (s->closed) {
		seg_release(w, g);
		return;
	}
	if (s->qtail)
		s->qtail->next = g;
	else
		s->qhead = g;
	s->qtail = g;
	s->qbytes += len;
	if (!s->send_busy)
		pg_sock_flush_soon(w, s);
}

void pg_sock_flush_soon(struct pg_worker *w, struct pg_sock *s)
{
	if (!s->flush_queued && !s->closed) {
		s->flush_queued = true;
		s->flush_next = w->flush_head;
		w->flush_head = s;
	}
}

void pg_sock_flush_all(struct pg_worker *w)
{
	struct pg_sock *s;

	while ((s = w->flush_head)) {
		w->flush_head = s->flush_next;
		s->flush_queued = false;
		pg_sock_flush(w, s); /* nothing for a closed one */
	}
}

void pg_sock_queue_copy(struct pg_worker *w, struct pg_sock *s, const void *data, size_t len)
{
	char *p = malloc(len ? len : 1);

	if (!p)
		abort();
	memcpy(p, data, len);
	pg_sock_queue(w, s, p, len, -1, true);
}

void pg_sock_connect(struct pg_worker *w, struct pg_sock *s, const union pg_sockaddr *sa)
{
	w->io->connect(w, s, sa);
}

void pg_sock_shutdown_when_sent(struct pg_worker *w, struct pg_sock *s)
{
	/* TLS hook: close_notify first, behind what is queued */
	if (s->tls && !s->closed && !s->shut && pg_tls_shutdown(w, s))
		return;
	if (!s->closed && !s->qbytes && !s->shut) {
		w->io->shutdown(w, s);
		s->shut = true;
	}
}

static void bury(struct pg_worker *w, struct pg_sock *s)
{
	if (s->buried)
		return;
	s->buried = true;
	s->dead_next = w->graveyard;
	w->graveyard = s;
}

void pg_sock_close(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_seg *g;

	if (s->closed)
		return;
	s->closed = true;
	s->want_recv = false;
	if (s->tls) /* TLS hook: its handshake, if any, no longer counted */
		pg_tls_closing(w, s);
	/* Cancels what is outstanding before the fd number can be reused, and
	 * before any segment is freed. */
	w->io->close(w, s);
	/* The segments a send names stay until that send completes: freed (or
	 * a provided buffer given back, to be refilled) any earlier, their
	 * memory could be read by the kernel and sent as another's bytes. */
	if (s->send_busy && s->qhead) {
		struct pg_seg **tail = &s->sending;

		for (unsigned i = 0; i < s->nsending && s->qhead; i++) {
			*tail = s->qhead;
			s->qhead = s->qhead->next;
			tail = &(*tail)->next;
		}
		*tail = NULL;
	}
	while ((g = s->qhead)) {
		s->qhead = g->next;
		seg_release(w, g);
	}
	s->qtail = NULL;
	s->qbytes = 0;
	bury(w, s);
}

void pg_sock_poll_rdhup(struct pg_worker *w, struct pg_sock *s)
{
	w->io->poll_rdhup(w, s);
}

static void release_sending(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_seg *g;

	while ((g = s->sending)) {
		s->sending = g->next;
		seg_release(w, g);
	}
}

void pg_sock_put(struct pg_worker *w, struct pg_sock *s)
{
	(void)w;
	s->refs--;
}

void pg_sock_reap(struct pg_worker *w, bool all)
{
	struct pg_sock **pp = &w->graveyard;

	while (*pp) {
		struct pg_sock *s = *pp;

		if (s->refs && !all) {
			pp = &s->dead_next;
			continue;
		}
		*pp = s->dead_next;
		release_sending(w, s); /* only at exit (all): its send never completed */
		if (s->tls) /* TLS hook: the ciphertext a send named is no longer named */
			pg_tls_conn_free(s);
		s->ops->free(w, s);
	}
}

/* --- events ------------------------------------------------------------------ */

void pg_sock_on_data(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid)
{
	bool kept = false;

	if (s->tls && !s->closed) /* TLS hook: ciphertext, decrypted there */
		kept = pg_tls_on_data(w, s, data, len, bid);
	else if (!s->closed)
		kept = s->ops->data(w, s, data, len, bid);
	if (!kept && bid >= 0)
		w->io->buf_return(w, bid);
}

void pg_sock_on_eof(struct pg_worker *w, struct pg_sock *s, int err)
{
	if (s->tls && !s->closed) /* TLS hook: mid-handshake, a failed handshake */
		pg_tls_on_eof(w, s, err);
	else if (!s->closed)
		s->ops->eof(w, s, err);
}

void pg_sock_on_sent(struct pg_worker *w, struct pg_sock *s, int res)
{
	size_t left = res > 0 ? (size_t)res : 0;

	s->send_busy = false;
	s->nsending = 0;
	if (s->closed) {
		release_sending(w, s);
		return;
	}
	if (res < 0) {
		s->ops->sent(w, s, res);
		return;
	}
	if (s->tls) /* TLS hook: the send named ciphertext, not the queue */
		pg_tls_sent(w, s, res);
	else {
		/* A short send leaves the rest of its segments queued, in order. */
		pg_sock_consume(w, s, left);
		pg_sock_flush(w, s);
	}
	s->ops->sent(w, s, 0);
}

void pg_sock_consume(struct pg_worker *w, struct pg_sock *s, size_t left)
{
	s->qbytes -= left;
	while (left) {
		struct pg_seg *g = s->qhead;
		size_t n = g->len - g->off;

		if (left < n) {
			g->off += (uint32_t)left;
			break;
		}
		left -= n;
		s->qhead = g->next;
		if (!s->qhead)
			s->qtail = NULL;
		seg_release(w, g);
	}
	/* Empty segments (a zero-length queue entry) go with the bytes. */
	while (s->qhead && s->qhead->off == s->qhead->len) {
		struct pg_seg *g = s->qhead;

		s->qhead = g->next;
		if (!s->qhead)
			s->qtail = NULL;
		seg_release(w, g);
	}
}

void pg_sock_on_connected(struct pg_worker *w, struct pg_sock *s, int res)
{
	if (s->tls && !s->closed) /* TLS hook: "connected" once the handshake is done */
		pg_tls_on_connected(w, s, res);
	else if (!s->closed)
		s->ops->connected(w, s, res);
}

void pg_sock_on_recv_ended(struct pg_worker *w, struct pg_sock *s)
{
	if (!s->closed && s->ops->recv_ended)
		s->ops->recv_ended(w, s);
}

void pg_sock_on_polled(struct pg_worker *w, struct pg_sock *s, int res)
{
	if (!s->closed && s->ops->polled)
		s->ops->polled(w, s, res);
}

size_t pg_sock_peer_name(int fd, char *out, size_t cap)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	const void *a = NULL;

	if (getpeername(fd, (struct sockaddr *)&ss, &sl))
		return 0;
	if (ss.ss_family == AF_INET)
		a = &((struct sockaddr_in *)&ss)->sin_addr;
	else if (ss.ss_family == AF_INET6)
		a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	if (!a || !inet_ntop(ss.ss_family, a, out, (socklen_t)cap))
		return 0;
	return strlen(out);
}
