// SPDX-License-Identifier: MIT
/*
 * Worker event loop and the io_uring implementation of the I/O actions
 * (struct pg_io, sock.h). One io_uring per thread, set up
 * SINGLE_ISSUER | DEFER_TASKRUN: only this thread submits, and completions
 * are run when it asks for them, in batches, with no IPIs. The loop is
 * receive buffers posted (bufs.c) -> starved receives re-armed ->
 * submit_and_wait_timeout -> for_each_cqe ->
 * one cq_advance per batch -> the data path's due checks -> housekeeping
 * every 100 ms -> the run list -> the sends queued this turn -> free closed
 * sockets no SQE names.
 *
 * user_data packs a pointer (8-byte aligned) and an op in its low 3 bits.
 * A struct pg_sock counts the SQEs naming it (refs) and is freed only once
 * it is closed and none are left, at the end of a loop turn.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <poll.h>
#include "datapath/datapath.h"
#include "proxy/body.h"
#include "proxy/deadline.h"
#include "proxy/queue.h"
#include "state/flowctl.h"
#include "sys/lifecycle.h"
#include "sys/log.h"
#include "proxy/worker.h"
#include "proxy/sock.h"
#include "proxy/tls.h"

enum pg_op {
	PG_OP_ACCEPT = 1,
	PG_OP_RECV = 2,
	PG_OP_SEND = 3,
	PG_OP_CONNECT = 4,
	PG_OP_PUT = 5,    /* a connect's link timeout, a cancel: only puts the socket */
	PG_OP_EVENTS = 6, /* the data path's event ring became readable (datapath.h) */
	PG_OP_POLL = 7,   /* POLLRDHUP on a spliced backend socket (datapath.c) */
};

struct worker_boot {
	sem_t ready;
	int rc;
};

static inline uint64_t ud_pack(void *p, enum pg_op op)
{
	return (uint64_t)(uintptr_t)p | op;
}

static struct io_uring_sqe *pg_sqe(struct pg_worker *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);

	if (!sqe) {
		/* SQ full: push what is queued to the kernel and take a fresh one. */
		io_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring);
	}
	return sqe; /* never NULL right after a submit */
}

/* --- the I/O actions (sock.h) ---------------------------------------------- */

static int uring_socket(struct pg_worker *w, int family)
{
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;

	(void)w;
	if (fd == -1)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void uring_recv(struct pg_worker *w, struct pg_sock *s)
{
	struct io_uring_sqe *sqe;

	if (s->recv_armed || s->starved)
		return;
	sqe = pg_sqe(w);
	io_uring_prep_recv_multishot(sqe, s->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = PG_BGID;
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_RECV));
	s->recv_armed = true;
	s->refs++;
}

/* Receives ended for lack of provided buffers are re-armed before each
 * wait, oldest first, as many as buffers are posted (those left make the
 * ring deeper at the next posting, hotbufs.h). Not at each return: a
 * burst posts its ENOBUFS behind the receives that took the buffers, so all
 * are back before the first socket starves (it then waited for other
 * traffic, maybe for ever). One woken too early gets ENOBUFS again. */
static void feed_starved(struct pg_worker *w)
{
	struct pg_sock *s;

	for (unsigned n = w->hot.posted; n && (s = pg_starved_pop(&w->starved));)
		if (!s->closed && s->want_recv) { /* a paused one is re-armed on resume */
			uring_recv(w, s);
			n--;
		}
	if (w->starved.head) /* more waiting than posted: post more next turn */
		pg_hotbufs_lacked(&w->hot);
}

static void uring_pause(struct pg_worker *w, struct pg_sock *s)
{
	struct io_uring_sqe *sqe;

	if (!s->recv_armed || s->cancelling)
		return;
	sqe = pg_sqe(w);
	io_uring_prep_cancel64(sqe, ud_pack(s, PG_OP_RECV), 0);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_PUT));
	s->cancelling = true;
	s->refs++;
}

static void uring_send(struct pg_worker *w, struct pg_sock *s, const struct msghdr *msg)
{
	struct io_uring_sqe *sqe = pg_sqe(w);

	if (msg->msg_iovlen == 1) /* plain send: no msghdr to copy */
		io_uring_prep_send(sqe, s->fd, msg->msg_iov[0].iov_base, msg->msg_iov[0].iov_len,
		                   MSG_NOSIGNAL);
	else
		io_uring_prep_sendmsg(sqe, s->fd, msg, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_SEND));
	s->refs++;
}

static void uring_connect(struct pg_worker *w, struct pg_sock *s, const union pg_sockaddr *sa)
{
	struct io_uring_sqe *sqe = pg_sqe(w);
	unsigned ms = w->gw->cfg->timeouts.connect_ms;

	w->ts_connect.tv_sec = ms / 1000;
	w->ts_connect.tv_nsec = (ms % 1000) * 1000000ll;
	io_uring_prep_connect(sqe, s->fd, &sa->sa, pg_sockaddr_len(sa));
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_CONNECT));
	sqe->flags |= IOSQE_IO_LINK;
	s->refs++;
	sqe = pg_sqe(w);
	io_uring_prep_link_timeout(sqe, &w->ts_connect, 0);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_PUT));
	s->refs++;
	/* The sockaddr is read at submission: submit while it is alive. */
	io_uring_submit(&w->ring);
}

static void uring_shutdown(struct pg_worker *w, struct pg_sock *s)
{
	(void)w;
	shutdown(s->fd, SHUT_WR);
}

static void uring_close(struct pg_worker *w, struct pg_sock *s)
{
	if (s->refs) {
		/* Cancel what is outstanding before the fd number can be reused:
		 * a send prepared this turn is issued by this submit (copying
		 * inline, or armed and then cancelled by the cancel behind it). */
		struct io_uring_sqe *sqe = pg_sqe(w);

		io_uring_prep_cancel_fd(sqe, s->fd, IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_PUT));
		s->refs++;
		io_uring_submit(&w->ring);
	}
	pg_starved_remove(&w->starved, s);
	close(s->fd);
	s->fd = -1;
}

static void uring_poll_rdhup(struct pg_worker *w, struct pg_sock *s)
{
	struct io_uring_sqe *sqe = pg_sqe(w);

	/* One-shot: spliced sockets report spurious POLLIN, so only the peer's
	 * FIN (or an error, always reported) completes it. */
	io_uring_prep_poll_add(sqe, s->fd, POLLRDHUP);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_POLL));
	s->refs++;
}

const struct pg_io pg_uring_io = {
    .socket = uring_socket,
    .recv = uring_recv,
    .pause = uring_pause,
    .send = uring_send,
    .connect = uring_connect,
    .shutdown = uring_shutdown,
    .close = uring_close,
    .poll_rdhup = uring_poll_rdhup,
    .buf_return = pg_bufs_return,
};

/* --- completions ----------------------------------------------------------- */

static void arm_accept(struct pg_worker *w, struct pg_listen *l)
{
	struct io_uring_sqe *sqe = pg_sqe(w);

	io_uring_prep_multishot_accept(sqe, l->fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud_pack(l, PG_OP_ACCEPT));
	l->armed = true;
}

/* Every listener not accepting (a multishot accept ended) accepts again. */
static void arm_accepts(struct pg_worker *w)
{
	for (int i = 0; i < PG_LISTENERS; i++)
		if (!w->listen[i].armed && w->listen[i].fd != -1 && !pg_draining(w->gw) &&
		    !__atomic_load_n(&w->gw->stop, __ATOMIC_RELAXED))
			arm_accept(w, &w->listen[i]);
}

static void on_accept(struct pg_worker *w, struct pg_listen *l, struct io_uring_cqe *cqe)
{
	if (!(cqe->flags & IORING_CQE_F_MORE))
		l->armed = false;
	if (cqe->res >= 0) {
		int one = 1;
		struct pg_client *c;

		if (pg_conn_over_cap(w->gw, w->nclients)) {
			/* Best effort: a full send buffer on a fresh socket cannot be. A
			 * TLS client would read the answer as garbage: closed. */
			if (!l->tls &&
			    send(cqe->res, PG_CONN_CAP_REPLY, sizeof(PG_CONN_CAP_REPLY) - 1,
			         MSG_DONTWAIT | MSG_NOSIGNAL) == -1)
				pg_debug("worker %u: connection cap reply: %s", w->id,
				         strerror(errno));
			close(cqe->res);
			goto rearm;
		}
		setsockopt(cqe->res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = pg_client_new(w, cqe->res);
		if (!c)
			close(cqe->res);
		else if (l->tls && pg_tls_accept(w, &c->s)) /* TLS hook: the handshake first */
			pg_client_close(w, c);
	} else if (cqe->res != -ECANCELED) {
		/* EMFILE and friends: retried at the next tick, not in a tight loop. */
		if (w->now_ms - w->accept_err_logged_ms > 1000) {
			pg_warn("worker %u: accept: %s", w->id, strerror(-cqe->res));
			w->accept_err_logged_ms = w->now_ms;
		}
		return;
	}
rearm:
	if (!l->armed)
		arm_accepts(w);
}

/* skb data path: wake up when this worker's event ring has a record. */
static void arm_events(struct pg_worker *w)
{
	int fd = pg_dp_events_fd(w);
	struct io_uring_sqe *sqe;

	if (fd < 0)
		return;
	sqe = pg_sqe(w);
	io_uring_prep_poll_multishot(sqe, fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud_pack(w, PG_OP_EVENTS));
}

/* Flow control's wake-ups from the other workers (state/flowctl.h): its
 * eventfd polled, named by w->fq (the data path's events are named by w). */
static void arm_kick(struct pg_worker *w)
{
	struct io_uring_sqe *sqe;

	if (!w->gw->flow)
		return;
	sqe = pg_sqe(w);
	io_uring_prep_poll_multishot(sqe, w->gw->flow->wake[w->id].fd, POLLIN);
	io_uring_sqe_set_data64(sqe, ud_pack(w->fq, PG_OP_EVENTS));
}

/* The gateway's stop (lifecycle.h): its eventfd polled, so the loop wakes
 * as stop is set rather than at its next 100 ms turn. The completion needs
 * nothing (user_data 0): the loop's condition sees stop. */
static void arm_stop(struct pg_worker *w)
{
	struct io_uring_sqe *sqe;

	if (w->gw->stop_fd == -1)
		return;
	sqe = pg_sqe(w);
	io_uring_prep_poll_add(sqe, w->gw->stop_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, 0);
}

/* Draining (SIGTERM): stop accepting; connections in progress finish. */
static void stop_accepting(struct pg_worker *w)
{
	for (int i = 0; i < PG_LISTENERS; i++) {
		struct pg_listen *l = &w->listen[i];

		if (l->fd == -1)
			continue;
		if (l->armed) {
			struct io_uring_sqe *sqe = pg_sqe(w);

			io_uring_prep_cancel64(sqe, ud_pack(l, PG_OP_ACCEPT), 0);
			io_uring_sqe_set_data64(sqe, 0); /* its completion needs nothing */
			io_uring_submit(&w->ring);
		}
		close(l->fd);
		l->fd = -1;
	}
	pg_info("worker %u: draining: listener closed", w->id);
}

static void on_recv(struct pg_worker *w, struct pg_sock *s, struct io_uring_cqe *cqe)
{
	bool more = cqe->flags & IORING_CQE_F_MORE;
	int res = cqe->res;

	if (!more) {
		s->recv_armed = false;
		s->cancelling = false;
	}
	if (cqe->flags & IORING_CQE_F_BUFFER) {
		int bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);

		pg_hotbufs_filled(&w->hot, (unsigned)bid);
		w->bufs_out++;
		if (res > 0)
			pg_sock_on_data(w, s, pg_buf_addr(w, bid), (size_t)res, bid);
		else /* taken, then nothing came (a receive that ran in io-wq) */
			pg_bufs_return(w, bid);
	}
	if (res == -ENOBUFS) {
		pg_hotbufs_lacked(&w->hot);
		if (!s->closed)
			pg_starved_push(&w->starved, s);
	} else if (res <= 0 && res != -ECANCELED) {
		pg_sock_on_eof(w, s, res);
		res = 0; /* the connection is over: do not re-arm */
	}
	if (!more) {
		if (res != 0 && !s->closed && s->want_recv && !s->starved)
			uring_recv(w, s);
		else if (!s->recv_armed)
			pg_sock_on_recv_ended(w, s);
		pg_sock_put(w, s);
	}
}

static void handle_cqe(struct pg_worker *w, struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	struct pg_sock *s = (void *)(uintptr_t)(ud & ~7ull);

	switch ((enum pg_op)(ud & 7)) {
	case PG_OP_ACCEPT:
		on_accept(w, (struct pg_listen *)s, cqe);
		return; /* names a listener, not a socket */
	case PG_OP_RECV:
		on_recv(w, s, cqe); /* puts s once the multishot recv is over */
		return;
	case PG_OP_SEND:
		pg_sock_on_sent(w, s, cqe->res);
		break;
	case PG_OP_CONNECT:
		pg_sock_on_connected(w, s, cqe->res);
		break;
	case PG_OP_POLL:
		pg_sock_on_polled(w, s, cqe->res);
		break;
	case PG_OP_EVENTS:
		if ((void *)s == (void *)w->fq) { /* flow control: run the queues */
			w->flow_kicked = true;
			if (!(cqe->flags & IORING_CQE_F_MORE))
				arm_kick(w);
			return;
		}
		/* Only wakes the loop, which drains the ring every pass. */
		if (!(cqe->flags & IORING_CQE_F_MORE))
			arm_events(w);
		return;
	case PG_OP_PUT:
		break;
	default:
		return; /* user_data 0: the accept's cancel or the stop poll, nothing to do */
	}
	pg_sock_put(w, s);
}

/* --- thread ---------------------------------------------------------------- */

static int ring_init(struct pg_worker *w)
{
	struct io_uring_params p = {0};
	int rc;

	/* SINGLE_ISSUER: only this thread submits. DEFER_TASKRUN: completion
	 * work runs when we wait, batched, instead of interrupting us. CQSIZE:
	 * multishot receives on thousands of sockets post many CQEs a turn. */
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
	p.cq_entries = 16384;
	rc = io_uring_queue_init_params(2048, &w->ring, &p);
	if (rc == -EINVAL) {
		/* Older kernels: plain ring. */
		memset(&p, 0, sizeof(p));
		p.flags = IORING_SETUP_CQSIZE;
		p.cq_entries = 16384;
		rc = io_uring_queue_init_params(2048, &w->ring, &p);
	}
	return rc;
}

static void *worker_main(void *arg)
{
	struct pg_worker *w = arg;
	struct worker_boot *boot = w->boot;
	uint64_t last_tick = 0, last_reports = 0;
	int rc;

	rc = ring_init(w);
	if (rc) {
		snprintf(w->err, sizeof(w->err), "io_uring setup: %s", strerror(-rc));
	} else if ((rc = pg_bufs_init(w))) {
		snprintf(w->err, sizeof(w->err), "io_uring provided buffers: %s", strerror(-rc));
		io_uring_queue_exit(&w->ring);
	}
	boot->rc = rc;
	sem_post(&boot->ready);
	if (rc)
		return NULL;

	arm_accepts(w);
	arm_events(w);
	arm_kick(w);
	arm_stop(w);
	while (!__atomic_load_n(&w->gw->stop, __ATOMIC_RELAXED)) {
		struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000000};
		struct io_uring_cqe *cqe;
		unsigned head, n = 0, wait_ms = pg_dp_next_ms(w), q_ms = pg_queue_next_ms(w),
		               cut_ms = pg_deadline_next_ms(w);

		if (q_ms < wait_ms)
			wait_ms = q_ms; /* a waiting request's deadline, or its room */
		if (cut_ms < wait_ms)
			wait_ms = cut_ms; /* a sent request's deadline */
		if (wait_ms < 100)
			ts.tv_nsec = (long long)wait_ms * 1000000;
		pg_bufs_post(w);
		feed_starved(w); /* buffers the last turn gave back */
		io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &ts, NULL);
		w->now_ms = pg_now_ms();
		/* before this turn's completions: a first token read now came
		 * past a deadline due by now (deadline.h) */
		if (pg_deadline_next_ms(w) == 0)
			pg_deadline_run(w);
		io_uring_for_each_cqe(&w->ring, head, cqe)
		{
			handle_cqe(w, cqe);
			n++;
		}
		io_uring_cq_advance(&w->ring, n);
		pg_dp_events(w);
		if (w->dp_wait)
			pg_dp_run(w);
		if (__atomic_load_n(&w->gw->reports, __ATOMIC_RELAXED) != w->reports_seen &&
		    w->now_ms - last_reports >= PG_REPORTS_PASS_MS) {
			last_reports = w->now_ms;
			w->reports_seen = __atomic_load_n(&w->gw->reports, __ATOMIC_RELAXED);
			pg_proxy_reports(w);
		}
		if (w->now_ms - last_tick >= 100) {
			last_tick = w->now_ms;
			if (pg_draining(w->gw) && w->listen[PG_LISTEN_PLAIN].fd != -1)
				stop_accepting(w);
			arm_accepts(w);
			pg_proxy_tick(w);
			pg_tls_worker_tick(w);
			pg_hotbufs_tick(&w->hot);
			w->flow_run = true; /* deadlines; and room nobody announced */
		}
		if (w->flow_run || w->flow_kicked || pg_queue_next_ms(w) == 0)
			pg_queue_run(w);
		pg_worker_run(w);
		pg_sock_flush_all(w);
		pg_sock_reap(w, false);
	}
	pg_proxy_shutdown(w);
	io_uring_queue_exit(&w->ring); /* cancels whatever is left */
	pg_sock_reap(w, true);
	return NULL;
}

int pg_worker_start(struct pg_gateway *gw, unsigned id, struct pg_worker **out, char *err,
                    size_t errlen)
{
	struct pg_worker *w = calloc(1, sizeof(*w));
	struct worker_boot boot;
	int rc;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	w->gw = gw;
	w->io = &pg_uring_io;
	w->id = id;
	w->stats = &gw->stats[id];
	if (getrandom(&w->rng, sizeof(w->rng), 0) != sizeof(w->rng) || !w->rng)
		w->rng = 0x9E3779B97F4A7C15ull ^ (pg_now_ns() + id);
	if (getrandom(&w->rid_boot, sizeof(w->rid_boot), 0) != sizeof(w->rid_boot))
		w->rid_boot = w->rng * 0xbf58476d1ce4e5b9ull;
	if (pg_listeners_open(w, err, errlen) ||
	    (pg_tls_worker_init(w) && snprintf(err, errlen, "worker %u: TLS: out of memory", id))) {
		pg_listeners_close(w);
		free(w);
		return -1;
	}
	sem_init(&boot.ready, 0, 0);
	w->boot = &boot;
	rc = pthread_create(&w->thread, NULL, worker_main, w);
	if (rc) { /* returns its error; errno is not set */
		snprintf(err, errlen, "pthread_create: %s", strerror(rc));
		pg_listeners_close(w);
		pg_tls_worker_free(w);
		free(w);
		return -1;
	}
	sem_wait(&boot.ready);
	sem_destroy(&boot.ready);
	w->boot = NULL;
	if (boot.rc) {
		pthread_join(w->thread, NULL);
		snprintf(err, errlen, "worker %u: %s", id, w->err);
		pg_listeners_close(w);
		pg_tls_worker_free(w);
		pg_bufs_free(w);
		free(w);
		return -1;
	}
	*out = w;
	return 0;
}

void pg_worker_spares_free(struct pg_worker *w)
{
	pg_spares_free(&w->spares);
	pg_parse_ahead_spares_free(w);
	pg_key_scratch_free(&w->key_scratch);
}

void pg_worker_join(struct pg_worker *w)
{
	pthread_join(w->thread, NULL);
	pg_worker_spares_free(w);
	pg_queue_free(w);
	pg_listeners_close(w);
	pg_tls_worker_free(w);
	pg_bufs_free(w);
	free(w);
}
