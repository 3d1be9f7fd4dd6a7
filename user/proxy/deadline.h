/* SPDX-License-Identifier: MIT */
/*
 * A deadline after a request was sent on (doc/routing.md "Deadlines and
 * refusals"): flow control sends a request on only when its first token is
 * predicted within its deadline (or its instance is explored, its speed not
 * measured); a prediction can be wrong, so the deadline holds after that
 * too. A request whose first token has not come by its deadline, while no
 * byte of its answer has reached the client, is answered 429
 * (deadline_exceeded) and its backend connection closed, so the engine
 * stops it. A streamed 2xx answer's head is held until its first token for
 * this (a client with a deadline gets no head it cannot use). The instance
 * learns nothing of its speed from it but that it is slower: one explored
 * is not explored again for a while (router/load.h pg_load_cut).
 */
#ifndef PG_PROXY_DEADLINE_H
#define PG_PROXY_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>
#include "proxy/conn.h"

/* c's request is sent on with budget_ms to its deadline (0: none). */
void pg_deadline_arm(struct pg_worker *w, struct pg_client *c, uint32_t budget_ms);

/* c's answer's first token has not come and nothing of the answer reached
 * its client (its head is not out, or held for the first token). */
static inline bool pg_deadline_open(const struct pg_exchange *x)
{
	return x->cut_ms && (!x->resp_started || x->head_wait);
}

/* Milliseconds until the next deadline of a request of w sent on
 * (UINT32_MAX: none), so the loop wakes up for it. */
uint32_t pg_deadline_next_ms(const struct pg_worker *w);

/* Cut the requests of w whose deadline passed (the loop runs it when
 * pg_deadline_next_ms says 0). */
void pg_deadline_run(struct pg_worker *w);

#endif /* PG_PROXY_DEADLINE_H */
