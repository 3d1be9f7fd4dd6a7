// SPDX-License-Identifier: MIT
/*
 * What the routing core decides from what it can see of an engine
 * (router/route.c, load.c), no gateway: flow control's room
 * in the instance's own units, by class (sheddable: an empty instance),
 * the engine's report of requests waiting, the gate for every strategy
 * (cache_aware keeps a holder without room); a deadline judged only on a
 * measured speed (an unmeasured instance explored one request at a time,
 * after a cut only once the backoff is over); an answer that does not
 * stream keeping its work queued until its head unless its speed is
 * measured (test_capacity.c: what an instance's cache keeps).
 */
#include "router_fixture.h"

/* A measured speed: 10,000 tokens/s, 20 ms overhead. */
static void measured(struct pg_backend *b)
{
	const struct pg_speed sp = {20, 100, 0};

	pg_work_publish_speed(b, &sp);
	b->fit_obs = PG_FIT_OWN_MIN;
}

/* The room of an instance is its own service time by default: the
 * prefill of the work it is usually sent, at its speed, or its overhead if
 * longer (not their sum): one request queued behind the one it computes,
 * sent before that one ends. */
static void test_room_auto(void **state)
{
	struct pg_backend *b = &maps.backends[1];
	struct pg_load_ticket t1 = {0}, t2 = {0}, t3 = {0};
	const uint64_t t0 = now_ns;

	(void)state;
	measured(b);
	assert_true(pg_route_has_room(b, PG_FLOW_QUEUE_AUTO, now_ms()));
	/* requests of 1,000 tokens: 100 ms of prefill each */
	pg_load_take(&r, 1, 1000, &t1, now_ns);
	assert_int_equal(b->work_avg, 1000);
	assert_float_equal(pg_work_service_ms(b, &(struct pg_speed){20, 100, 0}), 100, 1e-9);
	/* the one it begins now fills it; 10 ms on, it has room again */
	assert_false(pg_route_has_room(b, PG_FLOW_QUEUE_AUTO, now_ms()));
	now_ns += 10 * 1000000ull;
	assert_true(pg_route_has_room(b, PG_FLOW_QUEUE_AUTO, now_ms()));
	/* one more (190 ms of prefill) is past it; a fixed 250 ms still has room */
	pg_load_take(&r, 1, 1000, &t2, now_ns);
	assert_false(pg_route_has_room(b, PG_FLOW_QUEUE_AUTO, now_ms()));
	assert_true(pg_route_has_room(b, 250, now_ms()));
	/* shorter requests: a shorter room, in the same units */
	pg_load_drop(&r, &t1);
	pg_load_drop(&r, &t2);
	for (int i = 0; i < 200; i++) {
		pg_load_take(&r, 1, 100, &t3, now_ns);
		pg_load_drop(&r, &t3);
	}
	assert_int_equal(b->work_avg, 100); /* 10 ms of prefill, under the 20 ms overhead */
	assert_float_equal(pg_work_service_ms(b, &(struct pg_speed){20, 100, 0}), 20, 1e-9);
	now_ns += 1000 * 1000000ull; /* the engine idle since */
	pg_load_take(&r, 1, 100, &t1, now_ns);
	pg_load_take(&r, 1, 100, &t2, now_ns);
	now_ns += 1000000ull;
	assert_true(pg_route_has_room(b, PG_FLOW_QUEUE_AUTO, now_ms())); /* 19 ms */
	pg_load_take(&r, 1, 100, &t3, now_ns);
	assert_false(pg_route_has_room(b, PG_FLOW_QUEUE_AUTO, now_ms())); /* 29 ms */
	assert_true(pg_route_has_room(b, 50, now_ms()));
	pg_load_drop(&r, &t1);
	pg_load_drop(&r, &t2);
	pg_load_drop(&r, &t3);
	/* an idle engine has room before any work is learned */
	assert_true(pg_route_has_room(&maps.backends[2], PG_FLOW_QUEUE_AUTO, now_ms()));
	now_ns = t0;
}

/* An engine that says requests wait has no room, whatever the model
 * predicts, while its report is fresh; the requests of ours seen to leave
 * its queue since are taken off it. */
static void test_room_engine_waiting(void **state)
{
	struct pg_backend *b = &maps.backends[1];
	struct pg_load_ticket t = {0};

	(void)state;
	measured(b);
	b->waiting = 1;
	b->scraped_ms = now_ms();
	b->firsts_at_scrape = b->firsts;
	assert_false(pg_route_has_room(b, 1000, now_ms()));
	assert_int_equal(pg_route_room(&r, 0, 1000, now_ms(), NULL), PG_ROOM); /* the other one */
	maps.backends[2].waiting = 3;
	maps.backends[2].scraped_ms = now_ms();
	assert_int_equal(pg_route_room(&r, 0, 1000, now_ms(), NULL), PG_FULL);
	/* one of ours on 1 gives its first token: 1 no longer waits */
	pg_load_take(&r, 1, 100, &t, now_ns);
	pg_load_first(&r, 0, NULL, &t, now_ns + 1000000);
	assert_true(pg_route_has_room(b, 1000, now_ms()));
	/* an old report is not trusted: 2 is idle as far as is known */
	now_ns += (uint64_t)PG_WORK_FRESH_MS * 1000000;
	assert_true(pg_route_has_room(&maps.backends[2], 1000, now_ms()));
}

/* Under flow control the instance chosen has room, whatever the
 * strategy: PREFIX_AWARE's first ring candidate is passed over while it
 * has none (and taken when no one has any: load never fails a request). */
static void test_gate_every_strategy(void **state)
{
	struct pg_route_input in = {
	    .api = PG_API_RAW, .body = "hello world", .body_len = 11, .complete = true};
	struct pg_choice ch;
	struct pg_key key;
	uint16_t first, other, got;

	(void)state;
	first = pg_route_dry(&r, &in, NULL, 1, &key, &ch);
	assert_int_not_equal(first, 0);
	other = first == 1 ? 2 : 1;
	maps.state[0].flow_queue_ms = 100;
	maps.backends[first].waiting = 2;
	maps.backends[first].scraped_ms = now_ms();
	got = pg_route_dry(&r, &in, NULL, 1, &key, &ch);
	assert_int_equal(got, other);
	maps.backends[other].waiting = 2;
	maps.backends[other].scraped_ms = now_ms();
	got = pg_route_dry(&r, &in, NULL, 1, &key, &ch);
	assert_int_equal(got, first);
	maps.state[0].flow_queue_ms = 0;
}

/* A sheddable request's room is an instance with nothing queued, the
 * other classes' the pool's room: a sheddable request goes only to an
 * empty instance while one is, and waits while none is, where a critical
 * one still has room. */
static void test_room_sheddable(void **state)
{
	char text[64];
	struct pg_route_input in = {
	    .api = PG_API_RAW, .body = text, .complete = true, .prio = PG_PRIO_SHEDDABLE};
	struct pg_load_ticket t1 = {0}, t2 = {0};
	const uint32_t shed = pg_route_class_room(1000, PG_PRIO_SHEDDABLE),
	               crit = pg_route_class_room(1000, PG_PRIO_CRITICAL);
	struct pg_choice ch;
	struct pg_key key;

	(void)state;
	assert_int_equal(pg_route_class_room(1000, PG_PRIO_STANDARD), 1000);
	measured(&maps.backends[1]);
	measured(&maps.backends[2]);
	/* 100 tokens on 1: 10 ms of prefill, under a 1,000 ms room */
	pg_load_take(&r, 1, 100, &t1, now_ns);
	assert_true(pg_route_has_room(&maps.backends[1], 1000, now_ms()));
	maps.state[0].flow_queue_ms = 1000;
	for (unsigned k = 0; k < 16; k++) { /* wherever the ring puts it */
		in.body_len = (size_t)snprintf(text, sizeof(text), "prompt number %u", k);
		assert_int_equal(pg_route_dry(&r, &in, NULL, 1, &key, &ch), 2);
	}
	/* both busy: no room for a sheddable request, room for the others */
	pg_load_take(&r, 2, 100, &t2, now_ns);
	assert_int_equal(pg_route_room(&r, 0, shed, now_ms(), NULL), PG_FULL);
	assert_int_equal(pg_route_room(&r, 0, crit, now_ms(), NULL), PG_ROOM);
	/* room comes by time: 10 ms queued on each, at the measured speed */
	assert_int_equal(pg_route_room_in_ms(&r, 0, 1000, now_ms()), 0);
	assert_int_equal(pg_route_room_in_ms(&r, 0, 0, now_ms()), 11);
	now_ns += 11 * 1000000ull;
	assert_int_equal(pg_route_room(&r, 0, 0, now_ms(), NULL), PG_ROOM);
	/* an unmeasured speed drains nothing by time: an event must say */
	pg_load_take(&r, 1, 100, &t1, now_ns);
	pg_load_take(&r, 2, 100, &t2, now_ns);
	maps.backends[1].fit_rate = maps.backends[2].fit_rate = 0;
	assert_int_equal(pg_route_room_in_ms(&r, 0, 0, now_ms()), UINT32_MAX);
	maps.state[0].flow_queue_ms = 0;
}

/* A prompt of len - 1 characters, the same for the same seed. */
static void prompt(char *text, size_t len, unsigned seed)
{
	for (size_t i = 0; i + 1 < len; i++)
		text[i] = (char)('a' + (i * 7 + i / 13 + seed) % 26);
	text[len - 1] = 0;
}

/* CACHE_AWARE under flow control: an instance without room that holds
 * more of a standard request than its shared head stays a candidate (its
 * cost counts its queue; sent elsewhere, the prefill its cache saves would
 * be done again), while one that does not hold it is passed over; a
 * critical request goes only where there is room. */
static void test_gate_cache_holder(void **state)
{
	char held[4001], other_text[4001];
	struct pg_route_input in = {.api = PG_API_RAW,
	                            .body = held,
	                            .body_len = 4000,
	                            .complete = true,
	                            .prio = PG_PRIO_STANDARD};
	struct pg_load_ticket t = {0};
	struct pg_choice ch;
	struct pg_key key;
	uint16_t holder, other;

	(void)state;
	teardown(NULL);
	assert_int_equal(setup_n(2, PG_STRATEGY_CACHE_AWARE), 0);
	maps.state[0].ca_capacity_blocks = 1000;
	prompt(held, sizeof(held), 0);
	holder = pg_route_worker(&r, 0, &in, NULL, 1, &key, &ch); /* recorded there */
	assert_int_not_equal(holder, 0);
	other = holder == 1 ? 2 : 1;
	/* queued on the holder: past a 1 ms room, under a 1,000-token prefill */
	maps.state[0].flow_queue_ms = 1;
	pg_load_take(&r, holder, 100, &t, now_ns);
	assert_false(pg_route_has_room(&maps.backends[holder], 1, now_ms()));
	assert_true(pg_route_has_room(&maps.backends[other], 1, now_ms()));
	assert_int_equal(pg_route_dry(&r, &in, NULL, 1, &key, &ch), holder);
	assert_int_equal(ch.decision, PG_DEC_CACHED);
	in.prio = PG_PRIO_SHEDDABLE;
	assert_int_equal(pg_route_dry(&r, &in, NULL, 1, &key, &ch), holder);
	in.prio = PG_PRIO_CRITICAL;
	assert_int_equal(pg_route_dry(&r, &in, NULL, 1, &key, &ch), other);
	in.prio = PG_PRIO_STANDARD;
	/* prompts it does not hold go where there is room, wherever the ring
	 * puts them (within cache_aware's tie: else half go to the holder) */
	in.body = other_text;
	for (unsigned seed = 1; seed <= 16; seed++) {
		prompt(other_text, sizeof(other_text), seed);
		assert_int_equal(pg_route_dry(&r, &in, NULL, 1, &key, &ch), other);
	}
	maps.state[0].flow_queue_ms = 0;
}

/* A deadline below what the defaults predict: an instance whose speed is
 * not measured is tried, one request at a time; once measured, it is
 * judged on what was measured. */
static void test_deadline_explores(void **state)
{
	struct pg_backend *b;
	struct pg_key key = {.tokens = 100};
	struct pg_choice ch;
	struct pg_load_ticket t = {0};
	uint16_t id;

	(void)state;
	teardown(NULL);
	assert_int_equal(setup_n(1, PG_STRATEGY_LEAST_OUTSTANDING), 0);
	b = &maps.backends[1];
	/* the defaults predict 61.5 ms and more: past a 50 ms deadline */
	assert_true(PG_SPEED_OVERHEAD_DEFAULT > 50);
	id = pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch);
	assert_int_equal(id, 1);
	assert_false(ch.late);
	/* one is on its way: the next is judged on the defaults */
	pg_load_take(&r, 1, 100, &t, now_ns);
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 0);
	assert_true(ch.late);
	pg_load_drop(&r, &t);
	/* measured at 20 ms of overhead: the deadline is met */
	measured(b);
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 1);
	assert_false(ch.late);
	/* measured slower than the deadline: refused, explored no more */
	pg_work_publish_speed(b, &(struct pg_speed){80, 100, 0});
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 0);
	assert_true(ch.late);
}

/* A request sent to explore an instance, cut at its deadline (no first
 * token by then): nothing learned, and the instance is explored again only
 * PG_LOAD_EXPLORE_BACKOFF_MS later; a cut on a measured instance, or of a
 * slot's previous member, holds nothing back. */
static void test_cut_explore_backoff(void **state)
{
	struct pg_backend *b;
	struct pg_key key = {.tokens = 100};
	struct pg_choice ch;
	struct pg_load_ticket t = {0};
	const uint64_t ms = 1000000;
	uint64_t before;

	(void)state;
	teardown(NULL);
	assert_int_equal(setup_n(1, PG_STRATEGY_LEAST_OUTSTANDING), 0);
	b = &maps.backends[1];
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 1);
	pg_load_take(&r, 1, 100, &t, now_ns);
	now_ns += 50 * ms;
	pg_load_cut(&r, &t, now_ns / ms);
	assert_false(pg_load_pending(&t));
	assert_int_equal(b->prefill_reqs, 0);
	assert_false(pg_work_measured(b));
	/* judged on the defaults until the backoff is over */
	now_ns += (PG_LOAD_EXPLORE_BACKOFF_MS - 1) * ms;
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 0);
	assert_true(ch.late);
	now_ns += ms;
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 1);
	assert_false(ch.late);
	/* the slot's member changed meanwhile: the old one's cut is not its */
	before = b->explore_after_ms;
	pg_load_take(&r, 1, 100, &t, now_ns);
	b->epoch++;
	pg_load_cut(&r, &t, now_ns / ms);
	assert_int_equal(b->explore_after_ms, before);
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 1);
	/* measured: a cut leaves the judgement to what was measured */
	measured(b);
	pg_load_take(&r, 1, 100, &t, now_ns);
	pg_load_cut(&r, &t, now_ns / ms);
	assert_int_equal(b->explore_after_ms, before);
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 1);
}

/* Answers that do not stream, each sent to an idle instance no stream has
 * measured, bound its first tokens: once PG_FIT_OWN_MIN of them came within
 * 30 ms, a request with a 50 ms deadline goes there behind another (not
 * one at a time, to explore); answers of 200 ms bound nothing below it. */
static void test_answer_bound_deadline(void **state)
{
	struct pg_backend *b;
	struct pg_key key = {.tokens = 100};
	struct pg_load_ticket t = {0}, ahead = {0};
	struct pg_choice ch;
	const uint64_t ms = 1000000;

	(void)state;
	teardown(NULL);
	assert_int_equal(setup_n(1, PG_STRATEGY_LEAST_OUTSTANDING), 0);
	b = &maps.backends[1];
	assert_non_null(r.speeds = pg_speeds_new());
	for (unsigned i = 0; i < PG_FIT_OWN_MIN; i++) {
		assert_int_equal(b->bound_rate, 0);
		pg_load_take(&r, 1, 100, &t, now_ns);
		now_ns += 30 * ms;
		pg_load_answered(&r, &t, now_ns);
		pg_load_drop(&r, &t);
	}
	assert_int_not_equal(b->bound_rate, 0);
	assert_false(pg_work_measured(b));
	pg_load_take(&r, 1, 100, &ahead, now_ns);
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 1);
	assert_false(ch.late);
	/* a bound not measured within the deadline: the defaults judge it */
	pg_load_drop(&r, &ahead);
	pg_speeds_free(r.speeds);
	r.speeds = pg_speeds_new();
	b->bound_rate = 0;
	for (unsigned i = 0; i < PG_FIT_OWN_MIN; i++) {
		pg_load_take(&r, 1, 100, &t, now_ns);
		now_ns += 200 * ms;
		pg_load_answered(&r, &t, now_ns);
		pg_load_drop(&r, &t);
	}
	assert_int_not_equal(b->bound_rate, 0);
	pg_load_take(&r, 1, 100, &ahead, now_ns);
	assert_int_equal(pg_route_key(&r, 0, 0, &key, NULL, NULL, 1, 50, PG_PRIO_STANDARD, &ch), 0);
	assert_true(ch.late);
	pg_load_drop(&r, &ahead);
	pg_speeds_free(r.speeds);
	r.speeds = NULL;
}

/* An answer that does not stream: while its instance's speed is not
 * measured, its work stays queued until its head or
 * PG_LOAD_UNMEASURED_SLACK times its predicted first token (never at a
 * time predicted from the defaults alone); on a measured speed, until its
 * predicted first token. */
static void test_answer_keeps_its_work(void **state)
{
	struct pg_backend *b = &maps.backends[1];
	struct pg_load_ticket t = {0};
	const uint32_t seen = b->firsts;

	(void)state;
	pg_load_take(&r, 1, 2000, &t, now_ns);
	assert_false(t.measured);
	assert_false(pg_load_due(&r, &t, now_ms() + (uint64_t)t.w.pred_ms));
	assert_int_equal(b->prefill_reqs, 1);
	now_ns += 500000000;
	pg_load_answered(&r, &t, now_ns);
	assert_int_equal(b->prefill_reqs, 0);
	assert_int_equal(b->prefill_tokens, 0);
	assert_int_equal(b->firsts, seen + 1); /* seen to leave the engine's queue */
	assert_true(b->head_since_ms >= now_ms() - 62);
	assert_int_equal(t.head_ns, now_ns);
	/* no head in time: it leaves at the slack's end */
	pg_load_take(&r, 1, 2000, &t, now_ns);
	assert_false(pg_load_due(&r, &t, now_ms() + (uint64_t)t.w.pred_ms * 3));
	assert_true(
	    pg_load_due(&r, &t, now_ms() + (uint64_t)t.w.pred_ms * PG_LOAD_UNMEASURED_SLACK + 1));
	assert_int_equal(b->prefill_reqs, 0);
	/* measured: it leaves at its predicted first token */
	measured(b);
	pg_load_take(&r, 1, 2000, &t, now_ns);
	assert_true(t.measured);
	assert_false(pg_load_due(&r, &t, now_ms() + (uint64_t)t.w.pred_ms - 1));
	assert_true(pg_load_due(&r, &t, now_ms() + (uint64_t)t.w.pred_ms));
	assert_int_equal(b->prefill_reqs, 0);
	assert_int_equal(b->firsts, seen + 1); /* predicted, not seen */
}

/* On a speed not measured, an answer that does not stream leaves the queue
 * once its engine's report says it has begun it: of the 3 sent before the
 * report was asked for, with 1 waiting, the first 2 have begun; the third,
 * and those sent after (maybe not there when it reported), stay. */
static void test_answer_begun(void **state)
{
	struct pg_backend *b = &maps.backends[1];
	struct pg_load_ticket t[5] = {0};

	(void)state;
	for (int i = 0; i < 3; i++)
		pg_load_take(&r, 1, 2000, &t[i], now_ns);
	b->takes_at_scrape = b->takes; /* the scrape begins */
	pg_load_take(&r, 1, 2000, &t[3], now_ns);
	b->waiting = 1;
	b->scraped_ms = now_ms();
	b->firsts_at_scrape = b->firsts;
	pg_load_take(&r, 1, 2000, &t[4], now_ns);
	assert_true(pg_load_due(&r, &t[0], now_ms()));
	assert_true(pg_load_due(&r, &t[1], now_ms()));
	for (int i = 2; i < 5; i++)
		assert_false(pg_load_due(&r, &t[i], now_ms()));
	assert_int_equal(b->prefill_reqs, 3);
	/* a report no longer fresh says nothing (and the slack is not out) */
	b->waiting = 0;
	b->scraped_ms = now_ms() - PG_WORK_FRESH_MS;
	assert_false(pg_load_due(&r, &t[2], now_ms()));
	/* a fresh one with none waiting, asked for after all were sent */
	b->takes_at_scrape = b->takes;
	b->scraped_ms = now_ms();
	for (int i = 2; i < 5; i++)
		assert_true(pg_load_due(&r, &t[i], now_ms()));
	assert_int_equal(b->prefill_reqs, 0);
	assert_int_equal(b->prefill_tokens, 0);
	/* measured: the predicted first token alone decides */
	measured(b);
	pg_load_take(&r, 1, 2000, &t[0], now_ns);
	b->takes_at_scrape = b->takes;
	assert_false(pg_load_due(&r, &t[0], now_ms()));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_room_auto, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_room_engine_waiting, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gate_every_strategy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gate_cache_holder, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_room_sheddable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_deadline_explores, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cut_explore_backoff, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answer_bound_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answer_keeps_its_work, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answer_begun, setup, teardown),
	};

	return cmocka_run_group_tests_name("room", tests, NULL, NULL);
}
