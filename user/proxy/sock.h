/* SPDX-License-Identifier: MIT */
/*
 * Sockets of the proxy: a send queue, a receive that can be armed and
 * paused, and two tables of functions that keep the state machine apart
 * from io_uring.
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

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/addr.h"

struct pg_worker;
struct pg_sock;

/* A piece of output waiting to be sent: heap data, or a provided buffer
 * forwarded as received (zero copy) and given back once sent. */
struct pg_seg {
	struct pg_seg *next;
	char *data;
	uint32_t len, off;
	int32_t bid; /* provided buffer id, or -1 */
	bool owned;  /* free(data) once sent */
};

struct pg_sock_ops {
	const char *name; /* for logs */
	/* Bytes received. Returns true if the provided buffer bid was kept
	 * (queued for sending as it is; given back once sent). */
	bool (*data)(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid);
	/* The peer closed (err 0) or the connection failed (-errno). */
	void (*eof)(struct pg_worker *w, struct pg_sock *s, int err);
	/* A send completed (err 0: the queue moved) or failed (-errno). */
	void (*sent)(struct pg_worker *w, struct pg_sock *s, int err);
	/* A connect completed (0) or failed (-errno; -ECANCELED: timed out). */
	void (*connected)(struct pg_worker *w, struct pg_sock *s, int res);
	/* The multishot receive is over (paused, or ended by the kernel). */
	void (*recv_ended)(struct pg_worker *w, struct pg_sock *s);
	/* A POLLRDHUP poll completed. */
	void (*polled)(struct pg_worker *w, struct pg_sock *s, int res);
	/* Free the object (the socket is closed and nothing names it). */
	void (*free)(struct pg_worker *w, struct pg_sock *s);
};

/* The I/O actions. Each is asynchronous: its result comes back as a
 * pg_sock_on_*() call from the loop, never from inside the action. */
struct pg_io {
	/* A new non-blocking TCP socket of family (AF_INET, AF_INET6): fd, or
	 * -errno. */
	int (*socket)(struct pg_worker *w, int family);
	void (*recv)(struct pg_worker *w, struct pg_sock *s);  /* arm (multishot) */
	void (*pause)(struct pg_worker *w, struct pg_sock *s); /* stop receiving */
	/* Send the bytes msg names, the first segments of s's queue (one send
	 * at a time keeps order); the result says how many went. */
	void (*send)(struct pg_worker *w, struct pg_sock *s, const struct msghdr *msg);
	void (*connect)(struct pg_worker *w, struct pg_sock *s, const union pg_sockaddr *sa);
	void (*shutdown)(struct pg_worker *w, struct pg_sock *s); /* SHUT_WR */
	/* Cancel whatever names s, then close its fd. */
	void (*close)(struct pg_worker *w, struct pg_sock *s);
	void (*poll_rdhup)(struct pg_worker *w, struct pg_sock *s);
	/* Give a provided receive buffer back. */
	void (*buf_return)(struct pg_worker *w, int bid);
};

/* Queued segments one send takes at most (a response head and its first
 * body bytes, an error answer's head and body: one send, one wake-up). */
#define PG_SOCK_IOV 8

struct pg_sock {
	int fd;
	const struct pg_sock_ops *ops;
	bool recv_armed;   /* a multishot recv is outstanding (pg_io's) */
	bool want_recv;    /* keep it armed (false: paused) */
	bool cancelling;   /* a cancel of the recv is outstanding (pg_io's) */
	bool send_busy;    /* a send is outstanding (one at a time keeps order) */
	bool can_send;     /* connected */
	bool closed;       /* fd closed; freed by pg_sock_reap once refs is 0 */
	bool starved;      /* recv stopped for lack of buffers (pg_io's) */
	bool buried;       /* on the worker's graveyard list */
	bool shut;         /* our side shut down */
	bool flush_queued; /* on the worker's flush list */
	uint32_t refs;     /* I/O in flight naming this struct (pg_io's) */
	uint8_t nsending;  /* segments the outstanding send names (the first ones) */
	struct pg_seg *qhead, *qtail;
	struct pg_seg *sending; /* closed: the segments its outstanding send names */
	size_t qbytes;
	struct msghdr msg; /* the outstanding send's */
	struct iovec iov[PG_SOCK_IOV];
	struct pg_sock *starved_next;
	struct pg_sock *dead_next;
	struct pg_sock *flush_next;
};

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
