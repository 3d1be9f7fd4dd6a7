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
 * reports its queue (vllm:num_requests_waiting, scraped), requests waiting
 * there beyond the fleet's own were sent by other clients: each counts as
 * much work as one of ours, or PG_WORK_FOREIGN_TOKENS.
 *
 * Speed. The time to first token of a request sent to an instance now is
 * modelled as
 *
 *     ttft = overhead + (queued + own) / rate + decoding x decode_cost
 *
 * queued: the instance's queue in tokens, as above; own: the request's
 * work there; decoding: its requests past their first token (they share the
 * engine's steps with prefills: vLLM's chunked prefill). The three
 * coefficients are
 * fit per instance by exponentially weighted least squares over the first
 * tokens seen (time constant PG_FIT_TAU_MS: a slowdown is tracked within a
 * minute), each observation weighted down when its residual is far past the
 * typical one (Huber), so a request the index wrongly believed cached does
 * not drag the fit, and held near a prior (defaults, or what the instance
 * reports) while observations are few. No I/O, no allocation, no clock: the
 * caller gives the times.
 */
#ifndef PG_WORK_H
#define PG_WORK_H

#include <stdbool.h>
#include <stdint.h>
#include "prefixgate.h"

/* Time constant of the fit's forgetting. */
#define PG_FIT_TAU_MS 15000
/* The prior's weight, in observations: it decides while fewer have come. */
#define PG_FIT_PRIOR_N 2.0
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
	double s[3][3], t[3]; /* weighted sums of x x' and x y, x = (1, ktokens, decoding) */
	double w;             /* their weight */
	double scale;         /* typical |residual|, ms (0: none seen yet) */
	uint64_t last_ms;     /* the sums' age: decayed from here */
	uint64_t n;           /* observations taken */
};

void pg_fit_init(struct pg_fit *f, const struct pg_speed *prior);

/* A new prior (a backend's report of itself), kept with what was learned. */
void pg_fit_prior(struct pg_fit *f, const struct pg_speed *prior);

/*
 * A first token came ttft_ms after its request was sent, when the
 * instance had tokens (queued + own) of work and decoding requests ahead
 * of it. Updates f->cur. now_ms: the caller's clock, non-decreasing.
 */
void pg_fit_observe(struct pg_fit *f, uint64_t now_ms, double tokens, double decoding,
                    double ttft_ms);

/* Backend b's speed as published (pg_backend.fit_*), the defaults where
 * nothing is learned yet. */
void pg_work_speed(const struct pg_backend *b, struct pg_speed *out);

/* The prefill tokens still ahead of a request sent to b at now_ms, this
 * gateway's and the other gateways' (see above), at speed sp. */
double pg_work_queued(const struct pg_backend *b, const struct pg_speed *sp, uint64_t now_ms);

/* b's requests past their first token, this gateway's and the others'. */
double pg_work_decoding(const struct pg_backend *b);

/* One attempt's place in its backend's queue. Zeroed: none. */
struct pg_work_ticket {
	bool pending;    /* in the queue */
	uint32_t tokens; /* its work */
	float ahead;     /* the queue when it was sent, tokens, itself included */
	float decoding;  /* the requests past their first token then */
	float pred_ms;   /* TTFT predicted then */
	uint64_t sent_ns;
};

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

#endif /* PG_WORK_H */
