// SPDX-License-Identifier: MIT
/*
 * The event rings of the in-kernel response paths: bpf/splice.bpf.c writes a
 * struct pg_splice_event to a pairing's ring when an skb pairing falls back,
 * breaks or its response ends (include/pg_splice.h); these calls create the
 * rings and read them (contracts in splice.h). One ring per consumer thread,
 * so that each worker drains only its own pairings' events, without locks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "datapath/splice_internal.h"

static int on_event(void *ctx, void *data, size_t size)
{
	struct pg_splice_ring *r = ctx;

	if (size >= sizeof(struct pg_splice_event) && r->fn)
		r->fn(r->ctx, data);
	return 0;
}

int pg_splice_events_init(struct pg_splice *sp, const struct pg_splice_config *cfg, char *err,
                          size_t errlen)
{
	unsigned int n = cfg && cfg->event_rings ? cfg->event_rings : 1;
	__u32 bytes = cfg && cfg->event_ring_bytes ? cfg->event_ring_bytes : PG_SPLICE_EVENTS_BYTES;
	long page = sysconf(_SC_PAGESIZE);
	int outer = bpf_map__fd(sp->skel->maps.splice_events), rc;

	if (n > PG_SPLICE_MAX_RINGS || (bytes & (bytes - 1)) || bytes % (__u32)page) {
		pg_splice_seterr(err, errlen,
		                 "splice: %u event rings of %u bytes: at most %d rings, each a "
		                 "power of two pages",
		                 n, bytes, PG_SPLICE_MAX_RINGS);
		return -EINVAL;
	}
	sp->rings = calloc(n, sizeof(*sp->rings));
	if (!sp->rings) {
		pg_splice_seterr(err, errlen, "splice: out of memory");
		return -ENOMEM;
	}
	for (__u32 i = 0; i < n; i++) {
		struct pg_splice_ring *r = &sp->rings[i];

		sp->nrings = i + 1; /* fini releases what exists so far */
		r->fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "splice_ring", 0, 0, bytes, NULL);
		if (r->fd < 0 || bpf_map_update_elem(outer, &i, &r->fd, BPF_ANY))
			goto fail;
		r->rb = ring_buffer__new(r->fd, on_event, r, NULL);
		if (!r->rb)
			goto fail;
	}
	return 0;
fail:
	rc = -errno;
	pg_splice_seterr(err, errlen, "splice: event ring %u: %s", sp->nrings - 1, strerror(errno));
	return rc;
}

void pg_splice_events_fini(struct pg_splice *sp)
{
	for (unsigned int i = 0; i < sp->nrings; i++) {
		ring_buffer__free(sp->rings[i].rb);
		if (sp->rings[i].fd >= 0)
			close(sp->rings[i].fd);
	}
	free(sp->rings);
	sp->rings = NULL;
	sp->nrings = 0;
}

int pg_splice_events_ring_fd(const struct pg_splice *sp, unsigned int ring)
{
	return ring < sp->nrings ? sp->rings[ring].fd : -EINVAL;
}

int pg_splice_events_drain(struct pg_splice *sp, unsigned int ring,
                           void (*fn)(void *ctx, const struct pg_splice_event *ev), void *ctx,
                           __u64 *lost)
{
	struct pg_splice_ring *r;
	__u64 now;
	int n;

	if (ring >= sp->nrings)
		return -EINVAL;
	r = &sp->rings[ring];
	r->fn = fn;
	r->ctx = ctx;
	n = ring_buffer__consume(r->rb);
	r->fn = NULL;
	/* Read after the records: a loss counted by now is reported now, a later
	 * one at the next drain. Its pairing's flag was set before the count. */
	now = __atomic_load_n(&sp->skel->bss->splice_events_lost[ring], __ATOMIC_ACQUIRE);
	if (lost)
		*lost = now - r->lost_seen;
	r->lost_seen = now;
	return n;
}

int pg_splice_events_fd(const struct pg_splice *sp)
{
	return pg_splice_events_ring_fd(sp, 0);
}

int pg_splice_events_consume(struct pg_splice *sp,
                             void (*fn)(void *ctx, const struct pg_splice_event *ev), void *ctx)
{
	return pg_splice_events_drain(sp, 0, fn, ctx, NULL);
}
