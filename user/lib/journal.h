/* SPDX-License-Identifier: MIT */
/*
 * The route journal's lines (--route-journal FILE): what a gateway gave
 * its routing core, in the order the core saw it, so that tools/tracesim
 * --replay can give its own routing core the same and compare the
 * decisions. Pure: one line formatted into a buffer, one parsed; the
 * writer is sys/journal.c, the reader tools/tracesim/replay.c.
 *
 * One event a line, words separated by single spaces, hashes in hex:
 *
 *   prefixgate-journal 2
 *   config STRATEGY PREFIX_LENGTH THRESHOLD CHOICES CAPACITY_BLOCKS SLOTS LOAD_SIGNAL
 *   member ID POOL NAME                   a member of the ring (its address)
 *   route SEQ T_MS WORKER POOL RND BUDGET_MS PRIO HASH ANCHOR TOKENS SOURCE
 *         KB_ANCHOR ANCHOR_LEN WHOLE N ID DECISION MATCHED CHAIN[0] .. CHAIN[N-1]
 *                                         a request routed (pg_route_key): the
 *                                         key and blocks it was given, its
 *                                         deadline and the flow control
 *                                         class it is routed as (lib/flow.h
 *                                         enum pg_prio; route.h), its
 *                                         clock, what was chosen
 *   take SEQ T_NS ID WORK                 its work queued (pg_load_take) and
 *                                         an in-flight slot taken
 *   first SEQ T_NS                        its first token (pg_load_first)
 *   answered SEQ T_NS                     its answer's head (pg_load_answered)
 *   due SEQ T_MS                          it left the queue unseen (pg_load_due)
 *   cut SEQ T_MS                          its deadline cut it (pg_load_cut)
 *   drop SEQ                              its work dropped (pg_load_drop)
 *   verdict SEQ KIND VERDICT              its cache verdict (pg_capacity_answer)
 *   release SEQ                           its in-flight slot given back
 *   tick T_MS                             the core's periodic work (pg_router_tick)
 *
 * SEQ numbers the routed requests from 1; 0 in take: a request the
 * journal did not see routed (a retry: pg_route_again is not journaled).
 */
#ifndef PG_LIB_JOURNAL_H
#define PG_LIB_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define PG_JR_MAGIC "prefixgate-journal 2" /* 2: PRIO in route */
/* A line's longest: a route with PG_CA_MAX_BLOCKS chain hashes. */
#define PG_JR_LINE_MAX (512 + 17 * 512)

enum pg_jr_type {
	PG_JR_CONFIG = 0,
	PG_JR_MEMBER,
	PG_JR_ROUTE,
	PG_JR_TAKE,
	PG_JR_FIRST,
	PG_JR_ANSWERED,
	PG_JR_DUE,
	PG_JR_CUT,
	PG_JR_DROP,
	PG_JR_VERDICT,
	PG_JR_RELEASE,
	PG_JR_TICK,
	PG_JR_TYPES,
};

struct pg_jr_config {
	char strategy[32]; /* its flag spelling (lib/names.h pg_strategy_flag) */
	uint32_t prefix_length, threshold, choices, capacity_blocks, slots, load_signal;
};

struct pg_jr_route {
	uint32_t worker, pool, budget_ms, prio;
	uint64_t rnd;
	/* the key as given (struct pg_key's fields the core reads) */
	uint64_t hash, anchor;
	uint32_t tokens, source;
	/* its blocks (struct pg_key_blocks) */
	uint64_t kb_anchor, whole;
	uint32_t anchor_len, n;
	const uint64_t *chain; /* n entries (parse: into the caller's buffer) */
	/* what was chosen */
	uint32_t id, decision, matched;
};

struct pg_jr {
	enum pg_jr_type type;
	uint64_t seq;
	uint64_t t; /* ns (take, first, answered) or ms (route, due, cut, tick) */
	uint32_t id, pool, work, kind, verdict;
	char name[64]; /* member */
	struct pg_jr_config cfg;
	struct pg_jr_route route;
};

/* e as one line with its '\n' into buf (cap at least PG_JR_LINE_MAX);
 * its length. */
size_t pg_jr_format(char *buf, size_t cap, const struct pg_jr *e);

/* One line (without its '\n') into e; a route's chain into chain
 * (PG_CA_MAX_BLOCKS entries). 0, or -1 when it is no journal line (the
 * magic line included: see PG_JR_MAGIC). */
int pg_jr_parse(const char *line, struct pg_jr *e, uint64_t *chain);

#endif /* PG_LIB_JOURNAL_H */
