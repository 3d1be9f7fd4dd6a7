/* SPDX-License-Identifier: MIT */
/*
 * What the parts of the HTTP state machine call of each other: request.c
 * reads requests (head, key body, streamed body); proxy.c is the rest of the
 * client side (dispatch, retries, errors, how a response's end or failure
 * reaches the client, timeouts); upstream.c the backend side (connections
 * and their pool, response heads and bodies).
 */
#ifndef PG_PROXY_INTERNAL_H
#define PG_PROXY_INTERNAL_H

#include "lib/buf.h"
#include "datapath/datapath.h"
#include "lib/forward.h"
#include "proxy/worker.h"


/* --- request.c -------------------------------------------------------------------- */
/* Run the client's request state machine as far as its input allows. */
void pg_client_advance(struct pg_worker *w, struct pg_client *c);

/* --- proxy.c ---------------------------------------------------------------------- */
/* Answer status with a JSON error and close (or just close mid-response). */
void pg_client_error(struct pg_worker *w, struct pg_client *c, int status, const char *msg);
/* Close gracefully: flush, shut our side, drain input for a while. */
void pg_client_linger(struct pg_worker *w, struct pg_client *c);
/* Send the request to backend id (a pooled connection unless fresh). */
void pg_attempt(struct pg_worker *w, struct pg_client *c, uint16_t id, unsigned decision,
		bool fresh);
/* The attempt on c->backend failed before a response byte reached the
 * client: retry elsewhere (or fresh) while possible, else answer 502. */
void pg_attempt_failed(struct pg_worker *w, struct pg_client *c, const char *why, bool mark_down);
/* The backend has sent the whole response: free the slot, pool or close u,
 * then serve the client's next request (or close it). */
void pg_response_end(struct pg_worker *w, struct pg_client *c, struct pg_upstream *u);
/* The backend failed mid-response: the client gets what was sent, then a close. */
void pg_backend_broke(struct pg_worker *w, struct pg_client *c);

/* --- upstream.c ------------------------------------------------------------------- */
struct pg_upstream *pg_upstream_new(struct pg_worker *w, uint16_t id, struct pg_client *c,
				    enum pg_dp_path path);
void pg_upstream_close(struct pg_worker *w, struct pg_upstream *u);
/* An idle keep-alive connection to backend id (NULL if none is usable). */
struct pg_upstream *pg_pool_get(struct pg_worker *w, uint16_t id);
void pg_pool_put(struct pg_worker *w, struct pg_upstream *u);
void pg_pool_remove(struct pg_worker *w, struct pg_upstream *u);
/* Close pooled connections idle too long or to a changed/removed member. */
void pg_pool_tick(struct pg_worker *w);
/* A finished connection that was asked to close (spliced response): wait
 * for the backend's FIN before closing, so TIME_WAIT stays on its side and
 * not on the ephemeral port each spliced request binds; closed by its EOF
 * or after PG_LINGER_MS. */
void pg_upstream_linger(struct pg_worker *w, struct pg_upstream *u);
void pg_pool_close_all(struct pg_worker *w);

#endif /* PG_PROXY_INTERNAL_H */
