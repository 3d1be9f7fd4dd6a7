/* SPDX-License-Identifier: MIT */
/*
 * State shared by the data path's files (datapath.c: choice, set-up and
 * tear-down; datapath_msg.c: the sockmsg gate; datapath_skb.c: sockmap
 * pairing and draining). Not part of the public API: include only from
 * those files.
 */
#ifndef PG_DATAPATH_INTERNAL_H
#define PG_DATAPATH_INTERNAL_H

#include "datapath/datapath.h"
#include "datapath/splice.h"

#define DP_READ_MAX    (64 * 1024)
#define DP_LOCAL_MAX   64
#define DP_WAIT_MAX_MS 64
#define DP_OPEN_MIN    (8 * 1024) /* msg: least budget worth opening the gate for */

/* Where a spliced response stands (the transitions are below). */
enum pg_dp_state {
	PG_SP_NONE = 0, /* copying (or head not read yet) */
	PG_SP_MSG,      /* msg route in place; gate at gate_at */
	PG_SP_STOPPING, /* skb: multishot recv cancelled, waiting for its last CQE */
	PG_SP_DRAIN,    /* skb: reading the socket to EAGAIN, then waiting for the
	                 * client's queue to empty before pairing */
	PG_SP_PAIRED,   /* skb: kernel redirects; POLLRDHUP armed */
	PG_SP_WAIT,     /* skb: FIN or fall-back seen; waiting until drained */
	PG_SP_COPY,     /* skb: drained; passed bytes and EOF read by the proxy */
};

/* One backend connection's kernel path (u->dp). */
struct pg_dp_conn {
	struct pg_upstream *u;
	enum pg_dp_path path;
	enum pg_dp_state sstate;
	bool spliced;         /* the body goes through the kernel */
	bool polling;         /* POLLRDHUP outstanding */
	bool on_wait;         /* on the worker's dp_wait list */
	uint16_t synced_gen;  /* msg: gate generation whose frame was taken back */
	uint16_t gate_gen;    /* msg: generation of the last gate opening */
	uint64_t rx;          /* bytes received from the backend by the proxy */
	uint64_t gate_at;     /* msg: open_at last published, or PG_SPLICE_GATE_CLOSED */
	__u64 carried_at;     /* msg: the client socket's carried bytes at that opening */
	uint64_t wait_at_ms;  /* skb WAIT: next drained check */
	uint32_t wait_ms;     /* skb WAIT: current back-off */
	union pg_sockaddr sa; /* backend address (msg route key) */
	__u64 key;            /* skb: the pairing's key in its events (backend cookie) */
	struct pg_dp_conn *wait_next;
};

struct pg_datapath {
	struct pg_splice *sp;
	enum pg_dp_path mode;
	bool auto_mode; /* --data-path auto: splice streamed responses only */
	uint64_t budget;
	union pg_sockaddr local[DP_LOCAL_MAX]; /* this host's addresses (is_local) */
	unsigned nlocal;
	uint32_t port_added[PG_MAX_BACKENDS]; /* msg: backend port + 1 registered */
	uint8_t logged[PG_MAX_BACKENDS];      /* "not on this host" said once */
	uint64_t err_logged_ms;
};

const char *pg_dp_state_str(enum pg_dp_state s);

/* Rate-limited warning: a per-request failure must not flood the log. */
void pg_dp_warn(struct pg_worker *w, const char *what, int rc);
/* msg: open the gate if the client's queue allows (datapath_msg.c). */
void pg_dp_msg_gate(struct pg_worker *w, struct pg_upstream *u);
/* skb: read the socket to EAGAIN, then pair (datapath_skb.c). */
void pg_dp_skb_drain(struct pg_worker *w, struct pg_upstream *u);
/* skb: the drained-check list (datapath_skb.c). */
void pg_dp_wait_add(struct pg_worker *w, struct pg_dp_conn *d);
void pg_dp_wait_remove(struct pg_worker *w, struct pg_dp_conn *d);

#endif /* PG_DATAPATH_INTERNAL_H */
