// SPDX-License-Identifier: MIT
/* The route journal's writer (journal.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "lib/key.h"
#include "lib/names.h"
#include "router/strategy.h"
#include "sys/journal.h"

struct pg_journal {
	pthread_mutex_t mu; /* recursive: the caller's lock, the line's */
	FILE *f;
	uint64_t seq; /* the last request numbered */
	unsigned nworkers;
	uint64_t *pending; /* each worker's last routed request, not taken yet */
	char line[PG_JR_LINE_MAX];
};

struct pg_journal *pg_journal_open(const char *path, unsigned nworkers, char *err, size_t errlen)
{
	struct pg_journal *j = calloc(1, sizeof(*j));
	pthread_mutexattr_t a;

	if (!j || !(j->pending = calloc(nworkers ? nworkers : 1, sizeof(*j->pending)))) {
		free(j);
		snprintf(err, errlen, "--route-journal: out of memory");
		return NULL;
	}
	if (!(j->f = fopen(path, "w"))) {
		snprintf(err, errlen, "--route-journal %s: %s", path, strerror(errno));
		free(j->pending);
		free(j);
		return NULL;
	}
	j->nworkers = nworkers;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&j->mu, &a);
	pthread_mutexattr_destroy(&a);
	fprintf(j->f, "%s\n", PG_JR_MAGIC);
	return j;
}

void pg_journal_close(struct pg_journal *j)
{
	if (!j)
		return;
	fclose(j->f);
	pthread_mutex_destroy(&j->mu);
	free(j->pending);
	free(j);
}

void pg_journal_lock(struct pg_journal *j)
{
	if (j)
		pthread_mutex_lock(&j->mu);
}

void pg_journal_unlock(struct pg_journal *j)
{
	if (j)
		pthread_mutex_unlock(&j->mu);
}

/* e's line, under the lock. */
static void put(struct pg_journal *j, const struct pg_jr *e)
{
	size_t n;

	pthread_mutex_lock(&j->mu);
	n = pg_jr_format(j->line, sizeof(j->line), e);
	fwrite(j->line, 1, n, j->f);
	pthread_mutex_unlock(&j->mu);
}

void pg_journal_members(struct pg_journal *j, const struct pg_gateway *gw)
{
	const struct pg_state *st = gw->maps.state;
	struct pg_jr e = {.type = PG_JR_CONFIG};

	if (!j)
		return;
	snprintf(e.cfg.strategy, sizeof(e.cfg.strategy), "%s",
	         pg_strategy_flag((enum pg_strategy)st->strategy));
	e.cfg.prefix_length = st->prefix_length;
	e.cfg.threshold = st->concurrency_threshold;
	e.cfg.choices = st->ca_choices;
	e.cfg.capacity_blocks = st->ca_capacity_blocks;
	e.cfg.slots = gw->maps.ca_slots;
	e.cfg.load_signal = gw->router.load_signal;
	pthread_mutex_lock(&j->mu);
	put(j, &e);
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		const struct pg_backend *b = &gw->maps.backends[id];
		uint16_t f = __atomic_load_n(&b->flags, __ATOMIC_RELAXED);

		if (!(f & PG_BACKEND_ACTIVE) || (f & PG_BACKEND_DRAINING))
			continue;
		e = (struct pg_jr){.type = PG_JR_MEMBER, .id = id, .pool = b->pool};
		pg_backend_name(b, e.name, sizeof(e.name));
		put(j, &e);
	}
	pthread_mutex_unlock(&j->mu);
}

void pg_journal_route(struct pg_journal *j, unsigned worker, unsigned pool,
                      const struct pg_key *key, const struct pg_key_blocks *kb, uint64_t rnd,
                      uint32_t budget_ms, uint8_t prio, uint64_t now_ms, uint16_t id,
                      const struct pg_choice *choice)
{
	struct pg_jr e = {.type = PG_JR_ROUTE, .t = now_ms};
	struct pg_jr_route *r = &e.route;

	if (!j)
		return;
	*r = (struct pg_jr_route){.worker = worker,
	                          .pool = pool,
	                          .budget_ms = budget_ms,
	                          .prio = prio,
	                          .rnd = rnd,
	                          .hash = key->hash,
	                          .anchor = key->anchor,
	                          .tokens = key->tokens,
	                          .source = key->source,
	                          .id = id,
	                          .decision = choice->decision,
	                          .matched = choice->matched};
	if (kb) {
		r->kb_anchor = kb->anchor;
		r->anchor_len = kb->anchor_len;
		r->whole = kb->whole;
		r->n = kb->n;
		r->chain = kb->chain;
	}
	pthread_mutex_lock(&j->mu);
	e.seq = ++j->seq;
	if (worker < j->nworkers)
		j->pending[worker] = e.seq;
	put(j, &e);
	pthread_mutex_unlock(&j->mu);
}

uint64_t pg_journal_take(struct pg_journal *j, unsigned worker, uint64_t now_ns, uint16_t id,
                         uint32_t work)
{
	struct pg_jr e = {.type = PG_JR_TAKE, .t = now_ns, .id = id, .work = work};

	if (!j)
		return 0;
	pthread_mutex_lock(&j->mu);
	if (worker < j->nworkers) {
		e.seq = j->pending[worker];
		j->pending[worker] = 0;
	}
	put(j, &e);
	pthread_mutex_unlock(&j->mu);
	return e.seq;
}

void pg_journal_event(struct pg_journal *j, enum pg_jr_type type, uint64_t seq, uint64_t t)
{
	if (j)
		put(j, &(struct pg_jr){.type = type, .seq = seq, .t = t});
}

void pg_journal_verdict(struct pg_journal *j, uint64_t seq, unsigned kind, unsigned verdict)
{
	if (j)
		put(j, &(struct pg_jr){
		           .type = PG_JR_VERDICT, .seq = seq, .kind = kind, .verdict = verdict});
}

void pg_journal_flush(struct pg_journal *j)
{
	if (!j)
		return;
	pthread_mutex_lock(&j->mu);
	fflush(j->f);
	pthread_mutex_unlock(&j->mu);
}
