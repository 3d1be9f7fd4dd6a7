/* SPDX-License-Identifier: MIT */
/*
 * A worker's sockets whose multishot receive ended for lack of provided
 * buffers (ENOBUFS), waiting to be re-armed: first in, first out, so a
 * socket that starves again goes to the back and none waits for ever
 * behind others. Empty when head is NULL (a zeroed struct is empty).
 */
#ifndef PG_STARVED_H
#define PG_STARVED_H

#include <stddef.h>
#include "proxy/io.h"

struct pg_starved {
	struct pg_sock *head, *tail;
};

static inline void pg_starved_push(struct pg_starved *q, struct pg_sock *s)
{
	if (s->starved)
		return;
	s->starved = true;
	s->starved_next = NULL;
	if (q->tail)
		q->tail->starved_next = s;
	else
		q->head = s;
	q->tail = s;
}

/* The oldest, taken off the queue; NULL if none. */
static inline struct pg_sock *pg_starved_pop(struct pg_starved *q)
{
	struct pg_sock *s = q->head;

	if (!s)
		return NULL;
	q->head = s->starved_next;
	if (!q->head)
		q->tail = NULL;
	s->starved = false;
	return s;
}

/* s off the queue wherever it is (closing it): a walk, rare. */
static inline void pg_starved_remove(struct pg_starved *q, struct pg_sock *s)
{
	struct pg_sock *prev = NULL;

	if (!s->starved)
		return;
	for (struct pg_sock *p = q->head; p; prev = p, p = p->starved_next) {
		if (p != s)
			continue;
		if (prev)
			prev->starved_next = s->starved_next;
		else
			q->head = s->starved_next;
		if (q->tail == s)
			q->tail = prev;
		break;
	}
	s->starved = false;
}

#endif /* PG_STARVED_H */
