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

/* A long body's head is read where it arrived: the body alone is copied,
 * once, into room reserved for all of it (not moved up past its head, nor
 * regrown, as the rest arrives), and reaches the backend byte for byte. A
 * head split over receives costs one more copy of what came with its end,
 * and then the same room. */
static void test_body_copied_once(void **state)
{
	enum { BODY = 40000 };
	static char body[BODY];
	char head[128], whole[sizeof(head) + BODY];
	size_t hl;

	(void)state;
	/* JSON, so that its key needs all of it */
	memset(body, 'a', BODY);
	memcpy(body, "{\"prompt\":\"", 11);
	memcpy(body + BODY - 2, "\"}", 2);
	for (size_t i = 11; i < BODY - 2; i++)
		body[i] = (char)('a' + i * 7 % 26);
	hl = (size_t)snprintf(head, sizeof(head),
	                      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
	                      "Content-Length: %d\r\n\r\n",
	                      BODY);
	memcpy(whole, head, hl);
	memcpy(whole + hl, body, BODY);
	/* split 0's buffer, freed with its exchange, is split 1's (the worker's
	 * spares): a worker's steady state allocates no body buffer */
	for (size_t split = 0; split < 2; split++) {
		int c = accept_client(), u = UP_FD0; /* then pooled */
		/* split 1: the head's first 10 bytes alone, then the rest */
		size_t first = split ? 10 : PG_BUFSZ;
		const struct pg_client *cl = client_of(c);
		const char *in_buf, *out;

		deliver(c, whole, first);
		if (split)
			deliver(c, whole + first, PG_BUFSZ);
		assert_int_equal(cl->state, PG_C_KEY);
		assert_int_equal(cl->in_len, (split ? first + PG_BUFSZ : first) - hl);
		assert_true(cl->in_cap >= BODY);
		if (split)
			assert_ptr_equal(cl->in_buf, in_buf);
		in_buf = cl->in_buf;
		deliver(c, whole + hl + cl->in_len, BODY - cl->in_len);
		assert_ptr_equal(cl->x.held_buf ? cl->x.held_buf : cl->in_buf, in_buf);
		if (!split)
			connected(u, 0);
		out = took(u);
		assert_non_null(strstr(out, "POST /v1/completions HTTP/1.1\r\n"));
		assert_non_null(strstr(out, "\r\n\r\n"));
		assert_memory_equal(strstr(out, "\r\n\r\n") + 4, body, BODY);
		say(u, resp_ok);
		assert_non_null(strstr(took(c), "\r\n\r\nok"));
	}
	assert_int_equal(next_up_fd, UP_FD0 + 1);
	assert_quiet();
}

/* Is p among the worker's kept buffers (lib/spare.h)? */
static bool kept(const void *p)
{
	for (unsigned i = 0; i < w->spares.n; i++)
		if (w->spares.v[i].p == p)
			return true;
	return false;
}

/* A backend answering before it took its whole request is closed with the
 * request's send in flight: the buffers that send names go with it, and
 * serve the next requests (the worker's spares) only once it is over, so
 * the kernel never sends a later request's bytes as this one's. One whose
 * answer is broken is closed the same way, and the retry goes on with
 * copies. */
static void test_buffers_outlive_their_send(void **state)
{
	int c = accept_client(), u = UP_FD0;
	const char *held;

	(void)state;
	for (int broken = 0; broken < 2; broken++, u = next_up_fd) {
		stall_fd = u;
		say(c, req1);
		if (F(u)->connecting)
			connected(u, 0);
		held = client_of(c)->x.held_buf;
		assert_non_null(held);
		assert_non_null(F(u)->pending);
		/* while the request is still being sent */
		say(u, broken ? "garbage\r\n\r\n" : resp_ok);
		assert_true(F(u)->closed);
		assert_false(kept(held));
		if (broken) {
			assert_ptr_not_equal(client_of(c)->x.held_buf, held);
			connected(next_up_fd - 1, 0); /* the retry, on the other backend */
			assert_non_null(strstr(took(next_up_fd - 1), "\r\n\r\nhello"));
			say(next_up_fd - 1, resp_ok);
		}
		assert_non_null(strstr(took(c), "\r\n\r\nok"));
		assert_int_equal(client_of(c)->state, PG_C_HEAD); /* kept alive */
		pg_sock_reap(w, false); /* the send's cancel came in: u is freed */
		assert_true(kept(held));
	}
	assert_quiet();
}

/* A parse made as a body arrived is kept for the next body with its token
 * array (the worker's spares), and that array's size does not count as
 * the next body's tokens: both bodies are parsed ahead. Each has ~1,700
 * tokens (20 bytes each, in 37 KB) in an array of 3,200 (64 KB), more
 * than the 32 KB of body the next one's first look has. */
static void test_parse_ahead_twice(void **state)
{
	static char req[64 << 10];
	int c = accept_client(), u = UP_FD0;
	size_t n = 0, hl;
	char body[48 << 10];

	(void)state;
	n = (size_t)snprintf(body, sizeof(body), "{\"prompt\":\"p\"");
	for (unsigned i = 0; i < 850; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, ",\"m%04u\":\"%033u\"", i, i);
	n += (size_t)snprintf(body + n, sizeof(body) - n, "}");
	hl = (size_t)snprintf(req, sizeof(req), "%s%zu\r\n\r\n",
	                      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", n);
	memcpy(req + hl, body, n);
	for (int k = 0; k < 2; k++) {
		deliver(c, req, hl + n);
		if (!k)
			connected(u, 0);
		assert_int_equal(w->stats->parsed_ahead, (uint64_t)k + 1);
		assert_non_null(strstr(took(u), "\"m0849\""));
		say(u, resp_ok);
		assert_non_null(strstr(took(c), "\r\n\r\nok"));
	}
	assert_int_equal(w->nahead_spare, 1);
	assert_true(pg_json_tok_bytes(&w->ahead_spare[0]->js) > 2 * PG_BUFSZ);
	assert_quiet();
}

/* Other first receives, read where they arrived: a chunked body whole in
 * it; a head split over two, with a request pipelined behind it; a body
 * too large for --max-body-size, answered from it (its bytes, and the
 * request behind them, never read). */
static void test_first_piece_shapes(void **state)
{
	int c = accept_client(), u = UP_FD0;
	char both[256];
	const char *out;

	(void)state;
	/* every body here is keyed "hello" or "world": one backend (as req1, req2) */
	say(c, "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "5\r\nhello\r\n0\r\n\r\n");
	connected(u, 0);
	out = took(u);
	assert_non_null(strstr(out, "\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
	say(u, resp_ok);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));

	say(c, "POST /a HTTP/1.1\r\nHo");
	snprintf(both, sizeof(both), "st: x\r\nContent-Length: 5\r\n\r\nhello%s", req2);
	say(c, both);
	out = took(u); /* the pooled connection */
	assert_non_null(strstr(out, "POST /a HTTP/1.1\r\n"));
	answer_pipelined_pair(c, u, out);

	c = accept_client();
	snprintf(both, sizeof(both), "%sabc%s", REQ("/a", 2000000), req2);
	say(c, both);
	assert_non_null(strstr(took(c), "HTTP/1.1 413 "));
	assert_int_equal(client_of(c)->state, PG_C_LINGER);
	assert_int_equal(client_of(c)->in_len, 0);
	assert_int_equal(F(u)->out_len, 0);
	assert_int_equal(next_up_fd, UP_FD0 + 1);
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
	    cmocka_unit_test_setup_teardown(test_body_copied_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_piece_shapes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_buffers_outlive_their_send, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_parse_ahead_twice, setup, teardown),
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
