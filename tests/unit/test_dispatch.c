// SPDX-License-Identifier: MIT
/*
 * The one dispatch path (user/proxy/dispatch.c) and the one first-token
 * event (pg_exchange_first_token), table-driven over the ways a request
 * reaches its backend: straight from its client, from flow control's
 * queue, retried after a failed attempt, and through a prefill/decode pair
 * (vLLM, SGLang; straight, queued, its prefill retried). On the fixture of
 * test_proxy.c (fake_io.h): flow control on with --flow-instance-queue-ms
 * 1, so that one request of a few hundred tokens fills an instance and the
 * next waits; tenants from X-Team; the fixture's clock never ticks, so
 * nothing leaves a queue by the model's clock behind a test's back.
 *
 * Each row drives a request R of its kind, a filler F where one is needed
 * to fill the instances, and a request W that waits behind them. For every
 * row:
 *  - R, F and W are each charged to their tenant once (the charge counts
 *    while anyone waits: the fixture says a peer gateway has requests
 *    waiting, so every dispatch is charged);
 *  - each is routed once, its routing latency recorded once (a retry is
 *    not), never past its own time so far less its wait in the queue;
 *  - W leaves the queue at R's first token (a streamed answer's first body
 *    byte, a prefill's answer), in that turn, not at a tick;
 *  - at the end every in-flight slot and every load ticket of every
 *    instance is given back, exactly once (nothing held, nothing wrapped).
 */
#include "fake_io.h"

static const char stream_head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n";
static const char stream_token[] = "a\r\ndata: {}\n\n\r\n";
static const char stream_end[] = "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";
/* a decode leg's whole answer, and a vLLM prefill's (%zu: its length) */
static const char decode_ok[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 29\r\n\r\ndata: {\"x\":1}\n\ndata: [DONE]\n\n";
static const char prefill_kv[] =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n"
    "{\"id\":\"c\",\"choices\":[{\"text\":\"a\"}],\"kv_transfer_params\":{\"do_remote_prefill\":"
    "true,\"remote_engine_id\":\"e9\",\"remote_block_ids\":[4,5],\"remote_host\":\"10.0.0.9\","
    "\"remote_port\":7}}";
#define WORDS 400 /* ~500 tokens: past pd-min-tokens, and fills an instance */

static char chat_body[8192];

/* The request of tenant team: a streamed chat of WORDS words. */
static int send_as(const char *team)
{
	static char req[9000];
	int c = accept_client();

	snprintf(req, sizeof(req),
	         "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Team: %s\r\n"
	         "Content-Length: %zu\r\n\r\n%s",
	         team, strlen(chat_body), chat_body);
	say(c, req);
	return c;
}

/* The backend connection opened last, connected. */
static int up_last(void)
{
	int u = next_up_fd - 1;

	connected(u, 0);
	took(u);
	return u;
}

static uint32_t key_tokens; /* the prompt's, as routing counted them (every request's) */

/* Client c's request was routed: once, its latency no longer than its own
 * time so far less its wait in the queue. */
static void routed(int c)
{
	const struct pg_exchange *x = &client_of(c)->x;

	if (!key_tokens)
		key_tokens = x->key.tokens;
	assert_int_equal(x->key.tokens, key_tokens);
	assert_true(x->route_ns > 0);
	assert_true(x->route_ns + (uint64_t)x->wait_us * 1000 <= pg_now_ns() - x->t0_ns);
}

static void waits(int c)
{
	assert_int_equal(client_of(c)->state, PG_C_QUEUED);
}

/* c left the queue in the turn that made room (no tick since). */
static void went(int c)
{
	assert_int_not_equal(client_of(c)->state, PG_C_QUEUED);
	routed(c);
}

/* Client c's streamed answer, from its backend connection u (its head
 * sent already, or not: head). */
static void stream_out(int u, int c, bool head)
{
	if (head)
		say(u, stream_head);
	say(u, stream_token);
	say(u, stream_end);
	assert_non_null(strstr(took(c), "data: [DONE]"));
}

static void prefill_answer(int u)
{
	char buf[1024];

	snprintf(buf, sizeof(buf), prefill_kv, strlen(strstr(prefill_kv, "\r\n\r\n") + 4));
	say(u, buf);
}

/* --- the rows' requests -------------------------------------------------------------- */

/* R's first token: its head (no first token yet: W still waits), then
 * its first event. */
static void first_token(int u, int r, int wq)
{
	say(u, stream_head);
	assert_int_equal(client_of(r)->x.ttft_ns, 0); /* a stream's head is not its first token */
	waits(wq);
	say(u, stream_token);
	assert_true(client_of(r)->x.ttft_ns > client_of(r)->x.t0_ns);
}

static void drive_direct(void)
{
	int r = send_as("r"), ur = up_last(), f, uf, wq, uw;

	routed(r);
	f = send_as("f");
	uf = up_last();
	wq = send_as("w");
	waits(wq);
	first_token(ur, r, wq);
	went(wq);
	uw = up_last();
	stream_out(ur, r, false);
	stream_out(uf, f, true);
	stream_out(uw, wq, true);
}

static void drive_queued(void)
{
	int f1 = send_as("f"), u1 = up_last(), f2 = send_as("f"), u2 = up_last(), r, ur, wq, uw;

	/* the loop's clock is its turn's start, behind a request's own
	 * (pg_now_ns), which its wait and routing latency are measured on */
	w->now_ms -= 2;
	r = send_as("r");
	waits(r);
	first_token(u1, f1, r);
	went(r);
	ur = up_last();
	wq = send_as("w");
	waits(wq);
	first_token(ur, r, wq);
	went(wq);
	uw = up_last();
	stream_out(u1, f1, false);
	stream_out(u2, f2, true);
	stream_out(ur, r, false);
	stream_out(uw, wq, true);
}

/* R's first backend refuses it: retried on the other, the only one left
 * (the first is down), which W then waits for. */
static void drive_retried(void)
{
	int r = send_as("r"), ur, wq, uw;

	connected(next_up_fd - 1, -ECONNREFUSED);
	ur = up_last();
	routed(r);
	wq = send_as("w");
	waits(wq);
	first_token(ur, r, wq);
	went(wq);
	uw = up_last();
	stream_out(ur, r, false);
	stream_out(uw, wq, true);
}

/* A vLLM pair: its prefill leg on one prefill instance (F fills the
 * other); W waits; R's prefill answers: room, W goes; R's decode leg. */
static void drive_pd_vllm(void)
{
	int r = send_as("r"), pr = up_last(), f, pf, wq, pw, dr, df, dw;

	routed(r);
	f = send_as("f");
	pf = up_last();
	wq = send_as("w");
	waits(wq);
	prefill_answer(pr);
	went(wq);
	/* W's prefill leg (R's prefill connection, kept), and R's decode leg */
	assert_int_equal(next_up_fd, pf + 2);
	dr = up_last();
	pw = pr;
	took(pw);
	prefill_answer(pf);
	df = up_last();
	prefill_answer(pw);
	dw = up_last();
	say(dr, decode_ok);
	say(df, decode_ok);
	say(dw, decode_ok);
	assert_non_null(strstr(took(r), "[DONE]"));
	assert_non_null(strstr(took(f), "[DONE]"));
	assert_non_null(strstr(took(wq), "[DONE]"));
}

/* The same, R waiting first: two pairs' prefills fill both instances. */
static void drive_pd_queued(void)
{
	int f1 = send_as("f"), p1 = up_last(), f2 = send_as("f"), p2 = up_last(), r, pr, wq, pw;

	w->now_ms -= 2; /* as drive_queued */
	r = send_as("r");
	waits(r);
	prefill_answer(p1); /* F1's: room, R goes (on F1's kept connection) */
	went(r);
	pr = p1;
	took(pr);
	wq = send_as("w");
	waits(wq);
	prefill_answer(pr);
	went(wq);
	pw = pr;
	took(pw);
	prefill_answer(p2);
	prefill_answer(pw);
	/* the four decode legs, in the order their prefills answered */
	for (int d = p2 + 1; d < next_up_fd; d++) {
		connected(d, 0);
		say(d, decode_ok);
	}
	assert_non_null(strstr(took(f1), "[DONE]"));
	assert_non_null(strstr(took(f2), "[DONE]"));
	assert_non_null(strstr(took(r), "[DONE]"));
	assert_non_null(strstr(took(wq), "[DONE]"));
}

/* R's prefill instance refuses it: the other prefill instance (the first
 * is down: W then waits for the second), the same decode instance. */
static void drive_pd_retried(void)
{
	int r = send_as("r"), pr, wq, pw, dr, dw;

	connected(next_up_fd - 1, -ECONNREFUSED);
	pr = up_last();
	assert_true(F(pr)->port == 9001 || F(pr)->port == 9002);
	routed(r);
	wq = send_as("w");
	waits(wq);
	prefill_answer(pr);
	went(wq);
	dr = up_last();
	pw = pr;
	took(pw);
	prefill_answer(pw);
	dw = up_last();
	say(dr, decode_ok);
	say(dw, decode_ok);
	assert_non_null(strstr(took(r), "[DONE]"));
	assert_non_null(strstr(took(wq), "[DONE]"));
}

/* SGLang: both legs at once; the prefill's answer is drained, not sent
 * on, and is its first token all the same. */
static void drive_pd_sglang(void)
{
	static const char drained[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
	int r = send_as("r"), pr = next_up_fd - 2, dr = next_up_fd - 1, f, pf, df, wq, pw, dw;

	connected(pr, 0);
	connected(dr, 0);
	routed(r);
	f = send_as("f");
	pf = next_up_fd - 2;
	df = next_up_fd - 1;
	connected(pf, 0);
	connected(df, 0);
	wq = send_as("w");
	waits(wq);
	say(pr, drained);
	assert_int_equal(F(r)->out_len, 0);
	went(wq);
	pw = pr; /* R's prefill connection, kept */
	dw = next_up_fd - 1;
	connected(dw, 0);
	say(pf, drained);
	say(pw, drained);
	stream_out(dr, r, true);
	stream_out(df, f, true);
	stream_out(dw, wq, true);
}

/* --- the table --------------------------------------------------------------------- */

struct row {
	const char *name;
	const char *flags[8]; /* beside flow control's */
	void (*drive)(void);
	unsigned requests;  /* routed (and charged) in all */
	unsigned charged_f; /* F's requests */
};

#define PD_VLLM   "--pool", "default:pd=vllm", "--pool", "default:decode=127.0.0.1:9003"
#define PD_SGLANG "--pool", "default:pd=sglang", "--pool", "default:decode=127.0.0.1:9003"

static const struct row rows[] = {
    {"direct", {NULL}, drive_direct, 3, 1},
    {"queued", {NULL}, drive_queued, 4, 2},
    {"retried", {NULL}, drive_retried, 2, 0},
    {"pd vllm", {PD_VLLM}, drive_pd_vllm, 3, 1},
    {"pd vllm queued", {PD_VLLM}, drive_pd_queued, 4, 2},
    {"pd vllm prefill retried", {PD_VLLM}, drive_pd_retried, 2, 0},
    {"pd sglang", {PD_SGLANG, "--pool", "default:bootstrap-port=8998"}, drive_pd_sglang, 3, 1},
};

static int setup_row(void **state)
{
	const struct row *row = *state;
	static const char *const flow[] = {
	    "--flow-control", "--flow-instance-queue-ms",   "1",
	    "--strategy",     "least_outstanding_requests", "--flow-tenant",
	    "header:X-Team"};
	size_t n = 0;

	memset(setup_extra, 0, sizeof(setup_extra));
	for (size_t i = 0; i < sizeof(flow) / sizeof(flow[0]); i++)
		setup_extra[n++] = (char *)flow[i];
	for (size_t i = 0; i < sizeof(row->flags) / sizeof(row->flags[0]) && row->flags[i]; i++)
		setup_extra[n++] = (char *)row->flags[i];
	assert_true(n < sizeof(setup_extra) / sizeof(setup_extra[0]));
	if (setup(NULL))
		return -1;
	/* a peer gateway has requests waiting: every dispatch is charged */
	gw.flow->peer_queued = 1;
	return 0;
}

static int teardown_row(void **state)
{
	(void)state;
	return teardown(NULL);
}

/* What tenant label's requests were charged (lib/flow.h work units). */
static uint64_t served(const char *label)
{
	for (unsigned t = 0; t < PG_FLOW_TENANTS; t++)
		if (gw.flow->tenants.t[t].key && !strcmp(gw.flow->tenants.t[t].label, label))
			return gw.flow->ts[t].served;
	return 0;
}

/* One request's work: its prompt's tokens, none cached, and the output
 * it is charged when it names none. */
static uint64_t cost(void)
{
	assert_true(key_tokens > 0);
	return key_tokens + 256;
}

static void run_row(void **state)
{
	const struct row *row = *state;
	size_t k = (size_t)snprintf(chat_body, sizeof(chat_body),
	                            "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":"
	                            "\"user\",\"content\":\"");

	for (unsigned i = 0; i < WORDS; i++)
		k += (size_t)snprintf(chat_body + k, sizeof(chat_body) - k, "%sword", i ? " " : "");
	snprintf(chat_body + k, sizeof(chat_body) - k, "\"}]}");
	key_tokens = 0;
	row->drive();
	assert_int_equal(w->stats->requests, row->requests);
	assert_int_equal(served("r"), cost());
	assert_int_equal(served("w"), cost());
	assert_int_equal(served("f"), row->charged_f * cost());
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		const struct pg_backend *b = &gw.maps.backends[id];

		assert_int_equal(b->in_flight, 0);
		assert_int_equal(b->prefill_reqs, 0);
		assert_int_equal(b->prefill_tokens, 0);
	}
	assert_quiet();
}

int main(void)
{
	struct CMUnitTest tests[sizeof(rows) / sizeof(rows[0])];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		tests[i] = (struct CMUnitTest){rows[i].name, run_row, setup_row, teardown_row,
		                               (void *)&rows[i]};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
