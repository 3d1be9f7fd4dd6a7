// SPDX-License-Identifier: MIT
/*
 * The etcd JSON-gateway client (etcd_client.h): blocking sockets, each wait
 * bounded by poll() against the call's deadline.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "config/config.h"
#include "fleet/etcd_client.h"
#include "gateway.h"

int pg_etcd_client_init(struct pg_etcd_client *cl, const char *endpoints, unsigned timeout_ms,
                        const char *user, const char *password_file, char *err, size_t errlen)
{
	const char *p = endpoints;
	char one[256], e[200];
	size_t len;

	memset(cl, 0, sizeof(*cl));
	cl->timeout_ms = timeout_ms;
	while (*p) {
		size_t n = strcspn(p, ",");

		if (cl->n == PG_ETCD_MAX_ENDPOINTS || n >= sizeof(one)) {
			snprintf(err, errlen, "--etcd-endpoints: too many or too long");
			return -1;
		}
		memcpy(one, p, n);
		one[n] = 0;
		if (pg_etcd_endpoint_parse(one, cl->hp[cl->n], sizeof(cl->hp[0]), e, sizeof(e))) {
			snprintf(err, errlen, "--etcd-endpoints: %s", e);
			return -1;
		}
		cl->n++;
		p += n + (p[n] == ',');
	}
	if (!cl->n) {
		snprintf(err, errlen, "--etcd-endpoints: no endpoint");
		return -1;
	}
	if (!user != !password_file) {
		snprintf(err, errlen, "etcd authentication needs both a user and a password file");
		return -1;
	}
	if (user) {
		if (pg_read_file(password_file, 4096, &cl->password, &len, e, sizeof(e))) {
			snprintf(err, errlen, "etcd password file %s: %s", password_file, e);
			return -1;
		}
		while (len && strchr(" \t\r\n", cl->password[len - 1]))
			cl->password[--len] = 0;
		cl->user = strdup(user);
	}
	return 0;
}

void pg_etcd_client_free(struct pg_etcd_client *cl)
{
	free(cl->user);
	free(cl->password);
	free(cl->token);
	memset(cl, 0, sizeof(*cl));
}

static int left_ms(uint64_t deadline)
{
	uint64_t now = pg_now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

static int wait_fd(int fd, short ev, uint64_t deadline)
{
	struct pollfd pfd = {.fd = fd, .events = ev};
	int rc;

	do
		rc = poll(&pfd, 1, left_ms(deadline));
	while (rc == -1 && errno == EINTR);
	return rc;
}

/* Connect to the current endpoint and send the request; the fd, or -1. */
static int send_request(struct pg_etcd_client *cl, const char *path, const struct pg_buf *body,
                        uint64_t deadline, char *err, size_t errlen)
{
	const char *hp = cl->hp[cl->cur];
	union pg_sockaddr sa;
	struct pg_buf req = {0};
	char e[160];
	size_t off = 0;
	int fd, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (pg_addr_parse(hp, &sa, e, sizeof(e))) {
		snprintf(err, errlen, "etcd %s: %s", hp, e);
		return -1;
	}
	fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1) {
		snprintf(err, errlen, "etcd %s: socket: %s", hp, strerror(errno));
		return -1;
	}
	if (connect(fd, &sa.sa, pg_sockaddr_len(&sa)) == -1 && errno != EINPROGRESS)
		soerr = errno;
	else if (wait_fd(fd, POLLOUT, deadline) <= 0)
		soerr = ETIMEDOUT;
	else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == -1)
		soerr = errno;
	if (soerr) {
		snprintf(err, errlen, "etcd %s: connect: %s", hp, strerror(soerr));
		close(fd);
		return -1;
	}
	pg_buf_printf(&req,
	              "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
	              "Content-Length: %zu\r\n",
	              path, hp, body->len);
	if (cl->token)
		pg_buf_printf(&req, "Authorization: %s\r\n", cl->token);
	pg_buf_puts(&req, "\r\n");
	pg_buf_append(&req, body->p, body->len);
	while (off < req.len && !req.oom) {
		ssize_t n = send(fd, req.p + off, req.len - off, MSG_NOSIGNAL);

		if (n > 0) {
			off += (size_t)n;
		} else if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLOUT, deadline) <= 0)
				break;
		} else {
			break;
		}
	}
	if (off < req.len || req.oom) {
		snprintf(err, errlen, "etcd %s: sending %s failed", hp, path);
		pg_buf_free(&req);
		close(fd);
		return -1;
	}
	pg_buf_free(&req);
	return fd;
}

/*
 * Read what the socket has into w->raw and frame it into w->data. 1: got
 * bytes, 0: none before deadline, -1: error, 2: the body is complete (or
 * the peer closed a body that ends at EOF).
 */
static int pump(struct pg_etcd_watch *w, uint64_t deadline, char *err, size_t errlen)
{
	char *d;
	ssize_t n;
	int rc = wait_fd(w->fd, POLLIN, deadline);

	if (rc <= 0)
		return rc < 0 ? (snprintf(err, errlen, "poll: %s", strerror(errno)), -1) : 0;
	d = pg_buf_reserve(&w->raw, 16384);
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	n = recv(w->fd, d, 16384, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 1;
	if (n <= 0) {
		if (w->have_head && w->head.body == PG_BODY_EOF)
			return 2;
		snprintf(err, errlen, "%s", n ? strerror(errno) : "connection closed");
		return -1;
	}
	w->raw.len += (size_t)n;
	if (!w->have_head) {
		ssize_t h = pg_http_parse_response(w->raw.p + w->raw.off, w->raw.len - w->raw.off,
		                                   false, &w->head);

		if (h < 0) {
			snprintf(err, errlen, "malformed HTTP response");
			return -1;
		}
		if (!h)
			return 1;
		w->raw.off += (size_t)h;
		if (w->head.status < 200) /* 100 Continue and the like: the next head */
			return 1;
		w->have_head = true;
		if (w->head.body == PG_BODY_CHUNKED)
			pg_chunked_init(&w->fr);
		else
			w->fr = (struct pg_frame){.kind = PG_FRAME_LENGTH,
			                          .remaining = w->head.content_length};
	}
	while (w->raw.off < w->raw.len) {
		const char *p = w->raw.p + w->raw.off;
		size_t len = w->raw.len - w->raw.off, used, doff, dlen;

		if (w->head.body == PG_BODY_CHUNKED) {
			enum pg_chunked_rc c = pg_chunked_feed(&w->fr, p, len, &used, &doff, &dlen);

			if (c == PG_CHUNKED_ERROR) {
				snprintf(err, errlen, "bad chunked framing");
				return -1;
			}
			if (c == PG_CHUNKED_DATA)
				pg_buf_append(&w->data, p + doff, dlen);
			w->raw.off += used;
			if (c == PG_CHUNKED_DONE)
				return 2;
		} else {
			used = w->head.body == PG_BODY_LENGTH && len > w->fr.remaining
			           ? (size_t)w->fr.remaining
			           : len;
			pg_buf_append(&w->data, p, used);
			w->raw.off += used;
			w->fr.remaining -= used;
			if (w->head.body != PG_BODY_EOF && !w->fr.remaining)
				return 2;
			if (w->head.body == PG_BODY_NONE)
				return 2;
		}
	}
	if (w->raw.off == w->raw.len)
		w->raw.off = w->raw.len = 0;
	if (w->data.len > PG_ETCD_MAX_BODY) {
		snprintf(err, errlen, "answer larger than %u bytes", PG_ETCD_MAX_BODY);
		return -1;
	}
	return w->head.body == PG_BODY_LENGTH && !w->fr.remaining ? 2 : 1;
}

void pg_etcd_watch_close(struct pg_etcd_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	pg_buf_free(&w->raw);
	pg_buf_free(&w->data);
	memset(w, 0, sizeof(*w));
	w->fd = -1;
}

/* One call to the current endpoint: 0 and r, or -1 (*retry: another
 * endpoint may answer). */
static int call_once(struct pg_etcd_client *cl, const char *path, const struct pg_buf *body,
                     struct pg_etcd_resp *r, bool *retry, char *err, size_t errlen)
{
	uint64_t deadline = pg_now_ms() + cl->timeout_ms;
	struct pg_etcd_watch w = {.fd = -1};
	char e[200];
	int rc = 1, status;

	*retry = true;
	w.fd = send_request(cl, path, body, deadline, err, errlen);
	if (w.fd < 0)
		return -1;
	while (rc == 1)
		rc = pump(&w, deadline, e, sizeof(e));
	if (rc != 2) {
		snprintf(err, errlen, "etcd %s%s: %s", cl->hp[cl->cur], path, rc ? e : "timed out");
		pg_etcd_watch_close(&w);
		return -1;
	}
	*retry = false;
	status = w.head.status;
	rc = pg_etcd_parse(w.data.p ? w.data.p : "", w.data.len, r, e, sizeof(e));
	if (rc)
		snprintf(err, errlen, "etcd %s%s: HTTP %d, %s", cl->hp[cl->cur], path,
		         w.head.status, e);
	else if (r->code || w.head.status != 200)
		snprintf(err, errlen, "etcd %s%s: HTTP %d, %s (code %d)", cl->hp[cl->cur], path,
		         w.head.status, r->code ? r->error : "error", r->code);
	pg_etcd_watch_close(&w);
	return rc || r->code || status != 200 ? -1 : 0;
}

static int authenticate(struct pg_etcd_client *cl, char *err, size_t errlen);

/*
 * call_once over the endpoints, re-authenticating once if etcd asks. err
 * gets every endpoint's failure, "; "-separated: a member that takes the
 * connection and times out (no quorum) is then told from members that are
 * down, whichever was tried last.
 */
static int call(struct pg_etcd_client *cl, const char *path, const struct pg_buf *body,
                struct pg_etcd_resp *r, bool auth_retry, char *err, size_t errlen)
{
	bool retry = false;
	size_t off = 0;
	char e[300];

	for (size_t i = 0; i < cl->n; i++) {
		pg_etcd_resp_free(r);
		if (!call_once(cl, path, body, r, &retry, e, sizeof(e)))
			return 0;
		if (off < errlen) {
			int k = snprintf(err + off, errlen - off, "%s%s", i ? "; " : "", e);

			off += k > 0 ? (size_t)k : 0;
		}
		if (!retry)
			break;
		cl->cur = (cl->cur + 1) % cl->n;
	}
	if (!retry && auth_retry && cl->user &&
	    (r->code == PG_ETCD_CODE_UNAUTH || strstr(r->error, "auth token"))) {
		if (authenticate(cl, err, errlen))
			return -1;
		return call(cl, path, body, r, false, err, errlen);
	}
	return -1;
}

static int authenticate(struct pg_etcd_client *cl, char *err, size_t errlen)
{
	struct pg_buf b = {0};
	struct pg_etcd_resp r = {0};
	int rc;

	free(cl->token);
	cl->token = NULL;
	pg_etcd_body_auth(&b, cl->user, cl->password);
	rc = call(cl, "/v3/auth/authenticate", &b, &r, false, err, errlen);
	if (!rc && !r.token) {
		snprintf(err, errlen, "etcd authenticate: no token in the answer");
		rc = -1;
	}
	if (!rc) {
		cl->token = r.token;
		r.token = NULL;
	}
	pg_etcd_resp_free(&r);
	pg_buf_free(&b);
	return rc;
}

int pg_etcd_call(struct pg_etcd_client *cl, const char *path, const struct pg_buf *body,
                 struct pg_etcd_resp *r, char *err, size_t errlen)
{
	memset(r, 0, sizeof(*r));
	if (cl->user && !cl->token && authenticate(cl, err, errlen))
		return -1;
	return call(cl, path, body, r, true, err, errlen);
}

int pg_etcd_watch_open(struct pg_etcd_client *cl, struct pg_etcd_watch *w,
                       const struct pg_buf *body, char *err, size_t errlen)
{
	memset(w, 0, sizeof(*w));
	w->fd = -1;
	if (cl->user && !cl->token && authenticate(cl, err, errlen))
		return -1;
	w->fd = send_request(cl, "/v3/watch", body, pg_now_ms() + cl->timeout_ms, err, errlen);
	if (w->fd < 0) {
		cl->cur = (cl->cur + 1) % cl->n;
		return -1;
	}
	return 0;
}

int pg_etcd_watch_read(struct pg_etcd_watch *w, int timeout_ms,
                       int (*fn)(void *arg, const char *line, size_t len), void *arg, char *err,
                       size_t errlen)
{
	int rc = pump(w, pg_now_ms() + (unsigned)timeout_ms, err, errlen);
	size_t start = 0;

	if (rc == 2) {
		snprintf(err, errlen, "the watch stream ended");
		rc = -1;
	}
	if (rc > 0 && w->head.status != 200) {
		snprintf(err, errlen, "watch: HTTP %d", w->head.status);
		rc = -1;
	}
	if (rc < 0) {
		pg_etcd_watch_close(w);
		return -1;
	}
	for (size_t i = 0; i < w->data.len; i++) {
		if (w->data.p[i] != '\n')
			continue;
		if (i > start)
			fn(arg, w->data.p + start, i - start);
		start = i + 1;
	}
	if (start) {
		memmove(w->data.p, w->data.p + start, w->data.len - start);
		w->data.len -= start;
	}
	return rc;
}
