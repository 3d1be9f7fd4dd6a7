// SPDX-License-Identifier: MIT
/*
 * The queue of sockets starved of provided buffers (proxy/starved.h): first
 * in, first out; a socket once; removal from anywhere keeps the order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "proxy/starved.h"

static void test_fifo(void **state)
{
	struct pg_sock s[5];
	struct pg_starved q = {0};

	(void)state;
	memset(s, 0, sizeof(s));
	assert_null(pg_starved_pop(&q));
	pg_starved_push(&q, &s[0]);
	pg_starved_push(&q, &s[1]);
	pg_starved_push(&q, &s[1]); /* already queued: once */
	pg_starved_push(&q, &s[2]);
	assert_true(s[1].starved);
	assert_ptr_equal(pg_starved_pop(&q), &s[0]);
	assert_false(s[0].starved);
	pg_starved_push(&q, &s[0]);   /* starved again: to the back */
	pg_starved_remove(&q, &s[2]); /* from the middle */
	assert_false(s[2].starved);
	pg_starved_remove(&q, &s[2]); /* not queued: nothing */
	assert_ptr_equal(pg_starved_pop(&q), &s[1]);
	pg_starved_remove(&q, &s[0]); /* the last: the tail moves back */
	assert_null(pg_starved_pop(&q));
	pg_starved_push(&q, &s[3]);
	pg_starved_push(&q, &s[4]);
	pg_starved_remove(&q, &s[4]);
	pg_starved_push(&q, &s[2]);
	assert_ptr_equal(pg_starved_pop(&q), &s[3]);
	assert_ptr_equal(pg_starved_pop(&q), &s[2]);
	assert_null(pg_starved_pop(&q));
	assert_null(q.tail);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fifo),
	};

	return cmocka_run_group_tests_name("starved", tests, NULL, NULL);
}
