// SPDX-License-Identifier: MIT
/*
 * The event ring of the in-kernel response paths: bpf/splice.bpf.c writes one
 * struct pg_splice_event to splice_events when an skb pairing falls back or
 * its response ends; these calls read them (contracts in splice.h).
 */
#include <errno.h>
#include <bpf/libbpf.h>
#include "datapath/splice_internal.h"

static int on_event(void *ctx, void *data, size_t size)
{
	struct pg_splice *sp = ctx;

	if (size >= sizeof(struct pg_splice_event) && sp->event_fn)
		sp->event_fn(sp->event_ctx, data);
	return 0;
}

int pg_splice_events_init(struct pg_splice *sp)
{
	sp->events =
	    ring_buffer__new(bpf_map__fd(sp->skel->maps.splice_events), on_event, sp, NULL);
	return sp->events ? 0 : -errno;
}

void pg_splice_events_fini(struct pg_splice *sp)
{
	ring_buffer__free(sp->events);
	sp->events = NULL;
}

int pg_splice_events_fd(const struct pg_splice *sp)
{
	return ring_buffer__epoll_fd(sp->events);
}

int pg_splice_events_consume(struct pg_splice *sp,
                             void (*fn)(void *ctx, const struct pg_splice_event *ev), void *ctx)
{
	int n;

	sp->event_fn = fn;
	sp->event_ctx = ctx;
	n = ring_buffer__consume(sp->events);
	sp->event_fn = NULL;
	return n;
}
