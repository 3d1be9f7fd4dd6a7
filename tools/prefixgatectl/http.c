// SPDX-License-Identifier: MIT
/*
 * A small blocking HTTP/1.1 client for the admin API: one request per
 * connection ("Connection: close"), every wait bounded. The response head
 * is parsed by user/lib/http.h, chunked bodies decoded by its decoder.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "ctl.h"
#include "lib/buf.h"
#include "lib/http.h"
#include "lib/json.h"

/* Larger responses are refused (a /metrics page of 255 backends is ~100 KiB). */
#define RESP_MAX (64u * 1024 * 1024)

static void set_timeouts(int fd, double s)
{
	struct timeval tv = {.tv_sec = (time_t)s, .tv_usec = (suseconds_t)((s - (time_t)s) * 1e6)};

	if (!tv.tv_sec && !tv.tv_usec)
		tv.tv_usec = 1000;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* Connect with a deadline: non-blocking connect, poll, then back to blocking
 * mode for the exchange (whose reads and writes time out by socket option). */
static int connect_timeout(const union pg_sockaddr *sa, double s, char *err, size_t errlen,
                           const char *who)
{
	int fd = socket(sa->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e = 0;
	struct pollfd p;
	socklen_t el = sizeof(e);

	if (fd == -1) {
		snprintf(err, errlen, "%s: socket: %s", who, strerror(errno));
		return -1;
	}
	if (connect(fd, &sa->sa, pg_sockaddr_len(sa)) == -1) {
		if (errno != EINPROGRESS) {
			e = errno;
			goto fail;
		}
		p = (struct pollfd){.fd = fd, .events = POLLOUT};
		int rc = poll(&p, 1, (int)(s * 1000) > 0 ? (int)(s * 1000) : 1);

		if (rc == 0) {
			e = ETIMEDOUT;
			goto fail;
		}
		if (rc == -1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == -1)
			e = errno;
		if (e)
			goto fail;
	}
	if (fcntl(fd, F_SETFL, 0) == -1) {
		e = errno;
		goto fail;
	}
	set_timeouts(fd, s);
	return fd;
fail:
	snprintf(err, errlen, "%s: connect: %s%s", who, strerror(e),
	         e == ECONNREFUSED ? " (is prefixgate running with this --admin address?)" : "");
	close(fd);
	return -1;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read more bytes into b. >0 bytes read, 0 at EOF, -1 error (errno). */
static ssize_t recv_more(int fd, struct pg_buf *b)
{
	ssize_t r;

	if (b->len >= RESP_MAX) {
		errno = EFBIG;
		return -1;
	}
	if (!pg_buf_reserve(b, 16384 + 1)) { /* + 1: recv leaves a byte spare */
		errno = ENOMEM;
		return -1;
	}
	do
		r = recv(fd, b->p + b->len, b->cap - b->len - 1, 0);
	while (r == -1 && errno == EINTR);
	if (r > 0)
		b->len += (size_t)r;
	return r;
}

/* Decode the chunked body at b->p[off..] in place into the same buffer
 * (decoded data never outruns the framing it came from). */
static int read_chunked(int fd, struct pg_buf *b, size_t off, size_t *out_len)
{
	struct pg_frame ch;
	size_t pos = off, w = off, used, doff, dlen;

	pg_chunked_init(&ch);
	for (;;) {
		enum pg_chunked_rc rc =
		    pg_chunked_feed(&ch, b->p + pos, b->len - pos, &used, &doff, &dlen);

		if (rc == PG_CHUNKED_ERROR) {
			errno = EPROTO;
			return -1;
		}
		if (rc == PG_CHUNKED_DATA) {
			memmove(b->p + w, b->p + pos + doff, dlen);
			w += dlen;
		}
		/* keep the buffer compact: consumed framing bytes are dropped */
		pos += used;
		memmove(b->p + w, b->p + pos, b->len - pos);
		b->len = w + (b->len - pos);
		pos = w;
		if (rc == PG_CHUNKED_DONE)
			break;
		if (rc == PG_CHUNKED_MORE) {
			ssize_t r = recv_more(fd, b);

			if (r <= 0) {
				if (!r)
					errno = EPROTO;
				return -1;
			}
		}
	}
	*out_len = w - off;
	return 0;
}

int ctl_http(const struct ctl_opts *o, const char *method, const char *target, const char *ctype,
             const char *body, size_t len, double timeout_s, struct ctl_http_resp *r, char *err,
             size_t errlen)
{
	struct pg_buf b = {0};
	struct pg_http_response resp;
	char who[96], head[8192];
	size_t start = 0, blen = 0;
	ssize_t h = 0, n;
	int fd, hn;

	memset(r, 0, sizeof(*r));
	snprintf(who, sizeof(who), "admin API %s", o->admin);
	fd = connect_timeout(&o->admin_sa, timeout_s, err, errlen, who);
	if (fd == -1)
		return -1;
	hn = snprintf(head, sizeof(head),
	              "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: prefixgatectl/" CTL_VERSION
	              "\r\nAccept: */*\r\nConnection: close\r\n",
	              method, target, o->admin);
	if (o->token && (size_t)hn < sizeof(head))
		hn += snprintf(head + hn, sizeof(head) - (size_t)hn, "Authorization: Bearer %s\r\n",
		               o->token);
	if ((size_t)hn >= sizeof(head))
		hn = (int)sizeof(head);
	else if (body)
		hn += snprintf(head + hn, sizeof(head) - (size_t)hn,
		               "Content-Type: %s\r\nContent-Length: %zu\r\n", ctype, len);
	else if (!strcmp(method, "POST") || !strcmp(method, "PUT"))
		hn += snprintf(head + hn, sizeof(head) - (size_t)hn, "Content-Length: 0\r\n");
	if ((size_t)hn + 3 > sizeof(head)) {
		snprintf(err, errlen, "%s: request target too long", who);
		goto fail_close;
	}
	memcpy(head + hn, "\r\n", 3);
	hn += 2;
	if (send_all(fd, head, (size_t)hn) || (body && send_all(fd, body, len))) {
		snprintf(err, errlen, "%s: %s %s: send: %s", who, method, target,
		         errno == EAGAIN ? "timed out" : strerror(errno));
		goto fail_close;
	}
	/* head; 1xx heads (100 Continue) are skipped */
	for (;;) {
		h = pg_http_parse_response(b.p ? b.p + start : "", b.len - start,
		                           !strcmp(method, "HEAD"), &resp);
		if (h < 0) {
			errno = EPROTO;
			goto fail_io;
		}
		if (h > 0 && resp.status < 200) {
			start += (size_t)h;
			continue;
		}
		if (h > 0)
			break;
		n = recv_more(fd, &b);
		if (n <= 0) {
			if (!n)
				errno = ECONNRESET;
			goto fail_io;
		}
	}
	start += (size_t)h;
	if (resp.body == PG_BODY_LENGTH) {
		if (resp.content_length > RESP_MAX) {
			errno = EFBIG;
			goto fail_io;
		}
		while (b.len - start < resp.content_length) {
			n = recv_more(fd, &b);
			if (n <= 0) {
				if (!n)
					errno = ECONNRESET;
				goto fail_io;
			}
		}
		blen = (size_t)resp.content_length;
	} else if (resp.body == PG_BODY_CHUNKED) {
		if (read_chunked(fd, &b, start, &blen))
			goto fail_io;
	} else if (resp.body == PG_BODY_EOF) {
		while ((n = recv_more(fd, &b)) > 0)
			;
		if (n < 0)
			goto fail_io;
		blen = b.len - start;
	}
	close(fd);
	r->status = resp.status;
	r->len = blen;
	r->body = malloc(blen + 1);
	if (!r->body) {
		snprintf(err, errlen, "%s: out of memory", who);
		pg_buf_free(&b);
		return -1;
	}
	if (blen)
		memcpy(r->body, b.p + start, blen);
	r->body[blen] = 0;
	pg_buf_free(&b);
	return 0;
fail_io:
	snprintf(err, errlen, "%s: %s %s: %s", who, method, target,
	         errno == EAGAIN   ? "timed out waiting for the reply"
	         : errno == EPROTO ? "malformed HTTP reply"
	                           : strerror(errno));
fail_close:
	close(fd);
	pg_buf_free(&b);
	return -1;
}

void ctl_http_resp_free(struct ctl_http_resp *r)
{
	free(r->body);
	memset(r, 0, sizeof(*r));
}

bool ctl_url_encode(const char *s, char *out, size_t cap, size_t *n)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		             (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
		             c == '~' || c == '/';

		if (*n + (plain ? 1 : 3) >= cap)
			return false;
		if (plain) {
			out[(*n)++] = (char)c;
		} else {
			out[(*n)++] = '%';
			out[(*n)++] = hex[c >> 4];
			out[(*n)++] = hex[c & 15];
		}
	}
	out[*n] = 0;
	return true;
}

const char *ctl_api_error(const struct ctl_http_resp *r, char *buf, size_t cap)
{
	struct pg_json js = {0};
	size_t n = 0;
	int64_t v;

	buf[0] = 0;
	if (!pg_json_parse(&js, r->body, r->len) && (v = pg_json_find(&js, 0, "error", 5)) >= 0 &&
	    js.tok[v].type == PG_JSON_STRING) {
		n = pg_json_str_copy(&js, (uint32_t)v, buf, cap - 1);
		if (n > cap - 1)
			n = cap - 1;
	} else {
		for (; n < r->len && n < cap - 1 && r->body[n] != '\n'; n++)
			buf[n] = r->body[n];
	}
	pg_json_free(&js);
	buf[n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] > 0x7e)
			buf[i] = '?';
	if (r->status == 401)
		snprintf(buf + n, cap - n,
		         "%s(prefixgatectl: --admin-token-file FILE or "
		         "PREFIXGATE_ADMIN_TOKEN)",
		         n ? " " : "");
	return buf;
}
