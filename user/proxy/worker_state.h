/* SPDX-License-Identifier: MIT */
/*
 * A worker's state (struct pg_worker) and what every part of the proxy
 * does with it: its provided buffers (bufs.c), its random numbers, its run
 * list (client.c). The loop that drives it is worker.c (worker.h); the
 * parts it runs (conn.h, body.h, queue.h, pd.h, sock.h, the data paths)
 * include this, not worker.h, so that the loop depends on them and not the
 * other way round.
 */
#ifndef PG_WORKER_STATE_H
#define PG_WORKER_STATE_H

#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "gateway.h"
#include "lib/key.h"
#include "lib/spare.h"
#include "proxy/conn.h"
#include "proxy/hotbufs.h"
#include "proxy/io.h"
#include "proxy/starved.h"

/* Provided receive buffers per worker, and their size: large enough that
 * a request of a few tens of KiB (a chat body, a RAG prompt) arrives in one
 * receive, whole, and is sent on from there (PG_LEND_BODY_MIN). */
#define PG_NBUFS 128
#define PG_BUFSZ (64 * 1024)
/* A Content-Length body of at least this many bytes that arrived whole in
 * the receive with its head is not copied: the provided buffer is lent to
 * the exchange (conn.h pg_hold) while buffers are plentiful
 * (pg_worker_can_lend). Below it the copy costs less than the buffer
 * held until the backend answers. */
#define PG_LEND_BODY_MIN 4096
/* A request body's JSON is parsed as it arrives once this much of it is
 * held and more is to come (json.h pg_json_stream): what is left once the
 * body is whole is its last piece, however long the body. A body that is
 * whole at the first look (most, on a fast link) is parsed whole. */
#define PG_PARSE_AHEAD_MIN (16 * 1024)
/* A response's bytes queued towards a slow client, at most (then the backend
 * connection stops being read, and TCP pushes back on the backend). */
#define PG_RESP_QUEUE_MAX (256 * 1024)
/* Request bytes queued towards a slow backend, at most. */
#define PG_REQ_QUEUE_MAX (1024 * 1024)
/* Unparsed client bytes held while a request is being answered (pipelining). */
#define PG_PIPELINE_MAX (PG_HTTP_MAX_HEAD + 16 * 1024)
/* Parses made as bodies arrived (with their tokens) a worker keeps for the
 * next bodies. */
#define PG_AHEAD_SPARES 4
/* A backend connection's response-head buffer (only for a head split over
 * receives: one that begins in a receive is parsed there) is kept for the
 * next response up to this size; one that grew past it (the end of a head
 * that came with a receive's worth of body) is freed once the head is read. */
#define PG_HBUF_KEEP 4096
/* Idle keep-alive backend connections kept per backend per worker, and for how long. */
#define PG_POOL_MAX     64
#define PG_POOL_IDLE_MS 30000
/* A connection asked to close (spliced response) waits this long for the
 * backend's FIN before the gateway closes it first. */
#define PG_LINGER_MS 2000
/* How long a refused/reset backend is skipped. */
#define PG_DOWN_MS 2000
/* Attempts per request: the first, then the next candidate after each
 * failure (a backend not tried yet, as routing would pick it) until one
 * answers, none is left, or this many were made (doc/routing.md "How it routes").
 * Each failed one costs a refused connect (instant) or --connect-timeout. */
#define PG_MAX_ATTEMPTS 32

/* A worker's listeners: --listen's, and --tls-listen's when given. */
enum pg_listener { PG_LISTEN_PLAIN = 0, PG_LISTEN_TLS = 1, PG_LISTENERS = 2 };
struct pg_listen {
	int fd; /* -1: none (closed when draining) */
	bool armed;
	bool tls;              /* its connections speak TLS (proxy/tls.h) */
} __attribute__((aligned(8))); /* named by an accept's user_data */

struct pg_tls_worker;

struct pg_worker {
	struct pg_gateway *gw;
	unsigned id;
	pthread_t thread;
	struct io_uring ring;
	struct pg_listen listen[PG_LISTENERS];
	struct io_uring_buf_ring *br;
	char *bufs;
	struct pg_hotbufs hot;                 /* which buffers are posted next */
	unsigned bufs_out;                     /* provided buffers held by us */
	const struct pg_io *io;                /* the I/O actions (io_uring, or a test's fake) */
	struct pg_starved starved;             /* sockets waiting for provided buffers */
	struct pg_sock *graveyard;             /* closed, freed once no I/O names them */
	struct pg_client *run_head, *run_tail; /* run list (pg_worker_run) */
	struct pg_sock *flush_head;            /* sockets with bytes queued this turn (sock.h) */
	struct __kernel_timespec ts_connect;
	uint64_t accept_err_logged_ms;
	void *boot;
	/* Client connections: idle keep-alive ones (no request begun), oldest
	 * first, so the tick stops at the first not yet due; and the rest. */
	struct pg_clist idle, busy;
	unsigned nclients; /* open client connections (--max-connections) */
	struct pg_upstream *pool[PG_MAX_BACKENDS];
	unsigned pool_len[PG_MAX_BACKENDS];
	struct pg_upstream *linger; /* done, waiting for the backend to close first */
	struct pg_worker_stats *stats;
	uint64_t rng;
	uint64_t rid_boot, rid_seq; /* made X-Request-Ids: random boot id, counter */
	uint64_t now_ms;            /* refreshed once per loop turn */
	struct pg_dp_conn *dp_wait; /* skb connections waiting to be drained (datapath.c) */
	/* Memory kept from one request for the next, so that in steady state
	 * a request's body, its parse and its key allocate nothing
	 * (pg_worker_spares_free): freed input buffers, request bodies among
	 * them (lib/spare.h); parses made as bodies arrived (body.h); the
	 * key's scratch (key.h). Small pieces (heads, send segments) and
	 * chunked bodies' copies still come from malloc. */
	struct pg_spares spares;
	struct pg_json_stream *ahead_spare[PG_AHEAD_SPARES];
	unsigned nahead_spare;
	struct pg_key_scratch key_scratch;
	/* Flow control (queue.h): a queue per pool, made when a request of
	 * the pool first waits; and whether they are to be run after this turn
	 * (room was made here). */
	struct pg_flow_q *fq[PG_MAX_POOLS];
	bool flow_run;
	struct pg_flow_share flow_share; /* lib/flow.h; proxy/queue.c routed_class takes it */
	uint64_t flow_room_ms; /* a queue's next request has room then, by time alone (0: none
	                        * such: router/route.h pg_route_room) */
	bool flow_kicked;      /* another worker woke this one (its eventfd polled readable) */
	uint32_t reports_seen; /* gw->reports when its requests were last checked against them */
	/* The earliest deadline of a request of this worker's sent on and not
	 * yet given its first token (proxy/deadline.h; 0: none). It may be
	 * early: a run that finds nothing due sets the next. */
	uint64_t cut_next_ms;
	struct pg_tls_worker *tls; /* TLS connections (proxy/tls.h); NULL: no TLS */
	char err[256];
};

/* A random number of this worker's (xorshift64*: per-worker, no locking;
 * quality ample for tie-breaks). */
static inline uint64_t pg_worker_rand(struct pg_worker *w)
{
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 0x2545F4914F6CDD1Dull;
}

/* The provided buffers (bufs.c), in buffer group PG_BGID. */
#define PG_BGID 0
/* A received provided buffer may be lent to a send queue (plenty left). */
bool pg_worker_can_lend(const struct pg_worker *w);
char *pg_buf_addr(struct pg_worker *w, int bid);
/* Map the ring, allocate the buffers and register them, none posted yet:
 * 0 or -errno. pg_bufs_free() frees what it made, after a failure too. */
int pg_bufs_init(struct pg_worker *w);
void pg_bufs_free(struct pg_worker *w);
/* Post free buffers up to the depth (hotbufs.h): before each wait. */
void pg_bufs_post(struct pg_worker *w);
/* Buffer bid is back from its connection (struct pg_io buf_return). */
void pg_bufs_return(struct pg_worker *w, int bid);
/* Drain the run list: responses that ended, clients with input to serve. */
void pg_worker_run(struct pg_worker *w);

#endif /* PG_WORKER_STATE_H */
