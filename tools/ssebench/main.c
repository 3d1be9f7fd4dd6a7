// SPDX-License-Identifier: MIT
/*
 * ssebench: hold C concurrent SSE streams against a target for a while and
 * report per-chunk latency and chunks/s as one JSON line (used by
 * tools/bench/datapath.py).
 *
 * Each connection sends one streaming request at a time (keep-alive, the
 * next when the previous ends) asking mockllm for --chunks events
 * --interval-ms apart. mockllm arms its timer for the next event after
 * sending one, so there is no fixed schedule to measure against and events
 * carry no send time: the figure reported is each event's excess delay,
 * max(0, gap since the previous event - interval). It holds the proxy's
 * added jitter and mockllm's own timer lateness; compare against a direct
 * run (no proxy) to see what a path adds.
 * Only events inside the measurement window (after --warmup-s) count.
 *
 * usage: ssebench --target A:P --conns C --chunks K --interval-ms I
 *                 --duration-s D [--warmup-s W]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LAT_MAX_US 2000000 /* histogram range: 1 µs buckets up to 2 s */

struct stream {
	int fd;
	uint64_t last_ns; /* arrival of the previous event of the current response */
	unsigned events;  /* events of the current response seen */
	char tail[8];     /* last bytes seen (a marker may straddle reads) */
	size_t tail_len;
};

static uint32_t *hist;
static uint64_t counted, over;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char req[512];
static size_t req_len;

static int open_stream(struct stream *s, const struct sockaddr_in *sa, int ep)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int one = 1;

	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->fd == -1 || connect(s->fd, (const struct sockaddr *)sa, sizeof(*sa)) == -1) {
		perror("ssebench: connect");
		return -1;
	}
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ev.data.ptr = s;
	epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev);
	s->events = 0;
	s->tail_len = 0;
	return send(s->fd, req, req_len, 0) == (ssize_t)req_len ? 0 : -1;
}

/* Count "data: {" events and the end marker in buf (with the previous tail). */
static void scan(struct stream *s, const char *buf, size_t n, uint64_t t, uint64_t interval_ns,
                 uint64_t from_ns, uint64_t until_ns, int *done)
{
	static const char ev[] = "data: {", end[] = "[DONE]";
	char joined[8 + 65536];
	size_t len = s->tail_len + n;

	memcpy(joined, s->tail, s->tail_len);
	memcpy(joined + s->tail_len, buf, n);
	for (size_t i = 0; i + sizeof(ev) - 1 <= len; i++) {
		if (i + sizeof(end) - 1 <= len && !memcmp(joined + i, end, sizeof(end) - 1))
			*done = 1;
		if (memcmp(joined + i, ev, sizeof(ev) - 1))
			continue;
		/* events 0 and 1 (role, first token) are sent together */
		if (s->events >= 2 && t >= from_ns && t < until_ns) {
			uint64_t due = s->last_ns + interval_ns;
			uint64_t us = t > due ? (t - due) / 1000 : 0;

			if (us >= LAT_MAX_US)
				over++;
			else
				hist[us]++;
			counted++;
		}
		s->last_ns = t;
		s->events++;
	}
	if (len >= sizeof(end) - 1 &&
	    !memcmp(joined + len - (sizeof(end) - 1), end, sizeof(end) - 1))
		*done = 1;
	s->tail_len = len < 7 ? len : 7;
	memcpy(s->tail, joined + len - s->tail_len, s->tail_len);
}

static double pct(double p)
{
	uint64_t want = (uint64_t)(p * (double)counted), acc = 0;

	for (unsigned i = 0; i < LAT_MAX_US; i++) {
		acc += hist[i];
		if (acc > want)
			return i;
	}
	return LAT_MAX_US;
}

int main(int argc, char **argv)
{
	const char *target = "127.0.0.1:8080";
	unsigned conns = 100, chunks = 1000, interval_ms = 20;
	double duration = 10, warmup = 2;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct rlimit rl = {65536, 65536};
	static char buf[65536];
	struct epoll_event evs[256];
	struct stream *ss;
	uint64_t t0, from, until;
	char host[64], *colon;
	int ep;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--target"))
			target = argv[i + 1];
		else if (!strcmp(argv[i], "--conns"))
			conns = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--chunks"))
			chunks = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--interval-ms"))
			interval_ms = (unsigned)atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--duration-s"))
			duration = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--warmup-s"))
			warmup = atof(argv[i + 1]);
		else {
			fprintf(stderr, "ssebench: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	snprintf(host, sizeof(host), "%s", target);
	colon = strchr(host, ':');
	if (!colon) {
		fprintf(stderr, "ssebench: --target ADDR:PORT\n");
		return 2;
	}
	*colon = 0;
	inet_pton(AF_INET, host, &sa.sin_addr);
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	setrlimit(RLIMIT_NOFILE, &rl);
	{
		static const char body[] = "{\"model\":\"m\",\"stream\":true,\"messages\":[{"
		                           "\"role\":\"user\",\"content\":\"hi\"}]}";

		req_len =
		    (size_t)snprintf(req, sizeof(req),
		                     "POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\n"
		                     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		                     "X-Mock-Chunks: %u\r\nX-Mock-Chunk-Interval-Ms: %u\r\n\r\n%s",
		                     sizeof(body) - 1, chunks, interval_ms, body);
	}
	hist = calloc(LAT_MAX_US, sizeof(*hist));
	ss = calloc(conns, sizeof(*ss));
	ep = epoll_create1(0);
	if (!hist || !ss || ep == -1)
		return 1;
	t0 = now_ns();
	for (unsigned i = 0; i < conns; i++)
		if (open_stream(&ss[i], &sa, ep))
			return 1;
	from = t0 + (uint64_t)(warmup * 1e9);
	until = from + (uint64_t)(duration * 1e9);
	while (now_ns() < until) {
		int n = epoll_wait(ep, evs, 256, 100);

		for (int i = 0; i < n; i++) {
			struct stream *s = evs[i].data.ptr;
			ssize_t r = recv(s->fd, buf, sizeof(buf), MSG_DONTWAIT);
			int done = 0;

			if (r <= 0) {
				if (r == -1 && errno == EAGAIN)
					continue;
				fprintf(stderr, "ssebench: stream closed by the target\n");
				close(s->fd);
				if (open_stream(s, &sa, ep))
					return 1;
				continue;
			}
			scan(s, buf, (size_t)r, now_ns(), (uint64_t)interval_ms * 1000000, from,
			     until, &done);
			if (done) {
				/* keep-alive: the next stream on the same connection */
				s->events = 0;
				s->tail_len = 0;
				if (send(s->fd, req, req_len, 0) != (ssize_t)req_len)
					return 1;
			}
		}
	}
	printf("{\"conns\": %u, \"chunks\": %llu, \"chunks_per_s\": %.0f, \"p50_us\": %.0f, "
	       "\"p99_us\": %.0f, \"over_2s\": %llu}\n",
	       conns, (unsigned long long)counted, (double)counted / duration, pct(0.5), pct(0.99),
	       (unsigned long long)over);
	return 0;
}
