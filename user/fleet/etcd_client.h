/* SPDX-License-Identifier: MIT */
/*
 * A blocking client of etcd's v3 JSON gateway over HTTP/1.1 (lib/etcd.h
 * builds the bodies and parses the answers): one connection per call, with
 * a deadline on every call, and the watch as a long-lived chunked response
 * read with a timeout. Used by the gateway's etcd thread (fleet/etcd.c)
 * and by prefixgatectl register / fleet. Not thread-safe: one client per
 * thread.
 *
 * Endpoints are tried in turn: a call that cannot connect or times out
 * moves to the next one (and stays there); when none answers, the error
 * names each one's failure. With a user, /v3/auth/authenticate gives a
 * token sent as the Authorization header; it is fetched again when etcd
 * says it is no longer valid.
 */
#ifndef PG_ETCD_CLIENT_H
#define PG_ETCD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/buf.h"
#include "lib/etcd.h"
#include "lib/http.h"

#define PG_ETCD_MAX_ENDPOINTS 16
#define PG_ETCD_MAX_BODY      (16u << 20) /* a larger answer is an error */

struct pg_etcd_client {
	char hp[PG_ETCD_MAX_ENDPOINTS][64]; /* "host:port" */
	size_t n, cur;
	unsigned timeout_ms;
	char *user, *password, *token;
};

/* endpoints: "http://h:p,http://h2:p2". password_file may be NULL (no
 * auth: user must be NULL too). 0, or -1 with err set. */
int pg_etcd_client_init(struct pg_etcd_client *cl, const char *endpoints, unsigned timeout_ms,
                        const char *user, const char *password_file, char *err, size_t errlen);
void pg_etcd_client_free(struct pg_etcd_client *cl);

/* POST path (e.g. "/v3/kv/range") with body; the answer parsed into r. 0,
 * or -1 with err set: no answer, not JSON, or an error answer (r->code,
 * r->error then say which; r is freed by the caller either way). */
int pg_etcd_call(struct pg_etcd_client *cl, const char *path, const struct pg_buf *body,
                 struct pg_etcd_resp *r, char *err, size_t errlen);

/* A watch: its connection and the bytes of the stream not yet split. */
struct pg_etcd_watch {
	int fd; /* -1: closed */
	bool have_head;
	struct pg_http_response head;
	struct pg_frame fr;
	struct pg_buf raw, data; /* read, not framed yet; decoded, not split into lines */
};

/* Open a watch (body from pg_etcd_body_watch); 0, or -1 with err set. */
int pg_etcd_watch_open(struct pg_etcd_client *cl, struct pg_etcd_watch *w,
                       const struct pg_buf *body, char *err, size_t errlen);
/* Wait at most timeout_ms for stream bytes; every complete line is given
 * to fn (which returns non-zero to stop early). 1: got bytes, 0: none in
 * time, -1: the stream ended or failed (err set; the watch is closed). */
int pg_etcd_watch_read(struct pg_etcd_watch *w, int timeout_ms,
                       int (*fn)(void *arg, const char *line, size_t len), void *arg, char *err,
                       size_t errlen);
void pg_etcd_watch_close(struct pg_etcd_watch *w);

#endif /* PG_ETCD_CLIENT_H */
