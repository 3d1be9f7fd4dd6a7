// SPDX-License-Identifier: MIT
/*
 * Worker event loop and socket primitives. One io_uring per thread, set up
 * SINGLE_ISSUER | DEFER_TASKRUN: only this thread submits, and completions
 * are run when it asks for them, in batches, with no IPIs. The loop is
 * submit_and_wait_timeout -> for_each_cqe -> one cq_advance per batch ->
 * housekeeping every 100 ms.
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
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include <poll.h>
#include "datapath/datapath.h"
#include "sys/lifecycle.h"
#include "sys/log.h"
#include "proxy/worker.h"

#define BGID 0

struct worker_boot {
	sem_t ready;
	int rc;
};

static inline uint64_t ud_pack(void *p, enum pg_op op)
{
	return (uint64_t)(uintptr_t)p | op;
}

struct io_uring_sqe *pg_sqe(struct pg_worker *w)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);

	if (!sqe) {
		/* SQ full: push what is queued to the kernel and take a fresh one. */
		io_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring);
	}
	return sqe; /* never NULL right after a submit */
}

uint64_t pg_worker_rand(struct pg_worker *w)
{
	/* xorshift64*: per-worker, no locking; quality ample for tie-breaks. */
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 0x2545F4914F6CDD1Dull;
}

/* --- provided buffers ------------------------------------------------------ */

static int bufring_init(struct pg_worker *w)
{
	struct io_uring_buf_reg reg = {0};
	size_t ring_bytes = PG_NBUFS * sizeof(struct io_uring_buf);
	int rc;

	/* liburing 2.3 has no io_uring_setup_buf_ring(): map the ring ourselves. */
	w->br = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
	if (w->br == MAP_FAILED) {
		w->br = NULL;
		return -errno;
	}
	w->bufs = malloc((size_t)PG_NBUFS * PG_BUFSZ);
	if (!w->bufs)
		return -ENOMEM;
	reg.ring_addr = (uint64_t)(uintptr_t)w->br;
	reg.ring_entries = PG_NBUFS;
	reg.bgid = BGID;
	rc = io_uring_register_buf_ring(&w->ring, &reg, 0);
	if (rc)
		return rc;
	io_uring_buf_ring_init(w->br);
	for (int i = 0; i < PG_NBUFS; i++)
		io_uring_buf_ring_add(w->br, w->bufs + (size_t)i * PG_BUFSZ, PG_BUFSZ, (unsigned short)i,
				      io_uring_buf_ring_mask(PG_NBUFS), i);
	io_uring_buf_ring_advance(w->br, PG_NBUFS);
	return 0;
}

void pg_buf_return(struct pg_worker *w, int bid)
{
	io_uring_buf_ring_add(w->br, w->bufs + (size_t)bid * PG_BUFSZ, PG_BUFSZ, (unsigned short)bid,
			      io_uring_buf_ring_mask(PG_NBUFS), 0);
	io_uring_buf_ring_advance(w->br, 1);
	w->bufs_out--;
	/* A socket whose recv ended for lack of buffers can go on now. */
	if (w->starved) {
		struct pg_sock *s = w->starved;

		w->starved = s->starved_next;
		s->starved = false;
		if (!s->closed && s->want_recv)
			pg_sock_recv(w, s);
	}
}

/* --- sockets --------------------------------------------------------------- */

void pg_sock_recv(struct pg_worker *w, struct pg_sock *s)
{
	struct io_uring_sqe *sqe;

	s->want_recv = true;
	if (s->recv_armed || s->closed || s->starved)
		return;
	sqe = pg_sqe(w);
	io_uring_prep_recv_multishot(sqe, s->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BGID;
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_RECV));
	s->recv_armed = true;
	s->refs++;
}

void pg_sock_pause(struct pg_worker *w, struct pg_sock *s)
{
	struct io_uring_sqe *sqe;

	s->want_recv = false;
	if (!s->recv_armed || s->cancelling || s->closed)
		return;
	sqe = pg_sqe(w);
	io_uring_prep_cancel64(sqe, ud_pack(s, PG_OP_RECV), 0);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_CANCEL));
	s->cancelling = true;
	s->refs++;
}

static void submit_send(struct pg_worker *w, struct pg_sock *s)
{
	struct pg_seg *g = s->qhead;
	struct io_uring_sqe *sqe = pg_sqe(w);

	io_uring_prep_send(sqe, s->fd, g->data + g->off, g->len - g->off, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_SEND));
	s->send_busy = true;
	s->refs++;
}

void pg_sock_flush(struct pg_worker *w, struct pg_sock *s)
{
	if (s->qhead && s->can_send && !s->send_busy && !s->closed)
		submit_send(w, s);
}

static void seg_release(struct pg_worker *w, struct pg_seg *g);

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
	pg_sock_flush(w, s);
}

void pg_sock_queue_copy(struct pg_worker *w, struct pg_sock *s, const void *data, size_t len)
{
	char *p = malloc(len);

	if (!p)
		abort();
	memcpy(p, data, len);
	pg_sock_queue(w, s, p, len, -1, true);
}

static void seg_release(struct pg_worker *w, struct pg_seg *g)
{
	if (g->bid >= 0)
		pg_buf_return(w, g->bid);
	if (g->owned)
		free(g->data);
	free(g);
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
	if (s->refs) {
		/* Cancel what is outstanding before the fd number can be reused,
		 * and before any segment is freed: a send prepared this turn is
		 * issued by this submit (copying inline, or armed and then
		 * cancelled by the cancel behind it). */
		struct io_uring_sqe *sqe = pg_sqe(w);

		io_uring_prep_cancel_fd(sqe, s->fd, IORING_ASYNC_CANCEL_ALL);
		io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_CANCEL));
		s->refs++;
		io_uring_submit(&w->ring);
	}
	/* The segment a send names stays until that send completes: freed (or
	 * its provided buffer given back, to be refilled) any earlier, its
	 * memory could be read by the kernel and sent as another's bytes. */
	if (s->send_busy && s->qhead) {
		s->sending = s->qhead;
		s->qhead = s->qhead->next;
	}
	while ((g = s->qhead)) {
		s->qhead = g->next;
		seg_release(w, g);
	}
	s->qtail = NULL;
	s->qbytes = 0;
	if (s->starved) {
		struct pg_sock **pp = &w->starved;

		while (*pp && *pp != s)
			pp = &(*pp)->starved_next;
		if (*pp)
			*pp = s->starved_next;
		s->starved = false;
	}
	close(s->fd);
	s->fd = -1;
	bury(w, s);
}

void pg_sock_poll_rdhup(struct pg_worker *w, struct pg_sock *s)
{
	struct io_uring_sqe *sqe = pg_sqe(w);

	/* One-shot: spliced sockets report spurious POLLIN, so only the peer's
	 * FIN (or an error, always reported) completes it. */
	io_uring_prep_poll_add(sqe, s->fd, POLLRDHUP);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_POLL));
	s->refs++;
}

static void sock_put(struct pg_worker *w, struct pg_sock *s)
{
	s->refs--;
	if (s->closed && !s->refs)
		bury(w, s);
}

static void free_graveyard(struct pg_worker *w, bool all)
{
	struct pg_sock **pp = &w->graveyard;

	while (*pp) {
		struct pg_sock *s = *pp;

		if (s->refs && !all) {
			pp = &s->dead_next;
			continue;
		}
		*pp = s->dead_next;
		if (s->sending) /* only at exit (all): its send never completed */
			seg_release(w, s->sending);
		if (s->kind == PG_SOCK_CLIENT)
			pg_client_free((struct pg_client *)s);
		else
			pg_upstream_free((struct pg_upstream *)s);
	}
}

void pg_sock_connect(struct pg_worker *w, struct pg_sock *s, const struct sockaddr_in *sa)
{
	struct io_uring_sqe *sqe = pg_sqe(w);
	unsigned ms = w->gw->cfg->timeouts.connect_ms;

	w->ts_connect.tv_sec = ms / 1000;
	w->ts_connect.tv_nsec = (ms % 1000) * 1000000ll;
	io_uring_prep_connect(sqe, s->fd, (const struct sockaddr *)sa, sizeof(*sa));
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_CONNECT));
	sqe->flags |= IOSQE_IO_LINK;
	s->refs++;
	sqe = pg_sqe(w);
	io_uring_prep_link_timeout(sqe, &w->ts_connect, 0);
	io_uring_sqe_set_data64(sqe, ud_pack(s, PG_OP_TIMEOUT));
	s->refs++;
	/* The sockaddr is read at submission: submit while it is alive. */
	io_uring_submit(&w->ring);
}

/* --- completions ----------------------------------------------------------- */

static void arm_accept(struct pg_worker *w)
{
	struct io_uring_sqe *sqe = pg_sqe(w);

	io_uring_prep_multishot_accept(sqe, w->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud_pack(w, PG_OP_ACCEPT));
	w->accept_armed = true;
}

static void on_accept(struct pg_worker *w, struct io_uring_cqe *cqe)
{
	if (!(cqe->flags & IORING_CQE_F_MORE))
		w->accept_armed = false;
	if (cqe->res >= 0) {
		int one = 1;
		struct pg_client *c;

		if (pg_conn_over_cap(w->gw, w->nclients)) {
			/* Best effort: a full send buffer on a fresh socket cannot be. */
			if (send(cqe->res, PG_CONN_CAP_REPLY, sizeof(PG_CONN_CAP_REPLY) - 1,
				 MSG_DONTWAIT | MSG_NOSIGNAL) == -1)
				pg_debug("worker %u: connection cap reply: %s", w->id, strerror(errno));
			close(cqe->res);
			goto rearm;
		}
		setsockopt(cqe->res, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = pg_client_new(w, cqe->res);
		if (!c)
			close(cqe->res);
		else
			pg_sock_recv(w, &c->s);
	} else if (cqe->res != -ECANCELED) {
		/* EMFILE and friends: retried at the next tick, not in a tight loop. */
		if (w->now_ms - w->accept_err_logged_ms > 1000) {
			pg_warn("worker %u: accept: %s", w->id, strerror(-cqe->res));
			w->accept_err_logged_ms = w->now_ms;
		}
		return;
	}
rearm:
	if (!w->accept_armed && w->listen_fd != -1 && !pg_draining(w->gw) &&
	    !__atomic_load_n(&w->gw->stop, __ATOMIC_RELAXED))
		arm_accept(w);
}

/* Draining (SIGTERM): stop accepting; connections in progress finish. */
static void stop_accepting(struct pg_worker *w)
{
	if (w->accept_armed) {
		struct io_uring_sqe *sqe = pg_sqe(w);

		io_uring_prep_cancel64(sqe, ud_pack(w, PG_OP_ACCEPT), 0);
		io_uring_sqe_set_data64(sqe, 0); /* its completion needs nothing */
		io_uring_submit(&w->ring);
	}
	close(w->listen_fd);
	w->listen_fd = -1;
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
	if (res > 0) {
		int bid = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
		char *data = w->bufs + (size_t)bid * PG_BUFSZ;
		bool kept = false;

		w->bufs_out++;
		if (!s->closed) {
			if (s->kind == PG_SOCK_CLIENT)
				kept = pg_client_data(w, (struct pg_client *)s, data, (size_t)res);
			else
				kept = pg_upstream_data(w, (struct pg_upstream *)s, data,
							(size_t)res, bid);
		}
		if (!kept)
			pg_buf_return(w, bid);
	} else if (res == -ENOBUFS) {
		if (!s->starved && !s->closed) {
			s->starved = true;
			s->starved_next = w->starved;
			w->starved = s;
		}
	} else if (res != -ECANCELED && !s->closed) {
		if (s->kind == PG_SOCK_CLIENT)
			pg_client_eof(w, (struct pg_client *)s, res);
		else
			pg_upstream_eof(w, (struct pg_upstream *)s, res);
		res = 0; /* the connection is over: do not re-arm */
	}
	if (!more) {
		if (res != 0 && !s->closed && s->want_recv && !s->starved)
			pg_sock_recv(w, s);
		else if (!s->closed && !s->recv_armed && s->kind == PG_SOCK_UPSTREAM)
			pg_dp_recv_ended(w, (struct pg_upstream *)s);
		sock_put(w, s);
	}
}

static void on_send(struct pg_worker *w, struct pg_sock *s, int res)
{
	s->send_busy = false;
	if (s->closed) {
		if (s->sending) {
			seg_release(w, s->sending);
			s->sending = NULL;
		}
		sock_put(w, s);
		return;
	}
	if (res < 0) {
		if (s->kind == PG_SOCK_CLIENT)
			pg_client_eof(w, (struct pg_client *)s, res);
		else
			pg_upstream_sent(w, (struct pg_upstream *)s, res);
		sock_put(w, s);
		return;
	}
	s->qhead->off += (uint32_t)res;
	s->qbytes -= (size_t)res;
	if (s->qhead->off == s->qhead->len) {
		struct pg_seg *g = s->qhead;

		s->qhead = g->next;
		if (!s->qhead)
			s->qtail = NULL;
		seg_release(w, g);
	}
	pg_sock_flush(w, s);
	if (s->kind == PG_SOCK_CLIENT)
		pg_client_sent(w, (struct pg_client *)s);
	else
		pg_upstream_sent(w, (struct pg_upstream *)s, 0);
	sock_put(w, s);
}

static void handle_cqe(struct pg_worker *w, struct io_uring_cqe *cqe)
{
	uint64_t ud = io_uring_cqe_get_data64(cqe);
	void *p = (void *)(uintptr_t)(ud & ~7ull);

	switch ((enum pg_op)(ud & 7)) {
	case PG_OP_ACCEPT:
		on_accept(w, cqe);
		break;
	case PG_OP_RECV:
		on_recv(w, p, cqe);
		break;
	case PG_OP_SEND:
		on_send(w, p, cqe->res);
		break;
	case PG_OP_CONNECT: {
		struct pg_sock *s = p;

		if (!s->closed)
			pg_upstream_connected(w, (struct pg_upstream *)s, cqe->res);
		sock_put(w, s);
		break;
	}
	case PG_OP_POLL: {
		struct pg_sock *s = p;

		if (!s->closed)
			pg_dp_polled(w, (struct pg_upstream *)s, cqe->res);
		sock_put(w, s);
		break;
	}
	case PG_OP_TIMEOUT:
	case PG_OP_CANCEL:
		sock_put(w, p);
		break;
	}
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
	uint64_t last_tick = 0;
	int rc;

	rc = ring_init(w);
	if (rc) {
		snprintf(w->err, sizeof(w->err), "io_uring setup: %s", strerror(-rc));
	} else if ((rc = bufring_init(w))) {
		snprintf(w->err, sizeof(w->err), "io_uring provided buffers: %s", strerror(-rc));
		io_uring_queue_exit(&w->ring);
	}
	boot->rc = rc;
	sem_post(&boot->ready);
	if (rc)
		return NULL;

	arm_accept(w);
	while (!__atomic_load_n(&w->gw->stop, __ATOMIC_RELAXED)) {
		struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = 100 * 1000000};
		struct io_uring_cqe *cqe;
		unsigned head, n = 0, wait_ms = pg_dp_next_ms(w);

		if (wait_ms < 100)
			ts.tv_nsec = (long long)wait_ms * 1000000;
		io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &ts, NULL);
		w->now_ms = pg_now_ms();
		io_uring_for_each_cqe(&w->ring, head, cqe)
		{
			handle_cqe(w, cqe);
			n++;
		}
		io_uring_cq_advance(&w->ring, n);
		if (w->dp_wait)
			pg_dp_run(w);
		free_graveyard(w, false);
		if (w->now_ms - last_tick >= 100) {
			last_tick = w->now_ms;
			if (pg_draining(w->gw) && w->listen_fd != -1)
				stop_accepting(w);
			if (!w->accept_armed && w->listen_fd != -1)
				arm_accept(w);
			pg_proxy_tick(w);
		}
	}
	pg_proxy_shutdown(w);
	io_uring_queue_exit(&w->ring); /* cancels whatever is left */
	free_graveyard(w, true);
	return NULL;
}

/* SO_REUSEPORT would let a second gateway (same user) bind the same port and
 * silently take half the connections: check with a plain bind first. */
static bool listen_taken(const struct sockaddr_in *sa, char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	bool taken = false;
	char a[32];

	if (fd == -1)
		return false; /* the real bind will say what is wrong */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == -1 && errno == EADDRINUSE) {
		inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a));
		snprintf(err, errlen, "--listen %s:%u: address already in use (another process "
			 "listens there)", a, ntohs(sa->sin_port));
		taken = true;
	}
	close(fd);
	return taken;
}

static int listener(const struct sockaddr_in *sa, char *err, size_t errlen)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	char a[32];

	if (fd == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* One listener per worker: the kernel spreads connections over them. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == -1 || listen(fd, 4096) == -1) {
		inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a));
		snprintf(err, errlen, "--listen %s:%u: %s", a, ntohs(sa->sin_port), strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

int pg_worker_start(struct pg_gateway *gw, unsigned id, struct pg_worker **out, char *err,
		    size_t errlen)
{
	struct pg_worker *w = calloc(1, sizeof(*w));
	struct worker_boot boot;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	w->gw = gw;
	w->id = id;
	w->stats = &gw->stats[id];
	if (getrandom(&w->rng, sizeof(w->rng), 0) != sizeof(w->rng) || !w->rng)
		w->rng = 0x9E3779B97F4A7C15ull ^ (pg_now_ns() + id);
	if (id == 0 && listen_taken(&gw->cfg->listen, err, errlen)) {
		free(w);
		return -1;
	}
	w->listen_fd = listener(&gw->cfg->listen, err, errlen);
	if (w->listen_fd == -1) {
		free(w);
		return -1;
	}
	sem_init(&boot.ready, 0, 0);
	w->boot = &boot;
	if (pthread_create(&w->thread, NULL, worker_main, w)) {
		snprintf(err, errlen, "pthread_create: %s", strerror(errno));
		close(w->listen_fd);
		free(w);
		return -1;
	}
	sem_wait(&boot.ready);
	sem_destroy(&boot.ready);
	w->boot = NULL;
	if (boot.rc) {
		pthread_join(w->thread, NULL);
		snprintf(err, errlen, "worker %u: %s", id, w->err);
		close(w->listen_fd);
		free(w);
		return -1;
	}
	*out = w;
	return 0;
}

void pg_worker_join(struct pg_worker *w)
{
	pthread_join(w->thread, NULL);
	if (w->listen_fd != -1)
		close(w->listen_fd);
	if (w->br)
		munmap(w->br, PG_NBUFS * sizeof(struct io_uring_buf));
	free(w->bufs);
	free(w);
}
