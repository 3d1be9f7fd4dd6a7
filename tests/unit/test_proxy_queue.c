// SPDX-License-Identifier: MIT
/*
 * Flow control in the proxy (user/proxy/queue.c) without sockets, on the
 * fixture of test_proxy.c (fake_io.h) with --flow-instance-queue-ms 1: a
 * backend with one request of 2,000 tokens in its queue (54 ms of prefill
 * at the default speed) has no room, so two such requests fill the
 * fixture's two backends (least outstanding requests puts one on each)
 * and the next one waits. The fixture's clock
 * (w->now_ms) stands still unless a test ticks it, so no queue drains by
 * the model's clock behind a test's back.
 */
#include "fake_io.h"

#define BODY_LEN 8000 /* 2,000 tokens */

/* A request to /a with a BODY_LEN body and extra header lines hdrs. */
static void send_req(int c, const char *hdrs)
{
	static char buf[BODY_LEN + 512];
	int n =
	    snprintf(buf, sizeof(buf),
	             "POST /a HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n", hdrs, BODY_LEN);

	memset(buf + n, 'q', BODY_LEN);
	deliver(c, buf, (size_t)n + BODY_LEN);
}

/* A chat request of a BODY_LEN prompt whose body names its user. */
static void send_chat(int c, const char *user, const char *hdrs)
{
	static char body[BODY_LEN + 256], buf[BODY_LEN + 768];
	int m = snprintf(body, sizeof(body),
	                 "{\"model\":\"m\",\"user\":\"%s\",\"messages\":[{\"role\":\"user\","
	                 "\"content\":\"",
	                 user);
	int n;

	memset(body + m, 'q', BODY_LEN);
	m += BODY_LEN;
	m += snprintf(body + m, sizeof(body) - (size_t)m, "\"}]}");
	n = snprintf(
	    buf, sizeof(buf),
	    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n", hdrs,
	    m);
	memcpy(buf + n, body, (size_t)m);
	deliver(c, buf, (size_t)n + (size_t)m);
}

static const struct pg_flow_stats *fstats(void)
{
	return &gw.maps.flow[0];
}

static int setup_flow(void **state)
{
	static char *extra[] = {
	    "--flow-control", "--flow-instance-queue-ms",  "1", "--flow-max-queued", "3",
	    "--strategy",     "least_outstanding_requests"};

	memset(setup_extra, 0, sizeof(setup_extra));
	memcpy(setup_extra, extra, sizeof(extra));
	return setup(state);
}

/* Fill both backends: two requests sent, their connections up. Returns
 * the first upstream fd (the second is the next). */
static int fill(int *c1, int *c2)
{
	int u = next_up_fd;

	*c1 = accept_client();
	*c2 = accept_client();
	send_req(*c1, "");
	send_req(*c2, "");
	assert_int_equal(next_up_fd, u + 2);
	connected(u, 0);
	connected(u + 1, 0);
	took(u);
	took(u + 1);
	return u;
}

/* Answer the request on upstream u (a whole, unstreamed response: its
 * work leaves the backend's queue at the head) and read the client's. */
static void answer(int u, int c)
{
	say(u, resp_ok);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
}

static void test_waits_then_goes(void **state)
{
	int c1, c2, c3 = 0, u = fill(&c1, &c2);

	(void)state;
	c3 = accept_client();
	send_req(c3, "");
	assert_int_equal(client_of(c3)->state, PG_C_QUEUED);
	assert_int_equal(next_up_fd, u + 2); /* nothing sent on */
	assert_int_equal(fstats()->queued, 1);
	assert_int_equal(fstats()->enqueued, 1);
	assert_true(fstats()->queued_bytes > BODY_LEN);
	/* An instance's queue empties: the waiting request goes, whole. */
	answer(u, c1);
	assert_int_equal(next_up_fd, u + 3);
	assert_int_equal(client_of(c3)->state, PG_C_WAIT);
	connected(u + 2, 0);
	assert_int_equal(strlen(took_body(u + 2)), BODY_LEN);
	assert_int_equal(fstats()->queued, 0);
	assert_int_equal(fstats()->queued_bytes, 0);
	assert_int_equal(fstats()->dispatched, 1);
	answer(u + 1, c2);
	answer(u + 2, c3);
	assert_quiet();
}

/* A request that waited: its routing latency leaves its wait out, both
 * measured on the request's own clock (pg_now_ns). The loop's clock is its
 * turn's start, behind it: a wait taken from it, in whole milliseconds,
 * once made the routing latency negative, wrapped to 4.29 s. */
static void test_wait_not_in_routing_latency(void **state)
{
	int c1, c2, c3, u = fill(&c1, &c2);
	const uint64_t sum = w->stats->route_lat_sum_ns;
	const struct pg_exchange *x;

	(void)state;
	w->now_ms -= 2;
	c3 = accept_client();
	send_req(c3, "");
	assert_int_equal(client_of(c3)->state, PG_C_QUEUED);
	answer(u, c1);
	x = &client_of(c3)->x;
	assert_int_equal(client_of(c3)->state, PG_C_WAIT);
	assert_true(x->route_ns > 0);
	assert_true(x->route_ns + (uint64_t)x->wait_us * 1000 <= pg_now_ns() - x->t0_ns);
	assert_int_equal(w->stats->route_lat_sum_ns - sum, x->route_ns);
	connected(u + 2, 0);
	answer(u + 1, c2);
	answer(u + 2, c3);
	assert_quiet();
}

static void test_client_gone_while_queued(void **state)
{
	int c1, c2, c3, u = fill(&c1, &c2);

	(void)state;
	c3 = accept_client();
	send_req(c3, "");
	assert_int_equal(client_of(c3)->state, PG_C_QUEUED);
	hangup(c3, 0);
	assert_true(F(c3)->closed);
	assert_int_equal(fstats()->queued, 0);
	assert_int_equal(fstats()->gone, 1);
	/* room later sends nothing: the instance never sees it */
	answer(u, c1);
	answer(u + 1, c2);
	assert_int_equal(next_up_fd, u + 2);
	assert_quiet();
}

static void test_deadline_expires(void **state)
{
	int c1, c2, c3, u = fill(&c1, &c2);
	const char *out;

	(void)state;
	c3 = accept_client();
	send_req(c3, "X-Prefixgate-Deadline-Ms: 100\r\n");
	assert_int_equal(client_of(c3)->state, PG_C_QUEUED);
	tick(50);
	assert_int_equal(client_of(c3)->state, PG_C_QUEUED);
	tick(200);
	out = took(c3);
	assert_non_null(strstr(out, "HTTP/1.1 429 Too Many Requests\r\n"));
	assert_non_null(strstr(out, "Retry-After: "));
	assert_non_null(strstr(out, "\"code\":\"deadline_exceeded\""));
	assert_non_null(strstr(out, "\"type\":\"rate_limit_exceeded\""));
	assert_int_equal(fstats()->expired, 1);
	assert_int_equal(fstats()->queued, 0);
	/* nothing sent on, and the connection serves the next request */
	assert_int_equal(next_up_fd, u + 2);
	assert_false(F(c3)->closed);
	assert_int_equal(client_of(c3)->state, PG_C_HEAD);
	answer(u, c1);
	say(c3, req1); /* on u, pooled */
	assert_non_null(strstr(took(u), "hello"));
	answer(u, c3);
	answer(u + 1, c2);
	assert_quiet();
}

static void test_bad_headers(void **state)
{
	static const char *const bad[] = {
	    "X-Prefixgate-Priority: urgent\r\n",
	    "X-Prefixgate-Deadline-Ms: soon\r\n",
	    "X-Prefixgate-Deadline-Ms: 0\r\n",
	    "X-Prefixgate-Deadline-Ms: 5\r\nX-Prefixgate-Deadline-Ms: 6\r\n",
	    "Authorization: Basic dXNlcjpwYXNz\r\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int c = accept_client(), u = next_up_fd;
		const char *out;

		send_req(c, bad[i]);
		out = took(c);
		assert_non_null(strstr(out, "HTTP/1.1 400 "));
		assert_int_equal(next_up_fd, u);
		assert_int_equal(fstats()->enqueued, 0);
		assert_quiet();
	}
}

static void test_priority_order(void **state)
{
	int c1, c2, cs, cc, u = fill(&c1, &c2);

	(void)state;
	cs = accept_client();
	cc = accept_client();
	send_req(cs, "X-Prefixgate-Priority: standard\r\n");
	send_req(cc, "X-Prefixgate-Priority: critical\r\n");
	assert_int_equal(fstats()->queued_class[PG_PRIO_CRITICAL], 1);
	assert_int_equal(fstats()->queued_class[PG_PRIO_STANDARD], 1);
	answer(u, c1); /* room for one: the critical one, though it came second */
	assert_int_equal(client_of(cc)->state, PG_C_WAIT);
	assert_int_equal(client_of(cs)->state, PG_C_QUEUED);
	answer(u + 1, c2);
	assert_int_equal(client_of(cs)->state, PG_C_WAIT);
	connected(u + 2, 0);
	connected(u + 3, 0);
	answer(u + 2, cc);
	answer(u + 3, cs);
	assert_quiet();
}

static void test_tenants_take_turns(void **state)
{
	int c1, c2, a1, a2, b1, u = fill(&c1, &c2);

	(void)state;
	a1 = accept_client();
	a2 = accept_client();
	b1 = accept_client();
	send_req(a1, "Authorization: Bearer sk-tenant-a\r\n");
	send_req(a2, "Authorization: Bearer sk-tenant-a\r\n");
	send_req(b1, "Authorization: Bearer sk-tenant-b\r\n");
	answer(u, c1);
	answer(u + 1, c2);
	/* two instances freed: one request of each tenant, not A's two */
	assert_int_equal(client_of(b1)->state, PG_C_WAIT);
	assert_int_equal(client_of(a1)->state + client_of(a2)->state, PG_C_WAIT + PG_C_QUEUED);
	assert_int_equal(fstats()->queued, 1);
	hangup(a1, 0);
	hangup(a2, 0);
	hangup(b1, 0);
	assert_int_equal(fstats()->queued, 0);
	assert_quiet();
}

/* The tenant from a header (--flow-tenant header:X-Team) or the body's
 * user (--flow-tenant user), the bearer token then ignored: as above, the
 * two instances freed go one to each tenant. */
static void tenants_take_turns_by(bool user)
{
	int c1, c2, a1, a2, b1, u = fill(&c1, &c2);
	const char *tok = "Authorization: Bearer sk-the-same\r\n";

	a1 = accept_client();
	a2 = accept_client();
	b1 = accept_client();
	if (user) {
		send_chat(a1, "alice", tok);
		send_chat(a2, "alice", tok);
		send_chat(b1, "bob", tok);
	} else {
		send_req(a1, "X-Team: a\r\nAuthorization: Bearer sk-the-same\r\n");
		send_req(a2, "X-Team: a\r\nAuthorization: Bearer sk-the-same\r\n");
		send_req(b1, "X-Team: b\r\nAuthorization: Bearer sk-the-same\r\n");
	}
	assert_int_equal(fstats()->queued, 3);
	answer(u, c1);
	answer(u + 1, c2);
	assert_int_equal(client_of(b1)->state, PG_C_WAIT);
	assert_int_equal(client_of(a1)->state + client_of(a2)->state, PG_C_WAIT + PG_C_QUEUED);
	hangup(a1, 0);
	hangup(a2, 0);
	hangup(b1, 0);
	assert_int_equal(fstats()->queued, 0);
	assert_quiet();
}

static int setup_flow_src(const char *src)
{
	static char *extra[] = {"--flow-control",
	                        "--flow-instance-queue-ms",
	                        "1",
	                        "--flow-max-queued",
	                        "3",
	                        "--strategy",
	                        "least_outstanding_requests",
	                        "--flow-tenant",
	                        NULL};

	extra[8] = (char *)src;
	memset(setup_extra, 0, sizeof(setup_extra));
	memcpy(setup_extra, extra, sizeof(extra));
	return setup(NULL);
}

static int setup_flow_header(void **state)
{
	(void)state;
	return setup_flow_src("header:X-Team");
}

static int setup_flow_user(void **state)
{
	(void)state;
	return setup_flow_src("user");
}

static void test_tenant_from_header(void **state)
{
	(void)state;
	tenants_take_turns_by(false);
}

static void test_tenant_from_user(void **state)
{
	(void)state;
	tenants_take_turns_by(true);
}

static void test_bound_sheds_sheddable(void **state)
{
	int c1, c2, s1, q1, q2, q3, u = fill(&c1, &c2);
	const char *out;

	(void)state;
	s1 = accept_client();
	q1 = accept_client();
	q2 = accept_client();
	q3 = accept_client();
	send_req(s1, "X-Prefixgate-Priority: sheddable\r\n");
	send_req(q1, "");
	send_req(q2, ""); /* the bound (3) reached */
	send_req(q3, ""); /* a standard one: the sheddable one makes room */
	out = took(s1);
	assert_non_null(strstr(out, "HTTP/1.1 429 "));
	assert_non_null(strstr(out, "\"code\":\"shed\""));
	assert_int_equal(client_of(q3)->state, PG_C_QUEUED);
	assert_int_equal(fstats()->shed, 1);
	/* full of standard ones: the next is refused */
	{
		int q4 = accept_client();

		send_req(q4, "");
		assert_non_null(strstr(took(q4), "\"code\":\"queue_full\""));
		assert_int_equal(fstats()->refused, 1);
	}
	assert_int_equal(fstats()->queued, 3);
	assert_int_equal(next_up_fd, u + 2);
	hangup(q1, 0);
	hangup(q2, 0);
	hangup(q3, 0);
	answer(u, c1);
	answer(u + 1, c2);
	assert_quiet();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_waits_then_goes, setup_flow, teardown),
	    cmocka_unit_test_setup_teardown(test_wait_not_in_routing_latency, setup_flow, teardown),
	    cmocka_unit_test_setup_teardown(test_client_gone_while_queued, setup_flow, teardown),
	    cmocka_unit_test_setup_teardown(test_deadline_expires, setup_flow, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_headers, setup_flow, teardown),
	    cmocka_unit_test_setup_teardown(test_priority_order, setup_flow, teardown),
	    cmocka_unit_test_setup_teardown(test_tenants_take_turns, setup_flow, teardown),
	    cmocka_unit_test_setup_teardown(test_tenant_from_header, setup_flow_header, teardown),
	    cmocka_unit_test_setup_teardown(test_tenant_from_user, setup_flow_user, teardown),
	    cmocka_unit_test_setup_teardown(test_bound_sheds_sheddable, setup_flow, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
