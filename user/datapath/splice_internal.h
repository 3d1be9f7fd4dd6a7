/* SPDX-License-Identifier: MIT */
/*
 * The loader's handle, shared by the files of the splice module:
 * splice_load.c (open, attach, pin, close), splice_conn.c (per-connection
 * calls on the maps) and splice_events.c (the event ring). Not part of the
 * public API (splice.h): include only from those files.
 */
#ifndef PG_SPLICE_INTERNAL_H
#define PG_SPLICE_INTERNAL_H

#include "datapath/splice.h"
#include "splice.skel.h"

struct pg_splice {
	struct splice_bpf *skel;
	unsigned int modes;
	int cgroup_fd;
	/* sk_skb / sk_msg verdicts: link fds, or -1 when attached the old way
	 * (bpf_prog_attach, kernels before sockmap links) and detached by hand */
	int skb_link, msg_link;
	int skb_attached, msg_attached;
	struct bpf_link *sockops_link;
	struct ring_buffer *events;
	void (*event_fn)(void *ctx, const struct pg_splice_event *ev);
	void *event_ctx;
	char pin_path[256];
};

/* splice_events.c: the consumer of the loaded splice_events ring (called by
 * pg_splice_open once the programs are loaded), and its release (NULL-safe
 * on sp->events). 0 or -errno. */
int pg_splice_events_init(struct pg_splice *sp);
void pg_splice_events_fini(struct pg_splice *sp);

#endif /* PG_SPLICE_INTERNAL_H */
