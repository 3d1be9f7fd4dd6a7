// SPDX-License-Identifier: MIT
/*
 * Buffers kept for reuse (lib/spare.h): the smallest that fits is taken,
 * none much larger than the need, at most PG_SPARE_MAX kept (the larger
 * ones), none over PG_SPARE_KEEP. Run under ASan, a buffer freed twice
 * or never would show.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "lib/spare.h"
#ifdef PG_SPARE_ASAN
#include <sanitizer/asan_interface.h>
#endif

static void *give_new(struct pg_spares *s, size_t cap)
{
	void *p = malloc(cap);

	assert_non_null(p);
	pg_spare_give(s, p, cap);
	return p;
}

static void test_take_smallest_that_fits(void **state)
{
	struct pg_spares s = {0};
	void *k4, *k64;
	size_t cap = 7;

	(void)state;
	assert_null(pg_spare_take(&s, 1, &cap));
	assert_int_equal(cap, 7); /* untouched when nothing is taken */
	pg_spare_give(&s, NULL, 100);
	assert_int_equal(s.n, 0);
	k64 = give_new(&s, 65536);
	k4 = give_new(&s, 4096);
	assert_int_equal(s.n, 2);
#ifdef PG_SPARE_ASAN
	/* kept: any use is reported (the ASan build of this test) */
	assert_true(__asan_address_is_poisoned((char *)k4 + 100));
#endif
	assert_ptr_equal(pg_spare_take(&s, 3000, &cap), k4);
	assert_int_equal(cap, 4096);
#ifdef PG_SPARE_ASAN
	assert_false(__asan_address_is_poisoned((char *)k4 + 4095));
#endif
	assert_null(pg_spare_take(&s, 3000, &cap)); /* 64 KiB is too large for it */
	assert_null(pg_spare_take(&s, 65537, &cap));
	assert_ptr_equal(pg_spare_take(&s, 65536 / PG_SPARE_SLACK + 1, &cap), k64);
	assert_int_equal(s.n, 0);
	free(k4);
	free(k64);
}

static void test_bounded(void **state)
{
	struct pg_spares s = {0};
	void *big[PG_SPARE_MAX];
	size_t cap;

	(void)state;
	give_new(&s, PG_SPARE_KEEP + 1); /* freed at once */
	assert_int_equal(s.n, 0);
	for (unsigned i = 0; i < PG_SPARE_MAX; i++)
		big[i] = give_new(&s, 8192 + i);
	assert_int_equal(s.n, PG_SPARE_MAX);
	give_new(&s, 1024); /* smaller than every kept one: freed */
	assert_int_equal(s.n, PG_SPARE_MAX);
	give_new(&s, 9000); /* larger than the smallest: replaces it */
	assert_int_equal(s.n, PG_SPARE_MAX);
	assert_null(pg_spare_take(&s, 1024, &cap)); /* the 1 KiB one is not kept */
	/* 8192 (big[0]) made room: the smallest left is 8193 */
	assert_ptr_equal(pg_spare_take(&s, 8000, &cap), big[1]);
	assert_int_equal(cap, 8193);
	free(big[1]);
	pg_spares_free(&s);
	assert_int_equal(s.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_take_smallest_that_fits),
	    cmocka_unit_test(test_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
