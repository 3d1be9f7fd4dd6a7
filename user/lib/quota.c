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

/* Kind k's counts in the minute that ends at now_ms, this gateway's and
 * the fleet's others' together, by age in seconds (by[0]: this second's);
 * returns their sum. One pass over the buckets, no division in it: the
 * quota check runs on every request. */
static uint64_t by_age(const struct pg_quota_counts *q, unsigned k, uint64_t now_ms,
                       uint64_t by[PG_QUOTA_BUCKETS])
{
	const uint64_t now = sec_of(now_ms);
	const struct pg_qwin *w[2] = {&q->local[k], &q->peer[k]};
	uint64_t sum = 0;

	memset(by, 0, sizeof(uint64_t) * PG_QUOTA_BUCKETS);
	for (unsigned j = 0; j < 2; j++)
		for (unsigned i = 0; i < PG_QUOTA_BUCKETS; i++) {
			const uint64_t b = LOAD(&w[j]->b[i]),
			               age = (now - (b >> PG_QUOTA_COUNT_BITS)) & SEC_MASK;

			if (age < PG_QUOTA_BUCKETS) {
				by[age] += b & COUNT_MASK;
				sum += b & COUNT_MASK;
			}
		}
	return sum;
}

/* Milliseconds until the minute's count (sum, by age) is at most target,
 * as its oldest seconds leave it. */
static uint64_t until_at_most(const uint64_t by[PG_QUOTA_BUCKETS], uint64_t sum, uint64_t target,
                              uint64_t now_ms)
{
	const uint64_t into = now_ms % PG_QUOTA_BUCKET_MS; /* of this second */

	for (unsigned age = PG_QUOTA_BUCKETS; sum > target && age-- > 0;) {
		sum -= by[age];
		if (sum <= target) /* the second age old leaves in 60 - age seconds */
			return (uint64_t)(PG_QUOTA_BUCKETS - age) * PG_QUOTA_BUCKET_MS - into;
	}
	return 0;
}

/* v's figures for kind k (its limit in v->lim); target: also when it
 * would be below target (a refused request's retry), else UINT64_MAX. */
static uint64_t view_kind(const struct pg_quota_counts *q, unsigned k, uint64_t now_ms,
                          struct pg_quota_view *v, uint64_t target)
{
	uint64_t by[PG_QUOTA_BUCKETS];
	const uint64_t sum = by_age(q, k, now_ms, by), max = v->lim.max[k];

	v->remaining[k] = sum < max ? max - sum : 0;
	v->reset_ms[k] = until_at_most(by, sum, 0, now_ms);
	if (target != UINT64_MAX)
		v->retry_ms = until_at_most(by, sum, target, now_ms);
	return sum;
}

void pg_quota_view(const struct pg_quota_counts *q, const struct pg_quota_lim *lim, uint64_t now_ms,
                   struct pg_quota_view *v)
{
	*v = (struct pg_quota_view){.lim = *lim};
	for (unsigned k = 0; k < PG_QUOTA_KINDS; k++)
		if (lim->max[k])
			view_kind(q, k, now_ms, v, UINT64_MAX);
}

enum pg_quota_verdict pg_quota_take(struct pg_quota_counts *q, const struct pg_quota_lim *lim,
                                    uint64_t now_ms, struct pg_quota_view *v)
{
	const uint32_t rpm = lim->max[PG_QUOTA_REQUESTS], tpm = lim->max[PG_QUOTA_TOKENS];
	const uint64_t sec = sec_of(now_ms);

	*v = (struct pg_quota_view){.lim = *lim};
	if (tpm && pg_qwin_sum(&q->local[PG_QUOTA_TOKENS], now_ms) +
	                   pg_qwin_sum(&q->peer[PG_QUOTA_TOKENS], now_ms) >=
	               tpm) {
		pg_quota_view(q, lim, now_ms, v);
		view_kind(q, PG_QUOTA_TOKENS, now_ms, v, tpm - 1);
		return PG_QUOTA_OVER_TOKENS;
	}
	/* counted first, then summed: concurrent takers all see each other */
	pg_qwin_add(&q->local[PG_QUOTA_REQUESTS], sec, now_ms, 1);
	if (rpm && pg_qwin_sum(&q->local[PG_QUOTA_REQUESTS], now_ms) +
	                   pg_qwin_sum(&q->peer[PG_QUOTA_REQUESTS], now_ms) >
	               rpm) {
		pg_qwin_add(&q->local[PG_QUOTA_REQUESTS], sec, now_ms, -1);
		pg_quota_view(q, lim, now_ms, v);
		view_kind(q, PG_QUOTA_REQUESTS, now_ms, v, rpm - 1);
		return PG_QUOTA_OVER_REQUESTS;
	}
	/* (where it stands is for its answer's head: pg_quota_view then) */
	return PG_QUOTA_OK;
}

void pg_quota_charge(struct pg_quota_counts *q, uint64_t tokens, uint64_t now_ms)
{
	if (tokens)
		pg_qwin_add(&q->local[PG_QUOTA_TOKENS], sec_of(now_ms), now_ms, (int64_t)tokens);
}

/* Text appended at out[*k] (cap bytes): false, nothing written, when it
 * does not fit. Formatting by hand: the headers go on every answer. */
static bool put_str(char *out, size_t cap, size_t *k, const char *s, size_t n)
{
	if (*k + n >= cap)
		return false;
	memcpy(out + *k, s, n);
	*k += n;
	return true;
}

static bool put_num(char *out, size_t cap, size_t *k, uint64_t v, unsigned min_digits)
{
	char d[24];
	size_t n = 0;

	do {
		d[sizeof(d) - 1 - n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v || n < min_digits);
	return put_str(out, cap, k, d + sizeof(d) - n, n);
}

size_t pg_quota_duration(uint64_t ms, char *out, size_t cap)
{
	const uint64_t m = ms / 60000, s = ms % 60000 / 1000;
	uint64_t f = ms % 1000;
	unsigned fd = 3;
	size_t k = 0;
	bool ok;

	if (ms < 1000) {
		ok = put_num(out, cap, &k, ms, 1) && put_str(out, cap, &k, "ms", 2);
	} else {
		ok = (!m || (put_num(out, cap, &k, m, 1) && put_str(out, cap, &k, "m", 1))) &&
		     put_num(out, cap, &k, s, 1);
		for (; f && f % 10 == 0; f /= 10) /* "6.5s", not "6.500s" */
			fd--;
		ok = ok &&
		     (!f || (put_str(out, cap, &k, ".", 1) && put_num(out, cap, &k, f, fd))) &&
		     put_str(out, cap, &k, "s", 1);
	}
	if (!ok)
		k = 0;
	if (cap)
		out[k] = 0;
	return k;
}

unsigned pg_quota_retry_after(uint64_t ms)
{
	uint64_t s = (ms + 999) / 1000;

	return s < 1 ? 1 : s > PG_QUOTA_WINDOW_MS / 1000 ? PG_QUOTA_WINDOW_MS / 1000 : (unsigned)s;
}

size_t pg_quota_headers(const struct pg_quota_view *v, char *out, size_t cap)
{
	static const struct {
		const char *limit, *remaining, *reset;
		size_t ll, rl, tl;
	} name[PG_QUOTA_KINDS] = {
#define N(kind)                                                                                    \
	{"x-ratelimit-limit-" kind ": ",                                                           \
	 "\r\nx-ratelimit-remaining-" kind ": ",                                                   \
	 "\r\nx-ratelimit-reset-" kind ": ",                                                       \
	 sizeof("x-ratelimit-limit-" kind ": ") - 1,                                               \
	 sizeof("\r\nx-ratelimit-remaining-" kind ": ") - 1,                                       \
	 sizeof("\r\nx-ratelimit-reset-" kind ": ") - 1}
	    N("requests"),
	    N("tokens"),
#undef N
	};
	size_t k = 0;

	for (unsigned i = 0; i < PG_QUOTA_KINDS; i++) {
		const size_t at = k;
		char reset[32];
		size_t rn;

		if (!v->lim.max[i])
			continue;
		rn = pg_quota_duration(v->reset_ms[i], reset, sizeof(reset));
		if (!put_str(out, cap, &k, name[i].limit, name[i].ll) ||
		    !put_num(out, cap, &k, v->lim.max[i], 1) ||
		    !put_str(out, cap, &k, name[i].remaining, name[i].rl) ||
		    !put_num(out, cap, &k, v->remaining[i], 1) ||
		    !put_str(out, cap, &k, name[i].reset, name[i].tl) ||
		    !put_str(out, cap, &k, reset, rn) || !put_str(out, cap, &k, "\r\n", 2)) {
			k = at; /* never half a header */
			break;
		}
	}
	if (cap)
		out[k] = 0;
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
