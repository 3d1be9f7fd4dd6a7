/* SPDX-License-Identifier: MIT */
/*
 * A worker thread: one io_uring, its SO_REUSEPORT listeners, its client
 * connections and its pool of keep-alive backend connections. No blocking
 * syscall on the request path: accept, recv (multishot, provided buffers),
 * connect and send all go through the ring.
 *
 * worker.c holds the event loop and the io_uring implementation of the
 * I/O actions (struct pg_io, io.h); conn.h the HTTP state machine that
 * runs on them. The state machine never calls itself back: what must not
 * run inside an event (a response's end, the next pipelined request) goes
 * on the run list, drained after each batch of completions.
 */
#ifndef PG_WORKER_H
#define PG_WORKER_H

#include <stddef.h>
#include "gateway.h"
#include "proxy/worker_state.h"

/* Create the listener (in the caller's thread, so bind errors stop startup)
 * and start the thread. */
int pg_worker_start(struct pg_gateway *gw, unsigned id, struct pg_worker **out, char *err,
                    size_t errlen);
void pg_worker_join(struct pg_worker *w);

/* The worker's listeners (listen.c): --listen's, and --tls-listen's
 * when given (worker 0 checks first that no other process listens
 * there). 0, or -1 with err set; pg_listeners_close closes what is open. */
int pg_listeners_open(struct pg_worker *w, char *err, size_t errlen);
void pg_listeners_close(struct pg_worker *w);

/* Free the memory kept for the next requests (at the worker's end). */
void pg_worker_spares_free(struct pg_worker *w);

/* The io_uring implementation of struct pg_io. */
extern const struct pg_io pg_uring_io;

#endif /* PG_WORKER_H */
