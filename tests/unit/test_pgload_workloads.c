// SPDX-License-Identifier: MIT
/*
 * pgload's conversation workloads (multi-turn, agentic, short-chat) as the
 * engine drives them: pg_wl_next, then pg_wl_done when the response ends.
 * Bodies are checked as JSON (the gateway's parser) and as bytes; a fake
 * server answers each request (--history server re-sends its replies).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>
#include <cmocka.h>

#include "lib/json.h"
#include "../../tools/pgload/pgload.h"
#include "../../tools/pgload/workload.h"

#define NREQ 600

/* Options as the command line gives them (argv[0] added). */
static void opts_from(struct pg_opts *o, const char *const *args)
{
	char *argv[24];
	int argc = 0;

	argv[argc++] = (char *)"pgload";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	optind = 0;
	assert_int_equal(pg_parse_args(argc, argv, o), 0);
}

struct req {
	char *body;
	size_t len;
	uint32_t group, turn;
	char *reply; /* what the fake server answered, NULL: it failed */
	size_t reply_len, reply_max;
};

static unsigned max_tokens_of(const struct req *r)
{
	const char *p = strstr(r->body, "\"max_tokens\":");

	assert_non_null(p);
	return (unsigned)strtoul(p + 13, NULL, 10);
}

/*
 * The fake server's reply, raw JSON string bytes: "g<group>t<turn>", one
 * escape, padded with dots to 4 bytes per max_tokens token (as mockllm
 * answers). Request idx fails when fail_every divides idx + 1.
 */
static void fake_reply(struct req *r, size_t idx, unsigned fail_every)
{
	size_t n = (size_t)max_tokens_of(r) * 4;
	int k;

	if (fail_every && (idx + 1) % fail_every == 0)
		return;
	r->reply = malloc(n + 32);
	k = snprintf(r->reply, n + 32, "g%ut%u\\n", r->group, r->turn);
	if ((size_t)k < n)
		memset(r->reply + k, '.', n - (size_t)k);
	r->reply_len = (size_t)k > n ? (size_t)k : n;
}

/*
 * n requests of the workload, each answered before the next is asked for
 * when `serial`, else in batches of every conversation ready at once; every
 * fail_every-th fails (0: none).
 */
static struct req *drive_f(const struct pg_opts *o, size_t n, bool serial, unsigned fail_every)
{
	struct pg_workload *w = pg_wl_create(o);
	struct req *out = calloc(n, sizeof(*out));
	struct pg_wl_req *batch = calloc(o->conversations, sizeof(*batch));
	size_t got = 0;

	assert_non_null(w);
	assert_non_null(out);
	assert_non_null(batch);
	while (got < n) {
		size_t nb = 0;

		while (got + nb < n && nb < o->conversations) {
			struct pg_wl_req *r = &batch[nb];

			if (pg_wl_next(w, o->first_index + got + nb, r) == 1)
				break;
			out[got + nb] = (struct req){.body = malloc(r->len + 1),
			                             .len = r->len,
			                             .group = r->group,
			                             .turn = r->turn,
			                             .reply_max = r->reply_max};
			memcpy(out[got + nb].body, r->body, r->len);
			out[got + nb].body[r->len] = '\0';
			nb++;
			if (serial)
				break;
		}
		assert_true(nb > 0);
		for (size_t i = 0; i < nb; i++) {
			struct req *q = &out[got + i];

			fake_reply(q, got + i, fail_every);
			pg_wl_done(w, &batch[i], q->reply != NULL, q->reply, q->reply_len);
		}
		got += nb;
	}
	free(batch);
	pg_wl_destroy(w);
	return out;
}

static struct req *drive(const struct pg_opts *o, size_t n, bool serial)
{
	return drive_f(o, n, serial, 0);
}

static void free_reqs(struct req *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(r[i].body);
		free(r[i].reply);
	}
	free(r);
}

/* Where the messages array ends: the body up to there is the history. */
static size_t history_len(const struct req *r)
{
	const char *p = strstr(r->body, "],\"max_tokens\":");

	assert_non_null(p);
	return (size_t)(p - r->body);
}

/* Parse a body; return the token of member `name` of the root. */
static int64_t member(struct pg_json *js, const struct req *r, const char *name)
{
	assert_int_equal(pg_json_parse(js, r->body, r->len), 0);
	return pg_json_find(js, 0, name, strlen(name));
}

/* Sum of the message content bytes, and the number of messages. */
static size_t content_bytes(const struct req *r, uint32_t *nmsgs, bool *has_system)
{
	struct pg_json js = {0};
	int64_t m = member(&js, r, "messages");
	size_t sum = 0;
	uint32_t k, i;

	assert_true(m >= 0);
	assert_int_equal(js.tok[m].type, PG_JSON_ARRAY);
	*has_system = false;
	for (k = pg_json_first((uint32_t)m), i = 0; i < js.tok[m].size; i++, k = js.tok[k].next) {
		int64_t c = pg_json_find(&js, k, "content", 7);
		int64_t role = pg_json_find(&js, k, "role", 4);

		assert_true(c >= 0 && role >= 0);
		if (i == 0 && pg_json_str_eq(&js, (uint32_t)role, "system", 6))
			*has_system = true;
		sum += js.tok[c].end - js.tok[c].start;
	}
	*nmsgs = js.tok[m].size;
	pg_json_free(&js);
	return sum;
}

/* Same seed, same bodies in the same order; another seed, other bodies. */
static void test_deterministic(void **state)
{
	static const char *const wls[] = {"multi-turn", "agentic", "short-chat"};

	(void)state;
	for (size_t k = 0; k < 3; k++) {
		const char *a1[] = {"--workload",      wls[k], "--seed", "5",
		                    "--conversations", "8",    NULL};
		const char *a2[] = {"--workload",      wls[k], "--seed", "6",
		                    "--conversations", "8",    NULL};
		struct pg_opts o1, o2;
		struct req *x, *y, *z;
		size_t differ = 0;

		opts_from(&o1, a1);
		opts_from(&o2, a2);
		x = drive(&o1, 120, false);
		y = drive(&o1, 120, false);
		z = drive(&o2, 120, false);
		for (size_t i = 0; i < 120; i++) {
			assert_int_equal(x[i].len, y[i].len);
			assert_memory_equal(x[i].body, y[i].body, x[i].len);
			assert_int_equal(x[i].group, y[i].group);
			assert_int_equal(x[i].turn, y[i].turn);
			differ += x[i].len != z[i].len || memcmp(x[i].body, z[i].body, x[i].len);
		}
		assert_int_equal(differ, 120);
		free_reqs(x, 120);
		free_reqs(y, 120);
		free_reqs(z, 120);
	}
}

/*
 * agentic: every body starts with the same tools + system block, byte for
 * byte (it is the bytes before the first user message), of about the
 * configured size; conversations differ right after it.
 */
static void test_agentic_shared_block(void **state)
{
	const char *args[] = {"--workload", "agentic", "--conversations", "16", "--seed",
	                      "3",          NULL};
	const char *marker = ",{\"role\":\"user\",\"content\":\"";
	struct pg_opts o;
	struct req *r;
	size_t block = 0;
	char *first_user[64] = {0};

	(void)state;
	opts_from(&o, args);
	assert_int_equal(o.system_tokens, 10000);
	assert_int_equal(o.tools, 4);
	r = drive(&o, NREQ, false);
	for (size_t i = 0; i < NREQ; i++) {
		const char *u = strstr(r[i].body, marker);
		size_t n;

		assert_non_null(u);
		n = (size_t)(u - r[i].body);
		if (i == 0) {
			block = n;
			/* ~12,000 tokens: system text plus the tools JSON */
			assert_true(block > 10000 * 4 + 4 * 450 * 4);
			assert_true(block < 13000 * 4);
		}
		assert_int_equal(n, block);
		assert_memory_equal(r[i].body, r[0].body, block);
		/* the user turn 0 that follows the block is the conversation's own */
		if (r[i].group < 64) {
			char *t0 = strndup(u, 64);

			if (!first_user[r[i].group])
				first_user[r[i].group] = t0;
			else {
				assert_string_equal(first_user[r[i].group], t0);
				free(t0);
			}
		}
	}
	for (int a = 0; a < 64; a++)
		for (int b = a + 1; b < 64; b++)
			if (first_user[a] && first_user[b])
				assert_string_not_equal(first_user[a], first_user[b]);
	for (int a = 0; a < 64; a++)
		free(first_user[a]);
	{
		struct pg_json js = {0};
		int64_t t = member(&js, &r[0], "tools"), m = pg_json_find(&js, 0, "messages", 8);
		uint32_t k = pg_json_first((uint32_t)t);
		int64_t fn = pg_json_find(&js, k, "function", 8);

		assert_true(t >= 0 && t < m); /* before the messages in the body */
		assert_int_equal(js.tok[t].type, PG_JSON_ARRAY);
		assert_int_equal(js.tok[t].size, 4);
		assert_true(fn >= 0);
		assert_true(pg_json_find(&js, (uint32_t)fn, "name", 4) >= 0);
		assert_true(pg_json_find(&js, (uint32_t)fn, "parameters", 10) >= 0);
		pg_json_free(&js);
	}
	free_reqs(r, NREQ);
}

/*
 * Every conversation workload: turn t's history is turn t-1's history plus
 * more messages (byte-identical prefix), turns count up from 0 per group,
 * and each turn adds one assistant and one user message.
 */
static void test_history_resent(void **state)
{
	static const char *const wls[] = {"multi-turn", "agentic", "short-chat"};

	(void)state;
	for (size_t k = 0; k < 3; k++) {
		const char *args[] = {"--workload", wls[k], "--conversations", "5", NULL};
		struct pg_opts o;
		struct req *r, *last[4096] = {0};
		uint32_t maxgroup = 0;

		opts_from(&o, args);
		r = drive(&o, NREQ, k == 1);
		for (size_t i = 0; i < NREQ; i++) {
			struct req *p;
			uint32_t nm, pm;
			bool sys, psys;

			assert_true(r[i].group < 4096);
			p = last[r[i].group];
			content_bytes(&r[i], &nm, &sys);
			if (!p) {
				assert_int_equal(r[i].turn, 0);
				assert_int_equal(nm, 1 + sys);
			} else {
				size_t h = history_len(p);

				assert_int_equal(r[i].turn, p->turn + 1);
				assert_true(r[i].len > p->len);
				assert_memory_equal(r[i].body, p->body, h);
				assert_memory_equal(r[i].body + h, ",{\"role\":\"assistant\"", 20);
				content_bytes(p, &pm, &psys);
				assert_int_equal(nm, pm + 2);
			}
			if (r[i].group > maxgroup)
				maxgroup = r[i].group;
			last[r[i].group] = &r[i];
		}
		assert_true(maxgroup > 5); /* finished conversations were replaced */
		free_reqs(r, NREQ);
	}
}

/*
 * --history server (the default): a follow-up re-sends the previous turn's
 * history, then the reply the server sent to it as the assistant message,
 * byte for byte; each turn asks for its drawn assistant length (not
 * --max-tokens) and captures that reply's bytes with room to spare. A
 * failed turn ends its conversation. --history replay: the drawn text and
 * --max-tokens, whatever the server said.
 */
static void test_server_history(void **state)
{
	static const char *const wls[] = {"multi-turn", "agentic", "short-chat"};

	(void)state;
	for (size_t k = 0; k < 6; k++) {
		const char *args[] = {"--workload", wls[k % 3],  "--conversations",
		                      "6",          "--history", k < 3 ? "server" : "replay",
		                      NULL};
		bool server = k < 3;
		struct pg_opts o;
		struct req *r, *last[4096] = {0};
		size_t follow = 0, ended = 0, distinct = 0;
		unsigned seen_mt = 0;

		opts_from(&o, args);
		assert_int_equal(o.history, server ? PG_HIST_SERVER : PG_HIST_REPLAY);
		r = drive_f(&o, NREQ, k == 1, 7);
		for (size_t i = 0; i < NREQ; i++) {
			struct req *p;
			unsigned mt = max_tokens_of(&r[i]);

			assert_true(r[i].group < 4096);
			p = last[r[i].group];
			if (server) {
				assert_true(mt >= 4 && mt <= 16 * o.assistant_tokens);
				assert_true(r[i].reply_max >= 32 * (size_t)mt);
				distinct += mt != seen_mt;
				seen_mt = mt;
			} else {
				assert_int_equal(mt, o.max_tokens);
				assert_int_equal(r[i].reply_max, 0);
			}
			if (p) {
				size_t h = history_len(p);
				const char *a = r[i].body + h;

				/* replay keeps a conversation going past a failed turn */
				assert_true(!server || p->reply);
				assert_memory_equal(r[i].body, p->body, h);
				assert_memory_equal(a, ",{\"role\":\"assistant\",\"content\":\"",
				                    32);
				if (server) {
					assert_memory_equal(a + 32, p->reply, p->reply_len);
					assert_memory_equal(a + 32 + p->reply_len, "\"}", 2);
				} else {
					assert_true(!p->reply ||
					            memcmp(a + 32, p->reply, p->reply_len) != 0);
				}
				follow++;
			} else if (i && server) {
				ended += r[i].turn == 0;
			}
			assert_int_equal(r[i].turn, p ? p->turn + 1 : 0);
			last[r[i].group] = &r[i];
		}
		assert_true(follow > NREQ / 3);
		if (server)
			assert_true(distinct > NREQ / 4 && ended > 0);
		free_reqs(r, NREQ);
	}
}

/* short-chat: no request carries more than --history-tokens of text. */
static void test_short_chat_bound(void **state)
{
	static const struct {
		const char *args[9];
		unsigned bound, sys;
	} cases[] = {
	    {{"--workload", "short-chat", NULL}, 800, 0},
	    {{"--workload", "short-chat", "--system-tokens", "100", NULL}, 800, 100},
	    {{"--workload", "short-chat", "--history-tokens", "200", "--user-tokens", "150", NULL},
	     200,
	     0},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct pg_opts o;
		struct req *r;
		uint32_t maxturn = 0;
		size_t maxbytes = 0;

		opts_from(&o, cases[k].args);
		assert_int_equal(o.conversations, 256);
		assert_int_equal(o.max_turns, 6);
		assert_int_equal(o.history_tokens, cases[k].bound);
		r = drive(&o, 3000, false);
		for (size_t i = 0; i < 3000; i++) {
			uint32_t nm;
			bool sys;
			size_t n = content_bytes(&r[i], &nm, &sys);

			assert_true(n <= (size_t)cases[k].bound * 4);
			assert_int_equal(sys, cases[k].sys > 0);
			assert_true(r[i].turn < 6);
			if (n > maxbytes)
				maxbytes = n;
			if (r[i].turn > maxturn)
				maxturn = r[i].turn;
		}
		assert_true(maxturn >= 1);
		assert_true(maxbytes > (size_t)cases[k].bound * 2); /* the bound is used */
		free_reqs(r, 3000);
	}
}

/* A system message that leaves no room is refused. */
static void test_short_chat_refused(void **state)
{
	const char *args[] = {"--workload", "short-chat", "--system-tokens", "800", NULL};
	struct pg_opts o;

	(void)state;
	opts_from(&o, args);
	assert_null(pg_wl_create(&o));
}

/* Targets: each request's draw is uniform over the targets, from the seed. */
static void test_target_pick(void **state)
{
	const char *args[] = {"--target", "127.0.0.1:1,127.0.0.1:2", "--target", "127.0.0.1:3",
	                      NULL};
	struct pg_opts o;
	unsigned count[3] = {0};

	(void)state;
	opts_from(&o, args);
	assert_int_equal(o.ntargets, 3);
	for (uint64_t i = 0; i < 30000; i++) {
		unsigned t = pg_wl_target(&o, i);

		assert_true(t < 3);
		assert_int_equal(t, pg_wl_target(&o, i));
		count[t]++;
	}
	for (int t = 0; t < 3; t++)
		assert_true(count[t] > 9500 && count[t] < 10500);
	o.ntargets = 1;
	for (uint64_t i = 0; i < 100; i++)
		assert_int_equal(pg_wl_target(&o, i), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_deterministic),      cmocka_unit_test(test_agentic_shared_block),
	    cmocka_unit_test(test_history_resent),     cmocka_unit_test(test_short_chat_bound),
	    cmocka_unit_test(test_short_chat_refused), cmocka_unit_test(test_target_pick),
	    cmocka_unit_test(test_server_history),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
