/* SPDX-License-Identifier: MIT */
/*
 * cache_aware's load model, pure: how long an instance would take to give a
 * request its first token, learned online from the first tokens it gave.
 *
 * Work. A request's prefill work on an instance is its prompt tokens less
 * what that instance holds of it cached (at least one token: the last one
 * is always computed). An instance's queue is the work of the requests sent
 * to it that have not had their first token yet (pg_backend.prefill_tokens,
 * prefill_reqs, and the other gateways' peer_prefill_*); the requests past
 * their first token are decoding (in_flight - prefill_reqs). The engine
 * computes the queue first come, first served, so what is still ahead of a
 * new request is the queue less what the engine did of its head since it
 * started it (pg_backend.head_since_ms: the later of the queue's start and
 * the end of the last prefill whose first token was seen) at its rate:
 * without that, a long queue looks longer by up to its head's work, and
 * the fit learns a rate 25% too fast (tools/tracesim). Where the instance
 * reports its queue (vllm:num_requests_waiting, scraped within
 * PG_WORK_FRESH_MS), requests waiting there beyond the fleet's own were
 * sent by other clients: each counts as much work as one of ours, or
 * PG_WORK_FOREIGN_TOKENS. An older report is not used at all: an engine
 * idle since would look busy (it held requests in the gateway for
 * seconds).
 *
 * A fleet of gateways is one queue per instance, whoever sent its
 * requests: the engine's progress is taken off the fleet's queue (ours and
 * the peers'), from the fleet's head. Each gateway tells the others how
 * long ago it last saw the engine begin a head and give a first token
 * (pg_work_ages, pg_work_heard), and a prefill that follows another
 * gateway's first token is learned from as one that follows ours. With
 * only its own, a gateway of four drained its own queue as if the engine
 * worked on nothing else, counted the peers' heads whole, and learned
 * from first tokens no peer's request seemed to come before, when requests
 * other gateways had sent at the same instant, not heard of yet, did
 * (tools/tracesim --gateways 4, the Mooncake trace at 0.9 load: speeds
 * learned off by up to 17x, mean TTFT 2.9x one gateway's).
 *
 * Speed. The time to first token of a request sent to an instance now is
 * modelled as
 *
 *     ttft = overhead + (queued + own) / rate + decoding x decode_cost
 *
 * queued: the instance's queue in tokens, as above; own: the request's
 * work there; decoding: its requests past their first token (they share the
 * engine's steps with prefills: vLLM's chunked prefill). The three
 * coefficients are fit per instance by exponentially weighted least
 * squares over the first tokens seen (time constant PG_FIT_TAU_MS: a
 * slowdown is tracked within a minute), each observation weighted down
 * when its residual is far past the typical one (Huber), so a request the
 * index wrongly believed cached does not drag the fit, and held near a
 * prior (defaults, or what the instance reports) while observations are
 * few. (A response that does not stream teaches the queue, not the
 * speed: router/load.h.) No I/O, no allocation, no clock: the caller
 * gives the times.
 */
#ifndef PG_ROUTER_WORK_H
#define PG_ROUTER_WORK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include "prefixgate.h"

/* Time constant of the fit's forgetting. */
#define PG_FIT_TAU_MS 15000
/* The prior's weight, in observations of each of two sizes: it decides
 * while fewer have come. */
#define PG_FIT_PRIOR_N 1.0
/* ... and never less than this (observations all of one size leave the
 * rate to it); the rate it allows, at most this many times the prior's or
 * a fraction of it: from a CPU's llama.cpp (hundreds of tokens/s, 1/70 of
 * the defaults; 16 held it at 2,287) to a rack of GPUs. */
#define PG_FIT_PRIOR_MIN  0.05
#define PG_FIT_RATE_RANGE 1000.0
/* Observations taken at full weight before any is weighed as an outlier. */
#define PG_FIT_WARMUP 8
/* Observations of its own before an instance's fit is routed on. Until
 * then it takes its pool's speed (the median of the members that have
 * them; the defaults while none has): a few first tokens, short prompts
 * whose prefill hides in the overhead's noise, can make an instance look
 * several times slower than it is, and an instance that looks slow gets no
 * new work to learn otherwise from. */
#define PG_FIT_OWN_MIN 8
/* Residuals past this many typical residuals weigh less (Huber's k). */
#define PG_FIT_HUBER 3.0

/* The model's coefficients. */
struct pg_speed {
	double overhead_ms;   /* fixed part of every TTFT */
	double ms_per_ktok;   /* prefill: ms per 1,000 tokens (1e6 / rate) */
	double ms_per_decode; /* added per request decoding on the instance */
};

/* The work of a request another client queued on an instance, when ours
 * give no measure of it: a guess (a 2,048-token prompt, nothing cached). */
#define PG_WORK_FOREIGN_TOKENS 2048
/* How old an engine's report of its queue may be and still count (ms):
 * four of --metrics-scrape-interval's default. */
#define PG_WORK_FRESH_MS 1000
/* pg_backend.work_avg: an exponential average over about this many. */
#define PG_WORK_AVG_N 16

/* The default speed (vLLM serving a 70B model on 8 GPUs: mockllm's
 * calibration): 36,600 prefill tokens/s, 61.5 ms overhead. */
#define PG_SPEED_RATE_DEFAULT     36600
#define PG_SPEED_OVERHEAD_DEFAULT 61.5

static inline double pg_speed_predict(const struct pg_speed *s, double tokens, double decoding)
{
	return s->overhead_ms + s->ms_per_ktok * tokens / 1000.0 + s->ms_per_decode * decoding;
}

/* One instance's fit. Zeroed is not valid: pg_fit_init. */
struct pg_fit {
	struct pg_speed prior, cur;
	double s[3][3], t[3];   /* weighted sums of x x' and x y, x = (1, ktokens, decoding) */
	double w;               /* their weight */
	double scale;           /* typical |residual|, ms (0: none seen yet) */
	uint64_t last_ms;       /* the sums' age: decayed from here */
	uint64_t n;             /* observations taken */
	uint64_t last_first_ns; /* the last first token seen (pg_fit_first) */
};

void pg_fit_init(struct pg_fit *f, const struct pg_speed *prior);

/* A new prior (a backend's report of itself), kept with what was learned. */
void pg_fit_prior(struct pg_fit *f, const struct pg_speed *prior);

/*
 * One observation: y_ms took tokens of prefill, plus, if whole (a whole
 * TTFT), the overhead and decoding requests x the decode cost. Updates
 * f->cur. now_ms: the caller's clock (a clock that goes back is taken as
 * no time passing).
 */
void pg_fit_observe(struct pg_fit *f, uint64_t now_ms, bool whole, double tokens, double decoding,
                    double y_ms);

/* One observation as the gateways of a fleet share it (pg_fit_first gives
 * it; every gateway learns every first token the fleet sees). */
struct pg_fit_obs {
	bool whole;        /* a whole TTFT (else a prefill alone) */
	uint32_t tokens;   /* prefill work */
	uint32_t decoding; /* requests decoding on the instance then */
	uint32_t y_us;     /* what it took */
};

/* pg_fit_observe of o, at now_ms. */
void pg_fit_learn(struct pg_fit *f, uint64_t now_ms, const struct pg_fit_obs *o);

/* o in two words (state/fleetq.h carries words), and back. */
static inline void pg_fit_obs_pack(const struct pg_fit_obs *o, uint64_t w[2])
{
	w[0] = o->tokens | (uint64_t)o->decoding << 32;
	w[1] = o->y_us | (uint64_t)o->whole << 32;
}

static inline void pg_fit_obs_unpack(const uint64_t w[2], struct pg_fit_obs *o)
{
	o->tokens = (uint32_t)w[0];
	o->decoding = (uint32_t)(w[0] >> 32);
	o->y_us = (uint32_t)w[1];
	o->whole = (w[1] >> 32) & 1;
}

/*
 * The first token of a request sent at sent_ns came at now_ns; own: its
 * prefill work there, decoding: the instance's requests decoding then;
 * prev_ns: the latest first token before it that other gateways saw (0:
 * none); queued: the instance may not have been idle when it was sent
 * (requests were ahead of it, or may have been). The engine prefills first
 * come, first served, so a request's prefill began when the one before it
 * ended, or when it was sent to an idle engine: after a first token later
 * than its sending (ours or another gateway's) whose prefill ended (an
 * overhead earlier, by the fit) after its sending, the time since that one
 * is its prefill alone, what the fit learns, whatever the queue looked
 * like; with none, one sent to an idle engine (or to one whose last
 * prefill had ended) is a whole TTFT. Learning never rests on the queue's
 * estimate, which rests on the learned rate: an estimate wrong in one
 * would feed the other (a rate learned too fast drains the queue too
 * fast, and the waits it hides are taken for overhead). Anything else:
 * nothing learned. Returns whether it learned, and what (obs, may be
 * NULL).
 */
bool pg_fit_first(struct pg_fit *f, uint64_t sent_ns, uint64_t now_ns, uint64_t prev_ns,
                  uint32_t own, double decoding, bool queued, struct pg_fit_obs *obs);

/* The shared table's fields, as every reader of them loads them: relaxed
 * atomics (any value is a recent snapshot, and these are estimates). */
#define PG_WORK_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

/* Backend b's speed as published (pg_backend.fit_*), the defaults where
 * nothing is learned yet. Inline: cache_aware reads it for every backend of
 * every decision. */
static inline void pg_work_speed(const struct pg_backend *b, struct pg_speed *out)
{
	const uint32_t rate = PG_WORK_LOAD(&b->fit_rate);

	out->ms_per_ktok = 1e6 / (rate ? rate : PG_SPEED_RATE_DEFAULT);
	out->overhead_ms =
	    rate ? PG_WORK_LOAD(&b->fit_overhead_us) / 1000.0 : PG_SPEED_OVERHEAD_DEFAULT;
	out->ms_per_decode = rate ? PG_WORK_LOAD(&b->fit_decode_us) / 1000.0 : 0;
}

/* b's published speed was measured (its own fit, or its pool's median),
 * not the defaults. */
static inline bool pg_work_measured(const struct pg_backend *b)
{
	return PG_WORK_LOAD(&b->fit_rate) != 0;
}

/* b's report of its queue (waiting, running) was taken within
 * PG_WORK_FRESH_MS of now_ms. */
static inline bool pg_work_fresh(const struct pg_backend *b, uint64_t now_ms)
{
	const uint64_t at = PG_WORK_LOAD(&b->scraped_ms);

	return at && now_ms < at + PG_WORK_FRESH_MS;
}

/* The requests b's engine has waiting now, as far as is known: its fresh
 * report (pg_work_fresh) less those of ours seen to leave its queue since
 * (pg_backend.firsts); 0 without a fresh report. */
static inline uint32_t pg_work_waiting(const struct pg_backend *b, uint64_t now_ms)
{
	const uint32_t w = PG_WORK_LOAD(&b->waiting),
	               left = PG_WORK_LOAD(&b->firsts) - PG_WORK_LOAD(&b->firsts_at_scrape);

	return pg_work_fresh(b, now_ms) && w > left ? w - left : 0;
}

/* Flow control's room on b by default (router/route.c), ms at speed sp:
 * the prefill of a request of the work it is usually sent
 * (pg_backend.work_avg), or its overhead if longer. One request queued
 * behind the one the engine computes; and the overhead because a
 * prefill's end is seen only at its first token, an overhead later, when
 * the engine must still have work. Not their sum: the overhead passes
 * while the engine computes the next prefill, and added in, at a third of
 * the default speed (an overhead 3.4 times the prefill), it let the queue
 * hold four requests (tools/bench/learn.py, flow with streams: the quiet
 * tenant's p99 1.99x its p99 alone, critical's 2.06x; 1.67x and 1.71x with
 * the larger of the two, the same work done). */
static inline double pg_work_service_ms(const struct pg_backend *b, const struct pg_speed *sp)
{
	return fmax(sp->ms_per_ktok * PG_WORK_LOAD(&b->work_avg) / 1000.0, sp->overhead_ms);
}

/* The prefill tokens still ahead of a request sent to b at now_ms, this
 * gateway's and the other gateways' (see above), at speed sp. */
static inline double pg_work_queued(const struct pg_backend *b, const struct pg_speed *sp,
                                    uint64_t now_ms)
{
	const uint64_t mine = PG_WORK_LOAD(&b->prefill_tokens),
	               since = PG_WORK_LOAD(&b->head_since_ms);
	double q = (double)mine + (double)PG_WORK_LOAD(&b->peer_prefill_tokens);

	/* what the engine did of the head since it began it: at most the
	 * queue (it may be past the head, on requests whose first token is
	 * on its way); only at a measured speed: the defaults' could drain a
	 * queue three times faster than a slow engine does */
	if (pg_work_measured(b)) {
		if (q > 0 && now_ms > since) {
			q -= (double)(now_ms - since) * 1000.0 / sp->ms_per_ktok;
			if (q < 0)
				q = 0;
		}
	}
	/* requests it says are waiting that no gateway of the fleet sent
	 * (other clients): as large as ours, or PG_WORK_FOREIGN_TOKENS */
	if (pg_work_fresh(b, now_ms)) {
		const uint32_t waiting = pg_work_waiting(b, now_ms),
		               reqs = PG_WORK_LOAD(&b->prefill_reqs),
		               peers = PG_WORK_LOAD(&b->peer_prefill_reqs);

		if (waiting > reqs + peers)
			q += (waiting - reqs - peers) *
			     (reqs ? (double)mine / reqs : PG_WORK_FOREIGN_TOKENS);
	}
	return q;
}

/* b's queue holds requests (this gateway's or the fleet's) whose leaving
 * only its engine's report shows at once: its speed is not measured, so
 * an answer that does not stream stays queued until its head or its
 * engine's report (router/load.h). The report is asked for more often
 * then (members/health.h PG_SCRAPE_BLIND_DIV). */
static inline bool pg_work_blind(const struct pg_backend *b)
{
	return !pg_work_measured(b) &&
	       (PG_WORK_LOAD(&b->prefill_reqs) || PG_WORK_LOAD(&b->peer_prefill_reqs));
}

/* What b's answers that did not stream bound its first tokens by
 * (pg_backend.bound_*): false while none is published. */
static inline bool pg_work_bound(const struct pg_backend *b, struct pg_speed *out)
{
	const uint32_t rate = PG_WORK_LOAD(&b->bound_rate);

	if (!rate)
		return false;
	out->ms_per_ktok = 1e6 / rate;
	out->overhead_ms = PG_WORK_LOAD(&b->bound_overhead_us) / 1000.0;
	out->ms_per_decode = 0;
	return true;
}

/* sp into b's published bound (pg_backend.bound_*, as pg_work_bound reads
 * it). */
void pg_work_publish_bound(struct pg_backend *b, const struct pg_speed *sp);

/* sp into b's published speed (pg_backend.fit_*, as pg_work_speed reads
 * it): an instance's own fit from PG_FIT_OWN_MIN first tokens on, its
 * pool's median before. */
void pg_work_publish_speed(struct pg_backend *b, const struct pg_speed *sp);

/* The median speed of the members of pool (ids 1..max_id of the table)
 * whose own speed is routed on (fit_obs >= PG_FIT_OWN_MIN); returns how
 * many there are (0: out untouched). */
unsigned pg_work_median_speed(const struct pg_backend *table, unsigned max_id, uint32_t pool,
                              struct pg_speed *out);

/* b's requests past their first token, this gateway's and the others'. */
static inline double pg_work_decoding(const struct pg_backend *b)
{
	const int64_t d =
	    (int64_t)PG_WORK_LOAD(&b->in_flight) - (int64_t)PG_WORK_LOAD(&b->prefill_reqs) +
	    PG_WORK_LOAD(&b->peer_in_flight) - (int64_t)PG_WORK_LOAD(&b->peer_prefill_reqs);

	return d > 0 ? (double)d : 0;
}

/* One attempt's place in its backend's queue. Zeroed: none. */
struct pg_work_ticket {
	bool pending;    /* in the queue */
	bool queued;     /* sent behind others (ours or another gateway's) */
	uint32_t tokens; /* its work */
	float ahead;     /* the queue when it was sent, tokens, itself included */
	float decoding;  /* the requests past their first token then */
	float pred_ms;   /* TTFT predicted then */
	uint32_t seq;    /* its place in the backend's order (pg_backend.takes) */
	uint64_t sent_ns;
};

/* b's engine has begun t (its prefill, or past it), as its fresh report
 * says: it serves first come, first served, so of the requests this
 * gateway had sent it when the report was asked for (takes_at_scrape), at
 * most the last `waiting` still wait; other clients' and gateways'
 * requests only make that count larger: never a request begun too soon. */
static inline bool pg_work_begun(const struct pg_backend *b, const struct pg_work_ticket *t,
                                 uint64_t now_ms)
{
	const uint32_t sent = PG_WORK_LOAD(&b->takes_at_scrape),
	               waiting = PG_WORK_LOAD(&b->waiting);

	return pg_work_fresh(b, now_ms) && waiting < sent &&
	       (int32_t)(sent - waiting - t->seq) >= 0;
}

/* An attempt with `tokens` of work is sent to b at now_ns (at speed sp). */
void pg_work_take(struct pg_backend *b, struct pg_work_ticket *t, uint32_t tokens,
                  const struct pg_speed *sp, uint64_t now_ns);

/* Its first token came at now_ns (b's overhead: overhead_ms): it leaves
 * the queue, the engine is on the next one since its prefill ended. Returns
 * its TTFT in ms (t is then what to learn from: ahead, decoding). */
double pg_work_first(struct pg_backend *b, struct pg_work_ticket *t, double overhead_ms,
                     uint64_t now_ns);

/* It leaves the queue, no first token seen. No-op if not pending. */
void pg_work_drop(struct pg_backend *b, struct pg_work_ticket *t);

/* It leaves the queue, its prefill over by end_ms by what is known (an
 * answer's head less the overhead, or a first token predicted from a
 * measured speed): the engine is on the next one since, at the latest. No
 * first token was seen: nothing a fleet's peers or a fit take as one.
 * No-op if not pending. */
void pg_work_leave(struct pg_backend *b, struct pg_work_ticket *t, uint64_t end_ms);

/* What b's fit learns from t, whose first token came at now_ns (after
 * pg_work_first): pg_fit_first with the fleet's view of b. */
bool pg_work_learn(struct pg_fit *f, const struct pg_backend *b, const struct pg_work_ticket *t,
                   uint64_t now_ns, struct pg_fit_obs *obs);

/* Fleets. An age in a message: none (nothing seen, or too old to say). */
#define PG_WORK_AGE_NONE UINT32_MAX

/* What this gateway tells the others of b at now_ns: how long ago (us) the
 * engine began its head as far as it knows (head_since_ms), and since its
 * own latest first token from b (first_ns). */
void pg_work_ages(const struct pg_backend *b, uint64_t now_ns, uint32_t *head_age_us,
                  uint32_t *first_age_us);

/* A peer said so of b; its message arrived at now_ns: the later head and
 * first token win (an age is what it was when sent: the time the message
 * took counts as none). */
void pg_work_heard(struct pg_backend *b, uint64_t now_ns, uint32_t head_age_us,
                   uint32_t first_age_us);

#endif /* PG_ROUTER_WORK_H */
