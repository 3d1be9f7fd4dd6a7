// SPDX-License-Identifier: MIT
/*
 * A backend's slot and load ticket (conn.h): the in-flight slot and the
 * work an attempt takes, the first token, the answer, the work's end.
 * Each change of the routing core's state here is journaled with it,
 * under the journal's lock (sys/journal.h; no-ops without one), so that
 * a journal's lines come in the order the core's state changed.
 */
#include "proxy/queue.h"
#include "proxy/worker_state.h"
#include "router/capacity.h"
#include "router/load.h"
#include "sys/journal.h"

void pg_slot_take(struct pg_worker *w, uint16_t id, unsigned decision, uint32_t work,
                  struct pg_load_ticket *t, bool *counted)
{
	struct pg_journal *j = w->gw->journal;
	const uint64_t now = pg_now_ns();

	pg_journal_lock(j);
	pg_inflight_take(&w->gw->router, id, decision);
	*counted = true;
	pg_load_take(&w->gw->router, id, work, t, now);
	t->journal = pg_journal_take(j, w->id, now, id, work);
	pg_journal_unlock(j);
}

void pg_slot_give(struct pg_worker *w, uint16_t id, struct pg_load_ticket *t, bool *counted)
{
	pg_exchange_no_token(w, t);
	if (*counted) {
		pg_journal_lock(w->gw->journal);
		pg_inflight_release(&w->gw->router, id);
		if (t->seq)
			pg_capacity_done(&w->gw->router, id, t->seq);
		t->seq = 0;
		pg_journal_event(w->gw->journal, PG_JR_RELEASE, t->journal, 0);
		pg_journal_unlock(w->gw->journal);
		*counted = false;
	}
}

void pg_exchange_first_token(struct pg_worker *w, struct pg_client *c, struct pg_load_ticket *t,
                             uint64_t now_ns)
{
	if (!pg_load_pending(t))
		return;
	pg_journal_lock(w->gw->journal);
	pg_load_first(&w->gw->router, w->id, &w->stats->ttft_err, t, now_ns);
	pg_journal_event(w->gw->journal, PG_JR_FIRST, t->journal, now_ns);
	pg_journal_unlock(w->gw->journal);
	if (t == &c->x.load) /* the client's first token (a prefill leg's is not) */
		c->x.ttft_ns = now_ns;
	pg_queue_room(w);
}

void pg_exchange_answered(struct pg_worker *w, struct pg_client *c, struct pg_load_ticket *t,
                          uint64_t now_ns)
{
	pg_journal_lock(w->gw->journal);
	pg_load_answered(&w->gw->router, t, now_ns);
	pg_journal_event(w->gw->journal, PG_JR_ANSWERED, t->journal, now_ns);
	pg_journal_unlock(w->gw->journal);
	if (t == &c->x.load)
		c->x.ttft_ns = now_ns;
	pg_queue_room(w);
}

void pg_exchange_due(struct pg_worker *w, struct pg_load_ticket *t, uint64_t now_ms)
{
	bool due;

	pg_journal_lock(w->gw->journal);
	due = pg_load_due(&w->gw->router, t, now_ms);
	if (due)
		pg_journal_event(w->gw->journal, PG_JR_DUE, t->journal, now_ms);
	pg_journal_unlock(w->gw->journal);
	if (due)
		pg_queue_room(w);
}

void pg_exchange_no_token(struct pg_worker *w, struct pg_load_ticket *t)
{
	if (!pg_load_pending(t))
		return;
	pg_journal_lock(w->gw->journal);
	pg_load_drop(&w->gw->router, t);
	pg_journal_event(w->gw->journal, PG_JR_DROP, t->journal, 0);
	pg_journal_unlock(w->gw->journal);
	pg_queue_room(w);
}
