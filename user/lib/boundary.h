/* SPDX-License-Identifier: MIT */
/*
 * The rules at a request's boundaries on kept-alive connections: when a
 * backend connection may carry another request, and what the client's
 * connection does after an early response. Pure: the proxy (exchange.c,
 * upstream.c) gathers the facts and follows the answers.
 *
 * The invariant: a backend connection returns to the pool, where any
 * client's next request may take it, only when it is clean:
 *  - the whole request was forwarded: every body byte read from the client
 *    and sent, nothing left in the socket's send queue;
 *  - the response head did not come while request bytes were still owed
 *    (an early answer: the backend may never read the rest, or may read
 *    the next request as it);
 *  - the response ended at its own framing, no byte after it, and allows
 *    keep-alive; it was not spliced (a spliced connection is asked to
 *    close) and not the answer to HEAD (a body sent anyway would be read as
 *    the next response);
 *  - the backend has not closed it, and is still the same active member.
 * Anything else closes it. Retries never reuse the failed connection, and
 * lingering (spliced) connections are never pooled.
 *
 * After an early response the client side follows RFC 9112 §9.3: a server
 * that does not read the whole body closes the connection after the
 * response, unless the rest of the body is read and dropped. The gateway
 * drops a Content-Length remainder of at most PG_DISCARD_MAX bytes (within
 * --body-timeout) and keeps the connection; anything else (a chunked body,
 * a larger remainder) gets "Connection: close" on the response. The same
 * rule holds for the gateway's own answers on a kept connection (flow
 * control's 429s, which may come before the body is read whole): every
 * other answer of the gateway closes.
 */
#ifndef PG_BOUNDARY_H
#define PG_BOUNDARY_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/http.h"

/* Request body bytes the gateway reads and drops after an early response
 * to keep the client's connection: a short upload's tail (a 401 answering
 * a RAG prompt) rather than a second request's worth of waiting. */
#define PG_DISCARD_MAX (256 * 1024)

struct pg_reuse {
	bool request_complete; /* the whole request was read from the client and queued */
	bool request_flushed;  /* and sent: nothing of it left in the send queue */
	bool early;            /* the response head came while request bytes were owed */
	bool resp_reusable;    /* the response allows keep-alive and ended at its framing
	                        * with no byte after it, on the copy path */
	bool head_request;     /* it answered HEAD */
	bool open;             /* not closed by either side */
	bool member;           /* the backend's epoch is unchanged and it is active */
	bool room;             /* the pool has room */
};

/* The connection may go back to the pool. */
bool pg_reuse_ok(const struct pg_reuse *r);

/* At the head of an early response (body bytes still owed), with rest
 * what is left of the request body (a Content-Length count, or a chunked
 * decoder's state): true to keep the client's connection (drop the rest
 * after the response), false to close it after the response. */
bool pg_early_keeps_client(const struct pg_frame *rest);

/* What the client's connection does after a response, the backend's or
 * the gateway's own (a 429 refusal may come before the body is read
 * whole): owed, body bytes are still to come, rest what is left of them.
 * The one rule for every answer that keeps a connection open. */
enum pg_after {
	PG_AFTER_NEXT,    /* read the next request */
	PG_AFTER_DISCARD, /* read and drop the rest of the body first */
	PG_AFTER_CLOSE,   /* "Connection: close" on the answer, then close */
};
enum pg_after pg_after_answer(bool keep_alive, bool owed, const struct pg_frame *rest);

#endif /* PG_BOUNDARY_H */
