// SPDX-License-Identifier: MIT
/*
 * Strict HTTP/1.1 head parser (RFC 9112), and the reason phrases; the
 * chunked body decoder is in http_chunked.c.
 *
 * Why not Debian's libhttp-parser (http-parser 2.9.4, libhttp-parser-dev)?
 * Measured against it (2.9.4, HTTP_PARSER_STRICT=1, Debian 12, gcc -O2):
 * - It accepts, with no error, heads a front door must refuse because a
 *   backend may frame them differently (request smuggling): obs-fold
 *   continuation lines, bare-LF line ends, "Transfer-Encoding : chunked"
 *   (space before the colon), "Transfer-Encoding: gzip, chunked" on a
 *   request, Transfer-Encoding in HTTP/1.0, chunk sizes with 17 hex digits
 *   and "1 \r\n" (whitespace before a chunk-size CRLF). It leaves to the
 *   caller HTTP/1.2, missing or duplicate Host, '#' or absolute-form
 *   targets and unknown Expect values. (It does reject duplicate or listed
 *   Content-Length, "+5", TE with CL, "chunked, chunked", NUL and bare CR.)
 * - Speed, one 662-byte chat-completions head (18 fields) parsed 1M times
 *   on an AMD EPYC core: http-parser 705 ns/head with span-recording
 *   callbacks (655 ns with no callbacks), this parser 223 ns/head with
 *   every field recorded and framing decided: about 3x faster.
 * - Its callbacks hand out names and values in pieces across reads, so a
 *   caller needs its own buffering and a second pass to judge framing.
 * Upstream no longer maintains it; its successor llhttp is packaged in
 * Debian 12 only as Node.js sources (node-llhttp), not as a C library.
 *
 * Shape: one forward pass over the bytes, character classes from 256-byte
 * tables, no allocation, no strlen on input. A partial head is re-parsed
 * from its start when more bytes arrive: heads are small and usually
 * arrive in one read, so resumable state is not worth its complexity
 * (pg_http_head_ready keeps trickled heads linear). A bad head is
 * refused before any of it is forwarded, so a backend never sees a message
 * it could frame differently from us.
 */
#include <string.h>
#include <strings.h>
#include "lib/http.h"
#include "lib/http_internal.h"

/* origin-form bytes (RFC 3986 pchar, "/", "?"), '%' checked apart. */
static const bool tgtchar[256] = {
    ['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1, ['-'] = 1, ['.'] = 1,  ['_'] = 1,
    ['~'] = 1,         ['!'] = 1,         ['$'] = 1,         ['&'] = 1, ['\''] = 1, ['('] = 1,
    [')'] = 1,         ['*'] = 1,         ['+'] = 1,         [','] = 1, [';'] = 1,  ['='] = 1,
    [':'] = 1,         ['@'] = 1,         ['/'] = 1,         ['?'] = 1,
};

/*
 * Next element of a comma-separated list (RFC 9110 §5.6.1) in v[*pos..n):
 * OWS trimmed, empty elements skipped. Returns false when none is left.
 */
static bool list_next(const char *v, size_t n, size_t *pos, struct pg_str *out)
{
	size_t i = *pos;

	for (;;) {
		while (i < n && (pg_frame_ows(v[i]) || v[i] == ','))
			i++;
		if (i >= n) {
			*pos = i;
			return false;
		}
		size_t start = i;
		while (i < n && v[i] != ',')
			i++;
		size_t end = i;
		while (end > start && pg_frame_ows(v[end - 1]))
			end--;
		*pos = i;
		out->p = v + start;
		out->len = end - start;
		return true;
	}
}

/* What the header fields of one head say; judged once the head is complete. */
struct fields {
	bool is_request;
	unsigned n_cl, n_te, n_host, n_key, n_conn;
	uint64_t content_length;
	bool te_exact_chunked; /* request: the only TE value is exactly "chunked" */
	unsigned te_chunked;   /* response: "chunked" codings seen */
	bool te_last_chunked;  /* response: last coding seen is chunked */
	bool conn_close, conn_keep_alive;
	bool conn_names; /* a Connection token other than keep-alive (or too many) */
	bool expect_continue, expect_other;
	bool encoded; /* response: a Content-Encoding other than identity */
	struct pg_str key;
};

static int parse_content_length(const char *v, size_t n, uint64_t *out)
{
	uint64_t x = 0;

	if (n == 0)
		return -400;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned char)v[i] - '0';
		if (d > 9)
			return -400; /* sign, comma list, space: all ambiguous */
		if (x > ((uint64_t)INT64_MAX - d) / 10)
			return -400;
		x = x * 10 + d;
	}
	*out = x;
	return 0;
}

/* Host = uri-host [":" port]; reg-name, IPv4 or IP-literal bytes only. */
static bool host_ok(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)v[i];
		if (c == '/' || c == '?' || c == '@' ||
		    (!tgtchar[c] && c != '%' && c != '[' && c != ']'))
			return false;
	}
	return true;
}

/* Interpret one field that matters for framing or routing. */
static int field_seen(struct fields *f, enum pg_http_field kind, const char *name, size_t nlen,
                      const char *v, size_t vlen)
{
	struct pg_str e;
	size_t pos = 0;

	switch (kind) {
	case PG_HF_HOST:
		if (f->is_request && (++f->n_host > 1 || !host_ok(v, vlen)))
			return -400;
		break;
	case PG_HF_EXPECT:
		if (f->is_request) {
			if (EQ(v, vlen, "100-continue"))
				f->expect_continue = true;
			else
				f->expect_other = true;
		}
		break;
	case PG_HF_CONNECTION:
		if (++f->n_conn > PG_HTTP_CONN_MAX)
			f->conn_names = true; /* the forwarder drops all but framing */
		while (list_next(v, vlen, &pos, &e)) {
			if (EQ(e.p, e.len, "keep-alive")) {
				f->conn_keep_alive = true; /* names only an own field */
				continue;
			}
			/* A field this names is not forwarded ("close" too: a
			 * field may be called that). */
			f->conn_names = true;
			if (EQ(e.p, e.len, "close"))
				f->conn_close = true;
		}
		break;
	case PG_HF_CONTENT_LENGTH:
		/* Servers that map headers to CGI-style variables read
		 * Content_Length as Content-Length: ambiguous framing. */
		if (++f->n_cl > 1 || memchr(name, '_', nlen))
			return -400; /* strict: even two equal values */
		return parse_content_length(v, vlen, &f->content_length);
	case PG_HF_X_PREFIXGATE_KEY:
		if (f->is_request) {
			if (++f->n_key > 1)
				return -400;
			f->key.p = v;
			f->key.len = vlen;
		}
		break;
	case PG_HF_CONTENT_ENCODING:
		if (!EQ(v, vlen, "identity"))
			f->encoded = true;
		break;
	case PG_HF_TRANSFER_ENCODING:
		if (memchr(name, '_', nlen))
			return -400;
		f->n_te++;
		f->te_exact_chunked = f->n_te == 1 && EQ(v, vlen, "chunked");
		while (list_next(v, vlen, &pos, &e)) {
			size_t tl = 0; /* coding name, before any ;parameters */
			while (tl < e.len && tchar[(unsigned char)e.p[tl]])
				tl++;
			f->te_last_chunked = EQ(e.p, tl, "chunked");
			f->te_chunked += f->te_last_chunked;
		}
		break;
	default:
		break;
	}
	return 0;
}

/*
 * Header fields from buf[pos..end) through the empty line. Returns the
 * offset just past that line, 0 if the bytes end first, or -status.
 * hdrs may be NULL (fields are then only counted and interpreted).
 */
static ssize_t parse_fields(const char *buf, size_t pos, size_t end, struct fields *f,
                            struct pg_http_header *hdrs, size_t *nhdrs)
{
	size_t n = 0;

	for (;;) {
		if (pos >= end)
			return 0;
		if (buf[pos] == '\r') {
			if (pos + 1 >= end)
				return 0;
			if (buf[pos + 1] != '\n')
				return -400;
			*nhdrs = n;
			return (ssize_t)(pos + 2);
		}
		/* A leading SP/HTAB (obs-fold), bare LF or ':' all fail here. */
		size_t name = pos;
		while (pos < end && tchar[(unsigned char)buf[pos]])
			pos++;
		if (pos >= end)
			return 0;
		if (buf[pos] != ':' || pos == name)
			return -400;
		size_t nlen = pos - name;
		pos++;
		while (pos < end && pg_frame_ows(buf[pos]))
			pos++;
		size_t val = pos;
		while (pos < end && fchar[(unsigned char)buf[pos]])
			pos++;
		if (pos + 1 >= end)
			return pos < end && buf[pos] != '\r' ? -400 : 0;
		if (buf[pos] != '\r' || buf[pos + 1] != '\n')
			return -400; /* NUL, CTL, bare CR or bare LF in the value */
		size_t vend = pos;
		while (vend > val && pg_frame_ows(buf[vend - 1]))
			vend--;
		pos += 2;
		if (n >= PG_HTTP_MAX_HEADERS)
			return -431;
		enum pg_http_field kind = pg_http_field_kind(buf + name, nlen);
		if (hdrs) {
			hdrs[n].name.p = buf + name;
			hdrs[n].name.len = nlen;
			hdrs[n].value.p = buf + val;
			hdrs[n].value.len = vend - val;
			hdrs[n].kind = (uint8_t)kind;
		}
		n++;
		int rc = field_seen(f, kind, buf + name, nlen, buf + val, vend - val);
		if (rc)
			return rc;
	}
}

/*
 * "HTTP/" DIGIT "." DIGIT at p (avail bytes). Returns 1 with *minor set
 * (or -505 for a well-formed other version), 0 if avail ends while still
 * matching, -400 on a mismatch.
 */
static int parse_version(const char *p, size_t avail, int *minor)
{
	static const char pat[] = "HTTP/0.0";

	for (size_t i = 0; i < 8; i++) {
		if (i >= avail)
			return 0;
		unsigned char c = (unsigned char)p[i];
		if (pat[i] == '0' ? (c < '0' || c > '9') : c != (unsigned char)pat[i])
			return -400;
	}
	if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
		return -505;
	*minor = p[7] - '0';
	return 1;
}

/* Empty lines before a request line (RFC 9112 §2.2): the offset past them
 * (end when the bytes run out inside them), or -400. */
static ssize_t skip_empty_lines(const char *buf, size_t end)
{
	size_t pos = 0;

	while (pos < end && buf[pos] == '\r') {
		if (pos + 1 >= end)
			return (ssize_t)end;
		if (buf[pos + 1] != '\n')
			return -400;
		pos += 2;
	}
	return (ssize_t)pos;
}

static ssize_t parse_request_head(const char *buf, size_t end, unsigned opts,
                                  struct pg_http_request *req, struct fields *f)
{
	const bool brackets = opts & PG_HTTP_TARGET_BRACKETS;
	ssize_t r = skip_empty_lines(buf, end);
	if (r < 0)
		return r;
	size_t pos = (size_t)r;

	size_t m = pos;
	while (pos < end && tchar[(unsigned char)buf[pos]])
		pos++;
	if (pos >= end)
		return 0;
	if (buf[pos] != ' ' || pos == m)
		return -400;
	req->method.p = buf + m;
	req->method.len = pos - m;
	pos++;

	size_t t = pos, query = 0;
	size_t tend = end - t > PG_HTTP_MAX_TARGET ? t + PG_HTTP_MAX_TARGET + 1 : end;
	while (pos < tend) {
		unsigned char c = (unsigned char)buf[pos];
		if (tgtchar[c] || (brackets && (c == '[' || c == ']'))) {
			if (c == '?' && !query)
				query = pos;
			pos++;
		} else if (c == '%') {
			if (pos + 2 >= end)
				return 0;
			if (pg_frame_hex(buf[pos + 1]) < 0 || pg_frame_hex(buf[pos + 2]) < 0)
				return -400;
			/* %00 decodes to a NUL, which backends' C-string paths
			 * cut at: the gateway and the backend would see two
			 * different targets. */
			if (buf[pos + 1] == '0' && buf[pos + 2] == '0')
				return -400;
			pos += 3;
		} else {
			break;
		}
	}
	if (pos - t > PG_HTTP_MAX_TARGET)
		return -414;
	if (pos >= end)
		return 0;
	if (buf[pos] != ' ' || pos == t)
		return -400; /* CTL, space run, '#', '"', ... or empty target */
	req->target.p = buf + t;
	req->target.len = pos - t;
	req->path.p = buf + t;
	req->path.len = (query ? query : pos) - t;
	/* Methods a reverse proxy cannot carry: CONNECT asks for a tunnel (the
	 * gateway is no forward proxy), TRACE would echo the client's
	 * credentials back through every hop. */
	if (EQ(req->method.p, req->method.len, "connect"))
		return -501;
	if (EQ(req->method.p, req->method.len, "trace"))
		return -405;
	if (buf[t] != '/' && !(req->target.len == 1 && buf[t] == '*' && req->method.len == 7 &&
	                       memcmp(req->method.p, "OPTIONS", 7) == 0))
		return -400; /* absolute-form, authority-form */
	pos++;

	int v = parse_version(buf + pos, end - pos, &req->minor);
	if (v == 0 || v == -400)
		return v;
	pos += 8;
	if (pos + 1 >= end)
		return pos < end && buf[pos] != '\r' ? -400 : 0;
	if (buf[pos] != '\r' || buf[pos + 1] != '\n')
		return -400;
	if (v != 1)
		return v;
	pos += 2;

	r = parse_fields(buf, pos, end, f, req->headers, &req->nheaders);
	return r;
}

ssize_t pg_http_parse_request(const char *buf, size_t len, struct pg_http_request *req)
{
	return pg_http_parse_request_opts(buf, len, 0, req);
}

ssize_t pg_http_parse_request_opts(const char *buf, size_t len, unsigned opts,
                                   struct pg_http_request *req)
{
	struct fields f = {.is_request = true};
	size_t end = len < PG_HTTP_MAX_HEAD ? len : PG_HTTP_MAX_HEAD;

	req->method = req->target = req->path = (struct pg_str){NULL, 0};
	req->minor = 0;
	req->body = PG_BODY_NONE;
	req->content_length = 0;
	req->keep_alive = false;
	req->conn_names = false;
	req->expect_continue = false;
	req->key = (struct pg_str){NULL, 0};
	req->head_len = 0;
	req->nheaders = 0;

	ssize_t r = parse_request_head(buf, end, opts, req, &f);
	if (r == 0 && len >= PG_HTTP_MAX_HEAD)
		return -431;
	if (r <= 0)
		return r;

	/* RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one before. */
	if (f.n_host > 1 || (req->minor == 1 && f.n_host != 1))
		return -400;
	if (f.n_te) {
		/* §6.1: TE in 1.0 is faulty framing; TE with CL is a smuggling
		 * attempt, and a gateway must not forward it either way. */
		if (req->minor == 0 || f.n_cl)
			return -400;
		if (!f.te_exact_chunked || f.n_te != 1)
			return -501;
		req->body = PG_BODY_CHUNKED;
	} else if (f.n_cl) {
		req->content_length = f.content_length;
		req->body = f.content_length ? PG_BODY_LENGTH : PG_BODY_NONE;
	}
	/* Only 100-continue is defined (RFC 9110 §10.1.1); others get 417. */
	if (f.expect_other)
		return -417;
	req->expect_continue = f.expect_continue && req->minor == 1;
	req->keep_alive = !f.conn_close && (req->minor == 1 || f.conn_keep_alive);
	req->conn_names = f.conn_names;
	req->key = f.key;
	req->head_len = (size_t)r;
	return r;
}

bool pg_http_head_ready(const char *buf, size_t len, size_t *scan)
{
	size_t i = *scan;

	if (len >= PG_HTTP_MAX_HEAD)
		return true;
	/* Leading empty lines: *scan stays at a line start while inside them. */
	if (i == 0 || buf[i - 1] == '\n') {
		while (i + 1 < len && buf[i] == '\r' && buf[i + 1] == '\n')
			i += 2;
		*scan = i;
		if (i >= len || (buf[i] == '\r' && i + 1 >= len))
			return false;
		if (buf[i] == '\r' || buf[i] == '\n')
			return true; /* bare CR or LF: let the parser say 400 */
	}
	/* Search mode: *scan never rests just after an LF (no empty line yet). */
	for (;;) {
		const char *lf = memchr(buf + i, '\n', len - i);
		if (!lf) {
			*scan = len;
			return false;
		}
		size_t j = (size_t)(lf - buf);
		if ((j + 1 < len && buf[j + 1] == '\n') ||
		    (j + 2 < len && buf[j + 1] == '\r' && buf[j + 2] == '\n')) {
			*scan = j; /* found: asking again answers the same */
			return true;
		}
		if (j + 2 >= len && (j + 1 >= len || buf[j + 1] == '\r')) {
			*scan = j; /* the empty line may still come */
			return false;
		}
		i = j + 1;
	}
}

static ssize_t parse_response_head(const char *buf, size_t end, struct pg_http_response *resp,
                                   struct fields *f)
{
	int v = parse_version(buf, end, &resp->minor);
	if (v == 0 || v == -400)
		return v;

	/* SP 3DIGIT, then SP reason or (tolerated) nothing, then CRLF. */
	static const char pat[] = " 000";
	size_t pos = 8;
	for (size_t i = 0; i < 4; i++, pos++) {
		if (pos >= end)
			return 0;
		unsigned char c = (unsigned char)buf[pos];
		if (pat[i] == '0' ? (c < '0' || c > '9') : c != ' ')
			return -400;
	}
	if (v != 1)
		return v; /* well-formed, other version */
	resp->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	if (resp->status < 100 || resp->status > 599)
		return -400;
	if (pos >= end)
		return 0;
	if (buf[pos] == ' ') {
		pos++;
		while (pos < end && fchar[(unsigned char)buf[pos]])
			pos++;
	}
	if (pos + 1 >= end)
		return pos < end && buf[pos] != '\r' ? -400 : 0;
	if (buf[pos] != '\r' || buf[pos + 1] != '\n')
		return -400;
	pos += 2;

	size_t n;
	return parse_fields(buf, pos, end, f, NULL, &n);
}

ssize_t pg_http_parse_response(const char *buf, size_t len, bool head_request,
                               struct pg_http_response *resp)
{
	struct fields f = {.is_request = false};
	size_t end = len < PG_HTTP_MAX_HEAD ? len : PG_HTTP_MAX_HEAD;

	memset(resp, 0, sizeof(*resp));
	ssize_t r = parse_response_head(buf, end, resp, &f);
	if (r == 0 && len >= PG_HTTP_MAX_HEAD)
		return -431;
	if (r <= 0)
		return r;

	/* Framing per RFC 9112 §6.1 and §6.3, ambiguity is a broken backend. */
	if (f.n_te && (f.n_cl || resp->minor == 0 || f.te_chunked > 1))
		return -400;
	bool no_body =
	    head_request || resp->status < 200 || resp->status == 204 || resp->status == 304;
	if (no_body)
		resp->body = PG_BODY_NONE;
	else if (f.n_te)
		/* chunked not last: the body runs to connection close (§6.3 p4) */
		resp->body = f.te_last_chunked ? PG_BODY_CHUNKED : PG_BODY_EOF;
	else if (f.n_cl)
		resp->body = f.content_length ? PG_BODY_LENGTH : PG_BODY_NONE;
	else
		resp->body = PG_BODY_EOF;
	if (f.n_cl && !f.n_te) {
		resp->content_length = f.content_length;
		resp->has_length = true;
	}
	resp->keep_alive =
	    !f.conn_close && (resp->minor == 1 || f.conn_keep_alive) && resp->body != PG_BODY_EOF;
	resp->conn_names = f.conn_names;
	resp->encoded = f.encoded;
	resp->head_len = (size_t)r;
	return r;
}

const struct pg_http_header *pg_http_find(const struct pg_http_request *req, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < req->nheaders; i++) {
		const struct pg_http_header *h = &req->headers[i];
		if (h->name.len == n && strncasecmp(h->name.p, name, n) == 0)
			return h;
	}
	return NULL;
}
