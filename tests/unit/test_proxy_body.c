// SPDX-License-Identifier: MIT
/*
 * The proxy's state machine (user/proxy/) with request bodies, without
 * sockets (fake_io.h, as test_proxy.c): where a body is read and held, the
 * buffers it is held in, and when they are given back; where a response
 * head is parsed.
 */
#include "fake_io.h"

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
		size_t first = split ? 10 : RECV_PIECE;
		const struct pg_client *cl = client_of(c);
		const char *in_buf, *out;

		deliver(c, whole, first);
		if (split)
			deliver(c, whole + first, RECV_PIECE);
		assert_int_equal(cl->state, PG_C_KEY);
		assert_int_equal(cl->in_len, (split ? first + RECV_PIECE : first) - hl);
		assert_true(cl->in_cap >= BODY);
		if (split)
			assert_ptr_equal(cl->in_buf, in_buf);
		in_buf = cl->in_buf;
		deliver(c, whole + hl + cl->in_len, BODY - cl->in_len);
		assert_ptr_equal(cl->x.hold.buf ? cl->x.hold.buf : cl->in_buf, in_buf);
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
		held = client_of(c)->x.hold.buf;
		assert_non_null(held);
		assert_non_null(F(u)->pending);
		/* while the request is still being sent */
		say(u, broken ? "garbage\r\n\r\n" : resp_ok);
		assert_true(F(u)->closed);
		assert_false(kept(held));
		if (broken) {
			assert_ptr_not_equal(client_of(c)->x.hold.buf, held);
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
	assert_true(pg_json_tok_bytes(&w->ahead_spare[0]->js) > 2 * RECV_PIECE);
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

/* A body that came whole with its head (PG_LEND_BODY_MIN or more) is sent
 * from the provided buffer it arrived in, never copied: a retry before the
 * response re-sends it from there, and the buffer is given back once, when
 * the response begins, or, if a send still names it then, once that send is
 * over (the response still coming, or its connection closed by then). What
 * follows it in the receive (a pipelined request) is copied out.
 * A short body, or one that arrives while buffers are scarce, is copied and
 * its buffer given back at once. */
static void test_whole_body_lent(void **state)
{
	enum { BODY = 8000 };
	static char req[BODY + 256];
	char body[BODY];
	const struct pg_client *cl;
	int c = accept_client(), u1 = UP_FD0, u2 = UP_FD0 + 1, u;
	size_t hl, n;

	(void)state;
	memset(body, 'b', BODY);
	memcpy(body, "{\"prompt\":\"", 11);
	memcpy(body + BODY - 2, "\"}", 2);
	hl = (size_t)snprintf(req, sizeof(req),
	                      "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
	                      "Content-Length: %d\r\n\r\n",
	                      BODY);
	memcpy(req + hl, body, BODY);
	n = hl + BODY;
	cl = client_of(c);

	/* lent, with a request pipelined behind it; the refused connect is
	 * retried on the other backend from the same bytes */
	memcpy(req + n, req2, strlen(req2));
	lend(c, 0, req, n + strlen(req2));
	assert_true(cl->x.hold.lent);
	assert_ptr_equal(cl->x.held, lent_buf[0] + hl);
	assert_int_equal(cl->in_len, strlen(req2));
	connected(u1, -ECONNREFUSED);
	connected(u2, 0);
	assert_memory_equal(took_body(u2), body, BODY);
	assert_true(lent_out[0]); /* until the response begins */
	say(u2, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no");
	assert_false(lent_out[0]);
	say(u2, "k");
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	assert_non_null(strstr(took(u2), "\r\n\r\nworld")); /* then the pipelined one */
	say(u2, resp_two);
	assert_non_null(strstr(took(c), "\r\n\r\ntwo"));

	/* its response begun while its send is still in flight: back once the
	 * send is over, the response still coming */
	stall_fd = u2;
	lend(c, 1, req, n);
	assert_int_equal(next_up_fd, UP_FD0 + 2); /* on the pooled connection */
	assert_non_null(F(u2)->pending);
	say(u2, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\no");
	assert_true(lent_out[1]);
	stall_fd = 0;
	pump();
	assert_false(lent_out[1]);
	assert_memory_equal(took_body(u2), body, BODY);
	say(u2, "k");
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	assert_true(F(u2)->closed); /* answered early: not pooled */

	/* answered whole while its send is still in flight: the buffer goes
	 * with the closed connection, back only once that send is over */
	u = next_up_fd;
	stall_fd = u;
	lend(c, 1, req, n);
	connected(u, 0);
	assert_non_null(F(u)->pending);
	say(u, resp_ok);
	assert_true(F(u)->closed);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	assert_true(lent_out[1]);
	pg_sock_reap(w, false);
	assert_false(lent_out[1]);
	stall_fd = 0;

	/* a short body, then one while half the buffers are out: copied */
	lend(c, 2, req1, strlen(req1));
	assert_false(lent_out[2]);
	u = next_up_fd - 1;
	connected(u, 0);
	assert_non_null(strstr(took(u), "\r\n\r\nhello"));
	say(u, resp_ok);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	w->bufs_out += PG_NBUFS / 2;
	lend(c, 3, req, n);
	assert_false(lent_out[3]);
	assert_false(cl->x.hold.lent);
	w->bufs_out -= PG_NBUFS / 2;
	if (F(u)->connecting || next_up_fd - 1 != u)
		connected(u = next_up_fd - 1, 0);
	assert_memory_equal(took_body(u), body, BODY);
	say(u, resp_ok);
	assert_non_null(strstr(took(c), "\r\n\r\nok"));
	assert_quiet();
}

/* A response head that begins in a receive is parsed there: interim (1xx)
 * answers before it are dropped, the body bytes behind it are sent on from
 * that provided buffer (given back once sent), and a head the receive does
 * not complete is gathered with the next one (its buffer given back at
 * once). */
static void test_response_head_where_it_arrived(void **state)
{
	static const char interim[] = "HTTP/1.1 100 Continue\r\n\r\n"
	                              "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	int c = accept_client(), u = UP_FD0;
	const char *out;

	(void)state;
	say(c, req1);
	connected(u, 0);
	assert_non_null(strstr(took(u), "hello"));
	stall_fd = c; /* the client's send stays in flight */
	lend(u, 0, interim, strlen(interim));
	assert_true(lent_out[0]); /* "ok" is sent from it */
	stall_fd = 0;
	pump();
	assert_false(lent_out[0]);
	out = took(c);
	assert_int_equal(strncmp(out, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_string_equal(strstr(out, "\r\n\r\n") + 4, "ok");

	/* interim answer and head split over receives, on the pooled connection */
	say(c, req2);
	assert_non_null(strstr(took(u), "world"));
	say(u, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 2");
	assert_int_equal(F(c)->out_len, 0);
	say(u, "00 OK\r\nContent-Length: 3\r\n\r\ntwo");
	out = took(c);
	assert_int_equal(strncmp(out, "HTTP/1.1 200 OK\r\n", 17), 0);
	assert_null(strstr(out, "103"));
	assert_string_equal(strstr(out, "\r\n\r\n") + 4, "two");

	/* a head cut short by its receive: copied out, the buffer back at once */
	say(c, req1);
	assert_non_null(strstr(took(u), "hello"));
	lend(u, 1, "HTTP/1.1 200 OK\r\nContent-Le", 27);
	assert_false(lent_out[1]);
	say(u, "ngth: 2\r\n\r\nok");
	assert_string_equal(strstr(took(c), "\r\n\r\n") + 4, "ok");
	assert_quiet();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_body_copied_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_piece_shapes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_buffers_outlive_their_send, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_parse_ahead_twice, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_whole_body_lent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_response_head_where_it_arrived, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
