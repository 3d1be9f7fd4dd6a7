// SPDX-License-Identifier: MIT
/*
 * W3C Trace Context (lib/trace.h): traceparent values read, a table of bad
 * ones each refused (the gateway then ignores them: never a 400), the
 * field written back, the sampling ratio and the parent-based decision,
 * new ids and child ids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "lib/trace.h"

#define GOOD "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static bool parse(const char *s, struct pg_trace_ctx *c)
{
	return pg_traceparent_parse(s, strlen(s), c);
}

static void test_good(void **state)
{
	static const uint8_t tid[16] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
	                                0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36};
	static const uint8_t pid[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
	struct pg_trace_ctx c;

	(void)state;
	assert_true(parse(GOOD, &c));
	assert_memory_equal(c.trace_id, tid, 16);
	assert_memory_equal(c.parent_id, pid, 8);
	assert_int_equal(c.flags, 1);
	assert_true(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c));
	assert_int_equal(c.flags, 0);
	/* a later version: its fields read, more after a '-' allowed */
	assert_true(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", &c));
	assert_int_equal(c.flags, 9);
	assert_true(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever", &c));
}

static void test_bad(void **state)
{
	static const char *const bad[] = {
	    "",
	    "00",
	    GOOD "-",                                                  /* 00 is exactly 55 */
	    GOOD " ",                                                  /* trailing space */
	    " " GOOD,                                                  /* leading space */
	    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", /* upper case */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0X", /* bad flags */
	    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version ff */
	    "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version not hex */
	    "00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* zero trace id */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", /* zero parent id */
	    "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* separators */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
	    "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",   /* short trace id */
	    "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b-01",  /* shifted */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",   /* short flags */
	    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", /* later version, no '-' */
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01,00-"
	    "4bf92f3577b34da6a3ce929d0e0e"
	    "4736-00f067aa0ba902b7-01", /* two joined */
	    "00-xbf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	};
	struct pg_trace_ctx c;

	(void)state;
	memset(&c, 0x5a, sizeof(c));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pg_trace_ctx before = c;

		if (parse(bad[i], &c))
			fail_msg("accepted: \"%s\"", bad[i]);
		assert_memory_equal(&c, &before, sizeof(c)); /* untouched */
	}
	/* a value cut short inside: the length is what counts, not a NUL */
	assert_false(pg_traceparent_parse(GOOD, 54, &c));
}

static void test_format(void **state)
{
	struct pg_trace_ctx c;
	char out[PG_TRACEPARENT_LEN + 1] = {0};
	static const uint8_t span[8] = {1, 2, 3, 4, 5, 6, 7, 0xff};

	(void)state;
	assert_true(parse(GOOD, &c));
	pg_traceparent_format(out, c.trace_id, c.parent_id, true);
	assert_string_equal(out, GOOD);
	pg_traceparent_format(out, c.trace_id, span, false);
	assert_string_equal(out, "00-4bf92f3577b34da6a3ce929d0e0e4736-01020304050607ff-00");
	assert_true(parse(out, &c));
	assert_memory_equal(c.parent_id, span, 8);
}

static void test_ratio(void **state)
{
	uint64_t t = 42;
	static const char *const bad[] = {"",     "-0.1", "1.5", "2",  "x",
	                                  "0.5x", "nan",  "inf", " 1", "0.1 "};

	(void)state;
	assert_int_equal(pg_trace_ratio_parse("1", &t), 0);
	assert_true(t == PG_TRACE_ALL);
	assert_int_equal(pg_trace_ratio_parse("1.0", &t), 0);
	assert_true(t == PG_TRACE_ALL);
	assert_int_equal(pg_trace_ratio_parse("0", &t), 0);
	assert_true(t == 0);
	assert_int_equal(pg_trace_ratio_parse("0.5", &t), 0);
	assert_true(t == 1ull << 63);
	assert_int_equal(pg_trace_ratio_parse("1e-2", &t), 0);
	assert_true(t / 10000 >= 18446744073709ull &&
	            t / 10000 <= 18446744073710ull); /* 2^64 / 100 */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!pg_trace_ratio_parse(bad[i], &t))
			fail_msg("accepted ratio \"%s\"", bad[i]);
	assert_int_equal(pg_trace_ratio_parse(NULL, &t), -1);
}

static void test_sample(void **state)
{
	struct pg_trace_ctx p = {.flags = 1};
	uint8_t id[16] = {0};
	uint64_t half, hundredth, rng = 88172645463325252ull;
	unsigned n = 0;

	(void)state;
	/* parent-based: the parent's flag, whatever the ratio */
	assert_true(pg_trace_sample(&p, id, 0));
	p.flags = 0;
	assert_false(pg_trace_sample(&p, id, PG_TRACE_ALL));
	p.flags = 0x03; /* other flags do not matter */
	assert_true(pg_trace_sample(&p, id, 0));
	/* no parent: by the trace id's low 8 bytes */
	assert_int_equal(pg_trace_ratio_parse("0.5", &half), 0);
	id[8] = 0x7f;
	assert_true(pg_trace_sample(NULL, id, half));
	id[8] = 0x80;
	assert_false(pg_trace_sample(NULL, id, half));
	id[8] = 0xff;
	memset(id + 9, 0xff, 7);
	assert_true(pg_trace_sample(NULL, id, PG_TRACE_ALL));
	assert_false(pg_trace_sample(NULL, id, 0));
	/* a ratio of 0.01 keeps about 1% of random ids */
	assert_int_equal(pg_trace_ratio_parse("0.01", &hundredth), 0);
	for (unsigned i = 0; i < 100000; i++) {
		rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
		pg_trace_new_id(id, 16, rng, rng * 0x2545F4914F6CDD1Dull);
		n += pg_trace_sample(NULL, id, hundredth);
	}
	assert_in_range(n, 850, 1150);
}

static void test_ids(void **state)
{
	uint8_t id[16], zero[16] = {0}, span[8], kid[8][8];

	(void)state;
	pg_trace_new_id(id, 16, 0, 0);
	assert_memory_not_equal(id, zero, 16);
	pg_trace_new_id(span, 8, 0, 5);
	assert_memory_not_equal(span, zero, 8);
	pg_trace_new_id(span, 8, 0x0102030405060708ull, 0);
	assert_int_equal(span[0], 1);
	assert_int_equal(span[7], 8);
	for (unsigned k = 0; k < 8; k++) {
		pg_trace_child_id(kid[k], span, k + 1);
		assert_memory_not_equal(kid[k], zero, 8);
		assert_memory_not_equal(kid[k], span, 8);
		for (unsigned j = 0; j < k; j++)
			assert_memory_not_equal(kid[k], kid[j], 8);
	}
	/* the same span's children are the same every time (the exporter's
	 * ids are derived, not kept) */
	pg_trace_child_id(id, span, 3);
	assert_memory_equal(id, kid[2], 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_good),   cmocka_unit_test(test_bad),
	    cmocka_unit_test(test_format), cmocka_unit_test(test_ratio),
	    cmocka_unit_test(test_sample), cmocka_unit_test(test_ids),
	};

	return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
