// SPDX-License-Identifier: MIT
/* A request routed and sent on (conn.h). */
#include <stdlib.h>
#include "sys/journal.h"
#include "proxy/tracing.h"
#include "proxy/body.h"
#include "proxy/conn.h"
#include "proxy/deadline.h"
#include "proxy/pd.h"
#include "proxy/queue.h"
#include "proxy/quota.h"
#include "proxy/worker_state.h"
#include "state/pools.h"

#define STAT(w, f) __atomic_fetch_add(&(w)->stats->f, 1, __ATOMIC_RELAXED)

/* x's pair (pex, dex: instances tried; may be NULL), by its pool's decode
 * set and pd-min-tokens: x->pd->route, its choices. */
static bool route_pd(struct pg_worker *w, struct pg_exchange *x, const struct pg_route_input *in,
                     const struct pg_idset *pex, const struct pg_idset *dex)
{
	const struct pg_pool_cfg *pc = &pg_pools_table(w->gw)->pool[in->pool];

	x->pd->route =
	    (uint8_t)pg_route_pd(&w->gw->router, w->id, in, pc->decode, pc->pd_min_tokens, pex, dex,
	                         pg_worker_rand(w), &x->key, &x->pd->pchoice, &x->choice);
	return x->pd->route != PG_PDR_NONE;
}

/* The routing call: the backend chosen (a prefill/decode pool's: the
 * decode instance, the prefill one in x->pd), 0 when none is. */
static uint16_t route(struct pg_worker *w, struct pg_client *c, const struct pg_route_input *in)
{
	struct pg_exchange *x = &c->x;

	if (!pg_pd_pool(w->gw, in->pool)) {
		uint16_t id;

		/* the decision and its journal line at once (sys/journal.h) */
		pg_journal_lock(w->gw->journal);
		id = pg_route_worker(&w->gw->router, w->id, in, NULL, pg_worker_rand(w), &x->key,
		                     &x->choice);
		pg_journal_unlock(w->gw->journal);
		return id;
	}
	x->pd = pg_pd_new(w->gw, in->pool);
	return route_pd(w, x, in, NULL, NULL) ? x->choice.backend : 0;
}

/* The latencies of the decision that ended at now: the routing's, from
 * its first byte, its wait in the queue (x->queued_ns to t_ns) apart; the
 * decision's own, from t_ns. One clock: no difference can go negative. */
static void record_latency(struct pg_worker *w, struct pg_exchange *x, uint64_t t_ns, uint64_t now)
{
	const uint64_t waited = x->queued_ns ? t_ns - x->queued_ns : 0;

	x->route_ns = now - x->t0_ns - waited;
	pg_stats_route_latency(w->stats, x->route_ns);
	pg_stats_decide_latency(w->stats, now - t_ns);
}

bool pg_dispatch(struct pg_worker *w, struct pg_client *c, struct pg_route_input *in, size_t n,
                 uint64_t t_ns)
{
	struct pg_exchange *x = &c->x;
	uint16_t id = route(w, c, in);
	uint64_t now = pg_now_ns();
	bool whole;

	pg_parse_ahead_end(w, x);
	record_latency(w, x, t_ns, now);
	pg_trace_routed(w, x, &x->trace, t_ns, now);
	if (x->key.ahead)
		STAT(w, parsed_ahead);
	if (x->key.fallback)
		STAT(w, key_fallbacks);
	if (!id) {
		if (x->choice.late)
			pg_queue_late(w, c);
		else
			pg_client_error(
			    w, c, 502, x->pd ? "no healthy decode instance" : "no healthy backend");
		return false;
	}
	pg_queue_charge(w, c, x->pd && x->pd->route == PG_PDR_PAIR ? &x->pd->pchoice : &x->choice);
	pg_quota_routed(w, c, in);
	pg_deadline_arm(w, c, in->budget_ms);
	/* (one that waited took its body, whole, to wait with it) */
	whole = x->queued_ns || pg_body_take(w, c, n);
	if (x->pd)
		return pg_pd_start(w, c, whole);
	free(x->kbuf);
	x->kbuf = NULL;
	x->klen = x->kcap = 0;
	c->state = whole ? PG_C_WAIT : PG_C_STREAM;
	pg_attempt(w, c, id, x->choice.decision, false);
	return true;
}

/* A prefill/decode request's pair routed again after its decode leg
 * failed: its body is held whole (pd.h). */
static bool route_pair(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;
	struct pg_route_input in = {.api = (enum pg_api)x->api,
	                            .header_key = {x->hdr_key, x->hdr_key_len},
	                            .body = pd->body,
	                            .body_len = pd->body_len,
	                            .complete = true,
	                            .pool = x->pool > 0 ? (unsigned)x->pool : 0,
	                            .scratch = &w->key_scratch};

	return route_pd(w, x, &in, &pd->ptried, &pd->dtried);
}

void pg_dispatch_again(struct pg_worker *w, struct pg_client *c, enum pg_again what)
{
	struct pg_exchange *x = &c->x;
	struct pg_pd_x *pd = x->pd;
	uint16_t id;

	switch (what) {
	case PG_AGAIN_ATTEMPT:
		id = pg_route_again(&w->gw->router, &x->key, &x->tried, pg_worker_rand(w),
		                    &x->choice);
		if (!id) {
			pg_client_error(w, c, 502, "no healthy backend");
			return;
		}
		pg_attempt(w, c, id, PG_DEC_RETRY, false);
		return;
	case PG_AGAIN_PREFILL:
		/* The decode instance stays: nothing it was chosen for changed,
		 * and choosing it again would find the prompt it was only just
		 * sent, recorded as cached there, and send it alone (the prefill
		 * instance's choice is not recorded again, as no retry's is). */
		if (pg_route_again(&w->gw->router, &x->key, &pd->ptried, pg_worker_rand(w),
		                   &pd->pchoice)) {
			pd->route = PG_PDR_PAIR;
			pg_pd_send(w, c);
			return;
		}
		__attribute__((fallthrough)); /* no other prefill instance */
	case PG_AGAIN_ALONE:
		/* A re-dispatch after failed attempts, whatever chose its decode
		 * instance; its work there is its whole prompt (less what that
		 * instance was believed to hold when it was chosen). */
		pd->route = PG_PDR_ALONE;
		x->choice.decision = PG_DEC_RETRY;
		pg_pd_send(w, c);
		return;
	case PG_AGAIN_PAIR:
		if (!route_pair(w, c)) {
			pg_client_error(w, c, 502, "no healthy decode instance");
			return;
		}
		pg_pd_send(w, c);
		return;
	}
}
