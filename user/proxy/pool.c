// SPDX-License-Identifier: MIT
/*
 * Backend connections between requests (conn.h): the pool of idle
 * keep-alive ones, per backend, and the lingering ones, which wait for the
 * backend's FIN after a spliced response.
 */
#include "datapath/datapath.h"
#include "lib/boundary.h"
#include "proxy/worker_state.h"
#include "proxy/sock.h"

bool pg_pool_reusable(const struct pg_worker *w, const struct pg_upstream *u, bool request_complete,
                      bool head_request)
{
	const struct pg_backend *b = &w->gw->maps.backends[u->backend];
	const struct pg_reuse r = {
	    .request_complete = request_complete,
	    .request_flushed = !u->s.qbytes,
	    .early = u->early,
	    .resp_reusable = u->keep_alive,
	    .head_request = head_request,
	    .open = !u->s.closed && !u->peer_closed,
	    .member = u->epoch == b->epoch && (b->flags & PG_BACKEND_ACTIVE),
	    .room = w->pool_len[u->backend] < PG_POOL_MAX,
	};

	return pg_reuse_ok(&r);
}

static void list_remove(struct pg_upstream **pp, struct pg_upstream *u)
{
	while (*pp && *pp != u)
		pp = &(*pp)->pool_next;
	if (*pp)
		*pp = u->pool_next;
	u->pool_next = NULL;
}

void pg_pool_remove(struct pg_worker *w, struct pg_upstream *u)
{
	if (u->state == PG_U_IDLE) {
		list_remove(&w->pool[u->backend], u);
		w->pool_len[u->backend]--;
	} else if (u->state == PG_U_LINGER) {
		list_remove(&w->linger, u);
	} else {
		return;
	}
	u->state = PG_U_DONE; /* on no list */
}

struct pg_upstream *pg_pool_get(struct pg_worker *w, uint16_t id)
{
	struct pg_upstream *u;

	while ((u = w->pool[id])) {
		pg_pool_remove(w, u);
		if (u->epoch == w->gw->maps.backends[id].epoch && !u->s.closed) {
			u->reused = true;
			return u;
		}
		pg_upstream_close(w, u);
	}
	return NULL;
}

void pg_pool_put(struct pg_worker *w, struct pg_upstream *u)
{
	u->state = PG_U_IDLE;
	u->reused = false;
	u->idle_since_ms = w->now_ms;
	u->pool_next = w->pool[u->backend];
	w->pool[u->backend] = u;
	w->pool_len[u->backend]++;
}

void pg_upstream_linger(struct pg_worker *w, struct pg_upstream *u)
{
	pg_dp_upstream_closing(w, u); /* kernel state goes now: nothing more to splice */
	u->c = NULL;
	u->state = PG_U_LINGER;
	u->idle_since_ms = w->now_ms;
	u->pool_next = w->linger;
	w->linger = u;
	pg_sock_recv(w, &u->s); /* its EOF (or any byte) closes it */
}

void pg_pool_tick(struct pg_worker *w)
{
	const struct pg_backend *bs = w->gw->maps.backends;

	for (struct pg_upstream *u = w->linger, *un; u; u = un) {
		un = u->pool_next;
		if (w->now_ms - u->idle_since_ms > PG_LINGER_MS)
			pg_upstream_close(w, u);
	}
	for (unsigned id = 1, hwm = pg_router_hwm(&w->gw->router); id <= hwm; id++) {
		struct pg_upstream *u, *un;

		for (u = w->pool[id]; u; u = un) {
			un = u->pool_next;
			if (w->now_ms - u->idle_since_ms > PG_POOL_IDLE_MS ||
			    u->epoch != bs[id].epoch || !(bs[id].flags & PG_BACKEND_ACTIVE))
				pg_upstream_close(w, u);
		}
	}
}

void pg_pool_close_all(struct pg_worker *w)
{
	while (w->linger)
		pg_upstream_close(w, w->linger);
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++)
		while (w->pool[id])
			pg_upstream_close(w, w->pool[id]);
}
