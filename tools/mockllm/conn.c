// SPDX-License-Identifier: MIT
/*
 * Connections: accept, read and parse requests (head, Content-Length or
 * chunked body, CRC32 of the body as received), send buffered output with
 * backpressure, close (gracefully, or with a reset for X-Mock-Fail).
 *
 * One request is answered at a time per connection; pipelined requests wait
 * in the input buffer until the previous response has been fully generated,
 * so responses go out in order. When the peer stops sending (EOF) the
 * requests already received are still answered, then the connection closes,
 * except a completion still being simulated: that is aborted, as vLLM does.
 */
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>

#include "mockllm.h"

#define LINGER_NS     (2ull * 1000000000) /* drain input this long before close */
#define RST_POLL_NS   1000000ull          /* reset-mid-body: poll the send queue */
#define RST_POLLS_MAX 2000
#define READ_BURST    (256u * 1024)

static void process(struct conn *c);

void conn_mark_dirty(struct conn *c)
{
	if (c->dirty || c->phase == PH_DEAD)
		return;
	c->dirty = true;
	c->next_dirty = g_srv.dirty;
	g_srv.dirty = c;
}

static void update_events(struct conn *c)
{
	uint32_t ev = 0;
	struct epoll_event e;

	if (c->phase == PH_DEAD)
		return;
	if (!c->rd_eof && (c->phase != PH_WORK || c->in.len < MOCK_MAX_PIPELINED))
		ev |= EPOLLIN;
	if (c->out.off < c->out.len)
		ev |= EPOLLOUT;
	if (ev == c->events)
		return;
	e.events = ev;
	e.data.ptr = c;
	if (epoll_ctl(g_srv.epfd, EPOLL_CTL_MOD, c->fd, &e) == -1)
		fprintf(stderr, "mockllm: epoll_ctl(MOD fd %d): %s\n", c->fd, strerror(errno));
	c->events = ev;
}

void conn_accept_all(void)
{
	for (;;) {
		int fd = accept4(g_srv.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event e;
		struct conn *c;
		int one = 1;

		if (fd == -1) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
				/* resumed when a connection closes */
				fprintf(stderr, "mockllm: accept: %s; pausing accepts\n",
				        strerror(errno));
				epoll_ctl(g_srv.epfd, EPOLL_CTL_DEL, g_srv.lfd, NULL);
				g_srv.accept_paused = true;
			} else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
				fprintf(stderr, "mockllm: accept: %s\n", strerror(errno));
			}
			return;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->phase = PH_HEAD;
		c->events = EPOLLIN;
		heap_node_init(&c->timer);
		e.events = EPOLLIN;
		e.data.ptr = c;
		if (epoll_ctl(g_srv.epfd, EPOLL_CTL_ADD, fd, &e) == -1) {
			fprintf(stderr, "mockllm: epoll_ctl(ADD): %s\n", strerror(errno));
			close(fd);
			free(c);
			continue;
		}
		g_srv.conns_open++;
		g_srv.conns_accepted++;
	}
}

void conn_close(struct conn *c, bool reset)
{
	if (c->phase == PH_DEAD)
		return;
	if (reset) {
		struct linger l = {.l_onoff = 1, .l_linger = 0};

		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	}
	close(c->fd); /* also removes it from the epoll set */
	heap_remove(&g_srv.timers, &c->timer);
	route_release(c);
	c->phase = PH_DEAD;
	c->next_dead = g_srv.dead;
	g_srv.dead = c;
	g_srv.conns_open--;
	if (g_srv.accept_paused) {
		struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};

		if (epoll_ctl(g_srv.epfd, EPOLL_CTL_ADD, g_srv.lfd, &e) == 0)
			g_srv.accept_paused = false;
	}
}

void conn_free_dead(void)
{
	while (g_srv.dead) {
		struct conn *c = g_srv.dead;

		g_srv.dead = c->next_dead;
		pg_buf_free(&c->in);
		pg_buf_free(&c->out);
		free(c);
	}
}

void conn_set_timer(struct conn *c, enum ctimer kind, uint64_t delay_ns)
{
	heap_remove(&g_srv.timers, &c->timer);
	c->tkind = kind;
	if (heap_push(&g_srv.timers, &c->timer, g_srv.now + delay_ns) == -1) {
		fprintf(stderr, "mockllm: out of memory for a timer\n");
		abort();
	}
}

/* The send queue is empty (all acknowledged): reset now, else poll again. */
static void reset_when_sent(struct conn *c)
{
	int queued = 0;

	if (ioctl(c->fd, SIOCOUTQ, &queued) == -1 || queued == 0 ||
	    ++c->rst_polls > RST_POLLS_MAX) {
		conn_close(c, true);
		return;
	}
	conn_set_timer(c, CT_RST_WAIT, RST_POLL_NS);
}

void conn_timer_fired(struct conn *c)
{
	enum ctimer kind = c->tkind;

	c->tkind = CT_NONE;
	switch (kind) {
	case CT_DELAY:
	case CT_CHUNK:
	case CT_PD_WAIT:
	case CT_PD_XFER:
		route_timer(c, kind);
		break;
	case CT_RST_WAIT:
		reset_when_sent(c);
		break;
	case CT_LINGER:
		conn_close(c, false);
		break;
	case CT_NONE:
		break;
	}
}

/* Everything queued has been sent: close or reset if that was asked. */
static void drained(struct conn *c)
{
	pg_buf_reset(&c->out);
	if (c->out.cap > 65536)
		pg_buf_free(&c->out);
	if (c->fin_after) {
		conn_close(c, false); /* a clean FIN in the middle of the body */
		return;
	} else if (c->rst_after) {
		if (c->tkind != CT_RST_WAIT)
			reset_when_sent(c);
	} else if (c->phase == PH_LINGER && c->tkind != CT_LINGER) {
		if (c->rd_eof) {
			conn_close(c, false);
			return;
		}
		/* Closing with unread input would send a reset that can destroy
		 * the response in flight: send FIN, drain input for a while. */
		shutdown(c->fd, SHUT_WR);
		conn_set_timer(c, CT_LINGER, LINGER_NS);
	}
}

static void flush(struct conn *c)
{
	if (c->phase == PH_HEAD && !c->in_process && (c->in.off < c->in.len || c->rd_eof))
		process(c);
	while (c->phase != PH_DEAD) {
		ssize_t n;

		if (c->bulk.active && c->out.len - c->out.off < MOCK_OUT_LOW && out_bulk_fill(c)) {
			if (c->bulk.made < c->bulk.total && c->req.fail == FAIL_CLOSE_MID)
				c->fin_after = true; /* close-mid-body */
			else if (c->bulk.made < c->bulk.total)
				c->rst_after = true; /* reset-mid-body */
			else
				conn_response_done(c);
		}
		if (c->out.off == c->out.len) {
			drained(c);
			break;
		}
		mock_buf_ok(&c->out);
		n = send(c->fd, c->out.p + c->out.off, c->out.len - c->out.off, MSG_NOSIGNAL);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				conn_close(c, false);
			break;
		}
		c->out.off += (size_t)n;
	}
	update_events(c);
}

void conn_flush_dirty(void)
{
	while (g_srv.dirty) {
		struct conn *c = g_srv.dirty;

		g_srv.dirty = c->next_dirty;
		c->dirty = false;
		if (c->phase != PH_DEAD)
			flush(c);
	}
}

/* The current response is fully generated: the next request may start. */
void conn_response_done(struct conn *c)
{
	route_release(c);
	conn_mark_dirty(c);
	if (c->phase == PH_DEAD)
		return;
	if (c->close_after) {
		c->phase = PH_LINGER;
		return;
	}
	/* The next pipelined request is parsed by flush(), never from inside
	 * a simulation callback, so the simulation is not re-entered. */
	c->phase = PH_HEAD;
}

static int64_t header_int(const struct pg_http_request *r, const char *name)
{
	const struct pg_http_header *h = pg_http_find(r, name);
	char tmp[24];
	char *end;
	long long v;

	if (!h || h->value.len == 0 || h->value.len >= sizeof(tmp))
		return -1;
	memcpy(tmp, h->value.p, h->value.len);
	tmp[h->value.len] = '\0';
	v = strtoll(tmp, &end, 10);
	return *end || v < 0 ? -1 : v;
}

static bool header_is(const struct pg_http_request *r, const char *name, const char *val)
{
	const struct pg_http_header *h = pg_http_find(r, name);

	return h && h->value.len == strlen(val) && !strncasecmp(h->value.p, val, h->value.len);
}

static enum route route_of(struct pg_str path)
{
	static const struct {
		const char *path;
		enum route r;
	} tab[] = {
	    {"/health", R_HEALTH},
	    {"/v1/models", R_MODELS},
	    {"/metrics", R_METRICS},
	    {"/v1/chat/completions", R_CHAT},
	    {"/v1/completions", R_COMPLETIONS},
	    {"/invocations", R_INVOCATIONS},
	    {"/mock/match/v1/chat/completions", R_MATCH_CHAT},
	    {"/mock/match/v1/completions", R_MATCH_COMPLETIONS},
	    {"/mock/speed", R_SPEED},
	};

	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
		if (path.len == strlen(tab[i].path) && !memcmp(path.p, tab[i].path, path.len))
			return tab[i].r;
	return R_OTHER;
}

/* Echo the request's identity fields (X-Forwarded-For, X-Request-Id,
 * traceparent, tracestate) as X-Seen-* response fields; each at most 200
 * bytes. */
static void note_seen(struct mreq *m, const struct pg_http_request *r)
{
	static const char *const names[] = {"X-Forwarded-For", "X-Request-Id", "traceparent",
	                                    "tracestate"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct pg_http_header *h = pg_http_find(r, names[i]);
		int k;

		if (!h || h->value.len > 200)
			continue;
		k = snprintf(m->seen + m->seen_len, sizeof(m->seen) - m->seen_len,
		             "X-Seen-%s: %.*s\r\n", names[i], (int)h->value.len, h->value.p);
		if (k > 0 && (size_t)k < sizeof(m->seen) - m->seen_len)
			m->seen_len += (size_t)k;
		if (i == 1) /* X-Request-Id: what names the two legs of a pair */
			m->rid = XXH3_64bits(h->value.p, h->value.len) | 1;
	}
}

/* Fill c->req from a parsed head. */
static void begin_request(struct conn *c, const struct pg_http_request *r)
{
	struct mreq *m = &c->req;

	memset(m, 0, sizeof(*m));
	m->route = route_of(r->path);
	m->is_get = r->method.len == 3 && !memcmp(r->method.p, "GET", 3);
	m->is_head = r->method.len == 4 && !memcmp(r->method.p, "HEAD", 4);
	m->is_post = r->method.len == 4 && !memcmp(r->method.p, "POST", 4);
	m->keep_alive = r->keep_alive;
	m->body_kind = r->body;
	m->body_left = r->body == PG_BODY_LENGTH ? r->content_length : 0;
	pg_chunked_init(&m->ck);
	m->crc = (uint32_t)crc32(0L, Z_NULL, 0);
	m->delay_ms = header_int(r, "X-Mock-Delay-Ms");
	m->chunks = header_int(r, "X-Mock-Chunks");
	m->chunk_interval_ms = header_int(r, "X-Mock-Chunk-Interval-Ms");
	m->resp_bytes = header_int(r, "X-Mock-Response-Bytes");
	m->resp_chunked = header_is(r, "X-Mock-Chunked", "1");
	note_seen(m, r);
	if (header_is(r, "X-Mock-Fail", "reset"))
		m->fail = FAIL_RESET;
	else if (header_is(r, "X-Mock-Fail", "close"))
		m->fail = FAIL_CLOSE;
	else if (header_is(r, "X-Mock-Fail", "reset-mid-body"))
		m->fail = FAIL_RESET_MID;
	else if (header_is(r, "X-Mock-Fail", "close-mid-body"))
		m->fail = FAIL_CLOSE_MID;
	m->want_body =
	    m->is_post &&
	    (m->route == R_CHAT || m->route == R_COMPLETIONS || m->route == R_MATCH_CHAT ||
	     m->route == R_MATCH_COMPLETIONS || m->route == R_SPEED) &&
	    m->resp_bytes < 0 && m->fail == FAIL_NONE;
	g_srv.requests[m->route]++;
}

/* Body bytes as received (de-chunked). False when the body is too large. */
static bool body_data(struct conn *c, const char *p, size_t n)
{
	struct mreq *m = &c->req;

	m->crc = (uint32_t)crc32(m->crc, (const unsigned char *)p, (uInt)n);
	m->body_len += n;
	if (!m->want_body)
		return true;
	if (m->body.len + n > MOCK_MAX_JSON_BODY)
		return false;
	pg_buf_append(&m->body, p, n);
	return true;
}

/* Consume body bytes from the input. 1: complete, 0: need more, -1: answered
 * with an error. */
static int read_body(struct conn *c)
{
	struct mreq *m = &c->req;
	struct pg_buf *in = &c->in;

	while (in->off < in->len || m->body_kind == PG_BODY_LENGTH) {
		const char *p = in->p + in->off;
		size_t avail = in->len - in->off;

		if (m->body_kind == PG_BODY_LENGTH) {
			size_t n = avail < m->body_left ? avail : (size_t)m->body_left;

			if (!body_data(c, p, n))
				goto too_large;
			in->off += n;
			m->body_left -= n;
			return m->body_left == 0;
		} else if (m->body_kind == PG_BODY_CHUNKED) {
			size_t used, doff, dlen;
			enum pg_chunked_rc rc =
			    pg_chunked_feed(&m->ck, p, avail, &used, &doff, &dlen);

			in->off += used;
			if (rc == PG_CHUNKED_ERROR) {
				m->keep_alive = false;
				out_error(c, 400, "bad chunked request body");
				return -1;
			}
			if (rc == PG_CHUNKED_DATA && !body_data(c, p + doff, dlen))
				goto too_large;
			if (rc == PG_CHUNKED_DONE)
				return 1;
			if (rc == PG_CHUNKED_MORE)
				return 0;
		} else {
			return 1;
		}
	}
	return m->body_kind == PG_BODY_CHUNKED ? 0 : 1;
too_large:
	m->keep_alive = false;
	out_error(c, 413, "request body too large");
	return -1;
}

/* Parse and dispatch what the input holds, as far as the current phase
 * allows. Re-entered from conn_response_done() for pipelined requests. */
static void process(struct conn *c)
{
	struct pg_buf *in = &c->in;

	c->in_process = true;
	while (c->phase == PH_HEAD || c->phase == PH_BODY) {
		if (c->phase == PH_HEAD) {
			struct pg_http_request r;
			ssize_t n;

			if (in->off == in->len) {
				if (c->rd_eof)
					c->phase = PH_LINGER;
				break;
			}
			n = pg_http_parse_request(in->p + in->off, in->len - in->off, &r);
			if (n == 0) {
				if (c->rd_eof)
					conn_close(c, false);
				break;
			}
			if (n < 0) {
				memset(&c->req, 0, sizeof(c->req));
				c->req.crc = (uint32_t)crc32(0L, Z_NULL, 0);
				c->phase = PH_WORK;
				out_error(c, (int)-n, pg_http_reason((int)-n));
				break;
			}
			begin_request(c, &r);
			in->off += (size_t)n;
			c->phase = PH_BODY;
			if (r.expect_continue && r.body != PG_BODY_NONE) {
				pg_buf_puts(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
				conn_mark_dirty(c);
			}
		}
		int rc = read_body(c);

		if (rc == 0) {
			if (c->rd_eof)
				conn_close(c, false);
			break;
		}
		c->phase = PH_WORK;
		if (rc == 1)
			route_request(c);
	}
	c->in_process = false;
	if (c->phase == PH_DEAD)
		return;
	/* keep unconsumed bytes only */
	if (in->off == in->len) {
		pg_buf_reset(in);
		if (in->cap > 65536)
			pg_buf_free(in);
	} else if (in->off > 0 && c->phase != PH_WORK) {
		memmove(in->p, in->p + in->off, in->len - in->off);
		in->len -= in->off;
		in->off = 0;
	}
	conn_mark_dirty(c);
}

/* Read what the socket has, at most READ_BURST bytes per event so that the
 * input buffer stays small while a large body streams in (level-triggered
 * epoll calls again for the rest). */
static void do_read(struct conn *c)
{
	size_t total = 0;

	while (total < READ_BURST) {
		struct pg_buf *in = &c->in;
		size_t room;
		ssize_t n;

		if (c->phase == PH_WORK && in->len >= MOCK_MAX_PIPELINED)
			break;
		if (in->off > 0 && in->off == in->len)
			in->off = in->len = 0;
		mock_room(in, 16384);
		room = in->cap - in->len < 65536 ? in->cap - in->len : 65536;
		n = recv(c->fd, in->p + in->len, room, 0);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				conn_close(c, false);
			break;
		}
		if (n == 0) {
			c->rd_eof = true;
			/* as vLLM behind uvicorn: a client that goes away aborts
			 * its generation, freeing the simulated capacity */
			if (route_busy(c)) {
				conn_close(c, false);
				return;
			}
			break;
		}
		if (c->phase == PH_LINGER) {
			pg_buf_reset(in); /* discarded */
			continue;
		}
		in->len += (size_t)n;
		total += (size_t)n;
		if ((size_t)n < room)
			break;
	}
	if (c->phase == PH_DEAD)
		return;
	if (c->phase == PH_LINGER && c->rd_eof && c->out.off == c->out.len && !c->rst_after) {
		conn_close(c, false);
		return;
	}
	process(c);
}

void conn_event(struct conn *c, uint32_t events)
{
	if (c->phase == PH_DEAD)
		return;
	if (events & (EPOLLERR | EPOLLHUP)) {
		conn_close(c, false);
		return;
	}
	if (events & EPOLLIN)
		do_read(c);
	if (c->phase != PH_DEAD && (events & EPOLLOUT))
		conn_mark_dirty(c);
}
