// SPDX-License-Identifier: MIT
/*
 * A floorproxy worker: one io_uring, one listener, many connection pairs.
 *
 * Each client connection gets one backend connection (a "pair"). A pair
 * has two directions, up (client -> backend) and down (backend -> client),
 * each with its own buffer and at most one operation in flight: a recv from
 * its source, then sends to its sink until the buffer is drained, then the
 * next recv. So bytes keep their order without a queue, and a slow reader
 * stops its writer (backpressure) once one buffer is full: no per-pair
 * memory beyond the two buffers.
 *
 * Plain recv into the pair's own buffer rather than multishot recv with
 * provided buffers: with one buffer per direction a multishot recv could
 * only be re-armed once the send is done, as here, and would gain nothing.
 *
 * End: EOF or an error on either side (or a failed connect) tears the pair
 * down: every operation still in flight on its two sockets is cancelled,
 * and the sockets are closed and the pair freed when the last completion
 * (the cancels' own included) has arrived. Nothing refers to a freed pair.
 */
#include "floorproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FP_BUF_BYTES  65536 /* per direction: a 32 KiB body fits one recv */
#define FP_SQ_ENTRIES 1024
#define FP_CQ_ENTRIES 16384 /* a turn can complete ops of many pairs */

enum fp_op {
	OP_ACCEPT,  /* multishot accept on the listener; no pair */
	OP_PAUSE,   /* timer before re-arming a failed accept; no pair */
	OP_CONNECT, /* the pair's backend connect */
	OP_RECV,    /* recv of one direction from its source */
	OP_SEND,    /* send of one direction to its sink */
	OP_CANCEL,  /* cancel of everything on one of the pair's sockets */
};

enum { UP, DOWN }; /* direction: client -> backend, backend -> client */
enum { CLIENT, BACKEND };

struct fp_dir {
	uint32_t len;  /* bytes in buf */
	uint32_t sent; /* of which already sent */
	char buf[FP_BUF_BYTES];
};

struct fp_pair {
	int fd[2];                         /* [CLIENT], [BACKEND] */
	const struct sockaddr_in *backend; /* where fd[BACKEND] connects */
	unsigned in_flight;                /* operations submitted and not yet completed */
	bool closing;                      /* torn down: free when in_flight reaches 0 */
	struct fp_dir dir[2];              /* [UP] reads fd[CLIENT], [DOWN] reads fd[BACKEND] */
};

/* Direction d reads from fd[d] and writes to the other socket. */
static int src_fd(const struct fp_pair *p, int d)
{
	return p->fd[d == UP ? CLIENT : BACKEND];
}

static int sink_fd(const struct fp_pair *p, int d)
{
	return p->fd[d == UP ? BACKEND : CLIENT];
}

/* user_data: the pair's address with the op in bits 1-3 and the direction in
 * bit 0 (pairs come from calloc: 16-byte aligned on this ABI). */
_Static_assert(_Alignof(max_align_t) >= 16, "user_data needs 4 free low bits");

static uint64_t encode(const struct fp_pair *p, enum fp_op op, int d)
{
	return (uint64_t)(uintptr_t)p | (uint64_t)op << 1 | (uint64_t)d;
}

static struct fp_pair *decode(uint64_t ud, enum fp_op *op, int *d)
{
	*op = (enum fp_op)(ud >> 1 & 7);
	*d = (int)(ud & 1);
	return (struct fp_pair *)(uintptr_t)(ud & ~(uint64_t)15);
}

/* An SQE, submitting what is queued first if the submission queue is full
 * (the queue is then empty unless the kernel refused it). */
static struct io_uring_sqe *sqe_get(struct fp_worker *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	int rc;

	if (!sqe) {
		rc = io_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring);
		if (!sqe) {
			fprintf(stderr, "floorproxy: worker %u: submission queue full (%s)\n",
			        w->id, rc < 0 ? strerror(-rc) : "nothing submitted");
			exit(1);
		}
	}
	return sqe;
}

/* Queue one operation of pair p, counted in p->in_flight. */
static struct io_uring_sqe *pair_sqe(struct fp_worker *w, struct fp_pair *p, enum fp_op op, int d)
{
	struct io_uring_sqe *sqe = sqe_get(w);

	io_uring_sqe_set_data64(sqe, encode(p, op, d));
	p->in_flight++;
	return sqe;
}

static void arm_accept(struct fp_worker *w)
{
	struct io_uring_sqe *sqe = sqe_get(w);

	io_uring_prep_multishot_accept(sqe, w->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, encode(NULL, OP_ACCEPT, 0));
}

static void arm_recv(struct fp_worker *w, struct fp_pair *p, int d)
{
	struct fp_dir *dir = &p->dir[d];

	dir->len = dir->sent = 0;
	io_uring_prep_recv(pair_sqe(w, p, OP_RECV, d), src_fd(p, d), dir->buf, sizeof(dir->buf), 0);
}

/* Send what is left of direction d's buffer. MSG_NOSIGNAL: a peer that has
 * gone is an error result, not a SIGPIPE. */
static void arm_send(struct fp_worker *w, struct fp_pair *p, int d)
{
	struct fp_dir *dir = &p->dir[d];

	io_uring_prep_send(pair_sqe(w, p, OP_SEND, d), sink_fd(p, d), dir->buf + dir->sent,
	                   dir->len - dir->sent, MSG_NOSIGNAL);
}

/* Start the end of pair p: cancel whatever is still in flight on either
 * socket. The sockets stay open until every completion is in (pair_put), so
 * no fd number is reused while an operation may still refer to it. */
static void teardown(struct fp_worker *w, struct fp_pair *p)
{
	if (p->closing)
		return;
	p->closing = true;
	for (int s = CLIENT; s <= BACKEND; s++)
		io_uring_prep_cancel_fd(pair_sqe(w, p, OP_CANCEL, s), p->fd[s],
		                        IORING_ASYNC_CANCEL_ALL);
}

/* One completion of pair p is in: free p if it was the last of a closing pair. */
static void pair_put(struct fp_pair *p)
{
	if (--p->in_flight || !p->closing)
		return;
	close(p->fd[CLIENT]);
	close(p->fd[BACKEND]);
	free(p);
}

static void set_nodelay(int fd)
{
	int one = 1;

	/* Requests and responses are written whole: send them at once. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A new client connection: open its backend connection, to the next
 * backend in turn. */
static void on_client(struct fp_worker *w, int cfd)
{
	const struct sockaddr_in *sa = &w->backends[w->next++ % w->nbackends];
	struct fp_pair *p = calloc(1, sizeof(*p));
	int bfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (!p || bfd == -1) {
		fprintf(stderr, "floorproxy: worker %u: %s: client dropped\n", w->id,
		        !p ? "out of memory" : strerror(errno));
		free(p);
		if (bfd != -1)
			close(bfd);
		close(cfd);
		return;
	}
	p->fd[CLIENT] = cfd;
	p->fd[BACKEND] = bfd;
	p->backend = sa;
	set_nodelay(cfd);
	set_nodelay(bfd);
	io_uring_prep_connect(pair_sqe(w, p, OP_CONNECT, 0), bfd, (const struct sockaddr *)sa,
	                      sizeof(*sa));
}

static void on_accept(struct fp_worker *w, const struct io_uring_cqe *cqe)
{
	static struct __kernel_timespec pause = {.tv_nsec = 10 * 1000 * 1000};

	if (cqe->res >= 0)
		on_client(w, cqe->res);
	if (cqe->flags & IORING_CQE_F_MORE)
		return;
	if (cqe->res >= 0) {
		arm_accept(w); /* a multishot accept may end at any time: re-arm */
		return;
	}
	/* Out of fds (EMFILE, ENFILE) or memory: the connection is still queued
	 * and an immediate re-arm would fail again at once. Wait 10 ms. */
	fprintf(stderr, "floorproxy: worker %u: accept: %s\n", w->id, strerror(-cqe->res));
	struct io_uring_sqe *sqe = sqe_get(w);

	io_uring_prep_timeout(sqe, &pause, 0, 0);
	io_uring_sqe_set_data64(sqe, encode(NULL, OP_PAUSE, 0));
}

static void on_pair_cqe(struct fp_worker *w, struct fp_pair *p, enum fp_op op, int d, int res)
{
	struct fp_dir *dir = &p->dir[d];

	if (p->closing || op == OP_CANCEL)
		return; /* late completions of a pair being torn down */
	switch (op) {
	case OP_CONNECT:
		if (res < 0) { /* backend refused or unreachable: close the client */
			char a[INET_ADDRSTRLEN];

			inet_ntop(AF_INET, &p->backend->sin_addr, a, sizeof(a));
			fprintf(stderr, "floorproxy: worker %u: connect to %s:%u: %s\n", w->id, a,
			        ntohs(p->backend->sin_port), strerror(-res));
			break;
		}
		arm_recv(w, p, UP);
		arm_recv(w, p, DOWN);
		return;
	case OP_RECV:
		if (res <= 0)
			break; /* EOF or error on the source: end the pair */
		dir->len = (uint32_t)res;
		arm_send(w, p, d);
		return;
	case OP_SEND:
		if (res < 0)
			break;
		dir->sent += (uint32_t)res;
		if (dir->sent < dir->len)
			arm_send(w, p, d); /* short send: the rest */
		else
			arm_recv(w, p, d);
		return;
	default:
		return;
	}
	teardown(w, p);
}

static void handle_cqe(struct fp_worker *w, const struct io_uring_cqe *cqe)
{
	enum fp_op op;
	int d;
	struct fp_pair *p = decode(cqe->user_data, &op, &d);

	switch (op) {
	case OP_ACCEPT:
		on_accept(w, cqe);
		return;
	case OP_PAUSE:
		arm_accept(w);
		return;
	default:
		on_pair_cqe(w, p, op, d, cqe->res);
		pair_put(p);
	}
}

/* SINGLE_ISSUER | DEFER_TASKRUN: only this thread submits, and completion
 * work runs when it waits, in a batch, instead of interrupting it (as
 * prefixgate's workers do; a plain ring where the kernel lacks them). */
static int ring_init(struct fp_worker *w)
{
	struct io_uring_params p = {
	    .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE,
	    .cq_entries = FP_CQ_ENTRIES,
	};
	int rc = io_uring_queue_init_params(FP_SQ_ENTRIES, &w->ring, &p);

	if (rc == -EINVAL) {
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = FP_CQ_ENTRIES;
		rc = io_uring_queue_init_params(FP_SQ_ENTRIES, &w->ring, &p);
	}
	return rc;
}

void *fp_worker_main(void *arg)
{
	struct fp_worker *w = arg;
	struct io_uring_cqe *cqe;
	unsigned head, seen;
	int rc = ring_init(w);

	if (rc) {
		fprintf(stderr, "floorproxy: worker %u: io_uring setup: %s\n", w->id,
		        strerror(-rc));
		exit(1);
	}
	pthread_barrier_wait(w->started);
	arm_accept(w);
	for (;;) {
		/* Submit everything queued by the last batch, wait for one more. */
		rc = io_uring_submit_and_wait(&w->ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
			fprintf(stderr, "floorproxy: worker %u: io_uring_submit_and_wait: %s\n",
			        w->id, strerror(-rc));
			exit(1);
		}
		seen = 0;
		io_uring_for_each_cqe(&w->ring, head, cqe)
		{
			handle_cqe(w, cqe);
			seen++;
		}
		io_uring_cq_advance(&w->ring, seen);
	}
	return NULL;
}
