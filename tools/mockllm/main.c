// SPDX-License-Identifier: MIT
/*
 * mockllm: flags, the listening socket and the event loop. One thread: epoll
 * for sockets, one timerfd armed at the earliest deadline of the connection
 * timers and of the simulation, so waiting costs nothing and many instances
 * share a small machine.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "mockllm.h"
#include "slots.h"

struct server g_srv;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "mockllm: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double num_arg(const char *flag, const char *v, double min, double max)
{
	char *end;
	double d = strtod(v, &end);

	if (*v == '\0' || *end || !(d >= min && d <= max)) {
		fprintf(stderr, "mockllm: %s %s: want a number from %g to %g\n", flag, v, min, max);
		exit(2);
	}
	return d;
}

static bool plain_name(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n >= max)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("._:/-", *s)))
			return false;
	return true;
}

/* Which of the two or three words v is (0, 1, 2); exits otherwise. */
static int word_arg(const char *flag, const char *v, const char *w0, const char *w1, const char *w2)
{
	if (!strcmp(v, w0))
		return 0;
	if (!strcmp(v, w1))
		return 1;
	if (w2 && !strcmp(v, w2))
		return 2;
	fprintf(stderr, "mockllm: %s %s: want %s or %s%s%s\n", flag, v, w0, w1, w2 ? " or " : "",
	        w2 ? w2 : "");
	exit(2);
}

/* The disaggregation flags that make sense together. */
static void check_pd_flags(const struct pd_config *pd, const char *port_flag,
                           const char *proto_flag)
{
	const char *why = NULL;

	if (proto_flag && pd->role == PD_ROLE_MIXED)
		why = "--pd-protocol needs --role prefill or --role decode";
	else if (port_flag && pd->role != PD_ROLE_PREFILL)
		why = "only a prefill instance (--role prefill) listens on a side port";
	else if (port_flag && pd->side_port_sglang != (pd->proto == PD_PROTO_SGLANG))
		why = pd->side_port_sglang
		          ? "--bootstrap-port is --pd-protocol sglang's; vllm's "
		            "side port is --kv-port"
		          : "--kv-port is --pd-protocol vllm's; sglang's side port "
		            "is --bootstrap-port";
	if (why) {
		fprintf(stderr, "mockllm: %s\n", why);
		exit(2);
	}
}

static void parse_args(int argc, char **argv, struct config *cfg)
{
	enum {
		O_PREFILL = 256,
		O_DECODE,
		O_BATCH,
		O_OVERHEAD,
		O_KV,
		O_SEQS,
		O_MODEL,
		O_SCALE,
		O_SPEED,
		O_NO_CACHE_OUTPUT,
		O_INTERFERENCE,
		O_BUDGET,
		O_ROLE,
		O_PROTO,
		O_KV_PORT,
		O_BOOT_PORT,
		O_TTL,
		O_KV_RATE,
		O_WAIT,
		O_POLICY,
		O_SLOTS,
	};
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"id", required_argument, NULL, 'i'},
	    {"model", required_argument, NULL, O_MODEL},
	    {"prefill-tokens-per-s", required_argument, NULL, O_PREFILL},
	    {"decode-ms-per-token", required_argument, NULL, O_DECODE},
	    {"decode-batch-factor", required_argument, NULL, O_BATCH},
	    {"ttft-overhead-ms", required_argument, NULL, O_OVERHEAD},
	    {"kv-capacity-tokens", required_argument, NULL, O_KV},
	    {"no-cache-output", no_argument, NULL, O_NO_CACHE_OUTPUT},
	    {"max-num-seqs", required_argument, NULL, O_SEQS},
	    {"slots", required_argument, NULL, O_SLOTS},
	    {"time-scale", required_argument, NULL, O_SCALE},
	    {"speed", required_argument, NULL, O_SPEED},
	    {"interference", no_argument, NULL, O_INTERFERENCE},
	    {"max-num-batched-tokens", required_argument, NULL, O_BUDGET},
	    {"role", required_argument, NULL, O_ROLE},
	    {"pd-protocol", required_argument, NULL, O_PROTO},
	    {"kv-port", required_argument, NULL, O_KV_PORT},
	    {"bootstrap-port", required_argument, NULL, O_BOOT_PORT},
	    {"kv-transfer-ttl-ms", required_argument, NULL, O_TTL},
	    {"kv-transfer-tokens-per-s", required_argument, NULL, O_KV_RATE},
	    {"kv-wait-timeout-ms", required_argument, NULL, O_WAIT},
	    {"kv-load-failure-policy", required_argument, NULL, O_POLICY},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct pd_config *pd = &g_pd.cfg;
	double scale = 1, speed = 1, budget = -1;
	const char *port_flag = NULL, *proto_flag = NULL;
	bool seqs_flag = false;
	int o;

	cfg->listen = "127.0.0.1:8000";
	cfg->model = "mockllm";
	cfg->cache_output = true;
	sim_default_params(&cfg->sim);
	pd->ttl_ms = 480000;
	pd->wait_ms = 300000;
	pd->kv_tokens_per_s = 1e6;
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'l':
			cfg->listen = optarg;
			break;
		case 'i':
			if (!plain_name(optarg, sizeof(cfg->id))) {
				fprintf(stderr,
				        "mockllm: --id %s: use up to 63 of [A-Za-z0-9._:/-]\n",
				        optarg);
				exit(2);
			}
			strcpy(cfg->id, optarg);
			break;
		case O_MODEL:
			if (!plain_name(optarg, 128)) {
				fprintf(stderr,
				        "mockllm: --model %s: use up to 127 of [A-Za-z0-9._:/-]\n",
				        optarg);
				exit(2);
			}
			cfg->model = optarg;
			break;
		case O_PREFILL:
			cfg->sim.prefill_tokens_per_s =
			    num_arg("--prefill-tokens-per-s", optarg, 1, 1e9);
			break;
		case O_DECODE:
			cfg->sim.decode_ms_per_token =
			    num_arg("--decode-ms-per-token", optarg, 0, 1e6);
			break;
		case O_BATCH:
			cfg->sim.decode_batch_factor =
			    num_arg("--decode-batch-factor", optarg, 0, 100);
			break;
		case O_OVERHEAD:
			cfg->sim.ttft_overhead_ms = num_arg("--ttft-overhead-ms", optarg, 0, 1e6);
			break;
		case O_KV:
			cfg->sim.kv_capacity_tokens =
			    (uint64_t)num_arg("--kv-capacity-tokens", optarg, 16, 1e9);
			break;
		case O_NO_CACHE_OUTPUT:
			cfg->cache_output = false;
			break;
		case O_SEQS:
			cfg->sim.max_num_seqs = (uint32_t)num_arg("--max-num-seqs", optarg, 1, 1e6);
			seqs_flag = true;
			break;
		case O_SLOTS:
			cfg->sim.slots = (uint32_t)num_arg("--slots", optarg, 1, SLOTS_MAX);
			break;
		case O_SCALE:
			scale = num_arg("--time-scale", optarg, 0.01, 1000);
			break;
		case O_SPEED:
			speed = num_arg("--speed", optarg, 0.001, 1000);
			break;
		case O_INTERFERENCE:
			if (budget < 0)
				budget = 2048;
			break;
		case O_BUDGET:
			budget = num_arg("--max-num-batched-tokens", optarg, 0, 1e7);
			break;
		case O_ROLE:
			pd->role = word_arg("--role", optarg, "mixed", "prefill", "decode");
			break;
		case O_PROTO:
			pd->proto = word_arg("--pd-protocol", optarg, "vllm", "sglang", NULL);
			proto_flag = optarg;
			break;
		case O_KV_PORT:
		case O_BOOT_PORT:
			port_flag = o == O_KV_PORT ? "--kv-port" : "--bootstrap-port";
			pd->side_port = (int)num_arg(port_flag, optarg, 0, 65535);
			pd->side_port_sglang = o == O_BOOT_PORT;
			break;
		case O_TTL:
			pd->ttl_ms = num_arg("--kv-transfer-ttl-ms", optarg, 0, 1e9);
			break;
		case O_KV_RATE:
			pd->kv_tokens_per_s =
			    num_arg("--kv-transfer-tokens-per-s", optarg, 1, 1e12);
			break;
		case O_WAIT:
			pd->wait_ms = num_arg("--kv-wait-timeout-ms", optarg, 0, 1e9);
			break;
		case O_POLICY:
			pd->recompute = word_arg("--kv-load-failure-policy", optarg, "fail",
			                         "recompute", NULL) == 1;
			break;
		case 'h':
			fputs(mock_usage, stdout);
			exit(0);
		default:
			fputs(mock_usage, stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "mockllm: unexpected argument %s\n", argv[optind]);
		exit(2);
	}
	check_pd_flags(pd, port_flag, proto_flag);
	if (cfg->sim.slots && (seqs_flag || pd->role != PD_ROLE_MIXED)) {
		fprintf(stderr, "mockllm: --slots: %s\n",
		        seqs_flag ? "a slot runs one request: --max-num-seqs is the slots' count"
		                  : "a prefill/decode pair's KV is paged: --role mixed only");
		exit(2);
	}
	if (budget > 0)
		cfg->sim.max_num_batched_tokens = (uint32_t)budget;
	pd->time_scale = scale;
	/* the sim's created parameters: POST /mock/speed is relative to them */
	sim_scale_params(&cfg->sim, scale * speed);
}

/* Bind and listen on ADDR:PORT ("[v6]:port" for IPv6); returns the port. */
static int open_listener(const char *spec)
{
	char host[256];
	const char *colon = strrchr(spec, ':');
	struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
	                         .ai_socktype = SOCK_STREAM};
	struct addrinfo *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	size_t hl;
	int one = 1, rc;

	if (!colon || (size_t)(colon - spec) >= sizeof(host)) {
		fprintf(stderr, "mockllm: --listen %s: want ADDR:PORT\n", spec);
		exit(2);
	}
	hl = (size_t)(colon - spec);
	memcpy(host, spec, hl);
	host[hl] = '\0';
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = '\0';
	}
	memcpy(g_srv.cfg.host, host, sizeof(host));
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc) {
		fprintf(stderr, "mockllm: --listen %s: %s\n", spec, gai_strerror(rc));
		exit(2);
	}
	g_srv.lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (g_srv.lfd == -1)
		die("socket");
	setsockopt(g_srv.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(g_srv.lfd, ai->ai_addr, ai->ai_addrlen) == -1) {
		fprintf(stderr, "mockllm: bind %s: %s\n", spec, strerror(errno));
		exit(1);
	}
	freeaddrinfo(ai);
	if (listen(g_srv.lfd, 4096) == -1)
		die("listen");
	if (getsockname(g_srv.lfd, (struct sockaddr *)&ss, &sl) == -1)
		die("getsockname");
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Arm the timerfd at the earliest deadline (absolute); 0 ms epoll timeout if
 * it has already passed, -1 when there is none. */
static int arm_timer(void)
{
	struct heap_node *top = heap_top(&g_srv.timers);
	uint64_t next = sim_next_event(g_srv.sim);
	struct itimerspec its = {0};

	if (top && top->due < next)
		next = top->due;
	if (next <= now_ns())
		return 0;
	if (next == g_srv.tfd_armed)
		return -1;
	if (next != UINT64_MAX) {
		its.it_value.tv_sec = (time_t)(next / 1000000000ull);
		its.it_value.tv_nsec = (long)(next % 1000000000ull);
	}
	if (timerfd_settime(g_srv.tfd, TFD_TIMER_ABSTIME, &its, NULL) == -1)
		die("timerfd_settime");
	g_srv.tfd_armed = next;
	return -1;
}

static void run(void)
{
	struct epoll_event evs[256];

	for (;;) {
		int n = epoll_wait(g_srv.epfd, evs, 256, arm_timer());
		struct heap_node *t;

		if (n == -1) {
			if (errno == EINTR)
				continue;
			die("epoll_wait");
		}
		g_srv.now = now_ns();
		sim_advance(g_srv.sim, g_srv.now);
		while ((t = heap_pop_due(&g_srv.timers, g_srv.now)))
			conn_timer_fired(container_of(t, struct conn, timer));
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == NULL) {
				conn_accept_all();
			} else if (p == &g_srv.tfd) {
				uint64_t ticks;

				if (read(g_srv.tfd, &ticks, sizeof(ticks)) == -1 && errno != EAGAIN)
					die("read timerfd");
				g_srv.tfd_armed = 0;
			} else if (!pd_event(p, evs[i].events)) {
				conn_event(p, evs[i].events);
			}
		}
		conn_flush_dirty();
		conn_free_dead();
		side_free_dead();
	}
}

int main(int argc, char **argv)
{
	struct epoll_event e = {.events = EPOLLIN};
	int port;

	parse_args(argc, argv, &g_srv.cfg);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	port = open_listener(g_srv.cfg.listen);
	if (!g_srv.cfg.id[0])
		snprintf(g_srv.cfg.id, sizeof(g_srv.cfg.id), "%d", port);
	g_srv.sim = sim_create(&g_srv.cfg.sim, route_sim_token, NULL);
	if (!g_srv.sim) {
		fprintf(stderr,
		        "mockllm: cannot allocate the simulation (--kv-capacity-tokens?)\n");
		return 1;
	}
	g_srv.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (g_srv.epfd == -1)
		die("epoll_create1");
	g_srv.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (g_srv.tfd == -1)
		die("timerfd_create");
	e.data.ptr = NULL; /* the listener */
	if (epoll_ctl(g_srv.epfd, EPOLL_CTL_ADD, g_srv.lfd, &e) == -1)
		die("epoll_ctl(listener)");
	e.data.ptr = &g_srv.tfd;
	if (epoll_ctl(g_srv.epfd, EPOLL_CTL_ADD, g_srv.tfd, &e) == -1)
		die("epoll_ctl(timerfd)");
	g_srv.now = now_ns();
	pd_setup(g_srv.cfg.host, g_srv.cfg.id);
	fprintf(stderr, "mockllm: %s listening on %s port %d\n", g_srv.cfg.id, g_srv.cfg.listen,
	        port);
	run();
	return 0;
}
