// SPDX-License-Identifier: MIT
/* cache_aware's choice (router/cache.h). */
#include <math.h>
#include <string.h>

#include "router/cache.h"

#define LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

void pg_ca_look(const struct pg_ca_index *ix, const uint64_t *chain, uint32_t n, uint64_t anchor,
                uint32_t anchor_len, uint64_t whole, bool explicit_key, uint32_t members,
                pg_ca_ok_fn ok, void *arg, struct pg_ca_look *out)
{
	uint32_t blocks[PG_CA_TIERS * PG_CA_WAYS];
	const uint32_t per = PG_CA_BLOCK / PG_CA_CHARS_PER_TOKEN;

	out->shared_blocks = 0;
	out->anchor = anchor;
	out->nheld = 0;
	if (!n || !ix->capacity_blocks)
		return;
	pg_ca_prefetch(ix, chain, n);
	out->shared_blocks = pg_ca_shared(ix, chain, n, members);
	/* a shared head that covers the anchor: what follows it decides */
	if (!explicit_key && (uint64_t)out->shared_blocks * PG_CA_BLOCK >= anchor_len)
		out->anchor = out->shared_blocks < n ? chain[out->shared_blocks] : whole;
	out->nheld = pg_ca_match_tiers(ix, chain, n, ok, arg, PG_CA_TIERS, out->held, blocks, NULL);
	for (size_t i = 0; i < out->nheld; i++)
		out->held_tokens[i] = blocks[i] * per;
}

/* One usable backend as the rule sees it. */
struct seen {
	uint16_t id;
	uint32_t matched;
	float queue_ms, prefill_ms, ms_per_ktok, ttft_ms, cost;
};

/* rq's holders and their tokens, in id order (at most PG_CA_TIERS x
 * PG_CA_WAYS: an insertion sort), so the scan in id order meets them in
 * turn instead of looking each backend up in the list. */
struct holders {
	size_t n, next;
	uint16_t id[PG_CA_TIERS * PG_CA_WAYS];
	uint32_t tokens[PG_CA_TIERS * PG_CA_WAYS];
};

static void holders_sorted(const struct pg_ca_req *rq, struct holders *h)
{
	h->n = h->next = 0;
	for (size_t i = 0; i < rq->nheld && h->n < PG_CA_TIERS * PG_CA_WAYS; i++) {
		size_t k = h->n++;

		while (k && h->id[k - 1] > rq->held[i]) {
			h->id[k] = h->id[k - 1];
			h->tokens[k] = h->tokens[k - 1];
			k--;
		}
		h->id[k] = rq->held[i];
		h->tokens[k] = rq->held_tokens[i];
	}
}

/* Tokens backend id (ids met in ascending order) holds of the request: the
 * shared head, or more if listed. */
static uint32_t held_by(const struct pg_ca_req *rq, struct holders *h, uint16_t id)
{
	uint32_t t = rq->shared_tokens;

	while (h->next < h->n && h->id[h->next] < id)
		h->next++;
	for (; h->next < h->n && h->id[h->next] == id; h->next++)
		if (h->tokens[h->next] > t)
			t = h->tokens[h->next];
	return t < rq->prompt_tokens ? t : rq->prompt_tokens;
}

/* Tokens of the request the index lists backend id as holding (0: not
 * listed), the shared head aside. */
static uint32_t listed_tokens(const struct pg_ca_req *rq, uint16_t id)
{
	uint32_t t = 0;

	for (size_t i = 0; i < rq->nheld; i++)
		if (rq->held[i] == id && rq->held_tokens[i] > t)
			t = rq->held_tokens[i];
	return t < rq->prompt_tokens ? t : rq->prompt_tokens;
}

bool pg_ca_holds_more(const struct pg_ca_req *rq, uint16_t id)
{
	return listed_tokens(rq, id) > rq->shared_tokens;
}

static bool listed(const uint16_t *ids, size_t n, uint16_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

static void estimate(struct seen *s, const struct pg_backend *b, const struct pg_ca_req *rq,
                     uint64_t now_ms)
{
	struct pg_speed sp;
	const uint32_t own = rq->prompt_tokens > s->matched ? rq->prompt_tokens - s->matched : 1;

	pg_work_speed(b, &sp);
	s->ms_per_ktok = (float)sp.ms_per_ktok;
	s->prefill_ms = (float)(sp.ms_per_ktok * own / 1000.0);
	s->queue_ms = (float)(sp.ms_per_ktok * pg_work_queued(b, &sp, now_ms) / 1000.0 +
	                      sp.ms_per_decode * pg_work_decoding(b));
	s->ttft_ms = (float)sp.overhead_ms + s->queue_ms + s->prefill_ms;
}

static void est_out(struct pg_ca_est *e, const struct seen *s)
{
	*e = (struct pg_ca_est){.id = s->id,
	                        .matched = s->matched,
	                        .wait_ms = s->queue_ms,
	                        .prefill_ms = s->prefill_ms,
	                        .saved_ms = s->ms_per_ktok * s->matched / 1000.0f,
	                        .ttft_ms = s->ttft_ms};
}

/* Where a tie goes: the rank of id among cand (ring order), ncand + id for
 * the others. */
static size_t rank_of(const uint16_t *cand, size_t ncand, uint16_t id)
{
	for (size_t i = 0; i < ncand; i++)
		if (cand[i] == id)
			return i;
	return ncand + id;
}

/* A request nothing holds: the tied instances that hold as many
 * conversations as they can leave the tie (their cost goes past limit)
 * while another is in it. */
static void pass_over_full(struct seen *seen, size_t n, float limit, const struct pg_ca_req *rq)
{
	bool full[PG_MAX_BACKENDS], other = false;

	for (size_t i = 0; i < n; i++)
		if (seen[i].cost <= limit) {
			full[i] = rq->full(seen[i].id, rq->full_arg);
			other |= !full[i];
		}
	for (size_t i = 0; other && i < n; i++)
		if (seen[i].cost <= limit && full[i])
			seen[i].cost = limit + 1;
}

/* Of the tied seen[] (cost <= limit), the one the tie rules pick. */
static size_t break_tie(const struct seen *seen, size_t n, float limit,
                        const struct pg_backend *backends, const uint16_t *cand, size_t ncand,
                        const struct pg_ca_req *rq)
{
	size_t best = n, best_rank = SIZE_MAX;
	uint32_t choices = rq->choices > 1 ? rq->choices : 1;

	if (choices > 1) {
		uint32_t low = 0;

		/* where this anchor went before, in ring order */
		for (size_t i = 0; i < n; i++) {
			size_t r;

			if (seen[i].cost > limit || !listed(rq->placed, rq->nplaced, seen[i].id))
				continue;
			r = rank_of(cand, ncand, seen[i].id);
			if (r < best_rank) {
				best = i;
				best_rank = r;
			}
		}
		if (best < n)
			return best;
		/* the least recently sent of the first `choices` candidates */
		for (size_t c = 0; c < ncand && c < choices; c++)
			for (size_t i = 0; i < n; i++) {
				uint32_t r;

				if (seen[i].id != cand[c] || seen[i].cost > limit)
					continue;
				r = LOAD(&backends[seen[i].id].recent);
				if (best == n || (uint64_t)r + PG_CA_RECENT_TIE < low) {
					best = i;
					low = r;
				}
			}
		if (best < n)
			return best;
	}
	for (size_t i = 0; i < n; i++) {
		size_t r;

		if (seen[i].cost > limit)
			continue;
		r = rank_of(cand, ncand, seen[i].id);
		if (r < best_rank) {
			best = i;
			best_rank = r;
		}
	}
	return best;
}

/* Why id was chosen: the longest match beyond the shared head (CACHED), or
 * with none anywhere the anchor's place, the first usable ring candidate
 * or where the anchor went before (AFFINITY, EXPLICIT_KEY), else for its
 * load (BALANCED). */
static enum pg_decision decision(const struct pg_backend *backends, unsigned max_id,
                                 const uint16_t *cand, size_t ncand, const struct pg_ca_req *rq,
                                 const struct pg_idset *exclude, uint64_t now_ms, bool explicit_key,
                                 uint16_t id, uint32_t matched, uint32_t longest)
{
	size_t first = 0;

	if (longest > rq->shared_tokens)
		return matched == longest ? PG_DEC_CACHED : PG_DEC_BALANCED;
	while (first < ncand &&
	       !pg_backend_eligible(backends, max_id, cand[first], exclude, now_ms))
		first++;
	if ((first < ncand && cand[first] == id) || listed(rq->placed, rq->nplaced, id))
		return explicit_key ? PG_DEC_EXPLICIT_KEY : PG_DEC_AFFINITY;
	return PG_DEC_BALANCED;
}

uint16_t pg_balance_cached(const struct pg_backend *backends, unsigned max_id, const uint16_t *cand,
                           size_t ncand, const struct pg_ca_req *rq, const struct pg_idset *exclude,
                           uint64_t now_ms, bool explicit_key, struct pg_choice *out)
{
	struct seen seen[PG_MAX_BACKENDS];
	struct holders hs;
	size_t n = 0, pick, second = SIZE_MAX;
	uint64_t queued_reqs = 0;
	uint32_t longest = rq->shared_tokens;
	float low = INFINITY, limit, lambda;

	if (max_id > PG_MAX_BACKENDS - 1)
		max_id = PG_MAX_BACKENDS - 1;
	if (ncand > PG_RING_CANDIDATES)
		ncand = PG_RING_CANDIDATES;
	memset(out, 0, sizeof(*out));
	out->ncand = (uint8_t)ncand;
	if (ncand)
		memcpy(out->cand, cand, ncand * sizeof(*cand));
	holders_sorted(rq, &hs);
	for (unsigned id = 1; id <= max_id; id++) {
		const struct pg_backend *b = &backends[id];

		if (!pg_backend_eligible(backends, max_id, id, exclude, now_ms))
			continue;
		seen[n].id = (uint16_t)id;
		seen[n].matched = held_by(rq, &hs, (uint16_t)id);
		if (seen[n].matched > longest)
			longest = seen[n].matched;
		estimate(&seen[n], b, rq, now_ms);
		queued_reqs += LOAD(&b->prefill_reqs) + LOAD(&b->peer_prefill_reqs);
		n++;
	}
	if (!n)
		return 0;
	lambda = (float)(rq->work_base + rq->work_queued * (double)queued_reqs / (double)n);
	for (size_t i = 0; i < n; i++) {
		seen[i].cost = seen[i].ttft_ms + lambda * seen[i].prefill_ms;
		if (seen[i].cost < low)
			low = seen[i].cost;
	}
	limit = low + fmaxf((float)PG_CA_TIE_MS, low * (float)PG_CA_TIE_FRAC);
	if (rq->full && longest <= rq->shared_tokens)
		pass_over_full(seen, n, limit, rq);
	pick = break_tie(seen, n, limit, backends, cand, ncand, rq);
	for (size_t i = 0; i < n; i++)
		if (i != pick && (second == SIZE_MAX || seen[i].cost < seen[second].cost))
			second = i;
	out->decision = decision(backends, max_id, cand, ncand, rq, exclude, now_ms, explicit_key,
	                         seen[pick].id, seen[pick].matched, longest);
	/* the shared head's first prefill there is its work (cache.h) */
	if (rq->head_sent && rq->shared_tokens && seen[pick].matched <= rq->shared_tokens) {
		const uint32_t held = listed_tokens(rq, seen[pick].id);

		if (held < rq->shared_tokens && !rq->head_sent(seen[pick].id, rq->head_arg)) {
			seen[pick].matched = held;
			estimate(&seen[pick], &backends[seen[pick].id], rq, now_ms);
		}
	}
	out->backend = seen[pick].id;
	out->matched = seen[pick].matched;
	out->shared = rq->shared_tokens;
	out->d_blocks = UINT32_MAX;
	est_out(&out->est[0], &seen[pick]);
	if (second != SIZE_MAX)
		est_out(&out->est[1], &seen[second]);
	return seen[pick].id;
}

static uint16_t choose(const struct pg_pick *p, struct pg_choice *out)
{
	static const struct pg_ca_req none = {.choices = 1};

	return pg_balance_cached(p->backends, p->max_id, p->cand, p->ncand, p->ca ? p->ca : &none,
	                         p->exclude, p->now_ms, p->explicit_key, out);
}

const struct pg_strategy_ops pg_strategy_cache = {.choose = choose, .ring = true, .blocks = true};
