// SPDX-License-Identifier: MIT
/* Quotas per tenant (quota.h). */
#include <stdio.h>
#include <string.h>
#include "lib/json.h"
#include "lib/quota.h"

#define SEC_MASK   ((1ull << (64 - PG_QUOTA_COUNT_BITS)) - 1)
#define COUNT_MASK ((1ull << PG_QUOTA_COUNT_BITS) - 1)
#define LOAD(p)    __atomic_load_n((p), __ATOMIC_RELAXED)

static uint64_t pack(uint64_t sec, uint64_t count)
{
	return (sec & SEC_MASK) << PG_QUOTA_COUNT_BITS | (count & COUNT_MASK);
}

/* Bucket word b's count if it is second sec's, else 0. */
static uint64_t count_at(uint64_t b, uint64_t sec)
{
	return (b >> PG_QUOTA_COUNT_BITS) == (sec & SEC_MASK) ? b & COUNT_MASK : 0;
}

static uint64_t sec_of(uint64_t ms)
{
	return ms / PG_QUOTA_BUCKET_MS;
}

void pg_qwin_add(struct pg_qwin *w, uint64_t sec, uint64_t now_ms, int64_t n)
{
	const uint64_t now = sec_of(now_ms);
	uint64_t *b, old, c;

	if (sec > now)
		sec = now;
	if (sec + PG_QUOTA_BUCKETS <= now || !n)
		return;
	b = &w->b[sec % PG_QUOTA_BUCKETS];
	old = LOAD(b);
	do {
		c = count_at(old, sec);
		if (n < 0)
			c = c > (uint64_t)-n ? c - (uint64_t)-n : 0;
		else
			c = c + (uint64_t)n < COUNT_MASK ? c + (uint64_t)n : COUNT_MASK;
	} while (!__atomic_compare_exchange_n(b, &old, pack(sec, c), true, __ATOMIC_RELAXED,
	                                      __ATOMIC_RELAXED));
}

uint64_t pg_qwin_at(const struct pg_qwin *w, uint64_t sec, uint64_t now_ms)
{
	if (sec > sec_of(now_ms) || sec + PG_QUOTA_BUCKETS <= sec_of(now_ms))
		return 0;
	return count_at(LOAD(&w->b[sec % PG_QUOTA_BUCKETS]), sec);
}

uint64_t pg_qwin_sum(const struct pg_qwin *w, uint64_t now_ms)
{
	const uint64_t now = sec_of(now_ms);
	uint64_t sum = 0;

	for (unsigned i = 0; i < PG_QUOTA_BUCKETS; i++) {
		uint64_t b = LOAD(&w->b[i]), d = (now - (b >> PG_QUOTA_COUNT_BITS)) & SEC_MASK;

		if (d < PG_QUOTA_BUCKETS)
			sum += b & COUNT_MASK;
	}
	return sum;
}

/* Kind k's counts at second sec: this gateway's and the fleet's others'. */
static uint64_t both_at(const struct pg_quota_counts *q, unsigned k, uint64_t sec, uint64_t now_ms)
{
	return pg_qwin_at(&q->local[k], sec, now_ms) + pg_qwin_at(&q->peer[k], sec, now_ms);
}

/* Milliseconds until kind k's count in the minute is at most target (sum:
 * its count now), as its oldest seconds leave it. */
static uint64_t until_at_most(const struct pg_quota_counts *q, unsigned k, uint64_t sum,
                              uint64_t target, uint64_t now_ms)
{
	const uint64_t now = sec_of(now_ms);

	for (uint64_t age = PG_QUOTA_BUCKETS; sum > target && age > 0; age--) {
		uint64_t sec = now + 1 - age;

		if (now + 1 < age)
			continue;
		sum -= both_at(q, k, sec, now_ms) < sum ? both_at(q, k, sec, now_ms) : sum;
		if (sum <= target)
			return (sec + PG_QUOTA_BUCKETS) * PG_QUOTA_BUCKET_MS - now_ms;
	}
	return 0;
}

/* v's figures for kind k, sum counted. */
static void view_kind(const struct pg_quota_counts *q, unsigned k, uint64_t sum, uint64_t now_ms,
                      struct pg_quota_view *v)
{
	const uint64_t max = v->lim.max[k];

	v->remaining[k] = sum < max ? max - sum : 0;
	v->reset_ms[k] = until_at_most(q, k, sum, 0, now_ms);
}

void pg_quota_view(const struct pg_quota_counts *q, const struct pg_quota_lim *lim, uint64_t now_ms,
                   struct pg_quota_view *v)
{
	*v = (struct pg_quota_view){.lim = *lim};
	for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
		if (lim->max[k])
			view_kind(q, k,
			          pg_qwin_sum(&q->local[k], now_ms) +
			              pg_qwin_sum(&q->peer[k], now_ms),
			          now_ms, v);
}

enum pg_quota_verdict pg_quota_take(struct pg_quota_counts *q, const struct pg_quota_lim *lim,
                                    uint64_t now_ms, struct pg_quota_view *v)
{
	const uint32_t rpm = lim->max[PG_QUOTA_REQUESTS], tpm = lim->max[PG_QUOTA_TOKENS];
	const uint64_t sec = sec_of(now_ms);
	uint64_t req, tok = 0;

	*v = (struct pg_quota_view){.lim = *lim};
	if (tpm) {
		tok = pg_qwin_sum(&q->local[PG_QUOTA_TOKENS], now_ms) +
		      pg_qwin_sum(&q->peer[PG_QUOTA_TOKENS], now_ms);
		if (tok >= tpm) {
			pg_quota_view(q, lim, now_ms, v);
			v->retry_ms = until_at_most(q, PG_QUOTA_TOKENS, tok, tpm - 1, now_ms);
			return PG_QUOTA_OVER_TOKENS;
		}
		view_kind(q, PG_QUOTA_TOKENS, tok, now_ms, v);
	}
	/* counted first, then summed: concurrent takers all see each other */
	pg_qwin_add(&q->local[PG_QUOTA_REQUESTS], sec, now_ms, 1);
	req = pg_qwin_sum(&q->local[PG_QUOTA_REQUESTS], now_ms) +
	      pg_qwin_sum(&q->peer[PG_QUOTA_REQUESTS], now_ms);
	if (rpm && req > rpm) {
		pg_qwin_add(&q->local[PG_QUOTA_REQUESTS], sec, now_ms, -1);
		req--;
		view_kind(q, PG_QUOTA_REQUESTS, req, now_ms, v);
		v->retry_ms = until_at_most(q, PG_QUOTA_REQUESTS, req, rpm - 1, now_ms);
		return PG_QUOTA_OVER_REQUESTS;
	}
	if (rpm)
		view_kind(q, PG_QUOTA_REQUESTS, req, now_ms, v);
	return PG_QUOTA_OK;
}

void pg_quota_charge(struct pg_quota_counts *q, uint64_t tokens, uint64_t now_ms)
{
	if (tokens)
		pg_qwin_add(&q->local[PG_QUOTA_TOKENS], sec_of(now_ms), now_ms, (int64_t)tokens);
}

size_t pg_quota_duration(uint64_t ms, char *out, size_t cap)
{
	uint64_t m = ms / 60000, s = ms % 60000 / 1000, f = ms % 1000;
	int n;

	if (ms < 1000)
		n = snprintf(out, cap, "%llums", (unsigned long long)ms);
	else if (!f)
		n = m ? snprintf(out, cap, "%llum%llus", (unsigned long long)m,
		                 (unsigned long long)s)
		      : snprintf(out, cap, "%llus", (unsigned long long)s);
	else {
		char frac[4];

		snprintf(frac, sizeof(frac), "%03llu", (unsigned long long)f);
		for (int i = 2; i > 0 && frac[i] == '0'; i--)
			frac[i] = 0;
		n = m ? snprintf(out, cap, "%llum%llu.%ss", (unsigned long long)m,
		                 (unsigned long long)s, frac)
		      : snprintf(out, cap, "%llu.%ss", (unsigned long long)s, frac);
	}
	return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap ? cap - 1 : 0;
}

unsigned pg_quota_retry_after(uint64_t ms)
{
	uint64_t s = (ms + 999) / 1000;

	return s < 1 ? 1 : s > PG_QUOTA_WINDOW_MS / 1000 ? PG_QUOTA_WINDOW_MS / 1000 : (unsigned)s;
}

size_t pg_quota_headers(const struct pg_quota_view *v, char *out, size_t cap)
{
	static const char *const name[PG_QUOTA_KINDS] = {"requests", "tokens"};
	size_t k = 0;

	if (cap)
		out[0] = 0;
	for (unsigned i = 0; i < PG_QUOTA_KINDS; i++) {
		char reset[32];
		int n;

		if (!v->lim.max[i])
			continue;
		pg_quota_duration(v->reset_ms[i], reset, sizeof(reset));
		n = snprintf(out + k, cap - k,
		             "x-ratelimit-limit-%s: %u\r\nx-ratelimit-remaining-%s: %llu\r\n"
		             "x-ratelimit-reset-%s: %s\r\n",
		             name[i], v->lim.max[i], name[i], (unsigned long long)v->remaining[i],
		             name[i], reset);
		if (n < 0 || (size_t)n >= cap - k) { /* never half a header */
			out[k] = 0;
			return k;
		}
		k += (size_t)n;
	}
	return k;
}

int pg_quota_value(const char *v, size_t n, uint32_t *out)
{
	uint64_t x = 0;

	if (!n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
		if (x > PG_QUOTA_MAX)
			return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

int pg_quota_key(const char *k, size_t kn)
{
	if (kn == 3 && !memcmp(k, "rpm", 3))
		return PG_QUOTA_REQUESTS;
	if (kn == 3 && !memcmp(k, "tpm", 3))
		return PG_QUOTA_TOKENS;
	return -1;
}

int pg_quota_spec(const char *v, size_t n, struct pg_quota_lim *lim, char *err, size_t errlen)
{
	struct pg_quota_lim out = *lim;
	bool seen[PG_QUOTA_KINDS] = {false, false};
	size_t i = 0;

	if (!n) {
		snprintf(err, errlen, "expected rpm=N, tpm=N or both (\"rpm=60,tpm=100000\")");
		return -1;
	}
	while (i < n) {
		const char *p = v + i, *comma = memchr(p, ',', n - i), *eq;
		size_t len = comma ? (size_t)(comma - p) : n - i;
		int k;

		eq = memchr(p, '=', len);
		k = eq ? pg_quota_key(p, (size_t)(eq - p)) : -1;
		if (k < 0) {
			snprintf(err, errlen, "\"%.*s\": expected rpm=N or tpm=N",
			         (int)(len < 64 ? len : 64), p);
			return -1;
		}
		if (seen[k]) {
			snprintf(err, errlen, "%.3s given twice", p);
			return -1;
		}
		seen[k] = true;
		if (pg_quota_value(eq + 1, len - (size_t)(eq + 1 - p), &out.max[k])) {
			snprintf(err, errlen,
			         "%.3s: expected 0 (no limit) to %u a minute, got \"%.*s\"", p,
			         PG_QUOTA_MAX, (int)(len - 4 < 64 ? len - 4 : 64), eq + 1);
			return -1;
		}
		i += len + (comma != NULL);
		if (comma && i == n) {
			snprintf(err, errlen, "a comma with nothing after it");
			return -1;
		}
	}
	*lim = out;
	return 0;
}

int pg_quota_json(const char *s, size_t n, struct pg_quota_lim *lim, uint8_t *set, char *err,
                  size_t errlen)
{
	struct pg_json js = {0};
	struct pg_quota_lim out = {{0, 0}};
	uint8_t got = 0, seen = 0;
	int rc = -1;

	if (pg_json_parse(&js, s ? s : "", n) || js.tok[0].type != PG_JSON_OBJECT) {
		snprintf(err, errlen,
		         "expected {\"rpm\":N,\"tpm\":N} (each 0 to %u, or null: the default's)",
		         PG_QUOTA_MAX);
		goto out;
	}
	for (uint32_t k = 1, i = 0; i < js.tok[0].size; i++, k = pg_json_member_next(&js, k)) {
		const struct pg_json_tok *kt = &js.tok[k], *vt = &js.tok[k + 1];
		const int kind = pg_quota_key(js.src + kt->start, kt->end - kt->start);

		if (kind < 0 || (seen >> kind & 1)) {
			snprintf(err, errlen, "\"%.*s\": expected rpm or tpm, once each",
			         (int)(kt->end - kt->start < 32 ? kt->end - kt->start : 32),
			         js.src + kt->start);
			goto out;
		}
		seen |= (uint8_t)(1u << kind);
		if (vt->type == PG_JSON_NULL)
			continue;
		if (vt->type != PG_JSON_NUMBER ||
		    pg_quota_value(js.src + vt->start, vt->end - vt->start, &out.max[kind])) {
			snprintf(err, errlen, "%s: expected 0 (no limit) to %u a minute, or null",
			         kind ? "tpm" : "rpm", PG_QUOTA_MAX);
			goto out;
		}
		got |= (uint8_t)(1u << kind);
	}
	*lim = out;
	*set = got;
	rc = 0;
out:
	pg_json_free(&js);
	return rc;
}
