// SPDX-License-Identifier: MIT
/* The route journal's lines (lib/journal.h): every event formatted and
 * parsed back the same; lines that are not the journal's refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "lib/journal.h"
#include "prefixgate.h"

static char line[PG_JR_LINE_MAX];
static uint64_t chain[PG_CA_MAX_BLOCKS], back[PG_CA_MAX_BLOCKS];

/* e formatted, then parsed into *out (its '\n' cut). */
static void round_trip(const struct pg_jr *e, struct pg_jr *out)
{
	size_t n = pg_jr_format(line, sizeof(line), e);

	assert_true(n > 1 && n < sizeof(line));
	assert_int_equal(line[n - 1], '\n');
	line[n - 1] = 0;
	assert_int_equal(pg_jr_parse(line, out, back), 0);
	assert_int_equal(out->type, e->type);
}

static void test_events(void **state)
{
	static const enum pg_jr_type seqs[] = {PG_JR_FIRST, PG_JR_ANSWERED, PG_JR_DUE,
	                                       PG_JR_CUT,   PG_JR_DROP,     PG_JR_RELEASE};
	struct pg_jr e, g;

	(void)state;
	e = (struct pg_jr){
	    .type = PG_JR_TAKE, .seq = 7, .t = 25288556839449ull, .id = 3, .work = 1490};
	round_trip(&e, &g);
	assert_true(g.seq == 7 && g.t == e.t && g.id == 3 && g.work == 1490);
	for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
		const bool timed = seqs[i] != PG_JR_DROP && seqs[i] != PG_JR_RELEASE;

		e = (struct pg_jr){.type = seqs[i], .seq = 42, .t = timed ? 123456789 : 0};
		round_trip(&e, &g);
		assert_true(g.seq == 42 && g.t == e.t);
	}
	e = (struct pg_jr){.type = PG_JR_VERDICT, .seq = 9, .kind = 2, .verdict = 1};
	round_trip(&e, &g);
	assert_true(g.seq == 9 && g.kind == 2 && g.verdict == 1);
	e = (struct pg_jr){.type = PG_JR_TICK, .t = 25288600};
	round_trip(&e, &g);
	assert_true(g.t == 25288600);
	e = (struct pg_jr){.type = PG_JR_MEMBER, .id = 4, .pool = 0};
	strcpy(e.name, "127.0.0.1:41235");
	round_trip(&e, &g);
	assert_true(g.id == 4 && !strcmp(g.name, e.name));
	e = (struct pg_jr){.type = PG_JR_CONFIG,
	                   .cfg = {.prefix_length = 4096,
	                           .threshold = 10,
	                           .choices = 1,
	                           .capacity_blocks = 2048,
	                           .slots = 65536}};
	strcpy(e.cfg.strategy, "cache_aware");
	round_trip(&e, &g);
	assert_memory_equal(&g.cfg, &e.cfg, sizeof(e.cfg));
}

/* A route with the longest chain: every field back, hashes in full. */
static void test_route(void **state)
{
	struct pg_jr e = {.type = PG_JR_ROUTE, .seq = 1, .t = 25288556}, g;
	struct pg_jr_route *r = &e.route;

	(void)state;
	for (size_t i = 0; i < PG_CA_MAX_BLOCKS; i++)
		chain[i] = 0xfedcba9876543210ull ^ (i * 0x9e3779b97f4a7c15ull);
	*r = (struct pg_jr_route){.worker = 1,
	                          .pool = 0,
	                          .budget_ms = 50,
	                          .prio = 2,
	                          .rnd = UINT64_MAX,
	                          .hash = 0xad9ca1d030fab455ull,
	                          .anchor = 0,
	                          .tokens = 1490,
	                          .source = 1,
	                          .kb_anchor = 0xf53a1d202db616f0ull,
	                          .anchor_len = 5960,
	                          .whole = 0xe2d85add4135c19bull,
	                          .n = PG_CA_MAX_BLOCKS,
	                          .chain = chain,
	                          .id = 3,
	                          .decision = 6,
	                          .matched = 1024};
	round_trip(&e, &g);
	assert_true(g.seq == 1 && g.t == e.t);
	assert_true(g.route.chain == back);
	assert_memory_equal(back, chain, sizeof(chain));
	g.route.chain = chain;
	assert_memory_equal(&g.route, r, sizeof(*r));
	/* no blocks (not cache_aware) */
	r->n = 0;
	r->whole = 0;
	round_trip(&e, &g);
	assert_int_equal(g.route.n, 0);
	assert_true(g.route.whole == 0);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
	    PG_JR_MAGIC,
	    "",
	    "tick",
	    "tick x",
	    "tick 5 6",
	    "tick  5",
	    "take 1 2 3",
	    "take 1 2 3 99999999999",
	    "first 1 2 ",
	    "member 1 0",
	    "config cache_aware 1 2 3 4 5",
	    "route 1 2 0 0 0 0 0 1 1 10 1 1 4 1 2 1 0 0 5", /* n 2, one hash */
	    "route 1 2 0 0 0 0 0 1 1 10 1 1 4 1 99999 1 0 0",
	    "routes 1",
	};
	struct pg_jr e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!pg_jr_parse(bad[i], &e, back))
			fail_msg("accepted: \"%s\"", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_events),
	    cmocka_unit_test(test_route),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests_name("journal", tests, NULL, NULL);
}
