// SPDX-License-Identifier: MIT
/*
 * A configuration written back (pg_config_render, GET /config) keeps
 * what each pool set apart from what it inherits: a file saved from it,
 * then edited at the top, gives every pool what the same edit of the
 * hand-written file gives; a pool's live routing (PUT /routing) is
 * written as its own.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/config.h"
#include "lib/buf.h"
#include "lib/conf.h"

static int parse(struct pg_config *cfg, const char *text)
{
	static char *none[] = {"prefixgate", NULL};
	struct pg_conf_errs e = {0};
	int rc = pg_config_parse_text(cfg, "t.conf", text, strlen(text), 1, none, &e);

	pg_conf_errs_free(&e);
	return rc;
}

/* text written back (live: each pool's routing as it runs, or NULL), NUL
 * terminated, into out. */
static void render(const char *text, const struct pg_route_cfg *live, struct pg_buf *out)
{
	struct pg_config cfg;

	assert_int_equal(parse(&cfg, text), 0);
	pg_buf_reset(out);
	pg_config_render(&cfg, live, out);
	pg_buf_append(out, "", 1);
	pg_config_free(&cfg);
}

static char *joined(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);

	assert_non_null(s);
	memcpy(s, a, la);
	memcpy(s + la, b, lb + 1);
	return s;
}

static void same_routing(const struct pg_config *want, const struct pg_config *got,
                         const char *what)
{
	assert_int_equal(want->pools.n, got->pools.n);
	for (unsigned p = 0; p < want->pools.n; p++) {
		const struct pg_route_cfg *w = &want->pools.pool[p].route,
		                          *g = &got->pools.pool[p].route;

		if (w->strategy != g->strategy || w->prefix_length != g->prefix_length ||
		    w->concurrency_threshold != g->concurrency_threshold ||
		    w->new_choices != g->new_choices || w->flow_queue_ms != g->flow_queue_ms ||
		    w->flow_deadline_ms != g->flow_deadline_ms)
			fail_msg("%s: pool %s: strategy %d/%d prefix %u/%u threshold %u/%u choices "
			         "%u/%u queue %u/%u deadline %u/%u (written/saved)",
			         what, want->pools.pool[p].name, w->strategy, g->strategy,
			         w->prefix_length, g->prefix_length, w->concurrency_threshold,
			         g->concurrency_threshold, w->new_choices, g->new_choices,
			         w->flow_queue_ms, g->flow_queue_ms, w->flow_deadline_ms,
			         g->flow_deadline_ms);
	}
}

/* Saved, then edited at the top: as the hand-written file so edited. */
static void test_saved_then_edited(void **state)
{
	static const char *const texts[] = {
	    "pool a { model x; backend 10.0.0.2:80; }\n",
	    "pool a { model x; prefix-length 2048; flow-control; }\n"
	    "pool b { model y; strategy random; flow-deadline-ms 900; }\n",
	    "strategy cache_aware;\n"
	    "pool default { backend 10.0.0.3:80; concurrency-threshold 3; }\n"
	    "pool a { model x; }\n",
	    "flow-control;\npool a { model x; flow-instance-queue-ms 80; }\npool b { model y; }\n",
	    "pool a { model x; flow-control off; }\npool b { model y; }\n",
	    "pool chat { model m; pd vllm; prefill 10.0.0.4:80; decode 10.0.0.6:80; }\n",
	};
	static const char *const edits[] = {
	    "flow-control;\n",
	    "flow-instance-queue-ms 70;\n",
	    "prefix-length 8192;\n",
	    "strategy random;\n",
	    "concurrency-threshold 7;\n",
	    "flow-deadline-ms 500;\n",
	    "new-conversation-choices 4;\n",
	};
	struct pg_buf saved = {0};

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		render(texts[i], NULL, &saved);
		for (size_t e = 0; e < sizeof(edits) / sizeof(edits[0]); e++) {
			char *hand = joined(texts[i], edits[e]), *kept = joined(saved.p, edits[e]);
			struct pg_config want, got;
			char what[64];

			snprintf(what, sizeof(what), "text %zu + %.*s", i,
			         (int)strlen(edits[e]) - 1, edits[e]);
			if (parse(&want, hand) == 0) {
				if (parse(&got, kept))
					fail_msg("%s: saved as\n%s\ndoes not read back", what,
					         saved.p);
				same_routing(&want, &got, what);
				pg_config_free(&got);
				pg_config_free(&want);
			}
			free(hand);
			free(kept);
		}
	}
	/* what a pool inherits is not written in its block */
	render(texts[0], NULL, &saved);
	if (strstr(saved.p, "flow-instance-queue-ms") || strstr(saved.p, "    prefix-length"))
		fail_msg("inherited values written:\n%s", saved.p);
	pg_buf_free(&saved);
}

/* A pool's live routing, changed by PUT /routing, is its own once saved. */
static void test_live_is_own(void **state)
{
	static const char text[] = "pool a { model x; }\npool b { model y; }\n";
	struct pg_route_cfg live[PG_MAX_POOLS];
	struct pg_buf saved = {0};
	struct pg_config cfg;
	char *edited;

	(void)state;
	assert_int_equal(parse(&cfg, text), 0);
	for (unsigned p = 0; p < cfg.pools.n; p++)
		live[p] = cfg.pools.pool[p].route;
	live[1].concurrency_threshold = 12;
	live[1].strategy = PG_STRATEGY_RANDOM;
	pg_config_render(&cfg, live, &saved);
	pg_buf_append(&saved, "", 1);
	pg_config_free(&cfg);
	edited =
	    joined(saved.p, "concurrency-threshold 7;\nstrategy least_outstanding_requests;\n");
	assert_int_equal(parse(&cfg, edited), 0);
	assert_int_equal(cfg.pools.pool[1].route.concurrency_threshold, 12);
	assert_int_equal(cfg.pools.pool[1].route.strategy, PG_STRATEGY_RANDOM);
	assert_int_equal(cfg.pools.pool[2].route.concurrency_threshold, 7);
	assert_int_equal(cfg.pools.pool[2].route.strategy, PG_STRATEGY_LEAST_OUTSTANDING);
	pg_config_free(&cfg);
	free(edited);
	pg_buf_free(&saved);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_saved_then_edited),
	    cmocka_unit_test(test_live_is_own),
	};

	return cmocka_run_group_tests_name("config_render", tests, NULL, NULL);
}
