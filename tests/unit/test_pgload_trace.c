// SPDX-License-Identifier: MIT
/*
 * pgload's trace workload: loading a trace (plain and gzip'd, and refusing
 * a damaged one by line), W / D / S on a hand-made trace with a known
 * answer, prompts built from block ids (the same id gives the same bytes in
 * every request; a prompt is input_length x 4 bytes), the send schedule.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <getopt.h>
#include <zlib.h>
#include <cmocka.h>

#include "lib/json.h"
#include "../../tools/pgload/pgload.h"
#include "../../tools/pgload/trace.h"
#include "../../tools/pgload/workload.h"

#define B PG_TRACE_BLOCK_BYTES

/*
 * The known answer. An infinite prefix cache, in order:
 *   0: ids 0 1      nothing seen                 W += 1000
 *   1: ids 0 1 2    0 1 seen: 1024 cached        W += 1500 - 1024 = 476
 *   2: ids 0        0 seen: 512, cut to 300      W += 0
 *   3: ids 5 0 1 2  5 unseen: the rest no help   W += 2000
 *   4: ids 0 3 3    0 seen, 3 not (its own 3)    W += 1200 - 512 = 688
 *   5: ids 9        9 unseen; 900 > 512: padded  W += 900
 * W = 5064, D = 10 s, distinct ids 0 1 2 3 5 9.
 */
static const char trace_text[] =
    "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 7, \"hash_ids\": [0, 1]}\n"
    "{\"timestamp\": 2000, \"input_length\": 1500, \"output_length\": 0, \"hash_ids\": [0, 1, "
    "2]}\n"
    "\n"
    "{\"hash_ids\": [0], \"timestamp\": 4000, \"input_length\": 300, \"output_length\": 9}\n"
    "{\"timestamp\": 6000, \"input_length\": 2000, \"output_length\": 1, \"hash_ids\": [5, 0, "
    "1, 2], \"extra\": null}\n"
    "{\"timestamp\": 6000, \"input_length\": 1200, \"output_length\": 2, \"hash_ids\": [0, 3, "
    "3]}\n"
    "{\"timestamp\": 10000, \"input_length\": 900, \"output_length\": 2000, \"hash_ids\": [9]}";

#define W_KNOWN 5064
#define NREQ    6

static char plain_path[64], gz_path[64];

static int write_files(void **state)
{
	int fd;
	gzFile gz;

	(void)state;
	strcpy(plain_path, "/tmp/pgload-trace-XXXXXX");
	strcpy(gz_path, "/tmp/pgload-trace-gz-XXXXXX");
	fd = mkstemp(plain_path);
	if (fd == -1 || write(fd, trace_text, strlen(trace_text)) != (ssize_t)strlen(trace_text))
		return -1;
	close(fd);
	fd = mkstemp(gz_path);
	if (fd == -1)
		return -1;
	close(fd);
	gz = gzopen(gz_path, "wb");
	if (!gz || gzwrite(gz, trace_text, (unsigned)strlen(trace_text)) <= 0)
		return -1;
	return gzclose(gz) == Z_OK ? 0 : -1;
}

static int remove_files(void **state)
{
	(void)state;
	unlink(plain_path);
	unlink(gz_path);
	return 0;
}

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

static void test_load_plain_and_gz(void **state)
{
	const char *paths[2] = {plain_path, gz_path};
	static const uint32_t ids4[3] = {0, 3, 3};

	(void)state;
	for (int p = 0; p < 2; p++) {
		struct pg_trace t = {0};

		assert_int_equal(pg_trace_load(&t, paths[p]), 0);
		assert_int_equal(t.n, NREQ); /* the blank line is none */
		assert_int_equal(t.nids, 2 + 3 + 1 + 4 + 3 + 1);
		assert_int_equal(t.req[1].ts_ms, 2000);
		assert_int_equal(t.req[1].input_len, 1500);
		assert_int_equal(t.req[1].output_len, 0);
		assert_int_equal(t.req[2].input_len, 300); /* members in any order */
		assert_int_equal(t.req[4].nids, 3);
		assert_memory_equal(t.ids + t.req[4].first_id, ids4, sizeof(ids4));
		/* the last line has no newline and still counts */
		assert_int_equal(t.req[5].ts_ms, 10000);
		assert_int_equal(t.req[5].output_len, 2000);
		pg_trace_free(&t);
	}
}

static void test_bad_lines(void **state)
{
	static const char *const bad[] = {
	    "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]",
	    "[1, 2]",
	    "{\"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}",
	    "{\"timestamp\": -1, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}",
	    "{\"timestamp\": 1.5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}",
	    "{\"timestamp\": 9, \"input_length\": 0, \"output_length\": 1, \"hash_ids\": []}",
	    "{\"timestamp\": 9, \"input_length\": 10, \"output_length\": \"1\", \"hash_ids\": []}",
	    "{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": 0}",
	    "{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [-1]}",
	    "{\"timestamp\": 9, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": "
	    "[4294967296]}",
	    /* before the first line's timestamp */
	    "{\"timestamp\": 4, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}",
	};
	static const char first[] =
	    "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": []}";
	struct pg_json js = {0};
	char err[160];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pg_trace t = {0};

		assert_int_equal(pg_trace_add_line(&t, &js, first, strlen(first), err, sizeof(err)),
		                 0);
		err[0] = '\0';
		assert_int_equal(
		    pg_trace_add_line(&t, &js, bad[i], strlen(bad[i]), err, sizeof(err)), -1);
		assert_true(err[0] != '\0'); /* it says why */
		assert_int_equal(t.n, 1);
		pg_trace_free(&t);
	}
	pg_json_free(&js);
}

/* A missing file, a line that is not a trace's (its number named), and a
 * gzip stream cut short are refused, not replayed in part. */
static void test_bad_files(void **state)
{
	char cut_path[64] = "/tmp/pgload-trace-cut-XXXXXX";
	char buf[4096];
	struct pg_trace t = {0};
	FILE *in, *out;
	size_t n;
	int fd;

	(void)state;
	assert_int_equal(pg_trace_load(&t, "/nonexistent/trace.jsonl"), -1);
	/* the gzip'd file with its last 12 bytes gone */
	fd = mkstemp(cut_path);
	assert_true(fd != -1);
	close(fd);
	in = fopen(gz_path, "rb");
	out = fopen(cut_path, "wb");
	assert_non_null(in);
	assert_non_null(out);
	n = fread(buf, 1, sizeof(buf), in);
	assert_true(n > 12 && n < sizeof(buf));
	fwrite(buf, 1, n - 12, out);
	fclose(in);
	fclose(out);
	assert_int_equal(pg_trace_load(&t, cut_path), -1);
	pg_trace_free(&t);
	/* an empty file holds no requests */
	out = fopen(cut_path, "wb");
	fclose(out);
	assert_int_equal(pg_trace_load(&t, cut_path), -1);
	unlink(cut_path);
}

static void test_w_d_s(void **state)
{
	const char *by_load[] = {
	    "--workload", "trace", "--trace", gz_path, "--load", "2", "--capacity-tokens-per-s",
	    "5064",       NULL};
	const char *by_speedup[] = {"--workload", "trace", "--trace", plain_path,
	                            "--speedup",  "3",     NULL};
	struct pg_trace t = {0};
	struct pg_trace_sum s;
	struct pg_workload *w;
	uint64_t wt, distinct;
	struct pg_opts o;

	(void)state;
	assert_int_equal(pg_trace_load(&t, plain_path), 0);
	assert_int_equal(pg_trace_uncached(&t, &wt, &distinct), 0);
	assert_int_equal(wt, W_KNOWN);
	assert_int_equal(distinct, 6);
	assert_true(pg_trace_span_s(&t) == 10.0);
	pg_trace_free(&t);
	/* S = RHO x C x D / W = 2 x 5064 x 10 / 5064 */
	opts_from(&o, by_load);
	w = pg_wl_create(&o);
	assert_non_null(w);
	pg_wl_trace_sum(w, &s);
	assert_true(s.on);
	assert_int_equal(s.total, NREQ);
	assert_int_equal(s.uncached_tokens, W_KNOWN);
	assert_int_equal(s.input_tokens, 1000 + 1500 + 300 + 2000 + 1200 + 900);
	assert_true(s.span_s == 10.0);
	assert_true(s.speedup > 20.0 - 1e-9 && s.speedup < 20.0 + 1e-9);
	assert_true(s.mean_rate > 12.0 - 1e-9 && s.mean_rate < 12.0 + 1e-9); /* 6 x 20 / 10 */
	pg_wl_destroy(w);
	opts_from(&o, by_speedup);
	w = pg_wl_create(&o);
	assert_non_null(w);
	pg_wl_trace_sum(w, &s);
	assert_true(s.speedup == 3.0);
	assert_int_equal(s.uncached_tokens, W_KNOWN);
	pg_wl_destroy(w);
}

/* The string value of member name of object obj in a parsed body. */
static void member_str(const struct pg_json *js, uint32_t obj, const char *name, const char **p,
                       size_t *n)
{
	int64_t v = pg_json_find(js, obj, name, strlen(name));

	assert_true(v >= 0);
	assert_int_equal(js->tok[v].type, PG_JSON_STRING);
	assert_int_equal(js->tok[v].flags & PG_JSON_F_ESCAPED, 0);
	*p = js->src + js->tok[v].start;
	*n = js->tok[v].end - js->tok[v].start;
}

static unsigned max_tokens_of(const struct pg_json *js)
{
	int64_t v = pg_json_find(js, 0, "max_tokens", 10), x;

	assert_true(v >= 0);
	assert_int_equal(pg_json_get_i64(js, (uint32_t)v, &x), 0);
	return (unsigned)x;
}

/* Every request's prompt: input_length x 4 bytes, block k of it the text
 * of its k-th id (the last cut), the same in every request; padding past
 * the ids. And the chat form splits the same bytes after block 0. */
static void test_prompts(void **state)
{
	const char *cmpl[] = {"--workload", "trace", "--trace", gz_path, NULL};
	const char *chat[] = {"--workload",           "trace", "--trace", gz_path, "--path",
	                      "/v1/chat/completions", NULL};
	const char *seed2[] = {"--workload", "trace", "--trace", gz_path, "--seed", "2", NULL};
	static const unsigned want_max[NREQ] = {7, 1, 9, 1, 2, 2000};
	char *prompts[NREQ], block[B];
	struct pg_trace t = {0};
	struct pg_json js = {0};
	struct pg_trace_sum s;
	struct pg_workload *w;
	struct pg_opts o;

	(void)state;
	assert_int_equal(pg_trace_load(&t, gz_path), 0);
	opts_from(&o, cmpl);
	assert_string_equal(o.path, "/v1/completions"); /* the trace's default */
	w = pg_wl_create(&o);
	assert_non_null(w);
	for (size_t i = 0; i < NREQ; i++) {
		const struct pg_trace_req *r = &t.req[i];
		size_t len = (size_t)r->input_len * 4, n;
		struct pg_wl_req q;
		const char *p;

		assert_int_equal(pg_wl_next(w, i, &q), 0);
		assert_true(q.traced);
		assert_int_equal(q.trace_index, i);
		assert_int_equal(q.group, i);
		assert_int_equal(pg_json_parse(&js, q.body, q.len), 0);
		member_str(&js, 0, "prompt", &p, &n);
		assert_int_equal(n, len);
		assert_int_equal(max_tokens_of(&js), want_max[i]);
		assert_non_null(strstr(q.body, "\"stream\":true"));
		for (uint32_t k = 0; k < r->nids && (size_t)k * B < len; k++) {
			size_t m = len - (size_t)k * B < B ? len - (size_t)k * B : B;

			pg_trace_block_text(block, o.seed, t.ids[r->first_id + k]);
			assert_memory_equal(p + (size_t)k * B, block, m);
		}
		prompts[i] = strndup(p, n);
		pg_wl_done(w, &q, true, NULL, 0);
	}
	/* shared ids, shared bytes: 0 1 in requests 0, 1, 3 (at 1 and 2) */
	assert_memory_equal(prompts[0], prompts[1], 1000 * 4);
	assert_memory_equal(prompts[0], prompts[3] + B, 1000 * 4);
	assert_memory_equal(prompts[0], prompts[2], 300 * 4); /* a cut block is its start */
	assert_memory_equal(prompts[1] + 2 * B, prompts[3] + 3 * B, 2000 * 4 - 3 * B); /* id 2 */
	assert_memory_equal(prompts[4] + B, prompts[4] + 2 * B, 1200 * 4 - 2 * B);     /* 3, 3 */
	/* a block starts a word (a space), and ends one */
	assert_true(prompts[1][B] == ' ' && prompts[1][B + 1] != ' ' && prompts[1][B - 1] != ' ');
	assert_true(prompts[5][B] == ' '); /* the padding too */
	pg_wl_trace_sum(w, &s);
	assert_int_equal(s.built, NREQ);
	assert_int_equal(s.padded_requests, 1);
	assert_int_equal(s.padded_tokens, 900 - 512);
	pg_wl_destroy(w);

	/* chat: block 0 is the system message, the rest the user's */
	opts_from(&o, chat);
	w = pg_wl_create(&o);
	for (size_t i = 0; i < NREQ; i++) {
		size_t len = (size_t)t.req[i].input_len * 4, sys = len < B ? len : B, n;
		int64_t msgs;
		struct pg_wl_req q;
		const char *p;

		assert_int_equal(pg_wl_next(w, i, &q), 0);
		assert_int_equal(pg_json_parse(&js, q.body, q.len), 0);
		msgs = pg_json_find(&js, 0, "messages", 8);
		assert_true(msgs >= 0 && js.tok[msgs].size == 2);
		member_str(&js, (uint32_t)msgs + 1, "content", &p, &n);
		assert_int_equal(n, sys);
		assert_memory_equal(p, prompts[i], sys);
		member_str(&js, js.tok[msgs + 1].next, "content", &p, &n);
		assert_int_equal(n, len - sys);
		assert_memory_equal(p, prompts[i] + sys, len - sys);
		pg_wl_done(w, &q, true, NULL, 0);
	}
	pg_wl_destroy(w);

	/* another --seed, other text */
	opts_from(&o, seed2);
	w = pg_wl_create(&o);
	{
		struct pg_wl_req q;
		const char *p;
		size_t n;

		assert_int_equal(pg_wl_next(w, 0, &q), 0);
		assert_int_equal(pg_json_parse(&js, q.body, q.len), 0);
		member_str(&js, 0, "prompt", &p, &n);
		assert_int_equal(n, 4000);
		assert_memory_not_equal(p, prompts[0], B);
		pg_wl_done(w, &q, true, NULL, 0);
	}
	pg_wl_destroy(w);
	for (size_t i = 0; i < NREQ; i++)
		free(prompts[i]);
	pg_json_free(&js);
	pg_trace_free(&t);
}

/* Request k of the part is due (ts_k - ts_first) / 1000 / S s after the
 * start; W stays the whole file's. */
static void test_schedule(void **state)
{
	const char *whole[] = {"--workload", "trace", "--trace", plain_path,
	                       "--speedup",  "4",     NULL};
	const char *part[] = {
	    "--workload",    "trace", "--trace",          plain_path, "--speedup", "3",
	    "--trace-start", "1",     "--trace-requests", "3",        NULL};
	static const uint64_t want_whole[NREQ] = {0,          500000000,  1000000000,
	                                          1500000000, 1500000000, 2500000000};
	/* from ts 2000: 0, 2000, 4000 ms at S = 3 */
	static const uint64_t want_part[3] = {0, 666666667, 1333333333};
	struct pg_trace_sum s;
	struct pg_workload *w;
	struct pg_opts o;
	uint64_t off;

	(void)state;
	opts_from(&o, whole);
	assert_true(o.duration_s == 0 && o.requests == 0); /* no 10 s cut */
	w = pg_wl_create(&o);
	assert_non_null(w);
	for (uint64_t k = 0; k < NREQ; k++) {
		assert_int_equal(pg_wl_at(w, k, &off), 0);
		assert_int_equal(off, want_whole[k]);
	}
	assert_int_equal(pg_wl_at(w, NREQ, &off), 1);
	pg_wl_destroy(w);
	opts_from(&o, part);
	w = pg_wl_create(&o);
	assert_non_null(w);
	for (uint64_t k = 0; k < 3; k++) {
		assert_int_equal(pg_wl_at(w, k, &off), 0);
		assert_int_equal(off, want_part[k]);
	}
	assert_int_equal(pg_wl_at(w, 3, &off), 1);
	pg_wl_trace_sum(w, &s);
	assert_int_equal(s.first, 1);
	assert_int_equal(s.count, 3);
	assert_int_equal(s.uncached_tokens, W_KNOWN);
	{
		struct pg_wl_req q;

		assert_int_equal(pg_wl_next(w, 0, &q), 0); /* the part's first: file's 1 */
		assert_int_equal(q.trace_index, 1);
		pg_wl_done(w, &q, true, NULL, 0);
	}
	pg_wl_destroy(w);
}

/* What needs the file is checked when it is loaded. */
static void test_part_errors(void **state)
{
	const char *start[] = {"--workload",    "trace", "--trace", plain_path,
	                       "--trace-start", "6",     NULL};
	const char *past[] = {
	    "--workload",       "trace", "--trace", plain_path, "--trace-start", "2",
	    "--trace-requests", "5",     NULL};
	const char *missing[] = {"--workload", "trace", "--trace", "/nonexistent", NULL};
	struct pg_opts o;

	(void)state;
	opts_from(&o, start);
	assert_null(pg_wl_create(&o));
	opts_from(&o, past);
	assert_null(pg_wl_create(&o));
	opts_from(&o, missing);
	assert_null(pg_wl_create(&o));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_plain_and_gz), cmocka_unit_test(test_bad_lines),
	    cmocka_unit_test(test_bad_files),         cmocka_unit_test(test_w_d_s),
	    cmocka_unit_test(test_prompts),           cmocka_unit_test(test_schedule),
	    cmocka_unit_test(test_part_errors),
	};

	return cmocka_run_group_tests_name("pgload_trace", tests, write_files, remove_files);
}
