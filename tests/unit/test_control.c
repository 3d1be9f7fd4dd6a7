// SPDX-License-Identifier: MIT
/*
 * Control thread tests: membership through members.h (initial members, the
 * backends file, drain, ring generations, sync, DOWN expiry), reload, and
 * one real socket test of the thread (admin listener + SIGHUP), on the
 * in-memory gateway of control_fixture.h.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include "control_fixture.h"
#include "control/control.h"
#include "members/members_internal.h"
#include "lib/ring.h"

static void test_init(void **state)
{
	struct pg_admin_reply r;

	(void)state;
	assert_int_equal(gw.maps.state->nbackends, 3);
	assert_int_equal(gw.maps.state->ring_generation, 1);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(gw.maps.state->prefix_length, PG_PREFIX_LENGTH_DEFAULT);
	for (int id = 1; id <= 3; id++)
		assert_int_equal(flags(id), PG_BACKEND_ACTIVE);
	assert_int_equal(flags(4), 0);

	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_string_equal(r.content_type, "application/json");
	assert_int_equal(count(r.body.p, "\"id\":"), 3);
	assert_non_null(strstr(r.body.p, "{\"id\":2,\"address\":\"10.0.0.2:8000\",\"healthy\":true,"
	                                 "\"draining\":false,\"health\":\"up\",\"in_flight\":0,"
	                                 "\"requests\":0,\"failures\":0"));
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/health", NULL, &r), 200);
	assert_string_equal(r.body.p, "{\"status\":\"ok\",\"backends\":3,\"healthy\":3}\n");
	pg_buf_free(&r.body);
}

static void test_init_file(void **state)
{
	char err[256];

	(void)state;
	/* the file repeats a --backend (kept once) and adds two */
	make_temp(file_path, sizeof(file_path),
	          "# fleet\n10.0.0.3:8000\n\n10.0.1.1:9000  # new\nlocalhost:9001\n");
	cfg.backends_file = file_path;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->nbackends, 5);
	assert_int_equal(gw.maps.backends[5].port, 9001);
	assert_int_equal(gw.maps.backends[5].family, AF_INET);
	assert_memory_equal(gw.maps.backends[5].addr, "\x7f\0\0\1", 4);
	/* one ring for the whole initial membership */
	assert_int_equal(gw.maps.state->ring_generation, 1);
}

static void test_init_file_errors(void **state)
{
	char err[256], want[128];

	(void)state;
	make_temp(file_path, sizeof(file_path), "10.0.1.1:9000\n\n10.0.1.300:9000\n");
	cfg.backends_file = file_path;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:3: ", file_path);
	assert_non_null(strstr(err, want));

	cfg.backends_file = "/nonexistent/backends";
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--backends-file /nonexistent/backends"));
}

static void test_zero_backends(void **state)
{
	struct pg_admin_reply r;
	char err[256];

	(void)state;
	cfg.nbackends = 0;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->nbackends, 0);
	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_string_equal(r.body.p, "[\n]\n");
	pg_buf_free(&r.body);
	assert_int_equal(req("POST", "/route", "hello", &r), 503);
	assert_non_null(strstr(r.body.p, "\"backend\":null"));
	pg_buf_free(&r.body);
}

static void test_drain(void **state)
{
	struct pg_backend *b = &gw.maps.backends[2];
	uint64_t now = pg_now_ms();
	uint32_t epoch = b->epoch;
	char err[128];

	(void)state;
	b->in_flight = 2;
	b->requests[PG_DEC_AFFINITY] = 5;
	assert_int_equal(pg_member_remove(&gw, "10.0.0.2:8000", err, sizeof(err)), 2);
	assert_int_equal(gw.maps.state->nbackends, 2);
	pg_control_tick(&gw, now + 10 * PG_DRAIN_GRACE_MS);
	assert_int_equal(flags(2), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	b->in_flight = 0;
	pg_control_tick(&gw, now - 1); /* in_flight 0, but within the grace period */
	assert_int_equal(flags(2), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	pg_control_tick(&gw, now + 10 * PG_DRAIN_GRACE_MS);
	assert_int_equal(flags(2), 0);
	assert_int_equal(pg_router_max_id(&gw.router), 3);
	assert_int_equal(pg_member_remove(&gw, "10.0.0.2:8000", err, sizeof(err)), -ENOENT);

	/* the freed id is reused: new epoch, counters cleared */
	assert_int_equal(pg_member_add(&gw, "10.0.0.7:8000", err, sizeof(err)), 2);
	assert_int_equal(b->epoch, epoch + 1);
	assert_int_equal(b->requests[PG_DEC_AFFINITY], 0);
	assert_int_equal(flags(2), PG_BACKEND_ACTIVE);

	/* the highest id leaves: scans stop below it, from the bound the
	 * adds raised (which stays) */
	assert_int_equal(gw.router.backend_hwm, 3);
	assert_int_equal(pg_member_remove(&gw, "10.0.0.3:8000", err, sizeof(err)), 3);
	pg_control_tick(&gw, now + 10 * PG_DRAIN_GRACE_MS);
	assert_int_equal(flags(3), 0);
	assert_int_equal(pg_router_max_id(&gw.router), 2);
	assert_int_equal(gw.router.backend_hwm, 3);
	assert_int_equal(pg_member_add(&gw, "10.0.0.8:8000", err, sizeof(err)), 3);
	assert_int_equal(pg_router_max_id(&gw.router), 3);
}

/* Share of keys (of a fixed sample) whose ring owner differs from before,
 * and no key may land on a draining member. */
static void test_ring_generations(void **state)
{
	const uint64_t gen0 = gw.maps.state->ring_generation;
	struct pg_admin_reply r;
	uint16_t c[PG_RING_CANDIDATES];
	char err[128], line[64];
	uint64_t h = 1;

	(void)state;
	assert_int_equal(pg_member_add(&gw, "10.0.0.4:8000", err, sizeof(err)), 4);
	assert_int_equal(gw.maps.state->ring_generation, gen0 + 1);
	/* 3 -> 4 members: ~1/4 of the keys move (all to the new one) */
	assert_in_range(gw.maps.state->remapped_ppm, 200000, 300000);
	assert_int_equal(pg_maps_pool_live_ring(&gw.maps, 0)->nbackends, 4);

	assert_int_equal(pg_member_remove(&gw, "10.0.0.1:8000", err, sizeof(err)), 1);
	assert_int_equal(gw.maps.state->ring_generation, gen0 + 2);
	assert_in_range(gw.maps.state->remapped_ppm, 200000, 300000);
	for (int i = 0; i < 10000; i++) {
		h = h * 6364136223846793005ull + 1442695040888963407ull;
		size_t n = pg_maps_pool_candidates(&gw.maps, 0, h, c);

		assert_int_equal(n, 3);
		for (size_t k = 0; k < n; k++)
			assert_int_not_equal(c[k], 1);
	}
	/* an error changes nothing */
	assert_int_equal(pg_member_add(&gw, "10.0.0.4:8000", err, sizeof(err)), -EEXIST);
	assert_int_equal(gw.maps.state->ring_generation, gen0 + 2);

	assert_int_equal(req("GET", "/metrics", NULL, &r), 200);
	snprintf(line, sizeof(line), "\nprefixgate_ring_generation %llu\n",
	         (unsigned long long)(gen0 + 2));
	assert_non_null(strstr(r.body.p, line));
	assert_non_null(strstr(r.body.p, "\nprefixgate_ring_remapped_ratio 0.2"));
	pg_buf_free(&r.body);
}

static void test_members_sync(void **state)
{
	char *v1[] = {"10.0.0.3:8000", "10.0.2.1:8000", "10.0.2.2:8000"};
	char *v2[] = {"10.0.2.2:8000", "10.0.2.3:8000"};
	char err[128];

	(void)state;
	assert_int_equal(pg_members_sync(&gw, v1, 3, err, sizeof(err)), 2);
	assert_int_equal(gw.maps.state->nbackends, 5);
	/* 10.0.0.3 (also --backend) stays; 10.0.2.1 (file only) drains */
	assert_int_equal(pg_members_sync(&gw, v2, 2, err, sizeof(err)), 2);
	assert_int_equal(flags(3), PG_BACKEND_ACTIVE);
	assert_int_equal(flags(4), PG_BACKEND_ACTIVE | PG_BACKEND_DRAINING);
	assert_int_equal(flags(5), PG_BACKEND_ACTIVE);
	assert_int_equal(flags(6), PG_BACKEND_ACTIVE);
	assert_int_equal(gw.maps.state->nbackends, 5);
	/* same list again: nothing to do, no new ring */
	uint64_t gen = gw.maps.state->ring_generation;

	assert_int_equal(pg_members_sync(&gw, v2, 2, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->ring_generation, gen);
	/* a member added through the API is not the file's to remove */
	assert_int_equal(pg_member_add(&gw, "10.0.3.1:8000", err, sizeof(err)), 7);
	assert_int_equal(pg_members_sync(&gw, NULL, 0, err, sizeof(err)), 2);
	assert_int_equal(flags(7), PG_BACKEND_ACTIVE);
	assert_int_equal(gw.maps.state->nbackends, 4);
}

static void test_down_expiry(void **state)
{
	struct pg_backend *b = &gw.maps.backends[1];
	struct pg_admin_reply r;
	uint64_t now = pg_now_ms();

	(void)state;
	b->down_until_ms = now + 60000;
	__atomic_fetch_or(&b->flags, PG_BACKEND_DOWN, __ATOMIC_RELAXED);
	assert_int_equal(req("GET", "/health", NULL, &r), 200);
	assert_string_equal(r.body.p, "{\"status\":\"ok\",\"backends\":3,\"healthy\":2}\n");
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/metrics", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\nprefixgate_backend_up{backend=\"10.0.0.1:8000\"} 0\n"));
	assert_non_null(strstr(r.body.p, "\nprefixgate_backends{state=\"down\"} 1\n"));
	pg_buf_free(&r.body);

	pg_control_tick(&gw, now);
	assert_true(flags(1) & PG_BACKEND_DOWN);
	pg_control_tick(&gw, now + 60000);
	assert_int_equal(flags(1), PG_BACKEND_ACTIVE);
	/* DOWN members stay in the ring: the balancer skips them */
	assert_int_equal(gw.maps.state->nbackends, 3);
}

static void test_reload(void **state)
{
	struct pg_admin_reply r;
	char err[256];

	(void)state;
	make_temp(file_path, sizeof(file_path), "10.0.5.1:80\n");
	make_temp(routing_path, sizeof(routing_path), "{\"RoutingStrategy\":\"RANDOM\"}");
	cfg.backends_file = file_path;
	cfg.routing_config = routing_path;
	cfg.route.strategy = PG_STRATEGY_LEAST_OUTSTANDING; /* as if --strategy overrode it */
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->nbackends, 4);

	/* unchanged routing file: the override and PUT /routing survive */
	assert_int_equal(req("PUT", "/routing",
	                     "{\"RoutingStrategy\":\"PREFIX_AWARE\","
	                     "\"PrefixAwareRoutingConfig\":{\"PrefixLength\":8192}}",
	                     &r),
	                 200);
	pg_buf_free(&r.body);
	write_file(file_path, "10.0.5.2:80\n10.0.5.3:80\n");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_PREFIX_AWARE);
	assert_int_equal(gw.maps.state->prefix_length, 8192);
	assert_int_equal(gw.maps.state->nbackends, 5);
	assert_true(flags(4) & PG_BACKEND_DRAINING); /* 10.0.5.1 */

	/* a changed routing file is applied whole */
	write_file(routing_path, "{\"RoutingStrategy\":\"RANDOM\"} ");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(gw.maps.state->prefix_length, PG_PREFIX_LENGTH_DEFAULT);

	/* broken files: logged, nothing changes */
	write_file(file_path, "10.0.5.2:80\nbogus\n");
	write_file(routing_path, "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"Bad\":1}");
	assert_int_equal(pg_control_reload(&gw), -1);
	assert_int_equal(gw.maps.state->nbackends, 5);
	assert_int_equal(gw.maps.state->strategy, PG_STRATEGY_RANDOM);
}

/* Explicit flags override --routing-config across re-reads, and a partial
 * PUT /routing keeps the fields it omits. */
static void test_reload_keeps_flags(void **state)
{
	struct pg_admin_reply r;
	char err[256];
	struct pg_state *st = gw.maps.state;

	(void)state;
	make_temp(routing_path, sizeof(routing_path),
	          "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	          "{\"PrefixLength\":2048,\"ConcurrencyThreshold\":5}}");
	cfg.routing_config = routing_path;
	/* as pg_config_parse leaves "--concurrency-threshold 20 --routing-config F" */
	cfg.route = (struct pg_route_cfg){.strategy = PG_STRATEGY_PREFIX_AWARE,
	                                  .prefix_length = 2048,
	                                  .concurrency_threshold = 20,
	                                  .new_choices = 1};
	cfg.route_flags.concurrency_threshold = 20;
	cfg.route_flags_set = PG_POOL_SET_THRESHOLD;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	assert_int_equal(st->concurrency_threshold, 20);
	write_file(routing_path,
	           "{\"RoutingStrategy\":\"PREFIX_AWARE\",\"PrefixAwareRoutingConfig\":"
	           "{\"PrefixLength\":1024,\"ConcurrencyThreshold\":7}}");
	assert_int_equal(pg_control_reload(&gw), 0);
	assert_int_equal(st->prefix_length, 1024);       /* the file's change */
	assert_int_equal(st->concurrency_threshold, 20); /* the flag, still */
	/* PUT /routing: what the body names changes, the rest is kept */
	assert_int_equal(req("PUT", "/routing",
	                     "{\"RoutingStrategy\":\"PREFIX_AWARE\","
	                     "\"PrefixAwareRoutingConfig\":{\"PrefixLength\":3072}}",
	                     &r),
	                 200);
	assert_non_null(strstr(r.body.p, "\"PrefixLength\":3072,\"ConcurrencyThreshold\":20}"));
	pg_buf_free(&r.body);
	assert_int_equal(req("PUT", "/routing",
	                     "{\"RoutingStrategy\":\"CACHE_AWARE\","
	                     "\"CacheAwareConfig\":{\"NewConversationChoices\":3}}",
	                     &r),
	                 200);
	pg_buf_free(&r.body);
	assert_int_equal(st->strategy, PG_STRATEGY_CACHE_AWARE);
	assert_int_equal(st->prefix_length, 3072);
	assert_int_equal(st->concurrency_threshold, 20);
	assert_int_equal(st->ca_choices, 3);
	/* an invalid body changes nothing */
	assert_int_equal(req("PUT", "/routing", "{\"PrefixAwareRoutingConfig\":{}}", &r), 400);
	pg_buf_free(&r.body);
	assert_int_equal(st->strategy, PG_STRATEGY_CACHE_AWARE);
}

/* ---- the thread, over a real socket -------------------------------------- */

/* One HTTP exchange with the admin listener; the reply, NUL-terminated,
 * or NULL after 5 s. */
static char *http(const char *raw)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
	                         .sin_port = htons(pg_control_admin_port()),
	                         .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct pollfd p;
	char *buf = calloc(1, 65536);
	size_t len = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0 && buf);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, raw, strlen(raw), 0), (ssize_t)strlen(raw));
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	while (len < 65535 && poll(&p, 1, 5000) == 1 &&
	       (n = recv(fd, buf + len, 65535 - len, 0)) > 0)
		len += (size_t)n;
	close(fd);
	if (!len) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void answer(const char *name, enum pg_dns_status st, const char *const *ips, size_t n)
{
	union pg_sockaddr a[8];
	struct pg_hostport hp;

	assert_int_equal(pg_hostport_parse(name, &hp, false, NULL, 0), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pg_addr_parse(ips[i], &a[i], NULL, 0), 0); /* port ignored */
	pg_ctl_name_answer(&gw, pg_ctl_name_find(&hp), st, a, n, "test");
}

static int member(const char *addr)
{
	union pg_sockaddr a;

	assert_int_equal(pg_addr_parse(addr, &a, NULL, 0), 0);
	return pg_ctl_find_member(&gw, &a, -1);
}

/* A DNS name: membership follows its answers; a failure keeps the last. */
static void test_names(void **state)
{
	const char *two[] = {"10.1.0.2:1", "10.1.0.1:1"},
	           *three[] = {"10.1.0.3:1", "10.1.0.1:1", "10.1.0.2:1"};
	const char *changed[] = {"[2001:db8::1]:1", "10.1.0.1:1"};
	char err[256], buf[PG_HOSTPORT_STRLEN];
	int id1, id9;

	(void)state;
	assert_int_equal(pg_member_add(&gw, "Pool.Example:8000", err, sizeof(err)), 0);
	assert_int_equal(pg_member_add(&gw, "pool.example:8000", err, sizeof(err)), -EEXIST);
	assert_int_equal(gw.maps.state->nbackends, 3); /* nothing until it answers */
	answer("pool.example:8000", PG_DNS_OK, two, 2);
	assert_int_equal(gw.maps.state->nbackends, 5);
	id1 = member("10.1.0.1:8000");
	assert_true(id1 > 0 && member("10.1.0.2:8000") > 0);
	assert_string_equal(pg_member_name(id1, buf), "pool.example:8000");
	assert_null(pg_member_name(member("10.0.0.1:8000"), buf));
	answer("pool.example:8000", PG_DNS_OK, three, 3);
	assert_int_equal(gw.maps.state->nbackends, 6);
	assert_int_equal(member("10.1.0.1:8000"), id1); /* identity kept, in any order */
	/* failures keep the last answer */
	answer("pool.example:8000", PG_DNS_FAIL, NULL, 0);
	answer("pool.example:8000", PG_DNS_NONAME, NULL, 0);
	assert_int_equal(gw.maps.state->nbackends, 6);
	/* two gone, an IPv6 one new */
	answer("pool.example:8000", PG_DNS_OK, changed, 2);
	assert_int_equal(gw.maps.state->nbackends, 5);
	assert_int_equal(member("10.1.0.1:8000"), id1);
	assert_true(gw.maps.backends[member("10.1.0.2:8000")].flags & PG_BACKEND_DRAINING);
	assert_int_equal(gw.maps.backends[member("[2001:db8::1]:8000")].family, AF_INET6);
	/* a --backend address also in the answer outlives the name */
	id9 = pg_member_add(&gw, "10.0.0.9:8000", err, sizeof(err));
	assert_true(id9 > 0);
	answer("pool.example:8000", PG_DNS_OK, (const char *[]){"10.1.0.1:1", "10.0.0.9:1"}, 2);
	assert_int_equal(gw.maps.state->nbackends, 5);
	/* removing the name drains what only it held */
	assert_int_equal(pg_member_remove(&gw, "pool.example:8000", err, sizeof(err)), 0);
	assert_int_equal(gw.maps.state->nbackends, 4);
	assert_false(gw.maps.backends[id9].flags & PG_BACKEND_DRAINING);
	assert_int_equal(pg_member_remove(&gw, "pool.example:8000", err, sizeof(err)), -ENOENT);
}

/* Lines the gateway logs while fn runs (stderr into a file). Free it. */
static char *logged(void (*fn)(void))
{
	char path[] = "/tmp/pg-test-log-XXXXXX", *text = malloc(8192);
	int fd = mkstemp(path), saved = dup(2), level = pg_log_level;
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0 && text);
	fflush(stderr);
	dup2(fd, 2);
	pg_log_level = PG_LOG_INFO;
	fn();
	pg_log_level = level;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, text, 8191, 0);
	text[n > 0 ? n : 0] = 0;
	close(fd);
	unlink(path);
	return text;
}

static int never_slot(void)
{
	struct pg_hostport hp;

	assert_int_equal(pg_hostport_parse("never.invalid:80", &hp, false, NULL, 0), 0);
	return pg_ctl_name_find(&hp);
}

static void fail_three(void)
{
	for (int i = 0; i < 3; i++)
		answer("never.invalid:80", PG_DNS_NONAME, NULL, 0);
}

static void fail_after_a_while(void)
{
	struct pg_name *nm = &pg_ctl.names[never_slot()];

	nm->failing_since -= PG_NAME_LOG_MS + 5000; /* as if a minute had passed */
	nm->logged_ms -= PG_NAME_LOG_MS;
	answer("never.invalid:80", PG_DNS_FAIL, NULL, 0);
}

/* A name that never resolves leaves a trace: GET /backends lists it with
 * its state and error, /metrics counts its failures, the log says so at
 * its first failure and then at most once a minute. */
static void test_name_never_resolves(void **state)
{
	struct pg_admin_reply r;
	struct pg_name_info ni;
	char err[256], *log;

	(void)state;
	assert_int_equal(pg_member_add(&gw, "never.invalid:80", err, sizeof(err)), 0);
	assert_true(pg_backend_name_info(never_slot(), &ni));
	assert_int_equal(ni.state, PG_NAME_RESOLVING);
	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "{\"id\":0,\"address\":null,\"name\":\"never.invalid:80\","
	                                 "\"state\":\"resolving\",\"error\":null,"));
	pg_buf_free(&r.body);
	log = logged(fail_three);
	assert_int_equal(
	    count(log, "backend name never.invalid:80: test; it stands for no address"), 1);
	assert_int_equal(count(log, "prefixgate warn"), 1);
	free(log);
	assert_true(pg_backend_name_info(never_slot(), &ni));
	assert_int_equal(ni.state, PG_NAME_UNRESOLVED);
	assert_int_equal(ni.failures, 3);
	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\"name\":\"never.invalid:80\",\"state\":\"unresolved\","
	                                 "\"error\":\"test\",\"lookup_failures\":3,"));
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/metrics", NULL, &r), 200);
	assert_non_null(
	    strstr(r.body.p, "\nprefixgate_backend_name_resolved{name=\"never.invalid:80\"} 0\n"));
	assert_non_null(strstr(r.body.p,
	                       "\nprefixgate_backend_name_lookup_failures_total{name=\"never."
	                       "invalid:80\"} 3\n"));
	assert_non_null(
	    strstr(r.body.p, "\nprefixgate_backend_name_addresses{name=\"never.invalid:80\"} 0\n"));
	pg_buf_free(&r.body);
	/* still failing a minute on: said again */
	log = logged(fail_after_a_while);
	assert_non_null(strstr(log, "backend name never.invalid:80: still failing after 6"));
	free(log);
	/* it resolves: a member, named; the entry of the name alone is gone */
	answer("never.invalid:80", PG_DNS_OK, (const char *[]){"10.9.0.1:1"}, 1);
	assert_true(pg_backend_name_info(never_slot(), &ni));
	assert_int_equal(ni.state, PG_NAME_RESOLVED);
	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_null(strstr(r.body.p, "\"address\":null"));
	assert_non_null(strstr(r.body.p,
	                       "\"address\":\"10.9.0.1:80\",\"name\":\"never.invalid:80\","
	                       "\"healthy\""));
	pg_buf_free(&r.body);
	/* failing again, its address kept: the member says why */
	answer("never.invalid:80", PG_DNS_FAIL, NULL, 0);
	assert_int_equal(req("GET", "/backends", NULL, &r), 200);
	assert_non_null(strstr(r.body.p, "\"name\":\"never.invalid:80\",\"name_error\":\"test\","));
	pg_buf_free(&r.body);
	assert_int_equal(req("GET", "/metrics", NULL, &r), 200);
	assert_non_null(
	    strstr(r.body.p, "\nprefixgate_backend_name_addresses{name=\"never.invalid:80\"} 1\n"));
	pg_buf_free(&r.body);
}

static void test_thread(void **state)
{
	char err[256], *o;
	sigset_t hup;
	int tries;

	(void)state;
	make_temp(file_path, sizeof(file_path), "10.0.9.1:8000\n");
	cfg.backends_file = file_path;
	assert_int_equal(pg_control_init(&gw, err, sizeof(err)), 0);
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	assert_int_equal(pthread_sigmask(SIG_BLOCK, &hup, NULL), 0);
	if (pg_control_start(&gw, err, sizeof(err)))
		fail_msg("pg_control_start: %s", err);
	assert_int_not_equal(pg_control_admin_port(), 0);

	o = http("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
	assert_non_null(o);
	assert_non_null(strstr(o, "\"backends\":4,\"healthy\":4}"));
	free(o);
	o = http("POST /backends HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\n"
	         "{\"address\":\"10.0.9.2:8000\"}");
	assert_non_null(o);
	assert_non_null(strstr(o, "HTTP/1.1 201 Created"));
	free(o);

	/* SIGHUP re-reads the backends file */
	write_file(file_path, "10.0.9.1:8000\n10.0.9.3:8000\n");
	assert_int_equal(kill(getpid(), SIGHUP), 0);
	for (tries = 0; tries < 100; tries++) {
		o = http("GET /backends HTTP/1.1\r\nHost: x\r\n\r\n");
		assert_non_null(o);
		bool seen = strstr(o, "\"10.0.9.3:8000\"") != NULL;

		free(o);
		if (seen)
			break;
		usleep(50000);
	}
	assert_true(tries < 100);
	pg_control_stop(&gw);
	assert_int_equal(pg_control_admin_port(), 0);
	assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &hup, NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_init, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_init_file, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_init_file_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_zero_backends, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_drain, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_ring_generations, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_members_sync, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_down_expiry, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_reload, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_reload_keeps_flags, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_name_never_resolves, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_names, setup_init, teardown),
	    cmocka_unit_test_setup_teardown(test_thread, setup, teardown),
	};

	return cmocka_run_group_tests_name("control", tests, NULL, NULL);
}
