/* SPDX-License-Identifier: MIT */
/*
 * A client connection's input: the bytes received and not yet consumed,
 * c->in[0, c->in_len) inside the buffer c->in_buf of c->in_cap bytes
 * (conn.h). Consuming moves c->in forward, not the bytes; room is made at
 * the front before the buffer grows. Buffers come from, and go back to,
 * the worker's spares (lib/spare.h).
 */
#ifndef PG_PROXY_INPUT_H
#define PG_PROXY_INPUT_H

#include <stddef.h>

struct pg_client;
struct pg_spares;

/* The first n unconsumed bytes are used up. */
void pg_in_consume(struct pg_client *c, size_t n);

/* Room for need bytes from c->in, and for reserve (what it is about to
 * hold) if more: the unconsumed bytes move to the front, or to a new
 * buffer, copied once either way. */
void pg_in_room(struct pg_spares *sp, struct pg_client *c, size_t need, size_t reserve);

/* Received bytes (n > 0) join the unconsumed ones; reserve as above. */
void pg_in_append(struct pg_spares *sp, struct pg_client *c, const char *data, size_t n,
                  size_t reserve);

#endif /* PG_PROXY_INPUT_H */
