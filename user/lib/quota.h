/* SPDX-License-Identifier: MIT */
/*
 * Quotas per tenant, pure (doc/routing.md "Quotas"): requests per minute and
 * tokens per minute, counted in a sliding minute, the OpenAI headers that
 * tell a client where it stands, and the values a quota is given as. No
 * I/O, no allocation, no clock (the caller gives the time).
 *
 * - A minute is PG_QUOTA_BUCKETS buckets of PG_QUOTA_BUCKET_MS: what was
 *   counted in a bucket leaves the minute PG_QUOTA_WINDOW_MS after its
 *   bucket began. A client that sends as fast as it may gets its limit in
 *   every minute it sends (a bucket's width early at most: 1/60), never the
 *   2x of a fixed window's edge nor a token bucket's burst on top.
 * - A bucket is one 64-bit word, its second's number above its count, so
 *   that every worker counts into it with a compare-and-swap and a stale
 *   bucket is never read as a live one. Buckets are by wall-clock second:
 *   the gateways of a fleet count the same seconds.
 * - Requests: a request is counted, then the minute is summed; one that
 *   finds the sum past its limit is taken back out and refused, so that
 *   concurrent workers never let more than the limit through (they may
 *   refuse one that a later sum would have let through).
 * - Tokens: a request goes while the tokens counted in the minute are below
 *   the limit; its prompt tokens are counted when it is routed, its
 *   completion tokens when its answer ends. A request may overshoot the
 *   limit by its own tokens, once (as AIBrix and Envoy AI Gateway do): the
 *   tokens of an answer are not known before it.
 * - The fleet (--nats): each gateway counts its own requests in local and
 *   tells the others, who count them in peer; the sum of both is checked.
 *   What the others let through before they were told is the overshoot:
 *   at most what the fleet's other gateways admit in one fleet interval
 *   plus a message's delivery.
 */
#ifndef PG_QUOTA_H
#define PG_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PG_QUOTA_WINDOW_MS 60000u
#define PG_QUOTA_BUCKET_MS 1000u
#define PG_QUOTA_BUCKETS   (PG_QUOTA_WINDOW_MS / PG_QUOTA_BUCKET_MS)
/* A limit's largest value (requests or tokens a minute); 0 is none. */
#define PG_QUOTA_MAX 1000000000
/* A bucket's count bits; the second's number takes the rest (it only has to
 * tell this minute's seconds from those of a minute ago: 2^24 s is 194
 * days). */
#define PG_QUOTA_COUNT_BITS 40

/* What a quota counts. */
enum pg_quota_kind {
	PG_QUOTA_REQUESTS = 0,
	PG_QUOTA_TOKENS = 1,
	PG_QUOTA_KINDS = 2,
};

/* A tenant's limits, by enum pg_quota_kind; 0: none. */
struct pg_quota_lim {
	uint32_t max[PG_QUOTA_KINDS];
};

/* One sliding minute of counts (atomics). Zeroed is empty. */
struct pg_qwin {
	uint64_t b[PG_QUOTA_BUCKETS];
};

/* One tenant's counts: its own (this gateway's), the fleet's others'
 * (peer), and what of its own the fleet was told (sent: the fleet
 * thread's only). */
struct pg_quota_counts {
	struct pg_qwin local[PG_QUOTA_KINDS], peer[PG_QUOTA_KINDS];
	struct pg_qwin sent[PG_QUOTA_KINDS];
};

/* Where a tenant stands, for its headers (pg_quota_headers). */
struct pg_quota_view {
	struct pg_quota_lim lim;
	uint64_t remaining[PG_QUOTA_KINDS];
	uint64_t reset_ms[PG_QUOTA_KINDS]; /* until the minute holds nothing of it */
	uint64_t retry_ms;                 /* a refused request: until one would go */
};

/* What pg_quota_take decided. */
enum pg_quota_verdict {
	PG_QUOTA_OK = 0,
	PG_QUOTA_OVER_REQUESTS = 1,
	PG_QUOTA_OVER_TOKENS = 2,
};

/* n counted in w at second sec (now_ms's clock: wall-clock ms), unless sec
 * has left the minute; n may be negative (taken back; never below 0). A
 * second ahead of now (a peer's clock) counts at now. */
void pg_qwin_add(struct pg_qwin *w, uint64_t sec, uint64_t now_ms, int64_t n);
/* What w counts in the minute that ends at now_ms. */
uint64_t pg_qwin_sum(const struct pg_qwin *w, uint64_t now_ms);
/* What w counts at second sec (0 when sec has left the minute). */
uint64_t pg_qwin_at(const struct pg_qwin *w, uint64_t sec, uint64_t now_ms);

/* Whether one more request of a tenant with limits lim goes at now_ms:
 * counted when it does; when it does not, v is where it stands (retry_ms
 * included). */
enum pg_quota_verdict pg_quota_take(struct pg_quota_counts *q, const struct pg_quota_lim *lim,
                                    uint64_t now_ms, struct pg_quota_view *v);
/* tokens more of its requests' (prompt tokens when routed, completion
 * tokens at the end) counted at now_ms. */
void pg_quota_charge(struct pg_quota_counts *q, uint64_t tokens, uint64_t now_ms);
/* Where it stands at now_ms (nothing counted). */
void pg_quota_view(const struct pg_quota_counts *q, const struct pg_quota_lim *lim, uint64_t now_ms,
                   struct pg_quota_view *v);

/* The x-ratelimit-* header lines (CRLF each) of v's limits into out (cap
 * bytes; NUL-terminated); returns their length, 0 when v has no limit. */
size_t pg_quota_headers(const struct pg_quota_view *v, char *out, size_t cap);
/* ms as OpenAI's reset headers spell a duration ("20ms", "6.5s", "1m0s"). */
size_t pg_quota_duration(uint64_t ms, char *out, size_t cap);
/* Retry-After, whole seconds: ms rounded up, at least 1. */
unsigned pg_quota_retry_after(uint64_t ms);

/* A limit's value v[0..n): decimal digits, 0 to PG_QUOTA_MAX: 0 and *out,
 * or -1. */
int pg_quota_value(const char *v, size_t n, uint32_t *out);
/* A quota's keys "rpm=N,tpm=N" (either or both, in any order) into lim
 * (keys not given are left as they are): 0, or -1 with err saying what is
 * wrong. */
int pg_quota_spec(const char *v, size_t n, struct pg_quota_lim *lim, char *err, size_t errlen);
/* Key k[0..kn) of a quota ("rpm", "tpm"): its kind, or -1. */
int pg_quota_key(const char *k, size_t kn);
/* A quota as JSON, s[0..n): {"rpm":N,"tpm":N}, each 0 to PG_QUOTA_MAX or
 * null (not its own: the default's), either absent (the same): 0 with lim
 * and *set (bit k: lim->max[k] given), or -1 with err saying what is
 * wrong. (PUT /tenants/NAME, etcd's P/config/quota and P/tenants/NAME.) */
int pg_quota_json(const char *s, size_t n, struct pg_quota_lim *lim, uint8_t *set, char *err,
                  size_t errlen);

#endif /* PG_QUOTA_H */
