// SPDX-License-Identifier: MIT
/*
 * floorproxy: a minimal io_uring TCP proxy to fixed backends (see
 * floorproxy.h). The command line, one listener per worker, the threads.
 * Exit status: 2 for a usage error, 1 when it cannot start.
 */
#include "floorproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char usage[] =
    "usage: floorproxy --backend ADDR:PORT... [--listen ADDR:PORT] [--workers N]\n"
    "Forward every client TCP connection to a backend over a connection of its\n"
    "own, copying bytes both ways through userspace (io_uring recv and send),\n"
    "parsing nothing: the floor cost of any userspace L7 proxy.\n"
    "\n"
    "  --backend ADDR:PORT  numeric IPv4 address of a backend (required); repeat it\n"
    "                       for up to 16: client connections take them in turn\n"
    "  --listen ADDR:PORT   numeric IPv4 address to listen on (default 127.0.0.1:8090)\n"
    "  --workers N          worker threads, each with its own io_uring and listener,\n"
    "                       1-64 (default: one per CPU)\n"
    "  --help               print this help and exit\n"
    "\n"
    "Flags take \"--flag value\" or \"--flag=value\". EOF or an error on either side\n"
    "of a connection closes both sides.\n";

/* "a.b.c.d:port", port 1-65535, into *sa; -1 with a message on stderr. */
static int parse_addr(const char *flag, const char *s, struct sockaddr_in *sa)
{
	const char *colon = strrchr(s, ':');
	char host[INET_ADDRSTRLEN], *end;
	unsigned long port;

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	if (!colon || (size_t)(colon - s) >= sizeof(host))
		goto bad;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 || colon[1] < '0' || colon[1] > '9' ||
	    *end || errno || port < 1 || port > 65535)
		goto bad;
	sa->sin_port = htons((uint16_t)port);
	return 0;
bad:
	fprintf(stderr,
	        "floorproxy: %s %s: want a numeric IPv4 ADDR:PORT, port 1-65535 "
	        "(e.g. 127.0.0.1:8001)\n",
	        flag, s);
	return -1;
}

static int parse_workers(const char *s, unsigned *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno || n < 1 || n > FP_MAX_WORKERS) {
		fprintf(stderr, "floorproxy: --workers %s: want a whole number, 1-%d\n", s,
		        FP_MAX_WORKERS);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

struct opts {
	struct sockaddr_in listen, backends[FP_MAX_BACKENDS];
	unsigned workers, nbackends;
};

/* 0: run; 1: --help printed; -1: usage error (message printed). */
static int parse_args(int argc, char **argv, struct opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	parse_addr("--listen", "127.0.0.1:8090", &o->listen);
	o->workers = cpus < 1 ? 1 : cpus > FP_MAX_WORKERS ? FP_MAX_WORKERS : (unsigned)cpus;
	o->nbackends = 0;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *eq = strchr(arg, '='), *val = NULL;
		size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
		char flag[32];

		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			fputs(usage, stdout);
			return 1;
		}
		if (strncmp(arg, "--", 2) || len >= sizeof(flag)) {
			fprintf(stderr, "floorproxy: unexpected argument '%s' (see --help)\n", arg);
			return -1;
		}
		memcpy(flag, arg, len);
		flag[len] = '\0';
		if (strcmp(flag, "--listen") && strcmp(flag, "--backend") &&
		    strcmp(flag, "--workers")) {
			fprintf(stderr, "floorproxy: unknown flag %s (see --help)\n", flag);
			return -1;
		}
		if (eq)
			val = eq + 1;
		else if (i + 1 < argc)
			val = argv[++i];
		else {
			fprintf(stderr, "floorproxy: %s needs a value (see --help)\n", flag);
			return -1;
		}
		if (!strcmp(flag, "--listen")) {
			if (parse_addr(flag, val, &o->listen))
				return -1;
		} else if (!strcmp(flag, "--backend")) {
			if (o->nbackends == FP_MAX_BACKENDS) {
				fprintf(stderr, "floorproxy: more than %d --backend flags\n",
				        FP_MAX_BACKENDS);
				return -1;
			}
			if (parse_addr(flag, val, &o->backends[o->nbackends++]))
				return -1;
		} else if (parse_workers(val, &o->workers)) {
			return -1;
		}
	}
	if (!o->nbackends) {
		fprintf(stderr, "floorproxy: --backend ADDR:PORT is required (see --help)\n");
		return -1;
	}
	return 0;
}

static void format_addr(const struct sockaddr_in *sa, char *buf, size_t len)
{
	char a[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &sa->sin_addr, a, sizeof(a));
	snprintf(buf, len, "%s:%u", a, ntohs(sa->sin_port));
}

/* A listening socket on sa; SO_REUSEPORT so that each worker has its own and
 * the kernel spreads connections over them. -1 with a message on failure. */
static int listener(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	char a[32];

	if (fd == -1) {
		perror("floorproxy: socket");
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == -1 || listen(fd, 4096) == -1) {
		format_addr(sa, a, sizeof(a));
		fprintf(stderr, "floorproxy: --listen %s: %s\n", a, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* SO_REUSEPORT would also let us share a port another process of this user
 * listens on, taking part of its connections: refuse a port already taken. */
static int port_taken(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, taken = 0;
	char a[32];

	if (fd == -1)
		return 0; /* listener() will say what is wrong */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == -1 && errno == EADDRINUSE) {
		format_addr(sa, a, sizeof(a));
		fprintf(stderr, "floorproxy: --listen %s: address already in use\n", a);
		taken = 1;
	}
	close(fd);
	return taken;
}

int main(int argc, char **argv)
{
	static struct fp_worker workers[FP_MAX_WORKERS];
	pthread_barrier_t started;
	struct opts o;
	char la[32], ba[32];
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc > 0 ? 0 : 2;
	/* Sends use MSG_NOSIGNAL; this covers anything else. */
	signal(SIGPIPE, SIG_IGN);
	if (port_taken(&o.listen))
		return 1;
	pthread_barrier_init(&started, NULL, o.workers + 1);
	for (unsigned i = 0; i < o.workers; i++) {
		struct fp_worker *w = &workers[i];

		w->id = i;
		w->backends = o.backends;
		w->nbackends = o.nbackends;
		w->next = i; /* so that the workers' first connections differ */
		w->started = &started;
		w->listen_fd = listener(&o.listen);
		if (w->listen_fd == -1)
			return 1;
		rc = pthread_create(&w->thread, NULL, fp_worker_main, w);
		if (rc) {
			fprintf(stderr, "floorproxy: pthread_create: %s\n", strerror(rc));
			return 1;
		}
	}
	pthread_barrier_wait(&started); /* every ring is up (or the process has exited) */
	format_addr(&o.listen, la, sizeof(la));
	printf("floorproxy: %s ->", la);
	for (unsigned i = 0; i < o.nbackends; i++) {
		format_addr(&o.backends[i], ba, sizeof(ba));
		printf(" %s", ba);
	}
	printf(", %u workers\n", o.workers);
	fflush(stdout);
	for (unsigned i = 0; i < o.workers; i++)
		pthread_join(workers[i].thread, NULL);
	return 0;
}
