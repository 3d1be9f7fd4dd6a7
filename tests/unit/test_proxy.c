// SPDX-License-Identifier: MIT
/*
 * The proxy's state machine (user/proxy/) without sockets: a worker whose
 * I/O actions (struct pg_io) are a fake that records what was asked, and
 * events delivered by hand, as the io_uring loop would deliver them (both in
 * fake_io.h). Each test ends with every in-flight slot and admission given
 * back exactly once (a double release shows as a wrapped counter).
 */
#include "fake_io.h"

/* --- tests --------------------------------------------------------------------------- */

static void test_exchange_and_pool(void **state)
{
	int c = accept_client(), u;

	(void)state;
	say(c, req1);
	u = UP_FD0;
	assert_true(F(u)->connecting);
	assert_int_equal(F(u)->out_len, 0); /* nothing sent before the connect */
	connected(u, 0);
	assert_non_null(strstr(took(u), "hello"));
	assert_int_equal(client_of(c)->state, PG_C_WAIT);
	say(u, resp_ok);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	/* Kept alive both ways: the backend connection went to the pool. */
	assert_false(F(u)->closed);
	assert_false(F(c)->closed);
	assert_int_equal(client_of(c)->state, PG_C_HEAD);
	assert_int_equal(w->pool_len[1] + w->pool_len[2], 1);
	/* The next request on it reuses the pooled connection. */
	say(c, req2);
	assert_int_equal(next_up_fd, UP_FD0 + 1); /* no new socket */
	assert_non_null(strstr(took(u), "world"));
	say(u, resp_two);
	assert_non_null(strstr(took(c), "two"));
	assert_quiet();
}

static void test_pipelining_in_order(void **state)
{
	char both[256];
	int c = accept_client(), u = UP_FD0;

	(void)state;
	snprintf(both, sizeof(both), "%s%s", req1, req2);
	say(c, both);
	connected(u, 0);
	/* The second request's dispatch comes from the run list. */
	answer_pipelined_pair(c, u, took(u));
	assert_int_equal(next_up_fd, UP_FD0 + 1);
	assert_quiet();
}

/* A response head begun in one receive and ended in a whole receive buffer
 * (the rest of the head, the body, and bytes past the response): answered,
 * not taken for a head too large (the limit is on the head, not on what a
 * receive holds), and its connection not reused (bytes past the response);
 * a head that has no end within the limit is one, and retried elsewhere. */
static void test_head_then_full_receive(void **state)
{
	static char big[PG_BUFSZ];
	static const char rest[] = "Content-Length: 2\r\n\r\nok";
	int c = accept_client(), u = UP_FD0;

	(void)state;
	say(c, req1);
	connected(u, 0);
	assert_non_null(strstr(took(u), "hello"));
	say(u, "HTTP/1.1 200 OK\r\n");
	memset(big, 'j', sizeof(big));
	memcpy(big, rest, strlen(rest));
	lend(u, 0, big, sizeof(big));
	assert_non_null(strstr(took(c), "HTTP/1.1 200 OK\r\n"));
	assert_int_equal(next_up_fd, UP_FD0 + 1); /* no retry */
	assert_true(F(u)->closed);
	assert_false(F(c)->closed);

	/* a head with no end in PG_HTTP_MAX_HEAD bytes is one: retried */
	say(c, req1);
	u = next_up_fd - 1;
	connected(u, 0);
	memcpy(big, "HTTP/1.1 200 OK\r\nX-A: ", 22);
	lend(u, 0, big, sizeof(big));
	assert_true(F(u)->closed);
	assert_int_equal(next_up_fd, u + 2);
	connected(u + 1, 0);
	say(u + 1, resp_ok);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	assert_quiet();
}

static void test_retry_before_first_byte(void **state)
{
	int c = accept_client(), u1 = UP_FD0, u2 = UP_FD0 + 1;

	(void)state;
	say(c, req1);
	connected(u1, -ECONNREFUSED);
	assert_true(F(u1)->closed);
	/* Retried on the other backend, on a fresh connection. */
	assert_true(F(u2)->connecting);
	assert_int_not_equal(F(u2)->port, F(u1)->port);
	connected(u2, 0);
	assert_non_null(strstr(took(u2), "hello"));
	say(u2, resp_ok);
	assert_non_null(strstr(took(c), "ok"));
	assert_false(F(c)->closed);
	/* The refused backend is skipped for a while. */
	bool down = false;
	for (unsigned id = 1; id <= 2; id++)
		if (port_of((uint16_t)id) == F(u1)->port)
			down = gw.maps.backends[id].flags & PG_BACKEND_DOWN;
	assert_true(down);
	assert_quiet();
}

static void test_retry_on_stale_pooled_connection(void **state)
{
	int c = accept_client(), u = UP_FD0;

	(void)state;
	say(c, req1);
	connected(u, 0);
	say(u, resp_ok);
	took(c);
	/* The pooled connection was closed by the backend meanwhile: the send
	 * fails; the same backend is tried again on a fresh connection. */
	say(c, req2);
	hangup(u, 0);
	assert_true(F(u)->closed);
	assert_true(F(UP_FD0 + 1)->connecting);
	assert_int_equal(F(UP_FD0 + 1)->port, F(u)->port);
	connected(UP_FD0 + 1, 0);
	say(UP_FD0 + 1, resp_two);
	assert_non_null(strstr(took(c), "two"));
	assert_quiet();
}

static void test_no_retry_after_first_byte(void **state)
{
	int c = accept_client(), u = UP_FD0;
	const char *out;

	(void)state;
	say(c, req1);
	connected(u, 0);
	say(u, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial");
	hangup(u, -ECONNRESET);
	assert_int_equal(next_up_fd, UP_FD0 + 1); /* no second attempt */
	out = took(c);
	assert_non_null(strstr(out, "partial"));
	assert_null(strstr(out, "502"));
	/* Short of its length, then the connection ends. */
	assert_int_equal(client_of(c)->state, PG_C_LINGER);
	assert_true(F(c)->shut);
	assert_true(F(u)->closed);
	assert_quiet();
}

static void test_backend_death_mid_chunked_body(void **state)
{
	int c = accept_client(), u = UP_FD0;

	(void)state;
	say(c, req1);
	connected(u, 0);
	say(u, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
	hangup(u, 0);
	assert_non_null(strstr(took(c), "hel"));
	assert_int_equal(client_of(c)->state, PG_C_LINGER);
	assert_true(F(u)->closed);
	assert_int_equal(w->pool_len[1] + w->pool_len[2], 0);
	assert_int_equal(gw.stats[0].backend_errors, 1);
	assert_quiet();
}

/* Drive a new client into each state, then have it hang up. */
static int into_state(enum pg_client_state st)
{
	int c = accept_client(), u = next_up_fd;

	switch (st) {
	case PG_C_HEAD:
		say(c, "POST /a HTTP/1.1\r\nHost:");
		break;
	case PG_C_KEY:
		say(c, REQ("/a", 100000) "0123456789");
		break;
	case PG_C_STREAM: {
		static char big[8192];
		size_t n = strlen(REQ("/a", 100000));

		memcpy(big, REQ("/a", 100000), n);
		memset(big + n, 'b', sizeof(big) - n);
		deliver(c, big, sizeof(big));
		connected(u, 0);
		break;
	}
	case PG_C_WAIT:
		say(c, req1);
		connected(u, 0);
		break;
	case PG_C_DISCARD: {
		static char big[8192];
		size_t n = strlen(REQ("/a", 100000));

		memcpy(big, REQ("/a", 100000), n);
		memset(big + n, 'b', sizeof(big) - n);
		deliver(c, big, sizeof(big));
		connected(u, 0);
		say(u, "HTTP/1.1 413 Too Big\r\nContent-Length: 0\r\n\r\n");
		break;
	}
	case PG_C_LINGER:
		say(c, "BAD\r\n\r\n");
		break;
	case PG_C_QUEUED:
		fail_msg("flow control's states: test_proxy_queue.c");
	}
	assert_int_equal(client_of(c)->state, st);
	return c;
}

static void test_client_abort_in_every_state(void **state)
{
	static const enum pg_client_state states[] = {PG_C_HEAD, PG_C_KEY,     PG_C_STREAM,
	                                              PG_C_WAIT, PG_C_DISCARD, PG_C_LINGER};

	(void)state;
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		int first_up = next_up_fd;
		int c = into_state(states[i]);

		hangup(c, i % 2 ? 0 : -ECONNRESET);
		assert_true(F(c)->closed);
		/* Its backend connection goes with it (the server stops
		 * generating for nobody); a pooled one may stay. */
		for (int u = first_up; u < next_up_fd; u++)
			if (!F(u)->closed)
				assert_int_equal(((struct pg_upstream *)F(u)->s)->state, PG_U_IDLE);
		assert_quiet();
		pg_sock_reap(w, false);
	}
	assert_int_equal(w->nclients, 0);
}

static void test_early_answer_discard_keeps_client(void **state)
{
	int c = into_state(PG_C_DISCARD), u = UP_FD0;
	static char rest[100000];
	size_t left = 100000 - (8192 - strlen(REQ("/a", 100000)));

	(void)state;
	assert_non_null(strstr(took(c), "413"));
	/* Answered before the whole request: never pooled. */
	assert_true(F(u)->closed);
	assert_quiet();
	/* The rest of the body is dropped, then the next request is served. */
	memset(rest, 'b', left);
	deliver(c, rest, left);
	assert_int_equal(client_of(c)->state, PG_C_HEAD);
	say(c, req2);
	connected(UP_FD0 + 1, 0);
	assert_non_null(strstr(took(UP_FD0 + 1), "world"));
	assert_null(strstr(F(UP_FD0 + 1)->out, "bbbb"));
	say(UP_FD0 + 1, resp_two);
	assert_non_null(strstr(took(c), "two"));
	assert_quiet();
}

static void test_linger_after_error(void **state)
{
	int c = accept_client();
	const char *out;

	(void)state;
	say(c, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
	out = took(c);
	assert_non_null(strstr(out, "HTTP/1.1 400 "));
	assert_non_null(strstr(out, "Connection: close"));
	assert_int_equal(client_of(c)->state, PG_C_LINGER);
	assert_true(F(c)->shut);  /* our side shut once the answer is out */
	assert_true(F(c)->armed); /* its input drained meanwhile */
	say(c, "more bytes, ignored");
	assert_int_equal(F(c)->out_len, 0);
	tick(1000);
	assert_false(F(c)->closed);
	tick(1100);
	assert_true(F(c)->closed);
	assert_quiet();
}

static void test_timeouts(void **state)
{
	int c1, c2, c3, u;

	(void)state;
	/* A head not complete in --header-timeout: 408. */
	c1 = accept_client();
	say(c1, "POST /a HTTP/1.1\r\n");
	/* Sent, no response byte in --first-byte-timeout: 504. */
	c2 = accept_client();
	u = next_up_fd;
	say(c2, req1);
	connected(u, 0);
	/* An idle keep-alive connection: closed after --idle-timeout. */
	c3 = accept_client();
	tick(1001);
	assert_non_null(strstr(took(c1), "408"));
	assert_false(F(c2)->closed);
	assert_int_equal(F(c2)->out_len, 0);
	tick(2000);
	assert_non_null(strstr(took(c2), "504"));
	assert_true(F(u)->closed);
	assert_false(F(c3)->closed);
	tick(2000);
	assert_true(F(c3)->closed);
	assert_quiet();
}

static void test_every_attempt_fails(void **state)
{
	int c, u1 = UP_FD0;

	(void)state;
	/* Every attempt refused: PG_MAX_ATTEMPTS at most, then 502. */
	c = accept_client();
	say(c, req1);
	for (int i = 0; i < PG_MAX_ATTEMPTS && F(u1 + i)->connecting; i++)
		connected(u1 + i, -ECONNREFUSED);
	assert_non_null(strstr(took(c), "502"));
	assert_true(next_up_fd - u1 <= PG_MAX_ATTEMPTS);
	assert_quiet();
	/* No socket at all: also a 502, nothing held. */
	c = accept_client();
	socket_errno = EMFILE;
	say(c, req2);
	assert_non_null(strstr(took(c), "502"));
	socket_errno = 0;
	assert_quiet();
}

/* Idle keep-alive clients close in the order they went idle; a request
 * moves a client to the back; draining closes the idle ones at once. */
static void test_idle_order_and_drain(void **state)
{
	int a, b, c, d, u;

	(void)state;
	a = accept_client();
	tick(1000);
	b = accept_client();
	tick(1000);
	c = accept_client();
	tick(500);
	say(a, req1);
	u = next_up_fd - 1;
	connected(u, 0);
	say(u, resp_ok); /* a is idle again from now (T+2500) */
	tick(3400);      /* T+5900 */
	assert_false(F(a)->closed || F(b)->closed || F(c)->closed);
	tick(100); /* T+6000: b's idle timeout */
	assert_true(F(b)->closed);
	assert_false(F(a)->closed || F(c)->closed);
	tick(1000); /* T+7000: c's */
	assert_true(F(c)->closed);
	assert_false(F(a)->closed);
	/* Draining: the idle ones go at once, a request in progress finishes. */
	d = accept_client();
	say(d, req2);
	__atomic_store_n(&gw.draining, 1, __ATOMIC_RELAXED);
	tick(1);
	assert_true(F(a)->closed);
	assert_false(F(d)->closed);
	assert_non_null(strstr(took(u), "world")); /* on the pooled connection */
	say(u, resp_two);
	assert_non_null(strstr(took(d), "Connection: close"));
	assert_quiet();
}

/* Sends the kernel takes only part of: every byte still goes, once, in order. */
static void test_short_sends(void **state)
{
	char both[256];
	int c = accept_client(), u = UP_FD0;
	const char *out;

	(void)state;
	send_chunk = 3;
	snprintf(both, sizeof(both), "%s%s", req1, req2);
	say(c, both);
	connected(u, 0);
	answer_pipelined_pair(c, u, took(u));
	/* An error answer (head and body, one send) in pieces too. */
	say(c, "BAD\r\n\r\n");
	out = took(c);
	assert_non_null(strstr(out, "HTTP/1.1 400 "));
	assert_non_null(strstr(out, "\"code\":400}}\n"));
	assert_true(F(c)->shut);
	assert_quiet();
}

static void test_enum_names(void **state)
{
	(void)state;
	assert_string_equal(pg_client_state_str(PG_C_DISCARD), "discard");
	assert_string_equal(pg_up_state_str(PG_U_IDLE), "idle");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_exchange_and_pool, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pipelining_in_order, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_head_then_full_receive, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retry_before_first_byte, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_retry_on_stale_pooled_connection, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_retry_after_first_byte, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backend_death_mid_chunked_body, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_client_abort_in_every_state, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_early_answer_discard_keeps_client, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_linger_after_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_timeouts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_every_attempt_fails, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_short_sends, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_order_and_drain, setup, teardown),
	    cmocka_unit_test(test_enum_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
