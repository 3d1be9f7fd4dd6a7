/* SPDX-License-Identifier: MIT */
/*
 * A worker thread: one io_uring, one SO_REUSEPORT listener, its client
 * connections and its pool of keep-alive backend connections. No blocking
 * syscall on the request path: accept, recv (multishot, provided buffers),
 * connect and send all go through the ring.
 *
 * worker.c holds the event loop and the socket primitives (send queues,
 * receive arming and pausing, closing); proxy.c the HTTP state machine of a
 * client connection and its backend connection.
 */
#ifndef PG_WORKER_H
#define PG_WORKER_H

#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include "gateway.h"
#include "lib/http.h"
#include "lib/key.h"

/* Provided receive buffers per worker, and their size. */
#define PG_NBUFS 512
#define PG_BUFSZ (16 * 1024)
/* A response's bytes queued towards a slow client, at most (then the backend
 * connection stops being read, and TCP pushes back on the backend). */
#define PG_RESP_QUEUE_MAX (256 * 1024)
/* Request bytes queued towards a slow backend, at most. */
#define PG_REQ_QUEUE_MAX (1024 * 1024)
/* Unparsed client bytes held while a request is being answered (pipelining). */
#define PG_PIPELINE_MAX (PG_HTTP_MAX_HEAD + 16 * 1024)
/* Idle keep-alive backend connections kept per backend per worker, and for how long. */
#define PG_POOL_MAX 64
#define PG_POOL_IDLE_MS 30000
/* A connection asked to close (spliced response) waits this long for the
 * backend's FIN before the gateway closes it first. */
#define PG_LINGER_MS 2000
/* How long a refused/reset backend is skipped. */
#define PG_DOWN_MS 2000
/* Attempts per request (first + retries on other backends). */
#define PG_MAX_ATTEMPTS 4

enum pg_op {
	PG_OP_ACCEPT = 1,
	PG_OP_RECV = 2,
	PG_OP_SEND = 3,
	PG_OP_CONNECT = 4,
	PG_OP_TIMEOUT = 5, /* link timeout of a connect */
	PG_OP_CANCEL = 6,
	PG_OP_POLL = 7, /* POLLRDHUP on a spliced backend socket (datapath.c) */
};

/* A piece of output waiting to be sent: heap data, or a provided buffer
 * forwarded as received (zero copy) and given back once sent. */
struct pg_seg {
	struct pg_seg *next;
	char *data;
	uint32_t len, off;
	int32_t bid;  /* provided buffer id, or -1 */
	bool owned;   /* free(data) once sent */
};

enum pg_sock_kind { PG_SOCK_CLIENT = 1, PG_SOCK_UPSTREAM = 2 };

struct pg_sock {
	int fd;
	uint8_t kind;
	bool recv_armed;   /* a multishot recv is outstanding */
	bool want_recv;    /* keep it armed (false: paused) */
	bool cancelling;   /* a cancel of the recv is outstanding */
	bool send_busy;    /* a send is outstanding (one at a time keeps order) */
	bool can_send;     /* connected */
	bool closed;       /* fd closed; struct freed when refs drops to 0 */
	bool starved;      /* recv stopped for lack of buffers: re-arm later */
	bool buried;       /* on the worker's graveyard list */
	uint32_t refs;     /* SQEs in flight naming this struct */
	struct pg_seg *qhead, *qtail;
	struct pg_seg *sending; /* closed: the segment its outstanding send names */
	size_t qbytes;
	struct pg_sock *starved_next;
	struct pg_sock *dead_next;
};

struct pg_upstream;

enum pg_client_state {
	PG_C_HEAD,    /* reading a request head */
	PG_C_KEY,     /* reading the body bytes the key needs */
	PG_C_STREAM,  /* dispatched; forwarding the rest of the body */
	PG_C_WAIT,    /* request fully sent; waiting for the response to end */
	PG_C_DISCARD, /* answered early: dropping the rest of its body (boundary.h) */
	PG_C_LINGER,  /* answered an error; draining input until close */
};

struct pg_client {
	struct pg_sock s; /* first member */
	struct pg_worker *w;
	struct pg_client *prev, *next; /* worker's list of clients */
	enum pg_client_state state;
	char *in;         /* received, not yet consumed bytes */
	size_t in_len, in_cap;
	size_t head_scan; /* pg_http_head_ready() progress */
	uint64_t linger_until_ms;
	/* The request being served. */
	uint64_t t0_ns;   /* first byte of the request seen */
	uint8_t api;      /* enum pg_api */
	uint8_t minor;    /* HTTP/1.minor */
	bool keep_alive;  /* client connection survives this exchange */
	bool head_method; /* HEAD: the response has no body */
	bool replayable;  /* fwd holds the whole request: retries possible */
	bool resp_started; /* a response byte was queued to the client */
	bool counted;     /* holds an in-flight slot on backend */
	bool shut;        /* our side shut down (lingering close) */
	bool admitted;    /* holds a gateway-wide --max-in-flight slot */
	bool first_sent;  /* the request's first byte reached the backend socket */
	uint16_t resp_status;  /* status of the response being forwarded */
	uint64_t resp_bytes;   /* response bytes forwarded by us (access log) */
	uint32_t route_ns;     /* request start -> backend chosen */
	uint64_t last_rx_ms;   /* client bytes last received (timeouts) */
	uint64_t idle_since_ms; /* waiting for a request since then */
	uint64_t sent_ms;      /* request handed to the backend (first-byte timeout) */
	uint8_t body;     /* enum pg_body_kind */
	uint64_t body_left; /* Content-Length bytes not yet forwarded (or discarded) */
	uint64_t body_seen; /* chunked: data bytes decoded so far (--max-body-size) */
	struct pg_chunked ch;
	bool ch_done;
	size_t ch_off;    /* raw chunked bytes of c->in already decoded */
	char *kbuf;       /* decoded chunked body held for the key */
	size_t klen, kcap;
	size_t key_need;  /* body bytes the key needs */
	char *hdr_key;    /* X-Prefixgate-Key copy */
	size_t hdr_key_len;
	char *fwd;        /* rewritten head + held body: what an attempt sends */
	size_t fwd_len, fwd_cap;
	size_t fwd_head;  /* length of the head in fwd */
	bool fwd_close;   /* "Connection: close" added to it (spliced attempt) */
	uint64_t streamed; /* body bytes sent after fwd (no retry once > 0) */
	struct pg_key key;
	struct pg_choice choice;
	struct pg_idset tried;
	uint16_t backend;
	uint8_t attempts;
	struct pg_upstream *up;
};

/* How the response body ends: its framing, tracked whichever path carries
 * the bytes (a spliced body's state is handed to and from the kernel). */
enum pg_resp_state { PG_R_HEAD, PG_R_LENGTH, PG_R_CHUNKED, PG_R_EOF, PG_R_DONE };

/* Data path of one backend connection (datapath.h). */
enum pg_dp_path { PG_DP_COPY = 0, PG_DP_SKB = 1, PG_DP_MSG = 2 };

/* Where a spliced response stands (datapath.c has the transitions). */
enum pg_dp_state {
	PG_SP_NONE = 0,   /* copying (or head not read yet) */
	PG_SP_MSG,        /* msg route in place; gate at gate_at */
	PG_SP_STOPPING,   /* skb: multishot recv cancelled, waiting for its last CQE */
	PG_SP_DRAIN,      /* skb: reading the socket to EAGAIN, then waiting for the
	                   * client's queue to empty before pairing */
	PG_SP_PAIRED,     /* skb: kernel redirects; POLLRDHUP armed */
	PG_SP_WAIT,       /* skb: FIN or fall-back seen; waiting until drained */
	PG_SP_COPY,       /* skb: drained; passed bytes and EOF read by the proxy */
};

struct pg_upstream {
	struct pg_sock s; /* first member */
	struct pg_worker *w;
	uint16_t backend;
	uint32_t epoch;
	bool reused;       /* came from the pool */
	bool keep_alive;   /* may go back to the pool after this response */
	bool connecting;
	bool in_pool;
	bool lingering;    /* on w->linger (linked through pool_next) */
	bool peer_closed;  /* the backend's EOF or error was read */
	bool early;        /* its response head came while request bytes were owed */
	struct pg_client *c; /* NULL while idle in the pool */
	struct pg_upstream *pool_next;
	uint64_t idle_since_ms;
	enum pg_resp_state rstate;
	char *hbuf;        /* response head being assembled */
	size_t hlen, hcap;
	uint64_t left;     /* Content-Length bytes to go */
	struct pg_chunked ch;
	/* Kernel data path (datapath.c). */
	uint8_t path;        /* enum pg_dp_path */
	uint8_t sstate;      /* enum pg_dp_state */
	bool spliced;        /* the body goes through the kernel (datapath.c) */
	uint16_t synced_gen; /* msg: gate generation whose frame was taken back */
	bool polling;        /* POLLRDHUP outstanding */
	bool on_wait;        /* on the worker's dp_wait list */
	uint16_t gate_gen;   /* msg: generation of the last gate opening */
	uint64_t rx;         /* bytes received from the backend */
	uint64_t gate_at;    /* msg: open_at last published, or PG_SPLICE_GATE_CLOSED */
	__u64 carried_at;    /* msg: the client socket's carried bytes at that opening */
	uint64_t wait_at_ms; /* skb WAIT: next drained check */
	uint32_t wait_ms;    /* skb WAIT: current back-off */
	struct sockaddr_in sa; /* backend address (msg route key) */
	struct pg_upstream *wait_next;
};

struct pg_worker {
	struct pg_gateway *gw;
	unsigned id;
	pthread_t thread;
	struct io_uring ring;
	int listen_fd;
	bool accept_armed;
	struct io_uring_buf_ring *br;
	char *bufs;
	unsigned bufs_out;       /* provided buffers held by us */
	struct pg_sock *starved; /* sockets waiting for provided buffers */
	struct pg_sock *graveyard; /* closed, freed once no SQE names them */
	struct __kernel_timespec ts_connect;
	uint64_t accept_err_logged_ms;
	void *boot;
	struct pg_client *clients;
	unsigned nclients;        /* open client connections (--max-connections) */
	struct pg_upstream *pool[PG_MAX_BACKENDS];
	unsigned pool_len[PG_MAX_BACKENDS];
	struct pg_upstream *linger; /* done, waiting for the backend to close first */
	struct pg_worker_stats *stats;
	uint64_t rng;
	uint64_t now_ms; /* refreshed once per loop turn */
	struct pg_upstream *dp_wait; /* skb connections waiting to be drained */
	char err[256];
};

/* Create the listener (in the caller's thread, so bind errors stop startup)
 * and start the thread. */
int pg_worker_start(struct pg_gateway *gw, unsigned id, struct pg_worker **out, char *err,
		    size_t errlen);
void pg_worker_join(struct pg_worker *w);

/* --- socket primitives (worker.c), used by proxy.c --- */
struct io_uring_sqe *pg_sqe(struct pg_worker *w);
void pg_sock_recv(struct pg_worker *w, struct pg_sock *s);
void pg_sock_pause(struct pg_worker *w, struct pg_sock *s);
void pg_sock_queue(struct pg_worker *w, struct pg_sock *s, char *data, size_t len, int bid,
		   bool owned);
void pg_sock_queue_copy(struct pg_worker *w, struct pg_sock *s, const void *data, size_t len);
void pg_sock_flush(struct pg_worker *w, struct pg_sock *s);
void pg_sock_connect(struct pg_worker *w, struct pg_sock *s, const struct sockaddr_in *sa);
void pg_sock_close(struct pg_worker *w, struct pg_sock *s);
void pg_sock_poll_rdhup(struct pg_worker *w, struct pg_sock *s);
void pg_buf_return(struct pg_worker *w, int bid);
uint64_t pg_worker_rand(struct pg_worker *w);

/* --- HTTP state machine (proxy.c), called by worker.c --- */
struct pg_client *pg_client_new(struct pg_worker *w, int fd);
/* Data received: returns true if the provided buffer was kept (forwarded). */
bool pg_client_data(struct pg_worker *w, struct pg_client *c, char *data, size_t len);
void pg_client_eof(struct pg_worker *w, struct pg_client *c, int err);
void pg_client_sent(struct pg_worker *w, struct pg_client *c);
void pg_client_free(struct pg_client *c);
bool pg_upstream_data(struct pg_worker *w, struct pg_upstream *u, char *data, size_t len, int bid);
void pg_upstream_eof(struct pg_worker *w, struct pg_upstream *u, int err);
/* The response body's framing state as the kernel paths share it (NONE for
 * a body that ends with the connection). */
void pg_upstream_frame(const struct pg_upstream *u, struct pg_frame *f);
/* Take back the state after bytes the kernel redirected; if that completes
 * the body, the response ends (true). */
bool pg_upstream_take_frame(struct pg_worker *w, struct pg_upstream *u, const struct pg_frame *f);
void pg_upstream_connected(struct pg_worker *w, struct pg_upstream *u, int res);
void pg_upstream_sent(struct pg_worker *w, struct pg_upstream *u, int err);
void pg_upstream_free(struct pg_upstream *u);
void pg_proxy_tick(struct pg_worker *w);
void pg_proxy_shutdown(struct pg_worker *w);

#endif /* PG_WORKER_H */
