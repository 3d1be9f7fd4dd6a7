/* SPDX-License-Identifier: MIT */
/*
 * State and helpers shared by the control thread (control.c), the
 * membership code (members.c) and the admin listener's connections
 * (admin_listener.c). Not part of the public API: include only from those
 * files. Everything here is used on the control thread only, or
 * before it starts (see control.h).
 */
#ifndef PG_CONTROL_INTERNAL_H
#define PG_CONTROL_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "control/admin.h"
#include "control/control.h"
#include "lib/ring.h"

/* Why a member is in the table (pg_ctl.origin[id]); 0 once draining. */
#define PG_ORIGIN_STATIC 0x1 /* --backend or POST /backends */
#define PG_ORIGIN_FILE   0x2 /* --backends-file */

/* One admin client connection. */
struct admin_conn {
	int fd;                   /* -1: free */
	uint64_t since_ms;        /* accepted at */
	struct pg_admin_conn req; /* the request being received */
	bool done;                /* the whole reply is in out */
	bool lingering;           /* reply sent, write side shut: wait for EOF */
	uint64_t linger_ms;       /* lingering since */
	struct pg_buf out;        /* bytes to send */
	size_t out_off;           /* of which sent */
};

/* The control thread's state: process-wide (one gateway per process).
 * Defined in control.c. */
struct pg_ctl_state {
	struct pg_gateway *gw;
	uint8_t origin[PG_MAX_BACKENDS];       /* PG_ORIGIN_* */
	uint64_t drain_since[PG_MAX_BACKENDS]; /* ms when draining began */
	char *route_text;                      /* --routing-config as last applied */
	size_t route_len;
	pthread_t thread;
	bool running;
	int lfd, sfd, efd;      /* listener, signalfd, stop eventfd */
	int ifd;                /* inotify on --backends-file's directory, or -1 */
	const char *watch_base; /* the file's name in that directory */
	uint16_t admin_port;
	struct admin_conn conns[PG_ADMIN_MAX_CONNS];
	struct pg_ring_member ring_members[PG_MAX_BACKENDS]; /* members.c's scratch */
	struct pg_ring_last ring_last; /* the previous ring build (pg_ring_update) */
};

extern struct pg_ctl_state pg_ctl;

/* pg_addr_parse for the member functions: 0, or -EINVAL with err set to
 * "address <why>". */
int pg_ctl_parse_addr(const char *addr, struct sockaddr_in *sa, char *err, size_t errlen);

/*
 * Make sa a member with origin bit(s) origin; no ring rebuild. dup_ok: an
 * active member with that address just gains the origin (file sync, start
 * up); otherwise it is -EEXIST. *changed is set when the ring must change.
 * Returns the id, or -EEXIST / -ENOSPC with err set.
 */
int pg_ctl_add_one(struct pg_gateway *gw, const struct sockaddr_in *sa, uint8_t origin, bool dup_ok,
                   bool *changed, char *err, size_t errlen);

/* The same into model pool pool (state/pools.h); an address already in
 * another pool is -EEXIST. */
int pg_ctl_add_one_pool(struct pg_gateway *gw, const struct sockaddr_in *sa, unsigned pool,
                        uint8_t origin, bool dup_ok, bool *changed, char *err, size_t errlen);

/* pg_members_sync without the ring rebuild: *changed says if one is due.
 * Returns the number of members added or drained, or -1 with err set. */
int pg_ctl_sync_file(struct pg_gateway *gw, char *const *list, size_t n, bool *changed, char *err,
                     size_t errlen);

/*
 * The admin connections in pg_ctl.conns (admin_listener.c; the policy is
 * stated there), driven by the control thread's poll loop:
 *  - pg_ctl_admin_accept: accept what the listener's backlog holds (at most
 *    PG_ADMIN_MAX_CONNS per call), evicting the oldest idle connection or
 *    answering 503 when no slot is free;
 *  - pg_ctl_conn_read / pg_ctl_conn_write: the connection is readable /
 *    writable (a read may answer, a write completes and lingers; either may
 *    close it, leaving c->fd -1);
 *  - pg_ctl_conn_close: close it now, its slot free;
 *  - pg_ctl_admin_timeouts: once per control tick, close the connections
 *    past their timeouts, and log evictions and refusals (at most one line
 *    per 10 s).
 */
void pg_ctl_admin_accept(struct pg_gateway *gw);
void pg_ctl_conn_read(struct pg_gateway *gw, struct admin_conn *c);
void pg_ctl_conn_write(struct admin_conn *c);
void pg_ctl_conn_close(struct admin_conn *c);
void pg_ctl_admin_timeouts(uint64_t now);

#endif /* PG_CONTROL_INTERNAL_H */
