/* SPDX-License-Identifier: MIT */
/*
 * Response data paths: copy (userspace), sockmap (sk_skb verdict on the
 * gateway's backend socket: any backend) and sockmsg (sk_msg verdict on a
 * same-host backend's own socket). The kernel side is bpf/splice.bpf.c,
 * its loader user/datapath/splice_load.c; this module decides, per backend connection,
 * which path carries the response body and drives the hand-offs between
 * the proxy and the kernel. doc/datapaths.md ("Data paths") has the measurements.
 *
 * Common to both kernel paths (upstream.c calls these at fixed points):
 *  - Requests are parsed and forwarded from userspace; only the response
 *    body is spliced. A spliced attempt uses a fresh backend connection with
 *    the request rewritten to "Connection: close".
 *  - The body's framing (Content-Length count, chunked decoder state) is
 *    tracked across the hand-offs: the proxy gives the program its decoder
 *    state, the program advances it over what it redirects and gives it
 *    back, so the gateway knows a complete response from a cut-short one
 *    without reading the body, and the client's connection stays open after
 *    a complete one (keep-alive). sockmsg passes the write that ends the
 *    response to the proxy, which sees the end at once; sockmap redirects
 *    it and the backend's FIN wakes the proxy to check.
 *  - The proxy reads and rewrites the response head itself (hop-by-hop
 *    headers, client keep-alive), and hands over the body only once every
 *    byte it read is in the client's write queue.
 *  - Bytes the kernel does not redirect (budget reached, redirect failed)
 *    reach the proxy over TCP and are forwarded after every redirected byte.
 *  - One pg_splice per process (loaded by pg_datapath_init, after the maps).
 */
#ifndef PG_DATAPATH_H
#define PG_DATAPATH_H

#include <stdbool.h>
#include <stdint.h>
#include "proxy/worker_state.h"

/* The gateway's data path (gw->dp; NULL: copy only). */
struct pg_datapath;

/*
 * Load what gw->cfg asks for into gw->dp. auto: sockmsg for same-host
 * backends if it loads and attaches, else copy (the cause logged); --no-bpf
 * or copy: nothing loaded. An explicit sockmap/sockmsg that cannot load
 * returns -1 with err naming the cause (the caller exits 2). budget:
 * per-connection bound in bytes (0: PG_SPLICE_BUDGET_DEFAULT).
 */
int pg_datapath_init(struct pg_gateway *gw, uint64_t budget, char *err, size_t errlen);
void pg_datapath_fini(struct pg_gateway *gw);
/* The path kernel-carried responses take (PG_DP_COPY: none). */
enum pg_dp_path pg_datapath_mode(const struct pg_gateway *gw);
/* "copy", "sockmap" or "sockmsg (same-host backends; copy for others)". */
const char *pg_datapath_name(const struct pg_gateway *gw);

/* The path for a new request to backend id (head_method: HEAD, no body;
 * stream: the request asks for a streamed response). */
enum pg_dp_path pg_dp_choose(struct pg_worker *w, uint16_t id, bool head_method, bool stream);

/* A new backend socket for client c, before connect(): allocates u->dp;
 * the msg path binds it and installs the route with its gate closed.
 * Non-zero: u->dp stays NULL and the response is copied. */
int pg_dp_upstream_setup(struct pg_worker *w, struct pg_upstream *u, struct pg_client *c,
                         const union pg_sockaddr *sa, enum pg_dp_path path);

/* The response body goes through the kernel (its head was forwarded). */
bool pg_dp_spliced(const struct pg_upstream *u);

/* The response head was forwarded and its body goes on: hand it over. */
void pg_dp_body_start(struct pg_worker *w, struct pg_upstream *u);

/* The client's send queue moved. Returns true if u's receive must stay as it
 * is (a splice state owns it), false to let the copy path resume it. */
bool pg_dp_client_sent(struct pg_worker *w, struct pg_upstream *u);

/* len backend bytes reached the proxy (msg: the count gates open at). */
void pg_dp_received(struct pg_upstream *u, size_t len);
/* Backend bytes were forwarded by the proxy (msg: maybe reopen the gate). */
void pg_dp_forwarded(struct pg_worker *w, struct pg_upstream *u);

/* Backend bytes or the EOF arrived on a spliced connection, before the proxy
 * decodes them: if they follow bytes the program redirected, take its
 * framing state back (msg path; the skb path does it in pg_dp_run). */
void pg_dp_sync(struct pg_worker *w, struct pg_upstream *u);

/* The bytes client socket fd has carried (acknowledged + queued in the
 * kernel): 0, or a negative errno. */
int pg_dp_carried(int fd, uint64_t *carried);
/* The first hand-off of c's response to the kernel, with the client socket
 * at carried bytes and nothing of ours queued: the base of the access
 * log's bytes_out (conn.h). Later hand-offs leave it. */
static inline void pg_dp_mark_base(struct pg_client *c, uint64_t carried)
{
	if (c->x.dp_base)
		return;
	c->x.dp_base = true;
	c->x.dp_carried0 = carried;
	c->x.dp_resp0 = c->x.resp_bytes;
}

/* Events of u's socket routed here by upstream.c. */
void pg_dp_recv_ended(struct pg_worker *w, struct pg_upstream *u);
void pg_dp_polled(struct pg_worker *w, struct pg_upstream *u, int res);

/* u is about to be closed (or to linger): undo the kernel state, leave the
 * wait list. pg_dp_free: u is being freed. */
void pg_dp_upstream_closing(struct pg_worker *w, struct pg_upstream *u);
void pg_dp_free(struct pg_upstream *u);

/* Event loop: ms until pg_dp_run has work (100 if none); run the checks due. */
unsigned pg_dp_next_ms(struct pg_worker *w);
void pg_dp_run(struct pg_worker *w);
/* skb: the fd of this worker's event ring (-1: none), which the loop polls
 * to wake up for a fall-back; and its drain, every loop pass, which puts the
 * pairings it names on the wait list. */
int pg_dp_events_fd(struct pg_worker *w);
void pg_dp_events(struct pg_worker *w);

#endif /* PG_DATAPATH_H */
