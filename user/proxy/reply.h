/* SPDX-License-Identifier: MIT */
/*
 * The answers the gateway writes itself on a client connection: its JSON
 * errors, the overload answer of --max-in-flight, and 100 Continue. Their
 * bytes count in the exchange's resp_bytes (the access log's bytes_out).
 */
#ifndef PG_REPLY_H
#define PG_REPLY_H

#include <stdbool.h>
#include "proxy/conn.h"

/* status with {"error":{"message":msg,...}}; close: add Connection: close. */
void pg_reply_error(struct pg_worker *w, struct pg_client *c, int status, const char *msg,
                    bool close);
/* status with the JSON body[0..len) (Content-Type application/json). */
void pg_reply_json(struct pg_worker *w, struct pg_client *c, int status, const char *body,
                   size_t len, bool close);
/* 429 of flow control (queue.h): {"error":{"message":msg,"type":
 * "rate_limit_exceeded","param":null,"code":code}}, as OpenAI's API
 * answers a rate limit, with Retry-After; close: add Connection: close. */
void pg_reply_throttled(struct pg_worker *w, struct pg_client *c, const char *code, const char *msg,
                        unsigned retry_after_s, bool close);
/* 503 of --max-in-flight (lifecycle.h), closing. */
void pg_reply_overload(struct pg_worker *w, struct pg_client *c);
/* Expect: 100-continue, answered by the gateway, which then reads the body. */
void pg_reply_continue(struct pg_worker *w, struct pg_client *c);

#endif /* PG_REPLY_H */
