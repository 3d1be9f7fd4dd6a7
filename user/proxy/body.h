/* SPDX-License-Identifier: MIT */
/*
 * A request body held for its key, until the request is routed
 * (client.c's PG_C_KEY state); its size limit and the chunked decoding
 * step, which the rest of the body goes through too (PG_C_STREAM).
 */
#ifndef PG_PROXY_BODY_H
#define PG_PROXY_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/http.h"

struct pg_worker;
struct pg_client;
struct pg_exchange;
struct pg_route_input;

/* A body of size bytes is past --max-body-size: answered 413 (or closed
 * once answering), true. */
bool pg_body_too_big(struct pg_worker *w, struct pg_client *c, uint64_t size);

/* One step of decoding a chunked body from c->in + off (http.h
 * pg_chunked_feed: *used bytes used, data at *doff of *dlen bytes), the
 * data counted and the end marked (x->ch_done); PG_CHUNKED_ERROR once the
 * gateway answered: 400 for bad framing, 413 past --max-body-size. */
enum pg_chunked_rc pg_body_chunk_step(struct pg_worker *w, struct pg_client *c, size_t off,
                                      size_t *used, size_t *doff, size_t *dlen);

/* Decode more of a chunked body from c->in into c->x.kbuf, for the key.
 * 1: the key has what it needs; 0: not yet; -1: answered (an error). */
int pg_body_chunked(struct pg_worker *w, struct pg_client *c);

/* The request is routed (or waits, queue.h) with the body held so far,
 * n bytes of c->in for a Content-Length body: it goes with the head, the
 * input buffer itself taken over (a 32 KiB prompt is not copied again),
 * and what follows the body in it (a pipelined request) moved to a buffer
 * of its own; a chunked one re-framed into x->fwd (forward.h), its decoded
 * copy x->kbuf left for the caller to free. True when the whole body is
 * then held. */
bool pg_body_take(struct pg_worker *w, struct pg_client *c, size_t n);

/* Parse what is held of the body's JSON so far (json.h pg_json_stream,
 * into x->ahead), from PG_PARSE_AHEAD_MIN bytes on, so that routing is
 * left only its last piece. A routing config changed in between, or a
 * body the key will not parse, only wastes the parse: the key checks the
 * parse's window and length (key.h pg_key_compute_ahead). */
void pg_parse_ahead(struct pg_worker *w, struct pg_exchange *x, const struct pg_route_input *in);

/* Drop x's parse made as the body arrived, if any: kept, with its tokens,
 * among the worker's spares (w->ahead_spare) for the next body, unless
 * they are full or its tokens grew past PG_SPARE_KEEP. */
void pg_parse_ahead_end(struct pg_worker *w, struct pg_exchange *x);

/* Free the worker's spare parses (at its end). */
void pg_parse_ahead_spares_free(struct pg_worker *w);

#endif /* PG_PROXY_BODY_H */
