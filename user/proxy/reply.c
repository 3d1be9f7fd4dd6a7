// SPDX-License-Identifier: MIT
/* The gateway's own answers (reply.h). */
#include <stdio.h>
#include "lib/http.h"
#include "proxy/quota.h"
#include "proxy/reply.h"
#include "proxy/worker_state.h"
#include "sys/lifecycle.h"
#include "proxy/sock.h"

/* Room for an answer's head: its status line, three fields, a 128-byte
 * X-Request-Id (forward.h PG_REQUEST_ID_MAX), Connection: close and the
 * tenant's quota fields (proxy/quota.h). */
#define PG_REPLY_HEAD_MAX (416 + PG_QUOTA_HEAD_MAX)

/* Queue an answer's bytes to the client, counted as its response's
 * (the access log's bytes_out). */
static void reply(struct pg_worker *w, struct pg_client *c, const char *p, size_t n)
{
	pg_sock_queue_copy(w, &c->s, p, n);
	c->x.resp_bytes += n;
}

/* The head of an answer of status with a JSON body of len bytes, more
 * fields (each ending in CRLF) and the request's X-Request-Id, when its
 * head was read (forward.h). Its length. */
static size_t head_of(const struct pg_exchange *x, char *head, size_t cap, int status, size_t len,
                      const char *more, bool close)
{
	int n =
	    snprintf(head, cap,
	             "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
	             "%zu\r\n%s%s%.*s%s%s\r\n",
	             status, pg_http_reason(status), len, more, x->id_len ? "X-Request-Id: " : "",
	             (int)x->id_len, x->id_len ? x->fwd + x->id_off : "", x->id_len ? "\r\n" : "",
	             close ? "Connection: close\r\n" : "");

	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

void pg_reply_error(struct pg_worker *w, struct pg_client *c, int status, const char *msg,
                    bool close)
{
	char body[256], head[PG_REPLY_HEAD_MAX], q[PG_QUOTA_HEAD_MAX];
	int bl =
	    snprintf(body, sizeof(body),
	             "{\"error\":{\"message\":\"%s\",\"type\":\"prefixgate_error\",\"code\":%d}}\n",
	             msg, status);

	pg_quota_head(w, &c->x, q, sizeof(q));
	reply(w, c, head, head_of(&c->x, head, sizeof(head), status, (size_t)bl, q, close));
	reply(w, c, body, (size_t)bl);
}

void pg_reply_throttled(struct pg_worker *w, struct pg_client *c, const char *code, const char *msg,
                        unsigned retry_after_s, bool close)
{
	char body[512], head[PG_REPLY_HEAD_MAX], more[32 + PG_QUOTA_HEAD_MAX];
	int bl = snprintf(body, sizeof(body),
	                  "{\"error\":{\"message\":\"%s\",\"type\":\"rate_limit_exceeded\","
	                  "\"param\":null,\"code\":\"%s\"}}\n",
	                  msg, code);
	int ml = snprintf(more, sizeof(more), "Retry-After: %u\r\n", retry_after_s);

	pg_quota_head(w, &c->x, more + ml, sizeof(more) - (size_t)ml);
	reply(w, c, head, head_of(&c->x, head, sizeof(head), 429, (size_t)bl, more, close));
	reply(w, c, body, (size_t)bl);
}

void pg_reply_json(struct pg_worker *w, struct pg_client *c, int status, const char *body,
                   size_t len, bool close)
{
	char head[PG_REPLY_HEAD_MAX];

	reply(w, c, head, head_of(&c->x, head, sizeof(head), status, len, "", close));
	reply(w, c, body, len);
}

void pg_reply_overload(struct pg_worker *w, struct pg_client *c)
{
	reply(w, c, PG_OVERLOAD_REPLY, sizeof(PG_OVERLOAD_REPLY) - 1);
}

void pg_reply_continue(struct pg_worker *w, struct pg_client *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	reply(w, c, cont, sizeof(cont) - 1);
}
