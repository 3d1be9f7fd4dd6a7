/* SPDX-License-Identifier: MIT */
/*
 * The route journal (--route-journal FILE): every input the workers and
 * the control tick give the routing core, and each decision, one line an
 * event (lib/journal.h), so that tools/tracesim --replay FILE can give its
 * routing core the same and show that it decides the same.
 *
 * For tests and investigations, not for production traffic: each event
 * takes a lock, and the caller holds it across the core's call and its
 * line (pg_journal_lock), so that the lines are in the order the core's
 * state changed, whichever thread changed it. What the health thread
 * stores (checks, /metrics scrapes) and a fleet's messages are not
 * journaled: a run to replay has them off (--health-check-path none
 * --metrics-scrape-interval 0, no fleet). A retried request's second
 * decision (pg_route_again) is not journaled: its take says SEQ 0.
 * Every function is a no-op on a NULL journal.
 */
#ifndef PG_SYS_JOURNAL_H
#define PG_SYS_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>
#include "lib/journal.h"

struct pg_gateway;
struct pg_journal;
struct pg_key;
struct pg_key_blocks;
struct pg_choice;

/* Opened (truncated) for nworkers workers; NULL with err set. */
struct pg_journal *pg_journal_open(const char *path, unsigned nworkers, char *err, size_t errlen);
/* Flushed and closed. */
void pg_journal_close(struct pg_journal *j);

/* Held across a core call and its line (recursive). */
void pg_journal_lock(struct pg_journal *j);
void pg_journal_unlock(struct pg_journal *j);

/* The routing configuration and the ring's members, at each rebuild. */
void pg_journal_members(struct pg_journal *j, const struct pg_gateway *gw);

/* A request routed by worker (router.h pg_router_out.routed): numbered,
 * its number pending for the worker's next take. */
void pg_journal_route(struct pg_journal *j, unsigned worker, unsigned pool,
                      const struct pg_key *key, const struct pg_key_blocks *kb, uint64_t rnd,
                      uint32_t budget_ms, uint8_t prio, uint64_t now_ms, uint16_t id,
                      const struct pg_choice *choice);
/* Worker's take of work on id: the number of the request it routed last
 * (0: none pending, a retry), which the ticket then carries. */
uint64_t pg_journal_take(struct pg_journal *j, unsigned worker, uint64_t now_ns, uint16_t id,
                         uint32_t work);
/* first, answered, due, cut, drop, release (seq: the ticket's), tick. */
void pg_journal_event(struct pg_journal *j, enum pg_jr_type type, uint64_t seq, uint64_t t);
void pg_journal_verdict(struct pg_journal *j, uint64_t seq, unsigned kind, unsigned verdict);
/* What was written reaches the file (the control tick, each 100 ms). */
void pg_journal_flush(struct pg_journal *j);

#endif /* PG_SYS_JOURNAL_H */
