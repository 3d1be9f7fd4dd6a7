// SPDX-License-Identifier: MIT
/*
 * Flow control's order (lib/flow.h): classes and the starvation bound,
 * fair shares by weight in work units, no credit banked while idle, who
 * is ahead of its share among the tenants present,
 * deadlines, the bounds and what they shed; and a random run against a
 * reference model written the naive way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/flow.h"

static struct pg_flow_tenants ts;
static struct pg_flow_q q;
static const struct pg_flow_limits lim = {100000, 1 << 30, PG_FLOW_STARVE_MS};

static void reset(void)
{
	memset(&ts, 0, sizeof(ts));
	memset(&q, 0, sizeof(q));
}

static struct pg_flow_item *item(unsigned tenant, unsigned prio, uint64_t cost)
{
	struct pg_flow_item *it = calloc(1, sizeof(*it));

	assert_non_null(it);
	it->tenant = (uint16_t)tenant;
	it->prio = (uint8_t)prio;
	it->cost = cost;
	it->bytes = 100;
	return it;
}

static void push(struct pg_flow_item *it, uint64_t now)
{
	struct pg_flow_item *shed;

	assert_int_equal(pg_flow_push(&q, &ts, it, &lim, now, &shed), PG_FLOW_QUEUED);
}

/* Take the next one out as dispatched. */
static struct pg_flow_item *take(uint64_t now)
{
	struct pg_flow_item *it = pg_flow_pop(&q, &ts, &lim, now);

	if (it)
		pg_flow_charge(&ts, it);
	return it;
}

static void test_tenants(void **state)
{
	unsigned a, b;

	(void)state;
	reset();
	a = pg_flow_tenant(&ts, 42, "alice");
	b = pg_flow_tenant(&ts, 43, "bob");
	assert_true(a && b && a != b);
	assert_int_equal(pg_flow_tenant(&ts, 42, "x"), a);
	assert_string_equal(ts.t[a].label, "alice");
	assert_int_equal(ts.t[a].weight, 1);
	assert_int_equal(pg_flow_tenant(&ts, 0, "none"), 0);
	/* a full table sends the rest to slot 0 */
	for (uint64_t k = 100; k < 100 + PG_FLOW_TENANTS; k++)
		pg_flow_tenant(&ts, k, "");
	assert_int_equal(pg_flow_tenant(&ts, 99999, "late"), 0);
}

static void test_classes(void **state)
{
	struct pg_flow_item *s = item(1, PG_PRIO_SHEDDABLE, 1), *d = item(1, PG_PRIO_STANDARD, 1),
	                    *c = item(2, PG_PRIO_CRITICAL, 1), *c2 = item(2, PG_PRIO_CRITICAL, 1),
	                    *late;
	const uint64_t B = PG_FLOW_STARVE_MS;

	(void)state;
	reset();
	push(s, 0);
	push(d, 1);
	push(c, 2);
	assert_ptr_equal(take(10), c);
	assert_ptr_equal(take(10), d);
	assert_ptr_equal(take(10), s);
	assert_null(take(10));
	/* a sheddable request queued past the starvation bound goes first */
	push(s, 0);
	push(d, 100);
	assert_ptr_equal(pg_flow_next(&q, &ts, &lim, PG_FLOW_STARVE_MS - 1), d);
	assert_ptr_equal(pg_flow_next(&q, &ts, &lim, PG_FLOW_STARVE_MS), s);
	/* of two starved classes, the one waiting longer */
	push(c, PG_FLOW_STARVE_MS);
	push(late = item(1, PG_PRIO_STANDARD, 1), 50);
	assert_ptr_equal(take(B + 60), s);
	/* one starved request a bound: d, starved too, waits behind c, then
	 * goes before c2 once the bound has passed */
	push(c2, B + 70);
	assert_true(B + 200 >= d->enq_ms + B);
	assert_true(pg_flow_rank(&q, &ts, &lim, B + 200, d) >
	            pg_flow_rank(&q, &ts, &lim, B + 200, c));
	assert_ptr_equal(take(B + 200), c);
	assert_ptr_equal(take(2 * B + 59), c2);
	push(c, 2 * B + 59);
	assert_ptr_equal(take(2 * B + 60), d);
	assert_ptr_equal(take(2 * B + 60), c);
	assert_ptr_equal(take(2 * B + 60), late);
	assert_null(take(2 * B + 60));
	free(s);
	free(c);
	free(c2);
	free(d);
	free(late);
}

/* The fleet: work charged here is kept to tell the peers; the peers' work
 * is charged here by this gateway's weights, a tenant new here added. */
static void test_fleet_charges(void **state)
{
	struct pg_flow_item *a = item(1, PG_PRIO_STANDARD, 300);
	unsigned t;

	(void)state;
	reset();
	ts.t[1].weight = 2;
	pg_flow_charge(&ts, a);
	assert_int_equal(ts.t[1].vtc, 300 * 1000 / 2);
	assert_int_equal(ts.t[1].fleet_out, 300);
	t = pg_flow_heard(&ts, 77, "team-b", 500);
	assert_true(t != 0 && t != 1);
	assert_int_equal(ts.t[t].key, 77);
	assert_string_equal(ts.t[t].label, "team-b");
	assert_int_equal(ts.t[t].vtc, 500 * 1000);
	assert_int_equal(ts.t[t].peer_served, 500);
	assert_int_equal(ts.t[t].fleet_out, 0); /* never told back */
	assert_int_equal(pg_flow_heard(&ts, 77, "x", 0), t);
	assert_int_equal(ts.t[t].vtc, 500 * 1000);
	/* "other" (key 0) stays slot 0 */
	assert_int_equal(pg_flow_heard(&ts, 0, "", 10), 0);
	assert_int_equal(ts.t[0].vtc, 10 * 1000);
	free(a);
}

/* Ranks across queues: a starved request first (by age), then by class,
 * then by the tenant's counter; none ranks last. */
static void test_ranks(void **state)
{
	struct pg_flow_item *s = item(1, PG_PRIO_SHEDDABLE, 1), *d = item(1, PG_PRIO_STANDARD, 1),
	                    *c = item(2, PG_PRIO_CRITICAL, 1);
	uint64_t rs, rd, rc;

	(void)state;
	reset();
	assert_int_equal(pg_flow_rank(&q, &ts, &lim, 0, NULL), UINT64_MAX);
	push(s, 0);
	push(d, 1);
	push(c, 2);
	rs = pg_flow_rank(&q, &ts, &lim, 10, s);
	rd = pg_flow_rank(&q, &ts, &lim, 10, d);
	rc = pg_flow_rank(&q, &ts, &lim, 10, c);
	assert_true(rc < rd && rd < rs);
	/* the sheddable one starved: before the critical one */
	assert_true(pg_flow_rank(&q, &ts, &lim, PG_FLOW_STARVE_MS, s) < rc);
	/* a standard one alone in its queue is not starved, however old */
	pg_flow_remove(&q, &ts, c);
	pg_flow_remove(&q, &ts, s);
	assert_int_equal(pg_flow_rank(&q, &ts, &lim, 10 * PG_FLOW_STARVE_MS, d), rd);
	/* within a class, the tenant served less first */
	ts.t[d->tenant].vtc += 5000;
	assert_true(pg_flow_rank(&q, &ts, &lim, 10, d) > rd);
	free(s);
	free(c);
	free(d);
}

/* Two tenants backlogged: the work they get follows their weights, however
 * many requests each sends and however large they are. */
static void test_fair_shares(void **state)
{
	static const struct {
		uint32_t wa, wb; /* weights */
		uint64_t ca, cb; /* cost of each request */
		double want;     /* a's share of the work */
	} cases[] = {
	    {1, 1, 100, 100, 0.5},
	    {1, 1, 1000, 100,
	     0.5}, /* a's requests 10x larger: half the work, a tenth of the requests */
	    {2, 1, 100, 100, 2.0 / 3},
	    {3, 1, 500, 100, 0.75},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		unsigned a, b;
		uint64_t work[2] = {0, 0};

		reset();
		a = pg_flow_tenant(&ts, 1, "a");
		b = pg_flow_tenant(&ts, 2, "b");
		ts.t[a].weight = cases[k].wa;
		ts.t[b].weight = cases[k].wb;
		/* a sends 10x b's requests: both always backlogged */
		for (int i = 0; i < 400; i++)
			push(item(a, PG_PRIO_STANDARD, cases[k].ca), (uint64_t)i);
		for (int i = 0; i < 400; i++)
			push(item(b, PG_PRIO_STANDARD, cases[k].cb), (uint64_t)i);
		for (int i = 0; i < 300; i++) {
			struct pg_flow_item *it = take(1000);

			work[it->tenant == a ? 0 : 1] += it->cost;
			free(it);
		}
		if ((double)work[0] / (double)(work[0] + work[1]) < cases[k].want - 0.03 ||
		    (double)work[0] / (double)(work[0] + work[1]) > cases[k].want + 0.03)
			fail_msg("case %zu: a got %llu of %llu", k, (unsigned long long)work[0],
			         (unsigned long long)(work[0] + work[1]));
		while ((q.n) && (free(take(1000)), 1))
			;
	}
}

/* A tenant idle while another was served comes back with one burst of
 * credit (PG_FLOW_BURST_WORK), never what it could have banked: its burst
 * goes at once, then the two alternate. */
static void test_no_banked_credit(void **state)
{
	const int burst = PG_FLOW_BURST_WORK / 1000; /* b's requests in one burst */
	unsigned a, b;
	int run = 0;

	(void)state;
	reset();
	a = pg_flow_tenant(&ts, 1, "a");
	b = pg_flow_tenant(&ts, 2, "b");
	for (int i = 0; i < 100; i++)
		push(item(a, PG_PRIO_STANDARD, 10000), 0);
	for (int i = 0; i < 50; i++) /* 500,000 work: many bursts */
		free(take(1));
	for (int i = 0; i < 200; i++)
		push(item(b, PG_PRIO_STANDARD, 1000), 2);
	/* b's burst first, whole */
	for (int i = 0; i < burst; i++) {
		struct pg_flow_item *it = take(3);

		assert_int_equal(it->tenant, b);
		free(it);
	}
	/* then, level with a, they share: b not 100 more in a row */
	for (int i = 0; i < 40; i++) {
		struct pg_flow_item *it = take(3);

		run = it->tenant == b ? run + 1 : 0;
		assert_true(run <= 11); /* a's request is 10 of b's */
		free(it);
	}
	while (q.n)
		free(take(4));
}

/* Served cost to tenant t, one request's charge at a time. */
static void serve(unsigned t, uint64_t cost, int n)
{
	struct pg_flow_item it = {.tenant = (uint16_t)t, .prio = PG_PRIO_STANDARD, .cost = cost};

	for (int i = 0; i < n; i++)
		pg_flow_charge(&ts, &it);
}

/* Who is ahead of its share, among the tenants present. */
static void test_shares(void **state)
{
	const uint64_t now = 100000;
	struct pg_flow_share sh;
	unsigned a, b;

	(void)state;
	reset();
	a = pg_flow_tenant(&ts, 1, "a");
	b = pg_flow_tenant(&ts, 2, "b");
	/* no one present: no one ahead */
	pg_flow_share(&ts, now, &sh);
	assert_false(pg_flow_ahead(&ts, &sh, a));
	/* a alone, however much served, is not ahead of itself */
	pg_flow_seen(&ts, a, now);
	serve(a, 1000, 1000);
	pg_flow_share(&ts, now, &sh);
	assert_false(pg_flow_ahead(&ts, &sh, a));
	/* b comes with nothing served: a is ahead, b is not */
	pg_flow_seen(&ts, b, now);
	pg_flow_share(&ts, now, &sh);
	assert_true(pg_flow_ahead(&ts, &sh, a));
	assert_false(pg_flow_ahead(&ts, &sh, b));
	/* b served as much: level, neither (a burst apart is still level) */
	serve(b, 1000, 1000 + PG_FLOW_BURST_WORK / 1000 - 1);
	pg_flow_share(&ts, now, &sh);
	assert_false(pg_flow_ahead(&ts, &sh, a));
	assert_false(pg_flow_ahead(&ts, &sh, b));
	serve(b, 1000, 2);
	pg_flow_share(&ts, now, &sh);
	assert_true(pg_flow_ahead(&ts, &sh, b));
	/* b gone quiet for longer than PG_FLOW_PRESENT_MS: b is still ahead
	 * of a, present; a, alone present but for it, not */
	pg_flow_seen(&ts, a, now + PG_FLOW_PRESENT_MS + 1);
	pg_flow_share(&ts, now + PG_FLOW_PRESENT_MS + 1, &sh);
	assert_false(pg_flow_ahead(&ts, &sh, a));
	assert_true(pg_flow_ahead(&ts, &sh, b));
	/* by weight: c of weight 10 served 10x d is level with it */
	reset();
	a = pg_flow_tenant(&ts, 3, "c");
	b = pg_flow_tenant(&ts, 4, "d");
	ts.t[a].weight = 10;
	pg_flow_seen(&ts, a, now);
	pg_flow_seen(&ts, b, now);
	serve(a, 1000, 1000);
	serve(b, 1000, 100);
	pg_flow_share(&ts, now, &sh);
	assert_false(pg_flow_ahead(&ts, &sh, a));
	serve(a, 1000, 2 * PG_FLOW_BURST_WORK / 100);
	pg_flow_share(&ts, now, &sh);
	assert_true(pg_flow_ahead(&ts, &sh, a));
}

static void test_deadlines(void **state)
{
	struct pg_flow_item *x = item(1, PG_PRIO_STANDARD, 1), *y = item(1, PG_PRIO_STANDARD, 1),
	                    *z = item(1, PG_PRIO_STANDARD, 1);

	(void)state;
	reset();
	x->deadline_ms = 500;
	y->deadline_ms = 300;
	push(x, 0);
	push(y, 0);
	push(z, 0); /* none */
	assert_int_equal(q.next_deadline_ms, 300);
	assert_null(pg_flow_expired(&q, 299));
	assert_ptr_equal(pg_flow_expired(&q, 300), y);
	pg_flow_remove(&q, &ts, y);
	assert_null(pg_flow_expired(&q, 300));
	assert_int_equal(q.next_deadline_ms, 500);
	assert_ptr_equal(pg_flow_expired(&q, 10000), x);
	pg_flow_remove(&q, &ts, x);
	assert_null(pg_flow_expired(&q, 10000));
	assert_int_equal(q.next_deadline_ms, 0);
	assert_int_equal(q.n, 1);
	pg_flow_remove(&q, &ts, z);
	pg_flow_remove(&q, &ts, z); /* once */
	assert_int_equal(q.n, 0);
	assert_int_equal(ts.t[1].queued, 0);
	free(x);
	free(y);
	free(z);
}

static void test_bounds(void **state)
{
	const struct pg_flow_limits small = {3, 1000, PG_FLOW_STARVE_MS};
	struct pg_flow_item *it[6], *shed;

	(void)state;
	reset();
	for (int i = 0; i < 6; i++)
		it[i] = item(1, i == 1 || i == 2 ? PG_PRIO_SHEDDABLE : PG_PRIO_STANDARD, 1);
	assert_int_equal(pg_flow_push(&q, &ts, it[0], &small, 0, &shed), PG_FLOW_QUEUED);
	assert_int_equal(pg_flow_push(&q, &ts, it[1], &small, 1, &shed), PG_FLOW_QUEUED);
	assert_int_equal(pg_flow_push(&q, &ts, it[2], &small, 2, &shed), PG_FLOW_QUEUED);
	/* full: a sheddable arrival is refused */
	it[5]->prio = PG_PRIO_SHEDDABLE;
	assert_int_equal(pg_flow_push(&q, &ts, it[5], &small, 3, &shed), PG_FLOW_REFUSED);
	/* a standard one sheds the newest sheddable */
	assert_int_equal(pg_flow_push(&q, &ts, it[3], &small, 3, &shed), PG_FLOW_SHED);
	assert_ptr_equal(shed, it[2]);
	assert_false(it[2]->queued);
	assert_int_equal(pg_flow_push(&q, &ts, it[4], &small, 4, &shed), PG_FLOW_SHED);
	assert_ptr_equal(shed, it[1]);
	/* nothing sheddable left: refused */
	it[2]->prio = PG_PRIO_STANDARD;
	assert_int_equal(pg_flow_push(&q, &ts, it[2], &small, 5, &shed), PG_FLOW_REFUSED);
	assert_int_equal(q.n, 3);
	/* bytes bound too */
	reset();
	it[0]->bytes = 900;
	it[1]->bytes = 200;
	assert_int_equal(pg_flow_push(&q, &ts, it[0], &small, 0, &shed), PG_FLOW_QUEUED);
	assert_int_equal(pg_flow_push(&q, &ts, it[1], &small, 0, &shed), PG_FLOW_REFUSED);
	for (int i = 0; i < 6; i++)
		free(it[i]);
}

/* --- a reference model: every item in one array, each choice by a scan --- */

struct ref_item {
	struct pg_flow_item *it;
	bool live;
};

/* jump: no starved item goes first before (one a bound) */
static struct pg_flow_item *ref_next(const struct ref_item *r, size_t n, uint64_t now,
                                     uint64_t jump)
{
	const struct ref_item *best = NULL;
	int top = PG_PRIO_COUNT;

	for (size_t i = 0; i < n; i++)
		if (r[i].live && r[i].it->prio < top)
			top = r[i].it->prio;
	if (top == PG_PRIO_COUNT)
		return NULL;
	/* starved: the oldest item of a lower class past the bound */
	for (size_t i = 0; i < n; i++) {
		const struct pg_flow_item *it = r[i].it;

		if (r[i].live && it->prio > top && now >= jump &&
		    now >= it->enq_ms + lim.starve_ms) {
			/* only a class's oldest counts, and classes' oldest compare */
			bool oldest = true;

			for (size_t j = 0; j < i; j++)
				if (r[j].live && r[j].it->prio == it->prio)
					oldest = false;
			/* equal waits: the higher class */
			if (oldest &&
			    (!best || it->enq_ms < best->it->enq_ms ||
			     (it->enq_ms == best->it->enq_ms && it->prio < best->it->prio)))
				best = &r[i];
		}
	}
	if (best)
		return best->it;
	/* the least-served tenant of the top class (lowest slot on a tie),
	 * its oldest */
	for (size_t i = 0; i < n; i++) {
		const struct pg_flow_item *it = r[i].it;

		if (!r[i].live || it->prio != top)
			continue;
		if (!best) {
			best = &r[i];
			continue;
		}
		if (ts.t[it->tenant].vtc < ts.t[best->it->tenant].vtc ||
		    (ts.t[it->tenant].vtc == ts.t[best->it->tenant].vtc &&
		     it->tenant < best->it->tenant))
			best = &r[i];
	}
	return best->it;
}

static void test_against_model(void **state)
{
	enum { N = 3000 };
	static struct pg_flow_item items[N];
	static struct ref_item r[N];
	uint64_t seed = 9, now = 0, jump = 0;
	size_t n = 0;

	(void)state;
	reset();
	for (int step = 0; step < 20000; step++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		now += (seed >> 60) * 50;
		if ((seed >> 33) % 3 && n < N) { /* arrive */
			struct pg_flow_item *it = &items[n], *shed;

			*it = (struct pg_flow_item){.tenant = (uint16_t)(1 + (seed >> 40) % 5),
			                            .prio = (uint8_t)((seed >> 50) % 3),
			                            .cost = 1 + (seed >> 20) % 1000,
			                            .bytes = 10};
			assert_int_equal(pg_flow_push(&q, &ts, it, &lim, now, &shed),
			                 PG_FLOW_QUEUED);
			r[n++] = (struct ref_item){it, true};
		} else { /* dispatch */
			struct pg_flow_item *want = ref_next(r, n, now, jump), *got;
			int top = PG_PRIO_COUNT;

			for (size_t i = 0; i < n; i++)
				if (r[i].live && r[i].it->prio < top)
					top = r[i].it->prio;
			got = take(now);
			assert_ptr_equal(got, want);
			if (got && got->prio > top)
				jump = now + lim.starve_ms;
			for (size_t i = 0; got && i < n; i++)
				if (r[i].it == got)
					r[i].live = false;
		}
	}
}

/* What a request says of itself: its class, deadline, bearer token, and
 * tenant labels (a token never shown). */
static void test_request_fields(void **state)
{
	enum pg_prio p;
	uint32_t ms;
	const char *tok;
	size_t n;
	char label[PG_FLOW_LABEL_MAX + 1], other[PG_FLOW_LABEL_MAX + 1];
	uint64_t k1, k2;

	(void)state;
	assert_int_equal(pg_flow_prio_parse("Critical", 8, &p), 0);
	assert_int_equal(p, PG_PRIO_CRITICAL);
	assert_int_equal(pg_flow_prio_parse("sheddable", 9, &p), 0);
	assert_int_equal(p, PG_PRIO_SHEDDABLE);
	assert_int_equal(pg_flow_prio_parse("high", 4, &p), -1);
	assert_int_equal(pg_flow_prio_parse("standardx", 9, &p), -1);
	assert_int_equal(pg_flow_deadline_parse("250", 3, 3600000, &ms), 0);
	assert_int_equal(ms, 250);
	assert_int_equal(pg_flow_deadline_parse("0", 1, 3600000, &ms), -1);
	assert_int_equal(pg_flow_deadline_parse("3600001", 7, 3600000, &ms), -1);
	assert_int_equal(pg_flow_deadline_parse("12a", 3, 3600000, &ms), -1);
	assert_int_equal(pg_flow_deadline_parse("", 0, 3600000, &ms), -1);
	assert_int_equal(pg_flow_deadline_parse("99999999999", 11, UINT32_MAX, &ms), -1);
	assert_int_equal(pg_flow_bearer("Bearer  sk-abc", 14, &tok, &n), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(tok, "sk-abc", 6);
	assert_int_equal(pg_flow_bearer("bearer sk", 9, &tok, &n), 0);
	assert_int_equal(pg_flow_bearer("Basic dXNl", 10, &tok, &n), -1);
	assert_int_equal(pg_flow_bearer("Bearer ", 7, &tok, &n), -1);
	assert_int_equal(pg_flow_bearer("Bearersk", 8, &tok, &n), -1);
	/* a secret is never its own label; a plain name is */
	k1 = pg_flow_label("sk-abc", 6, true, label);
	assert_int_equal(strncmp(label, "t-", 2), 0);
	assert_int_equal(strlen(label), 14);
	assert_null(strstr(label, "abc"));
	k2 = pg_flow_label("sk-abc", 6, true, other);
	assert_true(k1 == k2 && !strcmp(label, other));
	assert_true(pg_flow_label("sk-abd", 6, true, other) != k1);
	pg_flow_label("team-a", 6, false, label);
	assert_string_equal(label, "team-a");
	/* a name that cannot be a label (too long, odd characters) is hashed */
	pg_flow_label("a name with spaces", 18, false, label);
	assert_int_equal(strncmp(label, "t-", 2), 0);
	pg_flow_label("abcdefghijklmnopqrstuvwx", 24, false, label);
	assert_int_equal(strncmp(label, "t-", 2), 0);
	/* the key is the label's: a configured name meets its requests */
	assert_true(pg_flow_label("team-a", 6, false, label) ==
	            pg_flow_label(label, strlen(label), false, other));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tenants),       cmocka_unit_test(test_classes),
	    cmocka_unit_test(test_fair_shares),   cmocka_unit_test(test_no_banked_credit),
	    cmocka_unit_test(test_deadlines),     cmocka_unit_test(test_bounds),
	    cmocka_unit_test(test_against_model), cmocka_unit_test(test_request_fields),
	    cmocka_unit_test(test_ranks),         cmocka_unit_test(test_fleet_charges),
	    cmocka_unit_test(test_shares),
	};

	return cmocka_run_group_tests_name("flow", tests, NULL, NULL);
}
