// SPDX-License-Identifier: MIT
/*
 * The load engine: one thread, one epoll set, one timer heap.
 *
 * Arrivals (open loop: Poisson times drawn from --seed, or the workload's
 * own times, the trace's scaled; closed loop: one per finished request) go
 * into a FIFO of scheduled start times. pump() takes them in order and puts
 * each on an idle keep-alive connection, or on a new one while fewer than
 * the cap are open (closed loop: --concurrency; open loop: --max-conns).
 * With several --target addresses each request draws its target (uniform,
 * from --seed and its index); connections belong to one target, and an
 * idle one to another target is closed when the cap leaves no other way to
 * open one. An arrival that finds no connection waits in the FIFO; its
 * latency still counts from its scheduled time, so a slow target cannot
 * hide its queueing (no coordinated omission).
 *
 * Stopping: at --duration, after --requests arrivals, or (trace) after the
 * workload's last send time no more are made; requests in flight finish or
 * time out (--timeout-ms). A hard deadline (stop + timeout + 1 s) aborts
 * whatever is left, so the run always ends.
 */
#include "engine.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S          1000000000ULL
#define NS_PER_MS         1000000ULL
#define RETRY_DELAY_NS    (10 * NS_PER_MS) /* closed loop, after a transport error */
#define DEADLINE_GRACE_NS NS_PER_S
#define TIMER_CHECK_EVERY 64        /* events handled between looks at the timers */
#define LATE_NS           NS_PER_MS /* an arrival dispatched this late counts as delayed */

uint64_t pg_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void push_timer(struct pg_eng *e, uint64_t due, enum pg_timer_kind kind)
{
	struct pg_timer t = {.due_ns = due, .kind = kind};

	if (pg_heap_push(&e->heap, &t) == -1) {
		fprintf(stderr, "pgload: out of memory for timers; ending the run\n");
		e->finished = true;
	}
}

uint16_t pg_eng_backend(struct pg_eng *e, const char *v, size_t n)
{
	struct pg_run *run = e->run;

	for (unsigned i = 0; i < run->nbackends; i++)
		if (strlen(run->backends[i]) == n && memcmp(run->backends[i], v, n) == 0)
			return (uint16_t)i;
	if (run->nbackends == PGLOAD_MAX_BACKENDS)
		return PG_NO_BACKEND;
	run->backends[run->nbackends] = strndup(v, n);
	if (!run->backends[run->nbackends])
		return PG_NO_BACKEND;
	return (uint16_t)run->nbackends++;
}

static void stop_issuing(struct pg_eng *e, bool drop_pending)
{
	uint64_t now = pg_now_ns();

	if (!e->issuing)
		return;
	e->issuing = false;
	e->run->issue_end_ns = now;
	if (drop_pending) {
		/* Closed loop: a pending arrival is only the next request of a
		 * client slot, not load the target failed to take. */
		if (!e->closed_loop)
			e->run->arrivals_unsent += e->pend_n;
		e->pend_n = 0;
	}
	push_timer(e, now + (uint64_t)e->o->timeout_ms * NS_PER_MS + DEADLINE_GRACE_NS,
	           PG_T_DEADLINE);
}

/* A request becomes due at time t. */
static void arrive(struct pg_eng *e, uint64_t t)
{
	if (!e->issuing || (e->stop_ns && t >= e->stop_ns))
		return;
	if (e->pend_n == e->pend_cap) {
		size_t cap = e->pend_cap ? e->pend_cap * 2 : 1024;
		uint64_t *p = malloc(cap * sizeof(*p));

		if (!p) {
			fprintf(stderr, "pgload: out of memory queueing arrivals; stopping\n");
			stop_issuing(e, false);
			return;
		}
		for (size_t i = 0; i < e->pend_n; i++)
			p[i] = e->pending[(e->pend_head + i) % e->pend_cap];
		free(e->pending);
		e->pending = p;
		e->pend_head = 0;
		e->pend_cap = cap;
	}
	e->pending[(e->pend_head + e->pend_n++) % e->pend_cap] = t;
	e->arrivals++;
	if (e->o->requests && e->arrivals >= e->o->requests)
		stop_issuing(e, false);
}

static struct pg_rec *new_rec(struct pg_eng *e, size_t *idx)
{
	struct pg_run *run = e->run;

	if (run->nrecs == run->cap) {
		size_t cap = run->cap ? run->cap * 2 : 4096;
		struct pg_rec *r = realloc(run->recs, cap * sizeof(*r));

		if (!r)
			return NULL;
		run->recs = r;
		run->cap = cap;
	}
	*idx = run->nrecs++;
	memset(&run->recs[*idx], 0, sizeof(run->recs[*idx]));
	return &run->recs[*idx];
}

/* An idle connection to target t, or a new one under the cap; NULL if none. */
static struct pg_conn *get_conn(struct pg_eng *e, unsigned t, int *err)
{
	struct pg_conn *c;

	*err = 0;
	if (e->nidle_t[t]) {
		c = &e->conns[e->idle[t][--e->nidle_t[t]]];
		e->nidle--;
		return c;
	}
	/* The cap is reached: give up an idle connection to another target. */
	for (unsigned k = 0; !e->nfree && k < e->o->ntargets; k++)
		if (e->nidle_t[k])
			pg_conn_close(e, &e->conns[e->idle[k][e->nidle_t[k] - 1]]);
	if (!e->nfree)
		return NULL;
	c = &e->conns[e->free_slots[--e->nfree]];
	c->target = (uint8_t)t;
	if (pg_conn_open(e, c) == -1) {
		*err = errno;
		e->free_slots[e->nfree++] = c->slot;
		return NULL;
	}
	e->nopen++;
	return c;
}

/* Finish a request that never reached a connection. */
static void fail_unplaced(struct pg_eng *e, size_t idx, struct pg_wl_req *wl, int err)
{
	struct pg_rec *r = &e->run->recs[idx];
	static bool told;

	if (!told) {
		fprintf(stderr, "pgload: cannot open a connection to %s: %s\n",
		        e->o->targets[r->target].name, strerror(err));
		told = true;
	}
	r->err = PG_ERR_CONNECT;
	r->done = 1;
	r->e2e_ns = pg_now_ns() - r->start_ns;
	pg_wl_done(e->wl, wl, false, NULL, 0);
	if (e->closed_loop)
		push_timer(e, pg_now_ns() + RETRY_DELAY_NS, PG_T_SLOT);
}

/* Dispatch waiting arrivals while connections and request bodies allow. */
static void pump(struct pg_eng *e)
{
	while (e->pend_n && (e->nidle || e->nfree)) {
		uint64_t now = pg_now_ns(), t;
		struct pg_wl_req wl;
		struct pg_conn *c;
		struct pg_rec *r;
		uint64_t widx = e->o->first_index + e->run->nrecs;
		size_t idx;
		int rc, err;

		rc = pg_wl_next(e->wl, widx, &wl);
		if (rc == 1) {
			e->wl_blocked = true; /* every conversation awaits a response */
			return;
		}
		if (rc == -1 || !(r = new_rec(e, &idx))) {
			fprintf(stderr, "pgload: out of memory building request %zu; stopping\n",
			        e->run->nrecs);
			if (rc == 0)
				pg_wl_done(e->wl, &wl, false, NULL, 0);
			stop_issuing(e, true);
			return;
		}
		t = e->pending[e->pend_head];
		e->pend_head = (e->pend_head + 1) % e->pend_cap;
		e->pend_n--;
		if (!e->closed_loop && now > t + LATE_NS)
			e->run->arrivals_delayed++;
		/*
		 * Open loop: latency counts from the arrival, or from when a
		 * conversation became ready if the arrival had to wait for one —
		 * that wait is the workload's shape, not the target's latency.
		 */
		r->start_ns = e->closed_loop           ? now
		              : t > e->wl_unblocked_ns ? t
		                                       : e->wl_unblocked_ns;
		r->send_ns = now;
		r->group = wl.group;
		r->turn = wl.turn;
		r->backend = PG_NO_BACKEND;
		r->target = (uint8_t)pg_wl_target(e->o, widx);
		r->prompt_tokens = r->cached_tokens = r->completion_tokens = -1;
		c = get_conn(e, r->target, &err);
		if (!c) {
			fail_unplaced(e, idx, &wl, err);
			continue;
		}
		e->inflight++;
		pg_conn_start(e, c, idx, &wl);
	}
}

/* A successful request's inter-token gaps: its record's figures, and the
 * gaps into the run's list (what the ITL percentiles are taken over). */
static void keep_itl(struct pg_run *run, struct pg_rec *r, const struct pg_itl *t)
{
	r->itl_n = (uint32_t)t->gap.n;
	r->itl_sum_ns = t->sum_ns;
	r->itl_max_ns = t->max_ns;
	if (t->oom || pg_gaps_append(&run->itl, t->gap.v, t->gap.n) == -1) {
		if (!run->itl_oom)
			fprintf(stderr, "pgload: out of memory keeping inter-token gaps; "
			                "the ITL figures lack some\n");
		run->itl_oom = true;
	}
}

void pg_eng_request_done(struct pg_eng *e, struct pg_conn *c, enum pg_err err, bool reusable)
{
	struct pg_rec *r = &e->run->recs[c->rec];
	uint64_t now = pg_now_ns();

	r->e2e_ns = now - r->start_ns;
	r->err = (uint8_t)err;
	r->done = 1;
	if (err == PG_OK)
		keep_itl(e->run, r, &c->itl);
	pg_wl_done(e->wl, &c->wl, err == PG_OK && !c->scan.text_over, c->scan.text.p,
	           c->scan.text.len);
	if (e->wl_blocked) {
		e->wl_blocked = false;
		e->wl_unblocked_ns = now;
	}
	c->gen++; /* its timeout timer is now stale */
	e->inflight--;
	e->run->end_ns = now;
	if (reusable) {
		c->reused = true;
		c->state = PG_C_IDLE;
		c->idle_pos = e->nidle_t[c->target];
		e->idle[c->target][e->nidle_t[c->target]++] = c->slot;
		e->nidle++;
	} else {
		pg_conn_close(e, c);
	}
	if (!e->closed_loop)
		return;
	if (err == PG_ERR_CONNECT || err == PG_ERR_IO || err == PG_ERR_EOF)
		push_timer(e, now + RETRY_DELAY_NS, PG_T_SLOT); /* do not spin on a dead target */
	else
		arrive(e, now);
}

/*
 * Schedule mode: arrival k is due at the run's start + the workload's
 * offset for k. Make every arrival due by now, each with its own time, and
 * set the timer for the next; the workload's end ends the issuing.
 */
static void scheduled_arrivals(struct pg_eng *e, uint64_t due, uint64_t now)
{
	uint64_t off;

	do {
		arrive(e, due);
		if (pg_wl_at(e->wl, ++e->sched_next, &off) != 0) {
			stop_issuing(e, false);
			return;
		}
		due = e->run->t0_ns + off;
	} while (e->issuing && due <= now);
	if (e->issuing)
		push_timer(e, due, PG_T_ARRIVAL);
}

static void on_timer(struct pg_eng *e, const struct pg_timer *t, uint64_t now)
{
	struct pg_conn *c;
	uint64_t next;

	switch (t->kind) {
	case PG_T_ARRIVAL:
		if (pg_scheduled(e->o)) {
			scheduled_arrivals(e, t->due_ns, now);
			break;
		}
		/* Catch up on every arrival already due, each with its own time. */
		next = t->due_ns;
		do {
			arrive(e, next);
			next += (uint64_t)(pg_rng_exp(&e->arrival_rng, e->o->rate) * NS_PER_S);
		} while (e->issuing && next <= now);
		if (e->issuing)
			push_timer(e, next, PG_T_ARRIVAL);
		break;
	case PG_T_SLOT:
		arrive(e, now);
		break;
	case PG_T_TIMEOUT:
		c = &e->conns[t->id];
		if (c->gen == t->gen && c->state != PG_C_FREE && c->state != PG_C_IDLE)
			pg_conn_fail(e, c, PG_ERR_TIMEOUT);
		break;
	case PG_T_STOP:
		stop_issuing(e, true);
		break;
	case PG_T_DEADLINE:
		e->finished = true;
		break;
	}
}

static int setup(struct pg_eng *e)
{
	const struct pg_opts *o = e->o;
	struct rlimit rl;
	/* Closed loop: --concurrency requests in flight, and room for each
	 * client slot's keep-alive connection to every target. */
	uint32_t n = e->closed_loop ? o->concurrency * o->ntargets : o->max_conns;

	for (unsigned t = 0; t < o->ntargets; t++) {
		e->addr[t].sin_family = AF_INET;
		e->addr[t].sin_port = htons(o->targets[t].port);
		if (inet_pton(AF_INET, o->targets[t].host, &e->addr[t].sin_addr) != 1) {
			fprintf(stderr, "pgload: --target %s: not a numeric IPv4 ADDR:PORT\n",
			        o->targets[t].name);
			return -1;
		}
	}
	/* One descriptor per connection: raise the soft limit as far as allowed. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 32) {
		fprintf(stderr,
		        "pgload: %u connections need %u descriptors but RLIMIT_NOFILE is %llu; "
		        "lower --concurrency/--max-conns or raise the limit (ulimit -n)\n",
		        n, n + 32, (unsigned long long)rl.rlim_cur);
		return -1;
	}
	e->ep = epoll_create1(EPOLL_CLOEXEC);
	if (e->ep == -1) {
		fprintf(stderr, "pgload: epoll_create1: %s\n", strerror(errno));
		return -1;
	}
	e->nslots = n;
	e->conns = calloc(n, sizeof(*e->conns));
	e->free_slots = calloc(n, sizeof(*e->free_slots));
	if (!e->conns || !e->free_slots) {
		fprintf(stderr, "pgload: out of memory for %u connections\n", n);
		return -1;
	}
	for (unsigned t = 0; t < o->ntargets; t++) {
		e->idle[t] = calloc(n, sizeof(*e->idle[t]));
		if (!e->idle[t]) {
			fprintf(stderr, "pgload: out of memory for %u connections\n", n);
			return -1;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		e->conns[i].fd = -1;
		e->conns[i].slot = i;
		e->free_slots[n - 1 - i] = i; /* slot 0 is used first */
	}
	e->nfree = n;
	for (unsigned t = 0; t < o->ntargets; t++) {
		e->head_prefix_len[t] = (size_t)snprintf(
		    e->head_prefix[t], sizeof(e->head_prefix[t]),
		    "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: pgload\r\n%s"
		    "Content-Type: application/json\r\nAccept: %s\r\nContent-Length: ",
		    o->path, o->targets[t].name, o->headers,
		    o->stream ? "text/event-stream" : "application/json");
		if (e->head_prefix_len[t] >= sizeof(e->head_prefix[t]) - 32) {
			fprintf(stderr, "pgload: --path is too long\n");
			return -1;
		}
	}
	pg_rng_seed(&e->arrival_rng, pg_mix(o->seed, 0x617272 /* "arr" */, 0));
	return 0;
}

static void teardown(struct pg_eng *e)
{
	for (uint32_t i = 0; e->conns && i < e->nslots; i++) {
		struct pg_conn *c = &e->conns[i];

		if (c->fd >= 0)
			close(c->fd);
		pg_scan_free(&c->scan);
		pg_itl_free(&c->itl);
		pg_buf_free(&c->hbuf);
	}
	free(e->conns);
	for (unsigned t = 0; t < PG_MAX_TARGETS; t++)
		free(e->idle[t]);
	free(e->free_slots);
	free(e->pending);
	pg_heap_free(&e->heap);
	if (e->ep >= 0)
		close(e->ep);
	pg_wl_destroy(e->wl);
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Fire every due timer, tracking how late each fired; then dispatch. */
static void run_timers(struct pg_eng *e)
{
	const struct pg_timer *top;
	uint64_t now = pg_now_ns();
	struct pg_timer t;

	while ((top = pg_heap_peek(&e->heap)) && top->due_ns <= now) {
		pg_heap_pop(&e->heap, &t);
		if (now - t.due_ns > e->run->max_lag_ns)
			e->run->max_lag_ns = now - t.due_ns;
		on_timer(e, &t, now);
	}
	pump(e);
}

static void loop(struct pg_eng *e)
{
	struct epoll_event evs[512];

	while (!e->finished && (e->issuing || e->pend_n || e->inflight)) {
		const struct pg_timer *top = pg_heap_peek(&e->heap);
		struct timespec ts, *tsp = NULL;
		uint64_t now = pg_now_ns();
		int n;

		if (top) {
			uint64_t wait = top->due_ns > now ? top->due_ns - now : 0;

			ts.tv_sec = (time_t)(wait / NS_PER_S);
			ts.tv_nsec = (long)(wait % NS_PER_S);
			tsp = &ts;
		}
		n = epoll_pwait2(e->ep, evs, 512, tsp, NULL);
		if (n == -1 && errno != EINTR) {
			fprintf(stderr, "pgload: epoll_pwait2: %s\n", strerror(errno));
			break;
		}
		for (int i = 0; i < n; i++) {
			struct pg_conn *c = &e->conns[evs[i].data.u32];

			if (c->state != PG_C_FREE)
				pg_conn_event(e, c, evs[i].events);
			/* A long batch must not delay arrivals: look at the clock. */
			if (i % TIMER_CHECK_EVERY == TIMER_CHECK_EVERY - 1)
				run_timers(e);
		}
		run_timers(e);
	}
	if (e->finished) {
		/* Hard deadline: abort what is left. */
		e->run->hit_deadline = e->inflight || e->pend_n;
		e->run->arrivals_unsent += e->pend_n;
		e->pend_n = 0;
		for (uint32_t i = 0; i < e->nslots; i++) {
			struct pg_conn *c = &e->conns[i];

			if (c->state != PG_C_FREE && c->state != PG_C_IDLE)
				pg_conn_fail(e, c, PG_ERR_ABORTED);
		}
	}
}

int pg_engine_run(const struct pg_opts *o, struct pg_run *run)
{
	struct pg_eng *e = calloc(1, sizeof(*e));
	struct rusage ru0, ru1;
	int rc = -1;

	if (!e) {
		fprintf(stderr, "pgload: out of memory\n");
		return -1;
	}
	e->o = o;
	e->run = run;
	e->ep = -1;
	e->closed_loop = o->rate <= 0 && !pg_scheduled(o);
	e->wl = pg_wl_create(o);
	if (!e->wl || setup(e) == -1)
		goto out;
	getrusage(RUSAGE_SELF, &ru0);
	run->t0_ns = pg_now_ns();
	run->end_ns = run->t0_ns;
	e->issuing = true;
	if (o->duration_s > 0) {
		uint64_t d = (uint64_t)(o->duration_s * NS_PER_S);

		e->stop_ns = run->t0_ns + d;
		push_timer(e, e->stop_ns, PG_T_STOP);
		push_timer(e, e->stop_ns + (uint64_t)o->timeout_ms * NS_PER_MS + DEADLINE_GRACE_NS,
		           PG_T_DEADLINE);
	}
	if (e->closed_loop) {
		for (unsigned i = 0; i < o->concurrency; i++)
			arrive(e, run->t0_ns);
	} else if (pg_scheduled(o)) {
		uint64_t off;

		if (pg_wl_at(e->wl, 0, &off) == 0)
			push_timer(e, run->t0_ns + off, PG_T_ARRIVAL);
		else
			stop_issuing(e, false);
	} else {
		push_timer(e,
		           run->t0_ns + (uint64_t)(pg_rng_exp(&e->arrival_rng, o->rate) * NS_PER_S),
		           PG_T_ARRIVAL);
	}
	pump(e);
	loop(e);
	if (!run->issue_end_ns)
		run->issue_end_ns = pg_now_ns();
	getrusage(RUSAGE_SELF, &ru1);
	run->cpu_user_s = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
	run->cpu_sys_s = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	run->preempted = (uint64_t)(ru1.ru_nivcsw - ru0.ru_nivcsw);
	pg_wl_trace_sum(e->wl, &run->trace);
	rc = 0;
out:
	teardown(e);
	free(e);
	return rc;
}
