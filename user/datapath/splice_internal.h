/* SPDX-License-Identifier: MIT */
/*
 * The loader's handle, shared by the files of the splice module:
 * splice_load.c (open, attach, pin, close), splice_conn.c (per-connection
 * calls on the maps) and splice_events.c (the event rings). Not part of the
 * public API (splice.h): include only from those files.
 */
#ifndef PG_SPLICE_INTERNAL_H
#define PG_SPLICE_INTERNAL_H

#include <stddef.h>
#include "datapath/splice.h"
#include "splice.skel.h"

/* One event ring and its consumer; used by one thread at a time. */
struct pg_splice_ring {
	int fd;                 /* the BPF_MAP_TYPE_RINGBUF map, slot i of splice_events */
	struct ring_buffer *rb; /* libbpf's reader of it */
	void (*fn)(void *ctx, const struct pg_splice_event *ev); /* while draining */
	void *ctx;
	__u64 lost_seen; /* splice_events_lost[i] at the previous drain */
};

struct pg_splice {
	struct splice_bpf *skel;
	unsigned int modes;
	int cgroup_fd;
	/* sk_skb / sk_msg verdicts: link fds, or -1 when attached the old way
	 * (bpf_prog_attach, kernels before sockmap links) and detached by hand */
	int skb_link, msg_link;
	int skb_attached, msg_attached;
	struct bpf_link *sockops_link;
	struct pg_splice_ring *rings;
	unsigned int nrings;
	char pin_path[256];
};

/* printf into err (NULL or errlen 0: nothing written). */
void pg_splice_seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* splice_events.c: create the event rings cfg asks for and put them in the
 * loaded splice_events (pg_splice_open calls it after the load); 0, or
 * -errno with err naming the cause. Their release, safe on a partial init. */
int pg_splice_events_init(struct pg_splice *sp, const struct pg_splice_config *cfg, char *err,
                          size_t errlen);
void pg_splice_events_fini(struct pg_splice *sp);

#endif /* PG_SPLICE_INTERNAL_H */
