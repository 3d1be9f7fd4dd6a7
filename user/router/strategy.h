/* SPDX-License-Identifier: MIT */
/*
 * The strategies, pure, one file each behind one table of operations:
 * random.c (RANDOM), least.c (LEAST_OUTSTANDING_REQUESTS), prefix.c
 * (PREFIX_AWARE) and cache.c (CACHE_AWARE). Each is given one decision's
 * inputs (struct pg_pick: the routing config, a snapshot of the backend
 * table, the key's ring candidates, and for cache_aware what the block
 * index says) and picks one backend and says why. No I/O, no allocation;
 * the caller (route.c) supplies the clock, the random number, the ring
 * and the index.
 *
 * Common rules. Usable means: id in 1..max_id, not in exclude,
 * pg_backend_usable (view.h); candidates beyond max_id are skipped, at
 * most PG_RING_CANDIDATES are used. Load never makes the choice fail:
 * only "no usable backend" returns 0. The decision is the strategy's: a
 * caller re-dispatching after a failed attempt records PG_DEC_RETRY
 * itself. rnd is used only to break ties and draw (its high bits, by
 * multiply-shift, so bias is at most PG_MAX_BACKENDS/2^64). One pass over
 * 1..max_id at most; shared fields are read with relaxed atomic loads.
 */
#ifndef PG_ROUTER_STRATEGY_H
#define PG_ROUTER_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "prefixgate.h"
#include "router/view.h"

struct pg_route_cfg {
	enum pg_strategy strategy;
	uint32_t prefix_length;
	uint32_t concurrency_threshold;
	enum pg_load_signal load_signal; /* LEAST_OUTSTANDING and the PREFIX_AWARE fallback */
	uint32_t new_choices;            /* CACHE_AWARE: CacheAwareConfig.NewConversationChoices
	                                  * (router/cache.h) */
	/* Flow control (lib/flow.h; FlowControlConfig, a prefixgate extension):
	 * the prefill an instance may have queued, in predicted ms, and still
	 * take another request (0: off; PG_FLOW_QUEUE_AUTO: its own service
	 * time; past it on every instance, requests wait in the gateway), and
	 * the default deadline (0: none). */
	uint32_t flow_queue_ms;
	uint32_t flow_deadline_ms;
};

/* flow_queue_ms: flow control on, each instance's room its own service
 * time (router/work.h pg_work_service_ms), the default; written
 * PG_FLOW_QUEUE_AUTO_TEXT wherever the others are numbers (pg_flow_queue_text). */
#define PG_FLOW_QUEUE_AUTO      UINT32_MAX
#define PG_FLOW_QUEUE_AUTO_TEXT "auto"

/* InstanceQueueMs as JSON writes it: its number, or "auto" quoted; buf
 * holds 16 bytes. */
static inline const char *pg_flow_queue_json(uint32_t ms, char *buf, size_t len)
{
	if (ms == PG_FLOW_QUEUE_AUTO)
		__builtin_snprintf(buf, len, "\"%s\"", PG_FLOW_QUEUE_AUTO_TEXT);
	else
		__builtin_snprintf(buf, len, "%u", ms);
	return buf;
}

/* cache_aware's estimate for one instance (router/cache.h), for the
 * X-Prefixgate-Route header and the dry run. */
struct pg_ca_est {
	uint16_t id;      /* 0: none */
	uint32_t matched; /* prompt tokens it is believed to hold */
	float wait_ms;    /* its queue ahead of the request */
	float prefill_ms; /* the request's prefill there */
	float saved_ms;   /* the prefill its cache saves */
	float ttft_ms;    /* predicted time to first token */
};

struct pg_choice {
	uint16_t backend; /* 0: no usable backend */
	uint8_t decision; /* enum pg_decision */
	uint8_t ncand;    /* ring candidates considered (prefix_aware) */
	uint16_t cand[PG_RING_CANDIDATES];
	uint32_t matched; /* cache_aware: prompt tokens the chosen one is believed to hold */
	uint8_t pool;     /* the model pool chosen in (route.h sets it; the balancer does not) */
	bool late;        /* none chosen: the first token would come past the deadline (route.h) */
	struct pg_ca_est est[2]; /* cache_aware: the chosen one, the runner-up */
	/* cache_aware: tokens every instance is taken to hold (a shared
	 * prefix), and how far back the chosen one was sent the prefix it is
	 * believed to hold, in its index clock's blocks (UINT32_MAX: none) and
	 * in other conversations (router/capacity.h: what its answer teaches) */
	uint32_t shared;
	uint32_t d_blocks;
	uint8_t d_seqs;
	/* a slot copy of the chosen one's is busy with it until
	 * pg_capacity_done (router/capacity.h) */
	bool seq_taken;
};

struct pg_ca_req;

/* One decision's inputs. */
struct pg_pick {
	const struct pg_route_cfg *cfg;
	const struct pg_backend *backends; /* the table: PG_MAX_BACKENDS entries */
	unsigned max_id;                   /* ids 1..max_id are scanned */
	/* the ring's candidates for the key (PREFIX_AWARE) or its anchor
	 * (CACHE_AWARE), in preference order */
	const uint16_t *cand;
	size_t ncand;
	const struct pg_idset *exclude; /* ids not to pick; may be NULL */
	uint64_t now_ms;
	uint64_t rnd; /* a fresh random 64-bit value */
	/* the key came from X-Prefixgate-Key or prompt_cache_key: affinity
	 * decisions are PG_DEC_EXPLICIT_KEY */
	bool explicit_key;
	const struct pg_ca_req *ca; /* CACHE_AWARE: what the index says (cache.h) */
};

struct pg_strategy_ops {
	/* Choose for p: out filled in (backend, decision; cand/ncand for the
	 * strategies that follow the ring). Returns out->backend. */
	uint16_t (*choose)(const struct pg_pick *p, struct pg_choice *out);
	bool ring;   /* it follows the ring: p->cand are given */
	bool blocks; /* its keys come with cache_aware's blocks (key.h) and
	              * p->ca with what the index says of them */
};

/* Each strategy's (enum pg_strategy: every value has one). */
extern const struct pg_strategy_ops pg_strategy_random, pg_strategy_least, pg_strategy_prefix,
    pg_strategy_cache;

/* The operations of strategy s (a value from a hand-edited map: the
 * default, PREFIX_AWARE's). */
const struct pg_strategy_ops *pg_strategy_of(enum pg_strategy s);

/* Choose for p by p->cfg->strategy. */
static inline uint16_t pg_balance(const struct pg_pick *p, struct pg_choice *out)
{
	return pg_strategy_of(p->cfg->strategy)->choose(p, out);
}

/* The eligible backend of p with the lowest load (pg_backend_load under
 * p->cfg->load_signal), ties broken uniformly by p->rnd; 0 if none
 * (least.c: LEAST_OUTSTANDING_REQUESTS, and PREFIX_AWARE's overflow). */
uint16_t pg_least_outstanding(const struct pg_pick *p);

/* Uniform index in [0, n) from 64 random bits (n > 0): the high half of
 * the 128-bit product. Bias is at most n / 2^64: nothing for n <
 * PG_MAX_BACKENDS. */
static inline size_t pg_pick_index(uint64_t rnd, size_t n)
{
	return (size_t)(((unsigned __int128)rnd * n) >> 64);
}

/* max_id and ncand within their bounds, out zeroed: every strategy's
 * first step. */
static inline void pg_pick_start(const struct pg_pick *p, unsigned *max_id, size_t *ncand,
                                 struct pg_choice *out)
{
	*max_id = p->max_id < PG_MAX_BACKENDS - 1 ? p->max_id : PG_MAX_BACKENDS - 1;
	*ncand = p->ncand < PG_RING_CANDIDATES ? p->ncand : PG_RING_CANDIDATES;
	__builtin_memset(out, 0, sizeof(*out));
}

#endif /* PG_ROUTER_STRATEGY_H */
