// SPDX-License-Identifier: MIT
/* The gateway's own answers (reply.h). */
#include <stdio.h>
#include "lib/http.h"
#include "proxy/quota.h"
#include "proxy/reply.h"
#include "proxy/worker_state.h"
#include "sys/lifecycle.h"
#include "proxy/sock.h"

void pg_reply_error(struct pg_worker *w, struct pg_client *c, int status, const char *msg,
                    bool close)
{
	char body[256], head[416 + PG_QUOTA_HEAD_MAX], q[PG_QUOTA_HEAD_MAX];
	const struct pg_exchange *x = &c->x;
	int bl, hl;

	pg_quota_head(w, x, q, sizeof(q));
	bl =
	    snprintf(body, sizeof(body),
	             "{\"error\":{\"message\":\"%s\",\"type\":\"prefixgate_error\",\"code\":%d}}\n",
	             msg, status);
	/* The request's X-Request-Id, when its head was read (forward.h). */
	hl = snprintf(head, sizeof(head),
	              "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: "
	              "%d\r\n%s%.*s%s%s%s\r\n",
	              status, pg_http_reason(status), bl, x->id_len ? "X-Request-Id: " : "",
	              (int)x->id_len, x->id_len ? x->fwd + x->id_off : "", x->id_len ? "\r\n" : "",
	              q, close ? "Connection: close\r\n" : "");
	pg_sock_queue_copy(w, &c->s, head, (size_t)hl);
	pg_sock_queue_copy(w, &c->s, body, (size_t)bl);
}

void pg_reply_throttled(struct pg_worker *w, struct pg_client *c, const char *code, const char *msg,
                        unsigned retry_after_s, bool close)
{
	char body[512], head[416 + PG_QUOTA_HEAD_MAX], q[PG_QUOTA_HEAD_MAX];
	const struct pg_exchange *x = &c->x;
	int bl, hl;

	pg_quota_head(w, x, q, sizeof(q));
	bl = snprintf(body, sizeof(body),
	              "{\"error\":{\"message\":\"%s\",\"type\":\"rate_limit_exceeded\","
	              "\"param\":null,\"code\":\"%s\"}}\n",
	              msg, code);
	hl = snprintf(head, sizeof(head),
	              "HTTP/1.1 429 %s\r\nContent-Type: application/json\r\nContent-Length: "
	              "%d\r\nRetry-After: %u\r\n%s%.*s%s%s%s\r\n",
	              pg_http_reason(429), bl, retry_after_s, x->id_len ? "X-Request-Id: " : "",
	              (int)x->id_len, x->id_len ? x->fwd + x->id_off : "", x->id_len ? "\r\n" : "",
	              q, close ? "Connection: close\r\n" : "");
	pg_sock_queue_copy(w, &c->s, head, (size_t)hl);
	pg_sock_queue_copy(w, &c->s, body, (size_t)bl);
}

void pg_reply_json(struct pg_worker *w, struct pg_client *c, int status, const char *body,
                   size_t len, bool close)
{
	char head[256];
	int hl = snprintf(
	    head, sizeof(head),
	    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n",
	    status, pg_http_reason(status), len, close ? "Connection: close\r\n" : "");

	pg_sock_queue_copy(w, &c->s, head, (size_t)hl);
	pg_sock_queue_copy(w, &c->s, body, len);
}

void pg_reply_overload(struct pg_worker *w, struct pg_client *c)
{
	pg_sock_queue_copy(w, &c->s, PG_OVERLOAD_REPLY, sizeof(PG_OVERLOAD_REPLY) - 1);
}

void pg_reply_continue(struct pg_worker *w, struct pg_client *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";

	pg_sock_queue_copy(w, &c->s, cont, sizeof(cont) - 1);
}
