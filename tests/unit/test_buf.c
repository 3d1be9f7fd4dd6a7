// SPDX-License-Identifier: MIT
/*
 * The growable byte buffer (lib/buf.h): appends and growth, room reserved
 * and filled by the caller, the consumed front dropped on growth, reset,
 * the plain-array append of the request path, and numbers in digits.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/buf.h"

static void test_append_grows(void **state)
{
	struct pg_buf b = {0};
	char big[3 * PG_BUF_MIN_CAP];

	(void)state;
	pg_buf_append(&b, "", 0);
	assert_null(b.p); /* nothing appended, nothing allocated */
	pg_buf_puts(&b, "ab");
	pg_buf_printf(&b, "%d-%s", 42, "x");
	assert_int_equal(b.len, 6);
	assert_memory_equal(b.p, "ab42-x", 6);
	assert_int_equal(b.p[b.len], '\0'); /* printf leaves a terminator */
	assert_int_equal(b.cap, PG_BUF_MIN_CAP);
	memset(big, 'z', sizeof(big));
	pg_buf_append(&b, big, sizeof(big));
	assert_int_equal(b.len, 6 + sizeof(big));
	assert_int_equal(b.cap, 4 * PG_BUF_MIN_CAP); /* doubled until it fits */
	assert_memory_equal(b.p + 6, big, sizeof(big));
	assert_false(b.oom);
	pg_buf_free(&b);
	assert_null(b.p);
	assert_int_equal(b.len + b.cap + b.off, 0);
}

static void test_reserve_extend(void **state)
{
	struct pg_buf b = {0};
	char *d;

	(void)state;
	d = pg_buf_reserve(&b, 0);
	assert_non_null(d); /* never NULL + 0, even when empty */
	assert_int_equal(b.len, 0);
	pg_buf_puts(&b, "head:");
	d = pg_buf_reserve(&b, 5000);
	assert_ptr_equal(d, b.p + b.len);
	assert_true(b.cap - b.len >= 5000);
	memcpy(d, "12", 2);
	b.len += 2;
	d = pg_buf_extend(&b, 3);
	memcpy(d, "345", 3);
	assert_int_equal(b.len, 10);
	assert_memory_equal(b.p, "head:12345", 10);
	pg_buf_free(&b);
}

static void test_consumed_front(void **state)
{
	struct pg_buf b = {0};
	char fill[PG_BUF_MIN_CAP];

	(void)state;
	memset(fill, 'a', sizeof(fill));
	pg_buf_append(&b, fill, sizeof(fill) - 4);
	pg_buf_append(&b, "wxyz", 4);
	b.off = sizeof(fill) - 4; /* a reader took all but "wxyz" */
	pg_buf_append(&b, "!", 1);
	/* the consumed bytes were dropped instead of growing */
	assert_int_equal(b.cap, PG_BUF_MIN_CAP);
	assert_int_equal(b.off, 0);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.p, "wxyz!", 5);
	/* while it fits, nothing moves */
	b.off = 2;
	pg_buf_append(&b, "?", 1);
	assert_int_equal(b.off, 2);
	assert_memory_equal(b.p + b.off, "yz!?", 4);
	pg_buf_reset(&b);
	assert_int_equal(b.len + b.off, 0);
	assert_int_equal(b.cap, PG_BUF_MIN_CAP); /* memory kept */
	pg_buf_free(&b);
}

static void test_oom_sticks(void **state)
{
	struct pg_buf b = {0};

	(void)state;
	pg_buf_puts(&b, "ok");
	assert_null(pg_buf_reserve(&b, SIZE_MAX - 1)); /* len + n overflows */
	assert_true(b.oom);
	pg_buf_puts(&b, "dropped");
	assert_int_equal(b.len, 2);
	assert_null(pg_buf_extend(&b, 1));
	pg_buf_reset(&b);
	assert_false(b.oom);
	pg_buf_puts(&b, "again");
	assert_memory_equal(b.p, "again", 5);
	pg_buf_free(&b);
}

static void test_json_str(void **state)
{
	struct pg_buf b = {0};
	static const char in[] = "a\"\\\n\x01\x7f\xc3\xa9\xff";

	(void)state;
	pg_buf_json_str(&b, in, sizeof(in) - 1);
	pg_buf_append(&b, "", 1);
	assert_string_equal(b.p, "\"a\\\"\\\\\\n\\u0001\\u007f\xc3\xa9\\ufffd\"");
	pg_buf_free(&b);
}

static void test_bytes_append(void **state)
{
	char *p = NULL;
	size_t len = 0, cap = 0;
	char big[PG_BUF_MIN_CAP + 1];

	(void)state;
	pg_bytes_append(&p, &len, &cap, "abc", 3);
	assert_int_equal(len, 3);
	assert_int_equal(cap, PG_BUF_MIN_CAP);
	memset(big, 'q', sizeof(big));
	pg_bytes_append(&p, &len, &cap, big, sizeof(big));
	assert_int_equal(len, 3 + sizeof(big));
	assert_int_equal(cap, 2 * PG_BUF_MIN_CAP);
	assert_memory_equal(p, "abcq", 4);
	free(p);
}

/* pg_digits against printf, in both bases, at every length and the ends */
static void test_digits(void **state)
{
	char out[PG_DIGITS_MAX], want[32];

	(void)state;
	for (unsigned base = 10; base <= 16; base += 6) {
		uint64_t p = 1;

		/* p - 1 and p for every power p of base, then the largest */
		for (int k = 0;; k++) {
			uint64_t v[3] = {p - 1, p, UINT64_MAX};

			for (int j = k ? 0 : 1; j < 3; j++) {
				const char *d = pg_digits(out + sizeof(out), v[j], base);
				size_t n = (size_t)snprintf(
				    want, sizeof(want), base == 10 ? "%" PRIu64 : "%" PRIx64, v[j]);

				assert_int_equal((size_t)(out + sizeof(out) - d), n);
				assert_memory_equal(d, want, n);
			}
			if (p > UINT64_MAX / base)
				break;
			p *= base;
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_append_grows),   cmocka_unit_test(test_reserve_extend),
	    cmocka_unit_test(test_consumed_front), cmocka_unit_test(test_oom_sticks),
	    cmocka_unit_test(test_json_str),       cmocka_unit_test(test_bytes_append),
	    cmocka_unit_test(test_digits),
	};

	return cmocka_run_group_tests_name("buf", tests, NULL, NULL);
}
