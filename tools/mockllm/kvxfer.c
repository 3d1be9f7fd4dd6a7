// SPDX-License-Identifier: MIT
/*
 * KV transfers of a vLLM-protocol prefill instance; see kvxfer.h. The
 * transfers are kept in id order, which is also the order of their
 * expiry (one TTL for all): expiring walks from the oldest live one, and
 * forgetting drops ended ones from the front.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvxfer.h"

const char *xfer_reason(enum xfer_result r)
{
	static const char *const names[XFER__COUNT] = {
	    [XFER_OK] = "ok",
	    [XFER_ENGINE] = "engine",
	    [XFER_UNKNOWN] = "unknown",
	    [XFER_STALE] = "stale",
	    [XFER_PULLED] = "pulled",
	    [XFER_MISMATCH] = "mismatch",
	    [XFER_REQUEST_ID] = "request_id",
	};

	return r < XFER__COUNT ? names[r] : "?";
}

int xfer_init(struct xfer_table *t, const char *engine, uint64_t ttl_ns)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->engine, sizeof(t->engine), "%s", engine);
	t->ttl_ns = ttl_ns;
	t->next_id = 1;
	return 0;
}

void xfer_free(struct xfer_table *t)
{
	free(t->v);
	t->v = NULL;
	t->head = t->n = t->cap = t->live_from = 0;
}

void xfer_sweep(struct xfer_table *t, uint64_t now)
{
	size_t i = t->live_from;

	for (; i < t->n; i++) {
		struct xfer *x = &t->v[i];

		if (x->state != XS_LIVE)
			continue;
		if (now < x->expires)
			break;
		x->state = XS_EXPIRED;
		t->pinned--;
		t->pinned_blocks -= x->n;
		t->expired++;
	}
	t->live_from = i;
	/* forget the oldest ended transfers beyond XFER_KEEP */
	while (t->head < t->live_from && t->n - t->head > XFER_KEEP)
		t->head++;
}

/* Room for one more at the end: drop the forgotten front first. */
static int reserve(struct xfer_table *t)
{
	if (t->head && t->head >= t->n / 2) {
		memmove(t->v, t->v + t->head, (t->n - t->head) * sizeof(*t->v));
		t->n -= t->head;
		t->live_from -= t->head;
		t->head = 0;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 256;
		struct xfer *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -1;
		t->v = v;
		t->cap = cap;
	}
	return 0;
}

uint64_t xfer_pin(struct xfer_table *t, uint64_t now, uint32_t n, uint64_t last_hash, uint64_t rid)
{
	struct xfer *x;

	xfer_sweep(t, now);
	if (n == 0 || reserve(t) == -1)
		return 0;
	x = &t->v[t->n++];
	x->first_id = t->next_id;
	x->n = n;
	x->last_hash = last_hash;
	x->expires = now + t->ttl_ns;
	x->rid = rid;
	x->state = XS_LIVE;
	t->next_id += n;
	t->pinned++;
	t->pinned_blocks += n;
	return x->first_id;
}

/* The remembered transfer holding block id, or NULL. */
static struct xfer *find(struct xfer_table *t, uint64_t id)
{
	size_t lo = t->head, hi = t->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct xfer *x = &t->v[mid];

		if (id < x->first_id)
			hi = mid;
		else if (id >= x->first_id + x->n)
			lo = mid + 1;
		else
			return x;
	}
	return NULL;
}

static enum xfer_result refuse(struct xfer_table *t, enum xfer_result r, char *why, const char *fmt,
                               ...) __attribute__((format(printf, 4, 5)));

static enum xfer_result refuse(struct xfer_table *t, enum xfer_result r, char *why, const char *fmt,
                               ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, XFER_WHY_MAX, fmt, ap);
	va_end(ap);
	t->refused[r]++;
	return r;
}

enum xfer_result xfer_pull(struct xfer_table *t, uint64_t now, const char *engine, uint64_t rid,
                           const uint64_t *ids, size_t n, size_t skip, uint32_t *blocks,
                           uint64_t *last_hash, char why[XFER_WHY_MAX])
{
	unsigned long long first, last;
	struct xfer *x;
	size_t k;

	why[0] = '\0';
	xfer_sweep(t, now);
	if (strcmp(engine, t->engine) != 0)
		return refuse(t, XFER_ENGINE, why,
		              "remote_engine_id %s is not this instance's (%s)", engine, t->engine);
	if (n == 0)
		return refuse(t, XFER_MISMATCH, why, "no block ids to pull");
	x = find(t, ids[0]);
	if (!x)
		return refuse(t, XFER_UNKNOWN, why,
		              ids[0] && ids[0] < t->next_id
		                  ? "block %llu: its transfer ended long ago and is forgotten"
		                  : "block %llu was never pinned here",
		              (unsigned long long)ids[0]);
	first = x->first_id;
	last = x->first_id + x->n - 1;
	for (k = 0; k < n && k < x->n && ids[k] == x->first_id + k; k++)
		;
	if (ids[0] != x->first_id || k != n || n != x->n || skip > n)
		return refuse(
		    t, XFER_MISMATCH, why,
		    "remote_block_ids (%zu from %llu) are not the transfer's (%u from %llu)", n,
		    (unsigned long long)ids[0], x->n, first);
	if (x->state == XS_PULLED)
		return refuse(t, XFER_PULLED, why, "blocks %llu-%llu were pulled already", first,
		              last);
	if (x->state == XS_EXPIRED)
		return refuse(t, XFER_STALE, why,
		              "blocks %llu-%llu expired %llu ms ago (--kv-transfer-ttl-ms)", first,
		              last, (unsigned long long)((now - x->expires) / 1000000));
	if (rid && x->rid && rid != x->rid)
		return refuse(t, XFER_REQUEST_ID, why,
		              "X-Request-Id differs from the prefill leg's (blocks %llu-%llu)",
		              first, last);
	x->state = XS_PULLED;
	t->pinned--;
	t->pinned_blocks -= x->n;
	t->served++;
	t->served_blocks += x->n - skip;
	*blocks = x->n;
	*last_hash = x->last_hash;
	return XFER_OK;
}
