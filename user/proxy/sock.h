/* SPDX-License-Identifier: MIT */
/*
 * Sockets of the proxy: a send queue, a receive that can be armed and
 * paused, and two tables of functions that keep the state machine apart
 * from io_uring (the types are in io.h).
 *
 *  - struct pg_io: the I/O actions (arm a receive, pause it, send, connect,
 *    shut down, close). worker.c implements them with io_uring; the unit
 *    tests implement them with a fake that records what was asked.
 *  - struct pg_sock_ops: what a socket does with its events (data, EOF,
 *    sent, connected). One table per kind of socket (client.c, upstream.c);
 *    the loop calls them through pg_sock_on_*(), never by kind.
 *
 * A closed socket is not freed at once: it goes to the worker's graveyard
 * and is freed by pg_sock_reap() once no I/O names it (refs, counted by the
 * pg_io implementation) and the event that closed it has returned.
 */
#ifndef PG_SOCK_H
#define PG_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include "lib/addr.h"
#include "proxy/io.h"

void pg_sock_init(struct pg_sock *s, int fd, const struct pg_sock_ops *ops);
/* Receive (and keep receiving) / stop receiving. */
void pg_sock_recv(struct pg_worker *w, struct pg_sock *s);
void pg_sock_pause(struct pg_worker *w, struct pg_sock *s);
/* Queue bytes (bid: a provided buffer lent as it is; owned: free(data)
 * once sent; neither: the caller keeps data alive until sent or closed).
 * The send goes at the end of the loop turn (pg_sock_flush_all), so what
 * one event queues leaves in one sendmsg. */
void pg_sock_queue(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid,
                   bool owned);
void pg_sock_queue_copy(struct pg_worker *w, struct pg_sock *s, const void *data, size_t len);
/* Send now what is queued, unless a send is outstanding. */
void pg_sock_flush(struct pg_worker *w, struct pg_sock *s);
/* Send at the end of the loop turn (TLS: bytes OpenSSL wrote itself). */
void pg_sock_flush_soon(struct pg_worker *w, struct pg_sock *s);
/* The first n queued bytes are gone (TLS: encrypted), their segments
 * released; zero-length segments at the front go too. */
void pg_sock_consume(struct pg_worker *w, struct pg_sock *s, size_t n);
/* End of a loop turn: send what this turn queued. */
void pg_sock_flush_all(struct pg_worker *w);
void pg_sock_connect(struct pg_worker *w, struct pg_sock *s, const union pg_sockaddr *sa);
/* Shut our side once the queue is empty (now if it is). */
void pg_sock_shutdown_when_sent(struct pg_worker *w, struct pg_sock *s);
void pg_sock_close(struct pg_worker *w, struct pg_sock *s);
void pg_sock_poll_rdhup(struct pg_worker *w, struct pg_sock *s);

/* --- events, from the pg_io implementation (the loop, or a test) --- */
void pg_sock_on_data(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid);
void pg_sock_on_eof(struct pg_worker *w, struct pg_sock *s, int err);
void pg_sock_on_sent(struct pg_worker *w, struct pg_sock *s, int res);
void pg_sock_on_connected(struct pg_worker *w, struct pg_sock *s, int res);
void pg_sock_on_recv_ended(struct pg_worker *w, struct pg_sock *s);
void pg_sock_on_polled(struct pg_worker *w, struct pg_sock *s, int res);
/* One I/O naming s is over. */
void pg_sock_put(struct pg_worker *w, struct pg_sock *s);
/* Free closed sockets nothing names any more (all: at exit, regardless). */
void pg_sock_reap(struct pg_worker *w, bool all);

/* The peer address of socket fd as text (IPv4 or IPv6) into out (cap
 * bytes, NUL-terminated): its length, 0 if it could not be read. */
size_t pg_sock_peer_name(int fd, char *out, size_t cap);

#endif /* PG_SOCK_H */
