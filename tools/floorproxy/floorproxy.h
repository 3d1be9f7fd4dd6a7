// SPDX-License-Identifier: MIT
/*
 * floorproxy: the floor of any userspace L7 proxy on this machine. It
 * accepts TCP clients, opens one backend connection per client connection
 * (to a fixed backend, or round-robin over a few so that a benchmark gives
 * it the same backends as the proxies it is compared with), and copies
 * bytes both ways through userspace with io_uring, parsing nothing. An HTTP
 * proxy does at least this much work per request; tools/bench/overhead.py
 * measures prefixgate's distance from it.
 *
 * main.c  the command line, the listeners, one thread per worker;
 * proxy.c a worker's event loop: accept, connect, recv -> send both ways.
 */
#ifndef FLOORPROXY_H
#define FLOORPROXY_H

#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>

#define FP_MAX_WORKERS  64
#define FP_MAX_BACKENDS 16

struct fp_worker {
	unsigned id;
	int listen_fd;                      /* this worker's own SO_REUSEPORT listener */
	const struct sockaddr_in *backends; /* where client connections are forwarded */
	unsigned nbackends;
	unsigned next;              /* backend of the next client connection */
	struct io_uring ring;       /* created by the worker thread itself */
	pthread_barrier_t *started; /* passed once the ring is set up */
	pthread_t thread;
};

/* The worker thread: sets up its ring, waits on w->started, then serves
 * until the process ends. A set-up failure prints why and exits the
 * process with status 1. */
void *fp_worker_main(void *arg);

#endif
