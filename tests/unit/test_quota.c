// SPDX-License-Identifier: MIT
/*
 * Quotas (lib/quota.h): the sliding minute's buckets, requests and tokens
 * taken against their limits, a greedy client held to its limit minute
 * after minute, the fleet's peers counted, the headers and durations, the
 * values refused; usage accounting (lib/account.h): exact against
 * estimated figures and how requests end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/account.h"
#include "lib/etcd.h"
#include "lib/quota.h"
#include "state/flowctl.h"
#include "state/quotas.h"

/* A wall clock well past the epoch, at a minute's start. */
#define T0 (1800000000ull * 1000)

static void test_window(void **state)
{
	static struct pg_qwin w;
	(void)state;

	pg_qwin_add(&w, T0 / 1000, T0, 5);
	pg_qwin_add(&w, T0 / 1000 + 10, T0 + 10500, 3);
	assert_int_equal(pg_qwin_sum(&w, T0 + 10500), 8);
	assert_int_equal(pg_qwin_at(&w, T0 / 1000, T0 + 10500), 5);
	/* a bucket leaves the minute a minute after it began */
	assert_int_equal(pg_qwin_sum(&w, T0 + 59999), 8);
	assert_int_equal(pg_qwin_sum(&w, T0 + 60000), 3);
	assert_int_equal(pg_qwin_sum(&w, T0 + 70000), 0);
	/* a stale bucket is replaced, never added to */
	pg_qwin_add(&w, T0 / 1000 + 60, T0 + 60000, 2);
	assert_int_equal(pg_qwin_sum(&w, T0 + 60000), 5);
	/* taken back, never below 0; a second gone is not counted */
	pg_qwin_add(&w, T0 / 1000 + 60, T0 + 60000, -7);
	assert_int_equal(pg_qwin_at(&w, T0 / 1000 + 60, T0 + 60000), 0);
	pg_qwin_add(&w, T0 / 1000, T0 + 60000, 4);
	assert_int_equal(pg_qwin_sum(&w, T0 + 60000), 3);
	/* a second ahead (a peer's clock) counts now */
	pg_qwin_add(&w, T0 / 1000 + 100, T0 + 61000, 1);
	assert_int_equal(pg_qwin_at(&w, T0 / 1000 + 61, T0 + 61000), 1);
}

static void test_requests(void **state)
{
	static struct pg_quota_counts q;
	const struct pg_quota_lim lim = {{3, 0}};
	struct pg_quota_view v;
	(void)state;

	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(pg_quota_take(&q, &lim, T0 + 1000 * i + 500, &v), PG_QUOTA_OK);
		pg_quota_view(&q, &lim, T0 + 1000 * i + 500, &v);
		assert_int_equal(v.remaining[PG_QUOTA_REQUESTS], 2 - i);
	}
	/* the reset: when the last one counted leaves the minute */
	assert_int_equal(v.reset_ms[PG_QUOTA_REQUESTS], 60000 + 2000 - 2500);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 5000, &v), PG_QUOTA_OVER_REQUESTS);
	assert_int_equal(v.remaining[PG_QUOTA_REQUESTS], 0);
	/* one goes again when the oldest leaves: at T0 + 60 s */
	assert_int_equal(v.retry_ms, 55000);
	assert_int_equal(pg_quota_retry_after(v.retry_ms), 55);
	/* the refused one was not counted */
	assert_int_equal(pg_qwin_sum(&q.local[PG_QUOTA_REQUESTS], T0 + 5000), 3);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 60000, &v), PG_QUOTA_OK);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 60001, &v), PG_QUOTA_OVER_REQUESTS);
}

/* A client that sends whenever it may, for 3 minutes: N a minute, and no
 * more in any minute. */
static void test_greedy(void **state)
{
	static struct pg_quota_counts q;
	const struct pg_quota_lim lim = {{120, 0}};
	struct pg_quota_view v;
	unsigned got = 0, per[3] = {0};
	(void)state;

	for (uint64_t t = T0 + 250; t < T0 + 180000; t += 7) /* start mid-second */
		if (pg_quota_take(&q, &lim, t, &v) == PG_QUOTA_OK) {
			got++;
			per[(t - T0) / 60000]++;
		}
	assert_int_equal(got, 360);
	assert_int_equal(per[0], 120);
	assert_int_equal(per[1], 120);
	assert_int_equal(per[2], 120);
}

static void test_tokens(void **state)
{
	static struct pg_quota_counts q;
	const struct pg_quota_lim lim = {{0, 1000}};
	struct pg_quota_view v;
	(void)state;

	assert_int_equal(pg_quota_take(&q, &lim, T0, &v), PG_QUOTA_OK);
	pg_quota_view(&q, &lim, T0, &v);
	assert_int_equal(v.remaining[PG_QUOTA_TOKENS], 1000);
	pg_quota_charge(&q, 600, T0);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 2000, &v), PG_QUOTA_OK);
	pg_quota_view(&q, &lim, T0 + 2000, &v);
	assert_int_equal(v.remaining[PG_QUOTA_TOKENS], 400);
	/* one request may overshoot by its own tokens, once */
	pg_quota_charge(&q, 700, T0 + 2000);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 3000, &v), PG_QUOTA_OVER_TOKENS);
	assert_int_equal(v.remaining[PG_QUOTA_TOKENS], 0);
	/* below the limit again once the first 600 leave: at T0 + 60 s */
	assert_int_equal(v.retry_ms, 57000);
	assert_int_equal(v.reset_ms[PG_QUOTA_TOKENS], 59000);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 60000, &v), PG_QUOTA_OK);
	/* no request limit: no request header figures */
	assert_int_equal(v.lim.max[PG_QUOTA_REQUESTS], 0);
}

/* The fleet's others' counts are checked with this gateway's own. */
static void test_peers(void **state)
{
	static struct pg_quota_counts q;
	const struct pg_quota_lim lim = {{10, 0}};
	struct pg_quota_view v;
	(void)state;

	pg_qwin_add(&q.peer[PG_QUOTA_REQUESTS], T0 / 1000, T0, 9);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 1000, &v), PG_QUOTA_OK);
	pg_quota_view(&q, &lim, T0 + 1000, &v);
	assert_int_equal(v.remaining[PG_QUOTA_REQUESTS], 0);
	assert_int_equal(pg_quota_take(&q, &lim, T0 + 1000, &v), PG_QUOTA_OVER_REQUESTS);
	/* the peers' 9 leave first */
	assert_int_equal(v.retry_ms, 59000);
}

static void test_headers(void **state)
{
	static struct pg_quota_counts q;
	const struct pg_quota_lim lim = {{60, 150000}};
	struct pg_quota_view v;
	char h[512], small[80];
	(void)state;

	pg_quota_take(&q, &lim, T0 + 400, &v);
	pg_quota_charge(&q, 16, T0 + 400);
	pg_quota_view(&q, &lim, T0 + 400, &v);
	pg_quota_headers(&v, h, sizeof(h));
	assert_string_equal(h, "x-ratelimit-limit-requests: 60\r\n"
	                       "x-ratelimit-remaining-requests: 59\r\n"
	                       "x-ratelimit-reset-requests: 59.6s\r\n"
	                       "x-ratelimit-limit-tokens: 150000\r\n"
	                       "x-ratelimit-remaining-tokens: 149984\r\n"
	                       "x-ratelimit-reset-tokens: 59.6s\r\n");
	/* never half a header */
	assert_int_equal(pg_quota_headers(&v, small, sizeof(small)), 0);
	assert_string_equal(small, "");
	/* nothing counted: the reset is now */
	memset(&q, 0, sizeof(q));
	pg_quota_view(&q, &(struct pg_quota_lim){{5, 0}}, T0, &v);
	pg_quota_headers(&v, h, sizeof(h));
	assert_string_equal(h, "x-ratelimit-limit-requests: 5\r\n"
	                       "x-ratelimit-remaining-requests: 5\r\n"
	                       "x-ratelimit-reset-requests: 0ms\r\n");
}

static void test_durations(void **state)
{
	static const struct {
		uint64_t ms;
		const char *s;
	} t[] = {{0, "0ms"},      {20, "20ms"},       {999, "999ms"},
	         {1000, "1s"},    {6500, "6.5s"},     {59001, "59.001s"},
	         {60000, "1m0s"}, {61250, "1m1.25s"}, {360000, "6m0s"}};
	char b[32];
	(void)state;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		pg_quota_duration(t[i].ms, b, sizeof(b));
		assert_string_equal(b, t[i].s);
	}
	assert_int_equal(pg_quota_retry_after(0), 1);
	assert_int_equal(pg_quota_retry_after(1001), 2);
	assert_int_equal(pg_quota_retry_after(600000), 60);
}

static void test_values(void **state)
{
	static const char *const bad[] = {
	    "",        "rpm",         "rpm=",     "rpm=-1",   "rpm=1.5",        "rpm=1e3",
	    "rpm=10,", "rpm=1,rpm=2", "rps=10",   "weight=2", "rpm=1000000001", "tpm=99999999999",
	    " rpm=1",  "rpm= 1",      "tpm=0x10",
	};
	struct pg_quota_lim lim = {{7, 8}};
	char err[160];
	uint32_t v;
	(void)state;

	assert_int_equal(pg_quota_spec("rpm=60,tpm=100000", 17, &lim, err, sizeof(err)), 0);
	assert_int_equal(lim.max[PG_QUOTA_REQUESTS], 60);
	assert_int_equal(lim.max[PG_QUOTA_TOKENS], 100000);
	assert_int_equal(pg_quota_spec("tpm=0", 5, &lim, err, sizeof(err)), 0);
	assert_int_equal(lim.max[PG_QUOTA_TOKENS], 0);
	assert_int_equal(lim.max[PG_QUOTA_REQUESTS], 60);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct pg_quota_lim before = lim;

		err[0] = 0;
		assert_int_equal(pg_quota_spec(bad[i], strlen(bad[i]), &lim, err, sizeof(err)), -1);
		assert_true(err[0]);
		assert_memory_equal(&before, &lim, sizeof(lim)); /* untouched */
	}
	assert_int_equal(pg_quota_value("1000000000", 10, &v), 0);
	assert_int_equal(v, PG_QUOTA_MAX);
	assert_int_equal(pg_quota_value("1000000001", 10, &v), -1);
	assert_int_equal(pg_quota_key("tpm", 3), PG_QUOTA_TOKENS);
	assert_int_equal(pg_quota_key("rp", 2), -1);
}

/* A quota as JSON: the admin API's and etcd's. */
static void test_json(void **state)
{
	static const char *const bad[] = {
	    "",
	    "[1]",
	    "{\"rps\":1}",
	    "{\"rpm\":-1}",
	    "{\"rpm\":1.5}",
	    "{\"tpm\":\"10\"}",
	    "{\"rpm\":1,\"rpm\":2}",
	    "{\"tpm\":1000000001}",
	};
	static const char J1[] = "{\"rpm\":5,\"tpm\":null}";
	struct pg_quota_lim lim = {{9, 9}};
	uint8_t set = 9;
	char err[160];
	(void)state;

	assert_int_equal(pg_quota_json(J1, strlen(J1), &lim, &set, err, sizeof(err)), 0);
	assert_int_equal(lim.max[PG_QUOTA_REQUESTS], 5);
	assert_int_equal(set, 1u << PG_QUOTA_REQUESTS);
	assert_int_equal(pg_quota_json("{}", 2, &lim, &set, err, sizeof(err)), 0);
	assert_int_equal(set, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		set = 7;
		assert_int_equal(
		    pg_quota_json(bad[i], strlen(bad[i]), &lim, &set, err, sizeof(err)), -1);
		assert_true(err[0] && set == 7);
	}
}

static void put(struct pg_etcd_view *v, const char *key, const char *val)
{
	assert_int_equal(pg_etcd_view_set(v, key, val, strlen(val)), 0);
}

/* The limits in force: the file's, then etcd's over them key by key;
 * a reload keeps etcd's; a bad etcd value is told and not applied. */
static void test_in_force(void **state)
{
	static struct pg_flowctl f;
	static struct pg_flow_cfg fc;
	struct pg_etcd_view v = {0};
	struct pg_quota_lim lim;
	struct pg_quotas *q;
	char err[200] = "";
	unsigned a, b;
	(void)state;

	fc.quota.max[PG_QUOTA_TOKENS] = 1000;
	fc.ntenants = 1;
	strcpy(fc.tenants[0].name, "team-a");
	fc.tenants[0].quota = (struct pg_quota_lim){{7, 0}};
	fc.tenants[0].quota_set = 1;
	q = pg_quotas_new(&fc, &f);
	assert_non_null(q);
	assert_true(q->on);
	a = pg_flow_tenant(&f.tenants, pg_flow_label("team-a", 6, false, err), "team-a");
	pg_quotas_lim(q, a, &lim);
	assert_true(lim.max[0] == 7 && lim.max[1] == 1000);
	put(&v, "config/quota", "{\"rpm\":50}");
	put(&v, "tenants/team-a", "{\"tpm\":10}");
	put(&v, "tenants/team-b", "{\"rpm\":0,\"tpm\":0}");
	put(&v, "tenants/a b", "{\"rpm\":1}");
	put(&v, "tenants/team-c", "{\"rpm\":\"x\"}");
	assert_int_equal(pg_quotas_etcd(q, &f, &fc, &v, err, sizeof(err)), 2);
	assert_non_null(strstr(err, "tenants/a b"));
	pg_quotas_lim(q, a, &lim);
	assert_true(lim.max[0] == 7 && lim.max[1] == 10); /* the file's rpm, etcd's tpm */
	b = pg_flow_tenant(&f.tenants, pg_flow_label("team-b", 6, false, err), "team-b");
	pg_quotas_lim(q, b, &lim);
	assert_true(lim.max[0] == 0 && lim.max[1] == 0); /* its own: none */
	pg_quotas_lim(q, 0, &lim);
	assert_true(lim.max[0] == 50 && lim.max[1] == 1000); /* the default, etcd's rpm */
	fc.tenants[0].quota.max[0] = 8;                      /* a reload: etcd's stay laid over */
	pg_quotas_apply(q, &f, &fc);
	pg_quotas_lim(q, a, &lim);
	assert_true(lim.max[0] == 8 && lim.max[1] == 10);
	pg_etcd_view_free(&v);
	pg_quotas_free(q);
}

static void test_accounting(void **state)
{
	const struct pg_use_est est = {.prompt = 100, .cached = 40, .completion = 256};
	struct pg_usage u = {0};
	struct pg_account a = {0};
	struct pg_use use;
	(void)state;

	/* nothing seen: every figure estimated */
	pg_use_of(NULL, &est, &use);
	assert_int_equal(use.exact, 0);
	assert_int_equal(use.n[PG_ACCT_COMPLETION], 256);
	/* a non-streamed answer's usage: exact */
	u = (struct pg_usage){.have = PG_USAGE_PROMPT | PG_USAGE_COMPLETION | PG_USAGE_OBJECT |
	                              PG_USAGE_CACHED,
	                      .prompt_tokens = 120,
	                      .cached_tokens = 96,
	                      .completion_tokens = 9};
	pg_use_of(&u, &est, &use);
	assert_int_equal(use.exact, 7);
	assert_int_equal(use.n[PG_ACCT_PROMPT], 120);
	assert_int_equal(use.n[PG_ACCT_CACHED], 96);
	/* a stream without usage: its content events, estimated */
	u = (struct pg_usage){.have = PG_USAGE_COUNTED, .events = 17};
	pg_use_of(&u, &est, &use);
	assert_int_equal(use.exact, 0);
	assert_int_equal(use.n[PG_ACCT_COMPLETION], 17);
	/* cached never above prompt */
	u = (struct pg_usage){.have = PG_USAGE_PROMPT, .prompt_tokens = 10};
	pg_use_of(&u, &est, &use);
	assert_int_equal(use.exact, 1);
	assert_int_equal(use.n[PG_ACCT_CACHED], 10);

	pg_account_add(&a, PG_ACCT_ANSWERED, &use);
	pg_account_add(&a, pg_acct_end_of(429, false), NULL);
	pg_account_add(&a, pg_acct_end_of(200, true), NULL);
	pg_account_add(&a, pg_acct_end_of(502, false), NULL);
	assert_int_equal(a.requests, 4);
	assert_int_equal(a.throttled, 1);
	assert_int_equal(a.errors, 2);
	assert_int_equal(a.tokens[PG_ACCT_PROMPT][0], 10);
	assert_int_equal(a.tokens[PG_ACCT_CACHED][1], 10);
	assert_int_equal(a.tokens[PG_ACCT_COMPLETION][1], 256);
	assert_string_equal(pg_acct_fig_names[PG_ACCT_CACHED], "cached_tokens");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_window),     cmocka_unit_test(test_requests),
	    cmocka_unit_test(test_greedy),     cmocka_unit_test(test_tokens),
	    cmocka_unit_test(test_peers),      cmocka_unit_test(test_headers),
	    cmocka_unit_test(test_durations),  cmocka_unit_test(test_values),
	    cmocka_unit_test(test_json),       cmocka_unit_test(test_in_force),
	    cmocka_unit_test(test_accounting),
	};

	return cmocka_run_group_tests_name("quota", tests, NULL, NULL);
}
