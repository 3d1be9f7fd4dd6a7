// SPDX-License-Identifier: MIT
/*
 * Head rewriting and request body re-framing (forward.h). Pure.
 */
#include <string.h>
#include <strings.h>
#include "lib/buf.h"
#include "lib/forward.h"
#include "lib/trace.h"

/* Bytes a rewritten head may have beyond the head it came from (its made
 * X-Request-Id and traceparent, framing field, Connection field; the
 * client's address apart), reserved at once so that its pieces are plain copies. A head
 * that somehow needs more only grows its buffer. */
#define HEAD_EXTRA 256

bool pg_name_is(struct pg_str s, const char *name)
{
	return strlen(name) == s.len && strncasecmp(s.p, name, s.len) == 0;
}

/* The fields the gateway keeps to itself (forward.h). */
static bool own_kind(enum pg_http_field k)
{
	return k == PG_HF_CONNECTION || k == PG_HF_KEEP_ALIVE || k == PG_HF_PROXY_CONNECTION ||
	       k == PG_HF_TE || k == PG_HF_UPGRADE || k == PG_HF_EXPECT;
}

bool pg_fwd_own_field(struct pg_str n)
{
	return own_kind(pg_http_field_kind(n.p, n.len));
}

bool pg_fwd_list_has(struct pg_str list, struct pg_str token)
{
	size_t i = 0;

	while (i < list.len) {
		size_t start, end;

		while (i < list.len && (pg_frame_ows(list.p[i]) || list.p[i] == ','))
			i++;
		start = i;
		while (i < list.len && list.p[i] != ',')
			i++;
		end = i;
		while (end > start && pg_frame_ows(list.p[end - 1]))
			end--;
		if (end > start && end - start == token.len &&
		    strncasecmp(list.p + start, token.p, token.len) == 0)
			return true;
	}
	return false;
}

/* The Connection fields' values of a head. */
struct conn_lists {
	struct pg_str v[PG_HTTP_CONN_MAX];
	size_t n;
	bool overflow;
};

/* A Connection field's value. */
static void conn_add(struct conn_lists *cl, struct pg_str value)
{
	if (cl->n < PG_HTTP_CONN_MAX)
		cl->v[cl->n++] = value;
	else
		cl->overflow = true;
}

/* A field the Connection fields name (Host and framing are never dropped
 * this way: the caller keeps or rewrites them). */
static bool conn_listed(const struct conn_lists *cl, struct pg_str name)
{
	if (cl->overflow)
		return true;
	for (size_t i = 0; i < cl->n; i++)
		if (pg_fwd_list_has(cl->v[i], name))
			return true;
	return false;
}

static inline void put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	pg_bytes_append(buf, len, cap, s, n);
}

static void put_field(char **buf, size_t *len, size_t *cap, struct pg_str name, struct pg_str v)
{
	put(buf, len, cap, name.p, name.len);
	put(buf, len, cap, ": ", 2);
	put(buf, len, cap, v.p, v.len);
	put(buf, len, cap, "\r\n", 2);
}

static void put_length(char **buf, size_t *len, size_t *cap, uint64_t n)
{
	char dec[PG_DIGITS_MAX], *d = pg_digits(dec + sizeof(dec), n, 10);

	put(buf, len, cap, "Content-Length: ", 16);
	put(buf, len, cap, d, (size_t)(dec + sizeof(dec) - d));
	put(buf, len, cap, "\r\n", 2);
}

void pg_fwd_make_id(char *out, uint64_t boot, uint64_t seq)
{
	static const char hex[] = PG_HEX_DIGITS;

	for (int i = 0; i < 16; i++) {
		out[15 - i] = hex[(boot >> (4 * i)) & 15];
		out[32 - i] = hex[(seq >> (4 * i)) & 15];
	}
	out[16] = '-';
}

/* X-Forwarded-For fields remembered per head; a head with more is
 * scanned again for them (rare). */
#define XFF_MAX 8

/* "X-Forwarded-For: <the client's values>, <client>": the client's fields
 * (xff[0..n), or all of them when n is over XFF_MAX) in order, joined as
 * one list (RFC 9110 §5.3), then the address. */
static void put_forwarded_for(const struct pg_http_request *req, const struct conn_lists *cl,
                              const uint16_t *xff, size_t n, struct pg_str client, char **buf,
                              size_t *len, size_t *cap)
{
	bool any = false, all = n > XFF_MAX;

	for (size_t k = 0; k < (all ? req->nheaders : n); k++) {
		const struct pg_http_header *h = &req->headers[all ? k : xff[k]];

		if (!h->value.len || (all && h->kind != PG_HF_X_FORWARDED_FOR) ||
		    conn_listed(cl, h->name))
			continue;
		put(buf, len, cap, any ? ", " : "X-Forwarded-For: ", any ? 2 : 17);
		put(buf, len, cap, h->value.p, h->value.len);
		any = true;
	}
	if (client.len) {
		put(buf, len, cap, any ? ", " : "X-Forwarded-For: ", any ? 2 : 17);
		put(buf, len, cap, client.p, client.len);
		any = true;
	}
	if (any)
		put(buf, len, cap, "\r\n", 2);
}

/* The identity fields of field h (forward.h): false if it is not one, or
 * true and it is dropped (an X-Forwarded-For joined later, an X-Request-Id
 * not kept) or kept (the X-Request-Id forwarded, at the end of buf). */
static bool identity_field(const struct pg_http_header *h, size_t i, struct pg_fwd_ident *id,
                           uint16_t *xff, size_t *nxff, char **buf, size_t *len, size_t *cap)
{
	if (h->kind == PG_HF_X_FORWARDED_FOR) {
		if (*nxff < XFF_MAX)
			xff[*nxff] = (uint16_t)i;
		++*nxff;
		return true;
	}
	if (h->kind != PG_HF_X_REQUEST_ID)
		return false;
	if (!id->id_len && h->value.len && h->value.len <= PG_REQUEST_ID_MAX) {
		id->id_off = *len + h->name.len + 2;
		id->id_len = h->value.len;
		put_field(buf, len, cap, h->name, h->value);
	}
	return true;
}

void pg_fwd_request_line(const char *h, size_t n, struct pg_str *method, struct pg_str *path)
{
	const char *sp = h ? memchr(h, ' ', n) : NULL, *end, *q;

	*method = *path = (struct pg_str){h, 0};
	if (!sp)
		return;
	end = memchr(sp + 1, ' ', n - (size_t)(sp + 1 - h));
	end = end ? end : sp + 1;
	q = memchr(sp + 1, '?', (size_t)(end - (sp + 1)));
	*method = (struct pg_str){h, (size_t)(sp - h)};
	*path = (struct pg_str){sp + 1, (size_t)((q ? q : end) - sp - 1)};
}

/* A trace context field the gateway replaces (forward.h): traceparent,
 * and tracestate when it goes with a traceparent that was not valid. */
static bool trace_field(struct pg_str name, bool drop_tracestate)
{
	return (name.len == 11 && pg_name_is(name, "traceparent")) ||
	       (drop_tracestate && name.len == 10 && pg_name_is(name, "tracestate"));
}

void pg_fwd_request_head(const struct pg_http_request *req, struct pg_fwd_ident *id, char **buf,
                         size_t *len, size_t *cap)
{
	struct conn_lists cl = {0};
	bool had_length = false;
	uint16_t xff[XFF_MAX];
	size_t nxff = 0;

	if (req->conn_names)
		for (size_t i = 0; i < req->nheaders; i++)
			if (req->headers[i].kind == PG_HF_CONNECTION)
				conn_add(&cl, req->headers[i].value);
	pg_bytes_room(buf, *len, cap, req->head_len + HEAD_EXTRA + (id ? id->client.len : 0));
	put(buf, len, cap, req->method.p, req->method.len);
	put(buf, len, cap, " ", 1);
	put(buf, len, cap, req->target.p, req->target.len);
	put(buf, len, cap, req->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
	if (id) {
		id->id_len = 0;
		id->made = false;
	}
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct pg_http_header *h = &req->headers[i];
		enum pg_http_field k = (enum pg_http_field)h->kind;

		if (k == PG_HF_CONTENT_LENGTH) {
			had_length = true;
			continue;
		}
		if (k == PG_HF_TRANSFER_ENCODING || k == PG_HF_TRAILER || own_kind(k))
			continue;
		if (k != PG_HF_HOST && conn_listed(&cl, h->name))
			continue;
		if (id && identity_field(h, i, id, xff, &nxff, buf, len, cap))
			continue;
		if (id && id->traceparent && trace_field(h->name, id->drop_tracestate))
			continue;
		put_field(buf, len, cap, h->name, h->value);
	}
	if (id) {
		put_forwarded_for(req, &cl, xff, nxff, id->client, buf, len, cap);
		if (!id->id_len && id->seq) {
			char made[PG_REQUEST_ID_GEN];

			pg_fwd_make_id(made, id->boot, ++*id->seq);
			id->id_off = *len + 14;
			id->id_len = sizeof(made);
			id->made = true;
			put_field(buf, len, cap, (struct pg_str){"X-Request-Id", 12},
			          (struct pg_str){made, sizeof(made)});
		}
		if (id->traceparent)
			put_field(buf, len, cap, (struct pg_str){"traceparent", 11},
			          (struct pg_str){id->traceparent, PG_TRACEPARENT_LEN});
	}
	if (req->body == PG_BODY_CHUNKED)
		put(buf, len, cap, "Transfer-Encoding: chunked\r\n", 28);
	else if (req->body == PG_BODY_LENGTH || had_length)
		put_length(buf, len, cap, req->content_length);
	put(buf, len, cap, "\r\n", 2);
}

void pg_fwd_with_length(const char *h, size_t n, uint64_t body_len, char **buf, size_t *len,
                        size_t *cap)
{
	const char *p = h, *end = h + n;

	pg_bytes_room(buf, *len, cap, n + PG_DIGITS_MAX + 18);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		size_t l = eol ? (size_t)(eol + 1 - p) : (size_t)(end - p);
		const char *colon = memchr(p, ':', l);
		struct pg_str name = {p, colon ? (size_t)(colon - p) : 0};

		if (l <= 2 && (p[0] == '\r' || p[0] == '\n')) /* the blank line */
			break;
		if (!colon ||
		    (!pg_name_is(name, "Content-Length") && !pg_name_is(name, "Transfer-Encoding")))
			put(buf, len, cap, p, l);
		p += l;
	}
	put_length(buf, len, cap, body_len);
	put(buf, len, cap, "\r\n", 2);
}

/* The field lines of a parsed, so well-formed, head. */
struct field_iter {
	const char *p, *end;
};

static bool field_next(struct field_iter *it, struct pg_str *name, struct pg_str *value,
                       struct pg_str *line)
{
	const char *eol, *colon, *v, *ve;

	if (it->p >= it->end)
		return false;
	eol = memchr(it->p, '\n', (size_t)(it->end - it->p));
	if (!eol)
		eol = it->end - 1;
	colon = memchr(it->p, ':', (size_t)(eol - it->p));
	if (!colon)
		colon = eol;
	*line = (struct pg_str){it->p, (size_t)(eol + 1 - it->p)};
	*name = (struct pg_str){it->p, (size_t)(colon - it->p)};
	v = colon < eol ? colon + 1 : eol;
	ve = eol > v && eol[-1] == '\r' ? eol - 1 : eol;
	while (v < ve && pg_frame_ows(*v))
		v++;
	while (ve > v && pg_frame_ows(ve[-1]))
		ve--;
	*value = (struct pg_str){v, (size_t)(ve - v)};
	it->p = eol + 1;
	return true;
}

void pg_fwd_response_head(const char *h, size_t n, const struct pg_http_response *resp,
                          const struct pg_fwd_resp *o, char **buf, size_t *len, size_t *cap)
{
	const char *first = memchr(h, '\n', n) + 1; /* past the status line */
	struct field_iter it = {first, h + n - 2};  /* before the blank line */
	struct pg_str name, value, line;
	struct conn_lists cl = {0};

	/* Only a Connection token other than keep-alive can name a field to
	 * drop (the parser says whether there is one). */
	if (resp->conn_names)
		while (field_next(&it, &name, &value, &line))
			if (pg_http_field_kind(name.p, name.len) == PG_HF_CONNECTION)
				conn_add(&cl, value);
	pg_bytes_room(buf, *len, cap, n + HEAD_EXTRA + o->request_id.len);
	put(buf, len, cap, h, (size_t)(first - h));
	it = (struct field_iter){first, h + n - 2};
	while (field_next(&it, &name, &value, &line)) {
		enum pg_http_field k = pg_http_field_kind(name.p, name.len);

		if (k == PG_HF_CONTENT_LENGTH || own_kind(k))
			continue;
		if (k != PG_HF_TRANSFER_ENCODING && conn_listed(&cl, name))
			continue;
		if (o->http10 && k == PG_HF_TRANSFER_ENCODING)
			continue; /* de-chunked: the close ends the body */
		if (o->request_id.len && k == PG_HF_X_REQUEST_ID)
			continue; /* ours replaces it */
		put(buf, len, cap, line.p, line.len);
	}
	if (resp->has_length)
		put_length(buf, len, cap, resp->content_length);
	if (o->request_id.len)
		put_field(buf, len, cap, (struct pg_str){"X-Request-Id", 12}, o->request_id);
	if (o->close)
		put(buf, len, cap, "Connection: close\r\n", 19);
	else if (o->http10)
		put(buf, len, cap, "Connection: keep-alive\r\n", 24);
	put(buf, len, cap, "\r\n", 2);
}

void pg_fwd_chunk(const char *data, size_t n, char **buf, size_t *len, size_t *cap)
{
	char hex[PG_DIGITS_MAX], *d;

	if (!n)
		return; /* a zero-size chunk would be the last one */
	d = pg_digits(hex + sizeof(hex), n, 16);
	put(buf, len, cap, d, (size_t)(hex + sizeof(hex) - d));
	put(buf, len, cap, "\r\n", 2);
	put(buf, len, cap, data, n);
	put(buf, len, cap, "\r\n", 2);
}

void pg_fwd_last_chunk(char **buf, size_t *len, size_t *cap)
{
	put(buf, len, cap, "0\r\n\r\n", 5);
}
