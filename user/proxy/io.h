/* SPDX-License-Identifier: MIT */
/*
 * The types of the proxy's sockets (sock.h has the functions that run
 * them): a socket with its send queue, the table of its events (struct
 * pg_sock_ops) and the table of I/O actions (struct pg_io). Types only, so
 * the connections (conn.h), the worker's state (worker_state.h) and the
 * starved list (starved.h) hold sockets without depending on sock.c.
 */
#ifndef PG_IO_H
#define PG_IO_H

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/addr.h"

struct pg_worker;
struct pg_sock;
struct pg_tls_conn;

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
	/* TLS (proxy/tls.h): what is received and sent goes through it, the
	 * table of events sees plain bytes; NULL: a plain socket */
	struct pg_tls_conn *tls;
};

#endif /* PG_IO_H */
