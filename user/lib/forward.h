/* SPDX-License-Identifier: MIT */
/*
 * What the gateway forwards of a message's head and of a request's body
 * framing. Pure: no I/O; output is appended to a growable byte buffer
 * (pg_bytes_append, buf.h).
 *
 * The rules, one definition for both directions:
 * - The gateway's own fields (RFC 9110 §7.6.1: Connection, Keep-Alive,
 *   Proxy-Connection, TE, Upgrade; and Expect, which it answers itself)
 *   never cross it, nor does any field a Connection field lists, except the
 *   ones framing or routing depend on (Host; Content-Length and
 *   Transfer-Encoding, rewritten below either way).
 * - A request's framing is forwarded in canonical form, whatever spelling
 *   the parser accepted: "Transfer-Encoding: chunked" or
 *   "Content-Length: <digits>"; its chunked body is re-framed chunk by chunk
 *   from the decoded data (extensions dropped) and ends in "0\r\n\r\n":
 *   request trailers are dropped (RFC 9110 §6.5.1 lets a recipient discard
 *   them, and they could carry framing, routing or credentials).
 * - A response keeps its Transfer-Encoding (its body is relayed as framed)
 *   and gets its Content-Length written as plain digits; except to an
 *   HTTP/1.0 client, which must never see Transfer-Encoding (RFC 9112
 *   §6.1): its chunked bodies are de-chunked and close-delimited, and a
 *   kept connection says "Connection: keep-alive" (1.0's default is close).
 * - Request identity: the client's address is appended to X-Forwarded-For
 *   (its fields joined into one, at the end of the head); of the client's
 *   X-Request-Id fields the first usable one (1 to PG_REQUEST_ID_MAX bytes)
 *   is kept and the others dropped, else one the gateway makes is added;
 *   the response carries the same X-Request-Id (the backend's own dropped);
 *   traceparent and tracestate pass untouched, like any end-to-end field,
 *   unless the gateway traces (proxy/tracing.h): then its own traceparent
 *   replaces the client's, and a tracestate goes only with a valid one.
 */
#ifndef PG_FORWARD_H
#define PG_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/http.h"

/* A client's X-Request-Id longer than this is replaced by a made one. */
#define PG_REQUEST_ID_MAX 128
/* Length of a made id: 16 hex digits of a per-worker random boot id, '-',
 * 16 hex digits of the worker's request counter. */
#define PG_REQUEST_ID_GEN 33

/* Who asked, for the request head. */
struct pg_fwd_ident {
	struct pg_str client; /* the client's address, appended to X-Forwarded-For */
	uint64_t boot;        /* a made X-Request-Id: this boot id, */
	uint64_t *seq;        /* and this counter, advanced (NULL: never make one) */
	size_t id_off;        /* out: the X-Request-Id value forwarded is */
	size_t id_len;        /*      buf[id_off, id_off + id_len) (len 0: none) */
	bool made;            /* out: the gateway made it */
	/* Trace context (lib/trace.h): when not NULL, the client's traceparent
	 * fields are dropped and this one (PG_TRACEPARENT_LEN bytes) added;
	 * with drop_tracestate, its tracestate fields are dropped too. */
	const char *traceparent;
	bool drop_tracestate;
};

/* A made X-Request-Id: PG_REQUEST_ID_GEN bytes into out (no NUL). */
void pg_fwd_make_id(char *out, uint64_t boot, uint64_t seq);

/* The request head for the backend: request line as parsed, fields
 * filtered and framing written as above, identity fields from id (may be
 * NULL: none added), then the blank line. */
void pg_fwd_request_head(const struct pg_http_request *req, struct pg_fwd_ident *id, char **buf,
                         size_t *len, size_t *cap);

/* How a response head is written for its client. */
struct pg_fwd_resp {
	bool close;               /* the client connection ends after it */
	bool http10;              /* the client speaks HTTP/1.0 */
	struct pg_str request_id; /* X-Request-Id to carry (len 0: none) */
};

/* The response head h[0..n) (already parsed into resp) for the client:
 * fields filtered as above (and Transfer-Encoding for HTTP/1.0), then
 * "X-Request-Id: request_id" if its len is not 0, then "Connection: close"
 * if close, else "Connection: keep-alive" to HTTP/1.0, then the blank
 * line. An HTTP/1.0 client of a chunked response must be closed (o->close:
 * the body is close-delimited). */
void pg_fwd_response_head(const char *h, size_t n, const struct pg_http_response *resp,
                          const struct pg_fwd_resp *o, char **buf, size_t *len, size_t *cap);

/* A forwarded request head h[0..n) (pg_fwd_request_head's, ending in its
 * blank line) for a body of body_len bytes: its framing field
 * (Content-Length or Transfer-Encoding) replaced by Content-Length:
 * body_len; the X-Request-Id stays where it was. Prefill/decode legs send
 * bodies edited to other lengths. */
void pg_fwd_with_length(const char *h, size_t n, uint64_t body_len, char **buf, size_t *len,
                        size_t *cap);

/* The method and the path (the target without its query: a query can
 * carry secrets) of a forwarded request head h[0..n) ("M T HTTP/1.x"),
 * pointing into h; both empty when the line has no space. The access log
 * and the traces record them. */
void pg_fwd_request_line(const char *h, size_t n, struct pg_str *method, struct pg_str *path);

/* One chunk of a re-framed request body: "<hex size>\r\n<data>\r\n". */
void pg_fwd_chunk(const char *data, size_t n, char **buf, size_t *len, size_t *cap);
/* The last chunk, no trailers. */
void pg_fwd_last_chunk(char **buf, size_t *len, size_t *cap);

/* Header name s equals name, case-insensitively. */
bool pg_name_is(struct pg_str s, const char *name);
/* Field name is one the gateway keeps to itself (the fixed list above). */
bool pg_fwd_own_field(struct pg_str name);
/* The comma-separated list value names token (case-insensitive). */
bool pg_fwd_list_has(struct pg_str list, struct pg_str token);

#endif /* PG_FORWARD_H */
