// SPDX-License-Identifier: MIT
/*
 * pgload's traces: loading one (plain and gzip'd, and refusing a damaged
 * one by line), W and D on a hand-made trace with a known answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include <cmocka.h>

#include "lib/json.h"
#include "../../tools/pgload/trace.h"

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

static void test_w_d(void **state)
{
	struct pg_trace t = {0};
	uint64_t wt, distinct;

	(void)state;
	assert_int_equal(pg_trace_load(&t, plain_path), 0);
	assert_int_equal(pg_trace_uncached(&t, &wt, &distinct), 0);
	assert_int_equal(wt, W_KNOWN);
	assert_int_equal(distinct, 6);
	assert_true(pg_trace_span_s(&t) == 10.0);
	/* S = 4: 2000 ms later is 0.5 s later; from request 1, 4000 ms */
	assert_int_equal(pg_trace_offset_ns(&t, 0, 1, 4), 500000000);
	assert_int_equal(pg_trace_offset_ns(&t, 1, 4, 4), 2000000000);
	pg_trace_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_load_plain_and_gz),
	    cmocka_unit_test(test_bad_lines),
	    cmocka_unit_test(test_bad_files),
	    cmocka_unit_test(test_w_d),
	};

	return cmocka_run_group_tests_name("pgload_trace", tests, write_files, remove_files);
}
