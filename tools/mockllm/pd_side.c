// SPDX-License-Identifier: MIT
/*
 * The side connections of a prefill/decode pair, the stand-in for NIXL's
 * and SGLang's transfer channels: a listener on the prefill's side port,
 * connections accepted on it, and those a decode dials. Line-oriented:
 * every message is one line ending in LF (pd.c says what they are); this
 * file only moves bytes, and hands each complete line to pd_side_line().
 *
 * A side connection is in the same epoll set as the HTTP connections; its
 * event pointer carries a tag in its low bit (records are malloc'd, so the
 * bit is free), the listener's is &g_pd.lfd.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mockllm.h"

#define SIDE_MAX_LINE MOCK_MAX_JSON_BODY /* a pull of the largest prompt's blocks */

struct side {
	int fd;
	bool server;     /* accepted on our side port, else dialled */
	bool connecting; /* dialled, connect() in progress */
	bool dead;
	bool close_after; /* close once the output is sent */
	uint32_t events;
	struct pg_buf in, out;
	struct conn *owner; /* dialled: the request waiting on it; NULL once gone */
	uint64_t *rooms;    /* accepted (SGLang): rooms it registered */
	size_t nrooms, rooms_cap;
	struct side *next_dead;
};

static struct side *dead_sides;

static void *tag(struct side *s)
{
	return (void *)((uintptr_t)s | 1);
}

bool pd_event(void *p, uint32_t events)
{
	if (p == &g_pd.lfd) {
		side_accept_all();
		return true;
	}
	if (!((uintptr_t)p & 1))
		return false;
	side_event((struct side *)((uintptr_t)p & ~(uintptr_t)1), events);
	return true;
}

static int set_events(struct side *s, uint32_t ev, int op)
{
	struct epoll_event e = {.events = ev, .data.ptr = tag(s)};

	if (ev == s->events && op == EPOLL_CTL_MOD)
		return 0;
	if (epoll_ctl(g_srv.epfd, op, s->fd, &e) == -1) {
		fprintf(stderr, "mockllm: epoll_ctl(side fd %d): %s\n", s->fd, strerror(errno));
		return -1;
	}
	s->events = ev;
	return 0;
}

static struct side *side_new(int fd, bool server, struct conn *owner)
{
	struct side *s = calloc(1, sizeof(*s));
	int one = 1;

	if (!s)
		return NULL;
	s->fd = fd;
	s->server = server;
	s->owner = owner;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (set_events(s, EPOLLIN | (server ? 0 : EPOLLOUT), EPOLL_CTL_ADD) == -1) {
		free(s);
		return NULL;
	}
	return s;
}

int side_listen(const char *host, int port, uint16_t *bound)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
	                         .ai_socktype = SOCK_STREAM};
	struct epoll_event e = {.events = EPOLLIN, .data.ptr = &g_pd.lfd};
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addrinfo *ai;
	char serv[8];
	int one = 1, fd;

	snprintf(serv, sizeof(serv), "%d", port);
	if (getaddrinfo(host, serv, &hints, &ai))
		return -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		freeaddrinfo(ai);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) == -1 || listen(fd, 1024) == -1 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) == -1) {
		int saved = errno;

		freeaddrinfo(ai);
		close(fd);
		errno = saved;
		return -1;
	}
	freeaddrinfo(ai);
	*bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
	                                        : ((struct sockaddr_in *)&ss)->sin_port);
	g_pd.lfd = fd;
	if (epoll_ctl(g_srv.epfd, EPOLL_CTL_ADD, fd, &e) == -1)
		return -1;
	return 0;
}

void side_accept_all(void)
{
	for (;;) {
		int fd = accept4(g_pd.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd == -1) {
			if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
				fprintf(stderr, "mockllm: accept on the side port: %s\n",
				        strerror(errno));
			return;
		}
		if (!side_new(fd, true, NULL))
			close(fd);
		else
			g_pd.side_accepted++;
	}
}

struct side *side_dial(const char *host, uint16_t port, struct conn *owner, const char **err)
{
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
	                         .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai;
	struct side *s;
	char serv[8];
	int fd;

	snprintf(serv, sizeof(serv), "%u", port);
	if (!strcmp(host, "localhost"))
		host = "127.0.0.1";
	if (getaddrinfo(host, serv, &hints, &ai)) {
		*err = "not a numeric address (mockllm resolves no names)";
		return NULL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 || (connect(fd, ai->ai_addr, ai->ai_addrlen) == -1 && errno != EINPROGRESS)) {
		*err = fd == -1 ? "cannot open a socket" : strerror(errno);
		if (fd != -1)
			close(fd);
		freeaddrinfo(ai);
		return NULL;
	}
	freeaddrinfo(ai);
	s = side_new(fd, false, owner);
	if (!s) {
		close(fd);
		*err = "out of memory";
		return NULL;
	}
	s->connecting = true;
	return s;
}

static void flush_out(struct side *s)
{
	while (!s->dead && !s->connecting && s->out.off < s->out.len) {
		ssize_t n =
		    send(s->fd, s->out.p + s->out.off, s->out.len - s->out.off, MSG_NOSIGNAL);

		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				pd_side_gone(s, strerror(errno));
			break;
		}
		s->out.off += (size_t)n;
	}
	if (s->dead)
		return;
	if (s->out.off == s->out.len) {
		pg_buf_reset(&s->out);
		if (s->close_after) {
			side_close(s);
			return;
		}
	}
	set_events(s, EPOLLIN | (s->connecting || s->out.len ? EPOLLOUT : 0), EPOLL_CTL_MOD);
}

void side_send(struct side *s, const char *p, size_t n)
{
	if (s->dead)
		return;
	pg_buf_append(&s->out, p, n);
	mock_buf_ok(&s->out);
	flush_out(s);
}

void side_close(struct side *s)
{
	if (s->dead)
		return;
	s->dead = true;
	close(s->fd);
	s->next_dead = dead_sides;
	dead_sides = s;
}

void side_close_when_sent(struct side *s)
{
	s->close_after = true;
	flush_out(s);
}

bool side_is_server(const struct side *s)
{
	return s->server;
}

struct conn *side_owner(const struct side *s)
{
	return s->owner;
}

void side_disown(struct side *s)
{
	s->owner = NULL;
}

int side_add_room(struct side *s, uint64_t room)
{
	if (s->nrooms == s->rooms_cap) {
		size_t cap = s->rooms_cap ? 2 * s->rooms_cap : 4;
		uint64_t *r = realloc(s->rooms, cap * sizeof(*r));

		if (!r)
			return -1;
		s->rooms = r;
		s->rooms_cap = cap;
	}
	s->rooms[s->nrooms++] = room;
	return 0;
}

const uint64_t *side_rooms(const struct side *s, size_t *n)
{
	*n = s->nrooms;
	return s->rooms;
}

/* Hand every complete line to pd.c; keep the partial one. */
static void lines(struct side *s)
{
	size_t off = 0;

	while (!s->dead) {
		char *nl = memchr(s->in.p + off, '\n', s->in.len - off);

		if (!nl)
			break;
		*nl = '\0';
		pd_side_line(s, s->in.p + off, (size_t)(nl - (s->in.p + off)));
		off = (size_t)(nl - s->in.p) + 1;
	}
	if (s->dead)
		return;
	memmove(s->in.p, s->in.p + off, s->in.len - off);
	s->in.len -= off;
	if (s->in.len > SIDE_MAX_LINE)
		pd_side_gone(s, "a line longer than the side protocol allows");
}

static void do_read(struct side *s)
{
	for (;;) {
		ssize_t n;

		mock_room(&s->in, 65536);
		n = recv(s->fd, s->in.p + s->in.len, s->in.cap - s->in.len, 0);
		if (n == -1) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				pd_side_gone(s, strerror(errno));
			return;
		}
		if (n == 0) {
			pd_side_gone(s, NULL);
			return;
		}
		s->in.len += (size_t)n;
		lines(s);
		if (s->dead)
			return;
	}
}

void side_event(struct side *s, uint32_t events)
{
	if (s->dead)
		return;
	if (s->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) == -1)
			err = errno;
		if (err) {
			pd_side_gone(s, strerror(err));
			return;
		}
		s->connecting = false;
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		do_read(s);
	if (!s->dead)
		flush_out(s);
}

void side_free_dead(void)
{
	while (dead_sides) {
		struct side *s = dead_sides;

		dead_sides = s->next_dead;
		pg_buf_free(&s->in);
		pg_buf_free(&s->out);
		free(s->rooms);
		free(s);
	}
}
