// SPDX-License-Identifier: MIT
/* A deadline after a request was sent on (deadline.h). */
#include <stdlib.h>
#include "proxy/deadline.h"
#include "proxy/queue.h"
#include "proxy/worker_state.h"
#include "sys/journal.h"

void pg_deadline_arm(struct pg_worker *w, struct pg_client *c, uint32_t budget_ms)
{
	if (!budget_ms)
		return;
	c->x.cut_ms = w->now_ms + budget_ms;
	if (!w->cut_next_ms || c->x.cut_ms < w->cut_next_ms)
		w->cut_next_ms = c->x.cut_ms;
}

uint32_t pg_deadline_next_ms(const struct pg_worker *w)
{
	if (!w->cut_next_ms)
		return UINT32_MAX;
	return w->cut_next_ms > w->now_ms ? (uint32_t)(w->cut_next_ms - w->now_ms) : 0;
}

/* c's first token did not come by its deadline: 429, and the attempt and
 * its backend connection end with it (pg_client_throttled resets the
 * exchange). */
static void cut(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	pg_journal_lock(w->gw->journal); /* sys/journal.h */
	pg_load_cut(&w->gw->router, &x->load, w->now_ms);
	pg_journal_event(w->gw->journal, PG_JR_CUT, x->load.journal, w->now_ms);
	pg_journal_unlock(w->gw->journal);
	free(x->head_wait);
	x->head_wait = NULL;
	x->resp_started = false; /* nothing of the answer went out */
	if (c->state == PG_C_STREAM)
		x->keep_alive = false; /* its body still on its way: the 429 closes */
	pg_queue_cut(w, c);
}

void pg_deadline_run(struct pg_worker *w)
{
	struct pg_client *c, *next;
	uint64_t soonest = 0;

	for (c = w->busy.head; c; c = next) {
		const struct pg_exchange *x = &c->x;

		next = c->next;
		if ((c->state != PG_C_WAIT && c->state != PG_C_STREAM) || !pg_deadline_open(x))
			continue;
		if (w->now_ms >= x->cut_ms)
			cut(w, c);
		else if (!soonest || x->cut_ms < soonest)
			soonest = x->cut_ms;
	}
	w->cut_next_ms = soonest;
}
