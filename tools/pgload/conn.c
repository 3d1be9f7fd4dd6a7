// SPDX-License-Identifier: MIT
/*
 * One keep-alive HTTP/1.1 client connection: non-blocking connect, one
 * request at a time written with sendmsg, the response head parsed with
 * pg_http_parse_response, chunked bodies decoded with pg_chunked_feed and
 * the decoded body scanned by sse.c. Every socket call is non-blocking;
 * waiting happens only in engine.c's epoll loop.
 */
#include "engine.h"

#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static struct pg_rec *rec_of(struct pg_eng *e, struct pg_conn *c)
{
	return &e->run->recs[c->rec];
}

static void set_out(struct pg_eng *e, struct pg_conn *c, bool on)
{
	struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.u32 = c->slot};

	if (c->want_out == on)
		return;
	if (epoll_ctl(e->ep, EPOLL_CTL_MOD, c->fd, &ev) == -1)
		fprintf(stderr, "pgload: epoll_ctl(MOD) on connection %u: %s\n", c->slot,
		        strerror(errno));
	c->want_out = on;
}

int pg_conn_open(struct pg_eng *e, struct pg_conn *c)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u32 = c->slot};
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1)
		return -1;
	/* Small request heads and SSE events must not wait for Nagle. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&e->addr[c->target], sizeof(e->addr[0])) == -1 &&
	    errno != EINPROGRESS) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	if (epoll_ctl(e->ep, EPOLL_CTL_ADD, fd, &ev) == -1) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	c->fd = fd;
	c->state = PG_C_CONNECTING;
	c->want_out = true;
	c->reused = false;
	e->run->conns_opened++;
	return 0;
}

void pg_conn_close(struct pg_eng *e, struct pg_conn *c)
{
	if (c->state == PG_C_FREE)
		return;
	if (c->state == PG_C_IDLE) {
		uint32_t *idle = e->idle[c->target];
		uint32_t last = idle[--e->nidle_t[c->target]];

		e->nidle--;
		idle[c->idle_pos] = last;
		e->conns[last].idle_pos = c->idle_pos;
	}
	if (c->fd >= 0)
		close(c->fd); /* also leaves the epoll set */
	c->fd = -1;
	c->state = PG_C_FREE;
	c->want_out = false;
	e->free_slots[e->nfree++] = c->slot;
	e->nopen--;
}

static void send_some(struct pg_eng *e, struct pg_conn *c);

void pg_conn_start(struct pg_eng *e, struct pg_conn *c, size_t rec, struct pg_wl_req *wl)
{
	size_t hp = e->head_prefix_len[c->target];
	struct pg_timer timeout;
	int n;

	c->rec = rec;
	c->wl = *wl;
	c->gen++;
	c->sent = 0;
	c->retried = false;
	c->bstate = PG_B_HEAD;
	pg_buf_reset(&c->hbuf);
	c->left = 0;
	c->leftover = false;
	pg_scan_reset(&c->scan, e->o->stream, wl->reply_max);
	pg_itl_reset(&c->itl);
	memcpy(c->head, e->head_prefix[c->target], hp);
	if (wl->traced)
		n = snprintf(c->head + hp, sizeof(c->head) - hp,
		             "%zu\r\nX-Trace-Index: %llu\r\n\r\n", wl->len,
		             (unsigned long long)wl->trace_index);
	else
		n = snprintf(c->head + hp, sizeof(c->head) - hp, "%zu\r\n\r\n", wl->len);
	c->head_len = hp + (size_t)n;
	timeout = (struct pg_timer){
	    .due_ns = pg_now_ns() + (uint64_t)e->o->timeout_ms * 1000000,
	    .kind = PG_T_TIMEOUT,
	    .id = c->slot,
	    .gen = c->gen,
	};
	if (pg_heap_push(&e->heap, &timeout) == -1)
		fprintf(stderr, "pgload: out of memory for a timeout; request %zu has none\n", rec);
	if (c->state == PG_C_IDLE) {
		c->state = PG_C_SENDING;
		send_some(e, c);
	}
	/* CONNECTING: the send starts when connect completes (EPOLLOUT). */
}

/*
 * The connection failed under a request. A kept-alive connection that the
 * server closed while idle fails like this before any response byte; the
 * request is then sent once more on a fresh connection.
 */
static void conn_error(struct pg_eng *e, struct pg_conn *c, enum pg_err err)
{
	struct pg_rec *r = rec_of(e, c);

	if (c->reused && !c->retried && r->bytes_recv == 0 &&
	    (err == PG_ERR_EOF || err == PG_ERR_IO)) {
		struct pg_wl_req wl = c->wl;

		close(c->fd);
		c->fd = -1;
		c->state = PG_C_FREE;
		e->run->retries++;
		r->bytes_sent = 0;
		if (pg_conn_open(e, c) == 0) {
			pg_conn_start(e, c, c->rec, &wl);
			c->retried = true;
			return;
		}
		/* The slot stays counted open until request_done closes it. */
		c->state = PG_C_CONNECTING;
		err = PG_ERR_CONNECT;
	}
	pg_eng_request_done(e, c, err, false);
}

void pg_conn_fail(struct pg_eng *e, struct pg_conn *c, enum pg_err err)
{
	pg_eng_request_done(e, c, err, false);
}

static void send_some(struct pg_eng *e, struct pg_conn *c)
{
	size_t total = c->head_len + c->wl.len;

	while (c->sent < total) {
		struct iovec iov[2];
		struct msghdr msg = {.msg_iov = iov};
		ssize_t n;

		if (c->sent < c->head_len) {
			iov[0] = (struct iovec){c->head + c->sent, c->head_len - c->sent};
			iov[1] = (struct iovec){c->wl.body, c->wl.len};
			msg.msg_iovlen = 2;
		} else {
			size_t off = c->sent - c->head_len;

			iov[0] = (struct iovec){c->wl.body + off, c->wl.len - off};
			msg.msg_iovlen = 1;
		}
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				set_out(e, c, true);
				return;
			}
			conn_error(e, c, errno == EPIPE ? PG_ERR_EOF : PG_ERR_IO);
			return;
		}
		c->sent += (size_t)n;
		rec_of(e, c)->bytes_sent += (uint64_t)n;
	}
	c->state = PG_C_RECEIVING;
	set_out(e, c, false);
}

static void response_done(struct pg_eng *e, struct pg_conn *c)
{
	struct pg_rec *r = rec_of(e, c);
	enum pg_err err = PG_OK;
	int ev = pg_scan_finish(&c->scan);

	if (ev > 0) {
		uint64_t now = pg_now_ns();

		if (!r->ttft_ns)
			r->ttft_ns = now - r->start_ns;
		if (e->o->stream)
			pg_itl_events(&c->itl, now, (unsigned)ev);
	}
	r->prompt_tokens = c->scan.prompt_tokens;
	r->cached_tokens = c->scan.cached_tokens;
	r->completion_tokens = c->scan.completion_tokens;
	if (r->completion_tokens < 0 && c->scan.content_events && e->o->stream)
		r->completion_tokens = (int32_t)c->scan.content_events;
	if (r->status < 200 || r->status > 299)
		err = PG_ERR_STATUS;
	else if (e->o->stream && !c->scan.done)
		err = PG_ERR_TRUNCATED;
	pg_eng_request_done(e, c, err,
	                    c->resp.keep_alive && !c->leftover && c->state == PG_C_RECEIVING);
}

/* Decoded body bytes: scan them, stamping TTFT at the first content and
 * (streaming) the time of every content event for the inter-token gaps. */
static int body_data(struct pg_eng *e, struct pg_conn *c, const char *p, size_t n)
{
	struct pg_rec *r = rec_of(e, c);
	int ev = pg_scan_feed(&c->scan, p, n);
	uint64_t now;

	if (ev == -1)
		return -1;
	/* Without streaming the first body byte is the first content. */
	if (ev == 0 && (e->o->stream || !n || r->ttft_ns))
		return 0;
	now = pg_now_ns();
	if (!r->ttft_ns)
		r->ttft_ns = now - r->start_ns;
	if (e->o->stream)
		pg_itl_events(&c->itl, now, (unsigned)ev);
	return 0;
}

/*
 * Body bytes p[0..n) as received. Returns 1 when the response is complete,
 * 0 when more is needed, -1 on a framing error.
 */
static int body_bytes(struct pg_eng *e, struct pg_conn *c, const char *p, size_t n)
{
	size_t used, off, dl, take;

	switch (c->resp.body) {
	case PG_BODY_CHUNKED:
		while (n) {
			enum pg_chunked_rc rc = pg_chunked_feed(&c->ch, p, n, &used, &off, &dl);

			if (rc == PG_CHUNKED_ERROR)
				return -1;
			if (rc == PG_CHUNKED_DATA && body_data(e, c, p + off, dl) == -1)
				return -1;
			p += used;
			n -= used;
			if (rc == PG_CHUNKED_DONE) {
				c->leftover = n > 0;
				return 1;
			}
			if (rc == PG_CHUNKED_MORE)
				break;
		}
		return 0;
	case PG_BODY_LENGTH:
		take = n < c->left ? n : (size_t)c->left;
		if (take && body_data(e, c, p, take) == -1)
			return -1;
		c->left -= take;
		c->leftover = n > take;
		return c->left == 0;
	case PG_BODY_EOF:
		return n && body_data(e, c, p, n) == -1 ? -1 : 0;
	case PG_BODY_NONE:
	default:
		c->leftover = n > 0;
		return 1;
	}
}

static int head_store(struct pg_conn *c, const char *p, size_t n)
{
	pg_buf_append(&c->hbuf, p, n);
	return c->hbuf.oom ? -1 : 0;
}

/* A complete head buf[0..hl): record status and backend, set up the body. */
static void head_done(struct pg_eng *e, struct pg_conn *c, const char *buf, size_t hl)
{
	struct pg_rec *r = rec_of(e, c);
	const char *v;
	size_t vl;

	r->status = (uint16_t)c->resp.status;
	if (pg_head_header(buf, hl, "X-Backend-Id", &v, &vl))
		r->backend = pg_eng_backend(e, v, vl);
	c->bstate = PG_B_BODY;
	c->left = c->resp.content_length;
	pg_chunked_init(&c->ch);
}

/*
 * Response bytes p[0..n) as received. Returns like body_bytes. A head that
 * arrives whole is parsed in place; a split one is gathered in c->hbuf.
 */
static int response_bytes(struct pg_eng *e, struct pg_conn *c, const char *p, size_t n)
{
	while (c->bstate == PG_B_HEAD) {
		const char *buf = p;
		size_t len = n, rest;
		ssize_t hl;

		if (c->hbuf.len) {
			if (head_store(c, p, n) == -1)
				return -1;
			buf = c->hbuf.p;
			len = c->hbuf.len;
			n = 0;
		}
		hl = pg_http_parse_response(buf, len, false, &c->resp);
		if (hl < 0 || (hl == 0 && len >= PG_HTTP_MAX_HEAD))
			return -1;
		if (hl == 0)
			return c->hbuf.len ? 0 : head_store(c, p, n);
		if (c->resp.status >= 200)
			head_done(e, c, buf, (size_t)hl);
		/* else 1xx: skip it, parse the next head from what follows */
		if (!c->hbuf.len) {
			p += hl;
			n -= (size_t)hl;
			if (c->bstate == PG_B_HEAD && !n)
				return 0;
			continue;
		}
		rest = c->hbuf.len - (size_t)hl;
		memmove(c->hbuf.p, c->hbuf.p + hl, rest);
		if (c->bstate == PG_B_BODY) {
			c->hbuf.len = 0;
			return body_bytes(e, c, c->hbuf.p, rest);
		}
		c->hbuf.len = rest;
		if (!rest)
			return 0;
	}
	return body_bytes(e, c, p, n);
}

static void recv_some(struct pg_eng *e, struct pg_conn *c)
{
	for (;;) {
		ssize_t n = recv(c->fd, e->rbuf, sizeof(e->rbuf), 0);
		int rc;

		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (c->state == PG_C_IDLE)
				pg_conn_close(e, c);
			else
				conn_error(e, c, PG_ERR_IO);
			return;
		}
		if (n == 0) {
			if (c->state == PG_C_IDLE)
				pg_conn_close(e, c);
			else if (c->bstate == PG_B_BODY && c->resp.body == PG_BODY_EOF)
				response_done(e, c); /* keep_alive is false: closes */
			else
				conn_error(e, c, PG_ERR_EOF);
			return;
		}
		if (c->state == PG_C_IDLE) {
			/* Bytes nobody asked for: the connection is out of step. */
			pg_conn_close(e, c);
			return;
		}
		rec_of(e, c)->bytes_recv += (uint64_t)n;
		rc = response_bytes(e, c, e->rbuf, (size_t)n);
		if (rc == -1) {
			pg_eng_request_done(e, c, PG_ERR_PARSE, false);
			return;
		}
		if (rc == 1) {
			response_done(e, c);
			return;
		}
		if ((size_t)n < sizeof(e->rbuf))
			return; /* drained: wait for the next EPOLLIN */
	}
}

void pg_conn_event(struct pg_eng *e, struct pg_conn *c, uint32_t events)
{
	if (c->state == PG_C_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
			err = errno;
		if (err) {
			pg_eng_request_done(e, c, PG_ERR_CONNECT, false);
			return;
		}
		c->state = PG_C_SENDING;
		send_some(e, c);
		return;
	}
	if (c->state == PG_C_SENDING && (events & EPOLLOUT))
		send_some(e, c);
	if (c->state != PG_C_FREE && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
		recv_some(e, c);
}
