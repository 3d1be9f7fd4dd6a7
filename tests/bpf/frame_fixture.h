/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the framing tests (tests/bpf/test_frame.c): response
 * bodies that know where their chunk-size lines are, plans that cut a body
 * into the backend's writes, the proxy's own decoder as the reference the
 * programs' frames are compared with, I/O with deadlines, and the event
 * count. Header-only (static functions), like sockpair.h.
 */
#ifndef PG_TEST_FRAME_FIXTURE_H
#define PG_TEST_FRAME_FIXTURE_H

#include <stdlib.h>
#include "sockpair.h"
#include "lib/http.h"

#define WAIT_MS        2000 /* for one write to arrive */
#define BODY_MAX       (4 * MiB)
#define MAX_HDRS       256   /* chunk-size lines in one body */
#define MAX_CUTS       65536 /* writes in one body */
#define HDRS_PER_WRITE 6     /* chunks per write: well inside PG_SPLICE_SCAN_STEPS */

static int short_writes;

/* A response body and where its chunk-size lines are. */
struct body {
	unsigned char buf[BODY_MAX];
	size_t len;
	size_t hdr[MAX_HDRS];     /* offset of each chunk-size line, the last chunk's too */
	size_t hdr_len[MAX_HDRS]; /* its length, CRLF included */
	size_t trailer;           /* offset of the trailer section */
	int n;
};

/* Where the backend's writes end, in order; the last is body->len. */
struct plan {
	size_t end[MAX_CUTS];
	int n, ones; /* writes, of which 1-byte writes inside a chunk-size line */
};

static struct body body;
static struct plan plan;
static unsigned char rx[BODY_MAX];

/* --- bodies ----------------------------------------------------------- */

static void put(struct body *b, const char *s)
{
	size_t n = strlen(s);

	memcpy(b->buf + b->len, s, n);
	b->len += n;
}

/*
 * Chunk-size line forms, each valid per RFC 9112 7.1.1: bare size, upper
 * case with leading zeros, token and quoted-string extensions (with escapes
 * and a ';' inside the quotes), BWS around ';' and '='.
 */
static void chunk_line(char *line, size_t cap, size_t size, __u64 r)
{
	switch (r % 6) {
	case 0:
		snprintf(line, cap, "%zx\r\n", size);
		break;
	case 1:
		snprintf(line, cap, "%zX;name=value\r\n", size);
		break;
	case 2:
		snprintf(line, cap, "%08zx;q=\"a \\\"quoted\\\" ;=value\"\r\n", size);
		break;
	case 3:
		snprintf(line, cap, "%zx ; bws = tok ;flag\r\n", size);
		break;
	case 4:
		snprintf(line, cap, "%zx;a=1;b=\"x;y\";c\r\n", size);
		break;
	default:
		snprintf(line, cap, "%zx;ext=\"\"\r\n", size);
		break;
	}
}

/* A chunked body of chunks of the given sizes, then a last chunk with an
 * extension and two trailer fields. */
static void chunked_body(struct body *b, const size_t *sizes, int n, __u64 seed)
{
	char line[128];
	__u64 r = seed;

	b->len = 0;
	b->n = 0;
	for (int i = 0; i <= n; i++) {
		size_t size = i < n ? sizes[i] : 0;

		r = splitmix(r);
		b->hdr[b->n] = b->len;
		if (i < n)
			chunk_line(line, sizeof(line), size, r);
		else
			snprintf(line, sizeof(line), "0;end=\"yes\"\r\n");
		put(b, line);
		b->hdr_len[b->n++] = strlen(line);
		for (size_t j = 0; j < size; j++) {
			r = splitmix(r);
			b->buf[b->len++] = (unsigned char)r;
		}
		if (i < n)
			put(b, "\r\n");
	}
	b->trailer = b->len;
	put(b, "X-Trailer: abc\r\nX-Sum: 0x1234 ; \"q\"\r\n\r\n");
}

/* Chunk sizes: the edges of hex digit counts and of the scan window, then
 * random ones, log-uniform up to 64 KiB. */
static int chunk_sizes(size_t *sizes, int max, __u64 seed)
{
	static const size_t edge[] = {1,    2,    15,   16,   17,    100,   255,  256,
	                              1000, 4095, 4096, 4097, 16384, 65535, 65536};
	int n = 0;

	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]) && n < max; i++)
		sizes[n++] = edge[i];
	while (n < max) {
		seed = splitmix(seed);
		sizes[n++] = 1 + (seed >> 8) % (1ull << (seed % 17));
	}
	/* shuffle, so that big and small chunks neighbour each other */
	for (int i = n - 1; i > 0; i--) {
		size_t t;
		int j;

		seed = splitmix(seed);
		j = (int)(seed % (__u64)(i + 1));
		t = sizes[i];
		sizes[i] = sizes[j];
		sizes[j] = t;
	}
	return n;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Split the body into writes: random sizes (1 B .. 70,000 B), cut so that
 * every third chunk-size line has a 1-byte write in its middle and every
 * third is cut in its extensions, the trailers cut twice (once between the
 * final CR and LF), and no write holds more than HDRS_PER_WRITE chunk-size
 * lines (more is the scan bound's test, not this one's). whole_tail: instead
 * of the trailer cuts, one last write from the CRLF that ends the last data
 * chunk to the end (the last-chunk line and trailers together).
 */
static void plan_writes(struct plan *p, const struct body *b, __u64 seed, int whole_tail)
{
	size_t tail = b->hdr[b->n - 1] - 2;
	static size_t forced[3 * MAX_HDRS + 3];
	static const size_t cls[] = {16, 1024, 16384, 70000};
	size_t pos = 0;
	int nf = 0, f = 0, h = 0;

	for (int i = 0; i < b->n; i++) {
		if (i % 3 == 1) {
			forced[nf++] = b->hdr[i] + 1;
			forced[nf++] = b->hdr[i] + 2;
		} else if (i % 3 == 2) {
			forced[nf++] = b->hdr[i] + b->hdr_len[i] / 2;
		}
	}
	if (whole_tail) {
		forced[nf++] = tail;
	} else {
		forced[nf++] = b->trailer + 5;
		forced[nf++] = b->len - 1;
	}
	qsort(forced, (size_t)nf, sizeof(forced[0]), cmp_size);

	p->n = p->ones = 0;
	while (pos < b->len && p->n < MAX_CUTS) {
		size_t end;
		int k;

		seed = splitmix(seed);
		end = pos + 1 + (seed >> 8) % cls[seed % 4];
		if (end > b->len)
			end = b->len;
		while (f < nf && forced[f] <= pos)
			f++;
		if (f < nf && forced[f] < end)
			end = forced[f];
		if (whole_tail && pos >= tail)
			end = b->len;
		while (h < b->n && b->hdr[h] < pos)
			h++;
		for (k = h; k < b->n && b->hdr[k] < end; k++) {
			if (k - h == HDRS_PER_WRITE) {
				end = b->hdr[k];
				break;
			}
		}
		for (k = 0; k < b->n; k++) {
			if (end == pos + 1 && pos > b->hdr[k] &&
			    pos < b->hdr[k] + b->hdr_len[k] - 2)
				p->ones++;
		}
		p->end[p->n++] = end;
		pos = end;
	}
}

/* --- decoder and frames ----------------------------------------------- */

/* Advance f over n bytes with the proxy's own decoder. Returns its last rc. */
static int decode(struct pg_frame *f, const unsigned char *buf, size_t n)
{
	struct pg_frame c = *f;
	size_t off = 0, used, doff, dlen;
	int rc = PG_CHUNKED_MORE;

	while (off < n) {
		rc = pg_chunked_feed(&c, (const char *)buf + off, n - off, &used, &doff, &dlen);
		off += used;
		if (rc == PG_CHUNKED_DONE || rc == PG_CHUNKED_ERROR)
			break;
	}
	*f = c;
	return rc == PG_CHUNKED_DONE && off != n ? PG_CHUNKED_ERROR : rc;
}

/* Field by field; prints each difference. Returns 1 if equal. */
static int frame_eq(const char *what, const struct pg_frame *got, const struct pg_frame *want)
{
	int eq = 1;

#define FIELD(x)                                                                                   \
	if (got->x != want->x) {                                                                   \
		printf("# %s: frame." #x " %llu, decoder %llu\n", what,                            \
		       (unsigned long long)got->x, (unsigned long long)want->x);                   \
		eq = 0;                                                                            \
	}
	FIELD(kind);
	FIELD(state);
	FIELD(remaining);
	FIELD(digits);
	FIELD(line_len);
#undef FIELD
	return eq;
}

/* --- I/O with deadlines ----------------------------------------------- */

/* Write all n bytes (non-blocking fd); counts short writes. */
static int send_all(int fd, const unsigned char *buf, size_t n, int ms)
{
	__u64 end = now_ms() + (__u64)ms;
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	ssize_t w;

	while (n) {
		w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			if ((size_t)w < n)
				short_writes++;
			buf += w;
			n -= (size_t)w;
			continue;
		}
		if (w == -1 && errno != EAGAIN)
			return -1;
		if (now_ms() > end)
			return -1;
		poll(&p, 1, 5);
	}
	return 0;
}

/* Read exactly n bytes. Polls briefly: spliced fds can poll readable with
 * nothing to read. */
static int recv_exact(int fd, unsigned char *buf, size_t n, int ms)
{
	__u64 end = now_ms() + (__u64)ms;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t r;

	while (n) {
		r = recv(fd, buf, n, MSG_DONTWAIT);
		if (r > 0) {
			buf += r;
			n -= (size_t)r;
			continue;
		}
		if (r == 0 || errno != EAGAIN || now_ms() > end)
			return -1;
		poll(&p, 1, 5);
	}
	return 0;
}

/* Bytes that arrive on fd within ms (they are read and dropped): 0 expected. */
static size_t stray(int fd, int ms)
{
	__u64 end = now_ms() + (__u64)ms;
	unsigned char buf[4096];
	size_t got = 0;
	ssize_t r;

	do {
		r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0)
			got += (size_t)r;
		else
			usleep(2000);
	} while (now_ms() < end);
	return got;
}

static int events_end, events_framing;

static void on_ev(void *ctx, const struct pg_splice_event *ev)
{
	(void)ctx;
	events_end += ev->reason == PG_SPLICE_WHY_END;
	events_framing += ev->reason == PG_SPLICE_WHY_FRAMING;
}

static void count_events(struct pg_splice *sp)
{
	events_end = events_framing = 0;
	pg_splice_events_consume(sp, on_ev, NULL);
}

#endif /* PG_TEST_FRAME_FIXTURE_H */
