// SPDX-License-Identifier: MIT
/*
 * Prefill/decode disaggregation's --pool keys (config_pd.c): the pool's
 * prefill members, its decode set, the protocol, bootstrap ports, and what
 * is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "config/config.h"
#include "config_args.h"
#include "lib/pd.h"

/* pg_config_parse of args, what it prints dropped */
static int run(struct pg_config *cfg, const char *const *args, char *err, size_t errlen)
{
	char text[64];

	return config_args_parse(cfg, args, err, errlen, text, sizeof(text));
}

static void test_pools(void **state)
{
	struct pg_config cfg;
	const struct pg_pool_cfg *chat, *dec;
	char err[256];

	(void)state;
	assert_int_equal(run(&cfg,
	                     ARGS("--no-bpf", "--pool", "chat:model=m", "--pool", "chat:pd=sglang",
	                          "--pool", "chat:prefill=10.0.0.1:8000@9001,10.0.0.2:8000",
	                          "--pool", "chat:bootstrap-port=8998", "--pool",
	                          "chat:decode=10.0.0.3:8000,10.0.0.4:8000", "--pool",
	                          "chat:pd-min-tokens=1000"),
	                     err, sizeof(err)),
	                 0);
	assert_int_equal(cfg.pools.n, 3);
	chat = &cfg.pools.pool[1];
	dec = &cfg.pools.pool[2];
	assert_string_equal(chat->name, "chat");
	assert_int_equal(chat->pd, PG_PD_SGLANG);
	assert_int_equal(chat->decode, 2);
	assert_int_equal(chat->nbackends, 2);
	assert_int_equal(chat->pd_min_tokens, 1000);
	assert_int_equal(chat->bootstrap_port, 8998);
	assert_int_equal(chat->nbootstraps, 1);
	assert_string_equal(chat->bootstraps[0].addr, "10.0.0.1:8000");
	assert_int_equal(chat->bootstraps[0].port, 9001);
	assert_string_equal(dec->name, "chat-decode");
	assert_true(dec->decode_set);
	assert_int_equal(dec->prefill, 1);
	assert_int_equal(dec->nbackends, 2);
	/* a decode set is chosen in by cache_aware unless told otherwise */
	assert_int_equal(dec->route.strategy, PG_STRATEGY_CACHE_AWARE);
	pg_config_free(&cfg);
	assert_int_equal(
	    run(&cfg,
	        ARGS("--no-bpf", "--pool", "chat:model=m", "--pool", "chat:pd=vllm", "--pool",
	             "chat:prefill=10.0.0.1:8000", "--pool", "chat:decode=10.0.0.3:8000", "--pool",
	             "chat-decode:strategy=least_outstanding_requests"),
	        err, sizeof(err)),
	    0);
	assert_int_equal(cfg.pools.pool[1].pd_min_tokens, PG_PD_MIN_TOKENS_DEFAULT);
	assert_int_equal(cfg.pools.pool[2].route.strategy, PG_STRATEGY_LEAST_OUTSTANDING);
	pg_config_free(&cfg);
}

static void test_refused(void **state)
{
	static const struct {
		const char *args[10];
		const char *err;
	} cases[] = {
	    {{"--pool", "chat:model=m", "--pool", "chat:pd=nixl"},
	     "--pool chat: pd=nixl: the protocol is vllm or sglang"},
	    {{"--pool", "chat:model=m", "--pool", "chat:pd=vllm"},
	     "--pool chat: pd=vllm needs its decode instances (decode=ADDR,...)"},
	    {{"--pool", "chat:model=m", "--pool", "chat:decode=10.0.0.3:8000"},
	     "--pool chat: decode= needs the protocol (pd=vllm or pd=sglang)"},
	    {{"--pool", "chat:model=m", "--pool", "chat:pd=sglang", "--pool",
	      "chat:prefill=10.0.0.1:1", "--pool", "chat:decode=10.0.0.3:1"},
	     "--pool chat: pd=sglang needs each prefill instance's bootstrap port "
	     "(prefill=ADDR@PORT, or bootstrap-port=PORT for all)"},
	    {{"--pool", "chat:model=m", "--pool", "chat:pd=vllm", "--pool",
	      "chat:prefill=10.0.0.1:1@5", "--pool", "chat:decode=10.0.0.3:1"},
	     "--pool chat: bootstrap ports are SGLang's (pd=sglang)"},
	    {{"--pool", "chat:model=m", "--pool", "chat:prefill=10.0.0.1:1@0"},
	     "--pool chat: prefill=10.0.0.1:1@0: @PORT is its bootstrap port, 1-65535"},
	    {{"--pool", "chat:model=m", "--pool", "chat:pd-min-tokens=x"},
	     "--pool chat: pd-min-tokens=x: expected 0-1000000000 tokens"},
	    {{"--pool", "chat:model=m", "--pool", "chat:pd=vllm", "--pool",
	      "chat:decode=10.0.0.3:1", "--pool", "chat-decode:decode=10.0.0.4:1"},
	     "--pool chat-decode: decode: pool chat-decode is a decode set"},
	};
	struct pg_config cfg;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = run(&cfg, cases[i].args, err, sizeof(err));

		if (rc != 2 || strcmp(err, cases[i].err))
			fail_msg("case %zu: rc %d err \"%s\", expected \"%s\"", i, rc, err,
			         cases[i].err);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pools),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
