/* SPDX-License-Identifier: MIT */
/*
 * Strict HTTP/1.1 message parsing (RFC 9112): request and response heads,
 * chunked bodies, and the reason phrases of the statuses. Pure: no I/O, no
 * allocation. The caller keeps the bytes; parsed results point into them.
 */
#ifndef PG_HTTP_H
#define PG_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "pg_frame.h"

#define PG_HTTP_MAX_HEAD    (64 * 1024) /* larger header block: 431 */
#define PG_HTTP_MAX_TARGET  (8 * 1024)  /* longer request target: 414 */
#define PG_HTTP_MAX_HEADERS 128         /* more header fields: 431 */
/* Connection fields the forwarder remembers; a head with more is taken to
 * name every field but Host and the framing ones (conn_names). */
#define PG_HTTP_CONN_MAX 16

struct pg_str {
	const char *p;
	size_t len;
};

/* The header fields the gateway reads or rewrites, by name
 * (pg_http_field_kind); every other field is PG_HF_OTHER. */
enum pg_http_field {
	PG_HF_OTHER = 0,
	PG_HF_HOST,
	PG_HF_EXPECT,
	PG_HF_CONNECTION,
	PG_HF_KEEP_ALIVE,
	PG_HF_PROXY_CONNECTION,
	PG_HF_TE,
	PG_HF_UPGRADE,
	PG_HF_TRAILER,
	PG_HF_CONTENT_LENGTH,    /* also Content_Length (refused: http.c) */
	PG_HF_TRANSFER_ENCODING, /* also Transfer_Encoding (refused) */
	PG_HF_X_FORWARDED_FOR,
	PG_HF_X_REQUEST_ID,
	PG_HF_X_PREFIXGATE_KEY,
	/* flow control's (proxy/queue.c), forwarded as they came */
	PG_HF_AUTHORIZATION,
	PG_HF_X_PREFIXGATE_PRIORITY,
	PG_HF_X_PREFIXGATE_DEADLINE_MS,
	PG_HF_CONTENT_ENCODING,
};

/* The kind of the field named name[0..len) (ASCII case-insensitive): one
 * comparison, chosen by the name's length (http_field.c). */
enum pg_http_field pg_http_field_kind(const char *name, size_t len);

struct pg_http_header {
	struct pg_str name, value; /* value without surrounding OWS */
	uint8_t kind;              /* enum pg_http_field */
};

enum pg_body_kind {
	PG_BODY_NONE = 0,    /* no body: a request with none framed, a length of 0, or
	                        a response that has none (to HEAD; 1xx, 204, 304) */
	PG_BODY_LENGTH = 1,  /* Content-Length bytes */
	PG_BODY_CHUNKED = 2, /* Transfer-Encoding: chunked */
	PG_BODY_EOF = 3,     /* responses only: body ends when the peer closes */
};

struct pg_http_request {
	struct pg_str method, target, path; /* path: target without ?query */
	int minor;                          /* HTTP/1.<minor>: 0 or 1 */
	enum pg_body_kind body;
	uint64_t content_length; /* when body == PG_BODY_LENGTH */
	bool keep_alive;         /* after this exchange, per version + Connection */
	bool conn_names;         /* a Connection token other than keep-alive, or
	                            more than PG_HTTP_CONN_MAX Connection fields:
	                            the fields they name are not forwarded */
	bool expect_continue;    /* Expect: 100-continue (HTTP/1.1 only) */
	struct pg_str key;       /* X-Prefixgate-Key value, len 0 if absent */
	size_t head_len;         /* bytes of the head, leading empty lines included */
	size_t nheaders;
	struct pg_http_header headers[PG_HTTP_MAX_HEADERS];
};

struct pg_http_response {
	int status;
	int minor;
	enum pg_body_kind body;
	uint64_t content_length; /* when has_length */
	bool has_length;         /* a Content-Length field gave content_length (HEAD, 304 too) */
	bool keep_alive;         /* the connection may carry another request after it */
	bool conn_names;         /* a Connection token other than keep-alive (as
	                            in pg_http_request) */
	bool encoded;            /* a Content-Encoding other than identity */
	size_t head_len;
};

/*
 * Parse a request head from buf[0..len). Returns the head length (> 0) when
 * a complete head is present and valid, 0 when more bytes are needed (and
 * len < PG_HTTP_MAX_HEAD), or a negative HTTP status to answer with:
 * -400 malformed or ambiguous framing, a %00 in the target, a target not in
 * origin form (or "*" for OPTIONS), a missing (HTTP/1.1), repeated or
 * malformed Host, a repeated X-Prefixgate-Key; -405 TRACE; -414 target too
 * long; -417 an Expect other than 100-continue; -431 header block too large
 * or more than PG_HTTP_MAX_HEADERS fields; -501 CONNECT or a
 * Transfer-Encoding other than exactly "chunked"; -505 version other than
 * HTTP/1.0 and HTTP/1.1.
 * Leading empty lines (CRLF) before the request line are skipped and counted
 * in the returned length.
 */
ssize_t pg_http_parse_request(const char *buf, size_t len, struct pg_http_request *req);

/*
 * pg_http_parse_request with options. PG_HTTP_TARGET_BRACKETS: '[' and ']'
 * are taken in the target as they are. RFC 3986 keeps them for a URI's
 * host, but curl, Python's http.client and most clients send them raw in a
 * path, and the admin API's DELETE /backends/[::1]:8000 names an IPv6
 * backend with them. The proxy does not take them: what it forwards stays
 * what every backend parses alike.
 */
#define PG_HTTP_TARGET_BRACKETS 0x1
ssize_t pg_http_parse_request_opts(const char *buf, size_t len, unsigned opts,
                                   struct pg_http_request *req);

/*
 * For a head read in pieces: re-parsing from the start after every read is
 * quadratic when a client trickles its head a few bytes at a time, so call
 * pg_http_parse_request only once this returns true. *scan is the search
 * position, kept by the caller between calls: set it to 0 for a new head
 * (also for the next pipelined one). True once buf[0..len) holds an empty
 * line after a non-empty one (bare-LF ones too, so they get their 400 at
 * once), a malformed start, or len >= PG_HTTP_MAX_HEAD; then it stays true.
 * Amortised O(1) per byte. A head ending in junk such as "\r\r" is not
 * found: the caller's read timeout (or PG_HTTP_MAX_HEAD) ends it.
 */
bool pg_http_head_ready(const char *buf, size_t len, size_t *scan);

/*
 * Parse a response head. head_request: the request was HEAD (no body).
 * 1xx responses are returned as such (status < 200, body PG_BODY_NONE); the
 * caller forwards them and parses the next head. Same return convention as
 * pg_http_parse_request (any negative value means a broken backend).
 */
ssize_t pg_http_parse_response(const char *buf, size_t len, bool head_request,
                               struct pg_http_response *resp);

/* The reason phrase for an HTTP status ("Not Found"), one table for every
 * reply the gateway and the tools write: the registered phrase of every
 * status of the IANA registry; "Error" for a status not registered. */
const char *pg_http_reason(int status);

/* The first field named name (case-insensitive), or NULL if absent. */
const struct pg_http_header *pg_http_find(const struct pg_http_request *req, const char *name);

/*
 * Incremental chunked-body decoder. Feed bytes as they arrive; each call
 * consumes a prefix of the input and reports at most one span of decoded
 * data inside what it consumed. Trailers are consumed and ignored. Limits
 * (pg_frame.h): 16 hex digits per chunk-size, PG_CHUNK_LINE_MAX bytes per
 * chunk-size line (extensions included), PG_CHUNK_TRAILER_MAX bytes of
 * trailers. On DONE, *consumed stops right after the final CRLF (what
 * follows is the next message).
 */
enum pg_chunked_rc {
	PG_CHUNKED_MORE = 0,   /* consumed everything given, need more */
	PG_CHUNKED_DATA = 1,   /* *data_off, *data_len set; call again with the rest */
	PG_CHUNKED_DONE = 2,   /* last chunk and trailers complete */
	PG_CHUNKED_ERROR = -1, /* bad chunk size, extension or framing: 400 */
};

/* The state of a chunked body before its first byte. */
void pg_chunked_init(struct pg_frame *f);
/* *consumed gets the bytes used from buf; data span is buf[*data_off, +*data_len). */
enum pg_chunked_rc pg_chunked_feed(struct pg_frame *f, const char *buf, size_t len,
                                   size_t *consumed, size_t *data_off, size_t *data_len);

#endif /* PG_HTTP_H */
