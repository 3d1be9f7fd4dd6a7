// SPDX-License-Identifier: MIT
/*
 * tracesim: a fleet of gateways (tracesim.h). Each gateway tells the others
 * what it has queued on an instance whenever that changes (a LOAD entry,
 * as user/fleet/fleet.c publishes it, at most PG_FLEET_POLL_MS after the
 * change, with the ages of its head and latest first token there), each
 * cache decision it makes (a CACHE entry) and each first token it learned
 * an instance's speed from (a FIT entry; both in batches every
 * PG_FLEET_CACHE_GAP_MS); they arrive --load-delay and --cache-delay ms
 * later. A receiver keeps each peer's last LOAD entry and sums them into
 * its table's peer_* fields, as pg_fleet_peers_sum does, and takes in the
 * ages (pg_work_heard), CACHE entries (pg_ca_tick, each a request, and
 * pg_ca_record) and FIT entries (pg_load_observe), as the fleet's NATS
 * callbacks do.
 */
#include <stdlib.h>
#include <string.h>

#include "tracesim.h"

static void push(struct ts_fifo *q, const struct ts_msg *m)
{
	if (q->tail == q->cap) {
		/* compact, then grow */
		memmove(q->m, q->m + q->head, (q->tail - q->head) * sizeof(*q->m));
		q->tail -= q->head;
		q->head = 0;
		if (q->tail == q->cap) {
			q->cap = q->cap ? 2 * q->cap : 1024;
			q->m = realloc(q->m, q->cap * sizeof(*q->m));
			if (!q->m)
				abort();
		}
	}
	q->m[q->tail++] = *m;
}

static uint64_t delay_ns(double ms)
{
	return (uint64_t)(ms * 1e6);
}

void ts_fleet_changed(struct ts_world *w, unsigned g, uint16_t b)
{
	const struct pg_backend *x = &w->gw[g].be[b];
	struct ts_msg m = {.sent_ns = w->now,
	                   .due_ns = w->now + delay_ns(w->o.load_delay),
	                   .from = (uint8_t)g,
	                   .b = b,
	                   .load = {.in_flight = x->in_flight,
	                            .prefill_reqs = x->prefill_reqs,
	                            .prefill_tokens = x->prefill_tokens}};

	if (w->o.gateways < 2)
		return;
	pg_work_ages(x, w->now, &m.head_age_us, &m.first_age_us);
	push(&w->loadq, &m);
}

void ts_fleet_decided(struct ts_world *w, unsigned g, const uint64_t *chain, uint32_t n, uint16_t b)
{
	struct ts_msg m = {
	    .due_ns = w->now + delay_ns(w->o.cache_delay), .from = (uint8_t)g, .b = b, .n = n};

	if (w->o.gateways < 2)
		return;
	m.chain = malloc((n ? n : 1) * sizeof(*chain));
	if (!m.chain)
		abort();
	memcpy(m.chain, chain, n * sizeof(*chain));
	push(&w->cacheq, &m);
}

void ts_fleet_learned(struct ts_world *w, unsigned g, uint16_t b, const struct pg_fit_obs *obs)
{
	if (w->o.gateways < 2)
		return;
	push(&w->fitq, &(struct ts_msg){.sent_ns = w->now,
	                                .due_ns = w->now + delay_ns(w->o.cache_delay),
	                                .from = (uint8_t)g,
	                                .b = b,
	                                .obs = *obs});
}

/* Receiver r's peer_* fields of instance b: its peers' last entries summed. */
static void sum_peers(struct ts_world *w, unsigned r, uint16_t b)
{
	struct ts_gw *gw = &w->gw[r];
	struct pg_backend *x = &gw->be[b];
	struct pg_fleet_load s = {0};
	uint32_t np = 0;

	for (unsigned p = 0; p < w->o.gateways; p++) {
		const struct pg_fleet_load *l = &gw->heard[p][b];

		if (p == r)
			continue;
		np++;
		s.in_flight += l->in_flight > 0 ? l->in_flight : 0;
		s.prefill_reqs += l->prefill_reqs;
		s.prefill_tokens += l->prefill_tokens;
	}
	x->peer_in_flight = s.in_flight;
	x->peer_prefill_reqs = s.prefill_reqs;
	x->peer_prefill_tokens = s.prefill_tokens;
	x->peer_gateways = np;
}

void ts_fleet_deliver(struct ts_world *w)
{
	struct ts_fifo *q = &w->loadq;

	for (; q->head < q->tail && q->m[q->head].due_ns <= w->now; q->head++) {
		const struct ts_msg *m = &q->m[q->head];

		for (unsigned r = 0; r < w->o.gateways; r++) {
			if (r == m->from)
				continue;
			w->gw[r].heard[m->from][m->b] = m->load;
			sum_peers(w, r, m->b);
			/* the ages as of its sending: the real message's are taken
			 * when it leaves, and it crosses a network in well under
			 * a millisecond */
			pg_work_heard(&w->gw[r].be[m->b], m->sent_ns, m->head_age_us,
			              m->first_age_us);
		}
	}
	q = &w->cacheq;
	for (; q->head < q->tail && q->m[q->head].due_ns <= w->now; q->head++) {
		struct ts_msg *m = &q->m[q->head];

		for (unsigned r = 0; r < w->o.gateways; r++) {
			struct pg_ca_index ix = pg_router_index(&w->gw[r].r);

			if (r == m->from)
				continue;
			pg_ca_tick(&ix); /* a request of the fleet's */
			pg_ca_record(&ix, m->chain, m->n, m->b);
		}
		free(m->chain);
	}
	q = &w->fitq;
	for (; q->head < q->tail && q->m[q->head].due_ns <= w->now; q->head++) {
		const struct ts_msg *m = &q->m[q->head];

		for (unsigned r = 0; r < w->o.gateways; r++) {
			if (r == m->from)
				continue;
			pg_load_observe(&w->gw[r].r, m->b, 1, &m->obs, w->now);
		}
	}
}
