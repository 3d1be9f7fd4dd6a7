// SPDX-License-Identifier: MIT
/*
 * The pure etcd parts (lib/etcd.h): base64, request bodies, the JSON
 * gateway's answers as etcd 3.4 writes them (int64s as strings, base64 keys
 * and values, watch lines wrapped in "result"), the view's decisions, what
 * the gateway routes on, and the state file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "lib/etcd.h"

#define P "/pg/"

static char *b64(const char *s)
{
	struct pg_buf b = {0};

	pg_b64_encode(&b, s, strlen(s));
	pg_buf_printf(&b, "%s", ""); /* NUL-terminates */
	return b.p;
}

static void test_base64(void **state)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const enc[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
	                                  "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	char out[16];
	size_t n;

	(void)state;
	for (size_t i = 0; i < 7; i++) {
		char *e = b64(plain[i]);

		assert_string_equal(e ? e : "", enc[i]);
		assert_int_equal(pg_b64_decode(enc[i], strlen(enc[i]), out, &n), 0);
		assert_int_equal(n, strlen(plain[i]));
		assert_memory_equal(out, plain[i], n);
		free(e);
	}
	assert_int_equal(pg_b64_decode("Zm9", 3, out, &n), -1);  /* not a multiple of 4 */
	assert_int_equal(pg_b64_decode("Zm=v", 4, out, &n), -1); /* padding inside */
	assert_int_equal(pg_b64_decode("Zm9*", 4, out, &n), -1); /* outside the alphabet */
	assert_int_equal(pg_b64_decode("Zg==Zg==", 8, out, &n), -1);
}

static void test_bodies(void **state)
{
	struct pg_buf b = {0};

	(void)state;
	/* "/pg/" -> range_end "/pg0": the prefix with its last byte + 1 */
	pg_etcd_body_range(&b, P, true, false, false);
	pg_buf_printf(&b, "%s", ""); /* NUL-terminates */
	assert_string_equal(b.p, "{\"key\":\"L3BnLw==\",\"range_end\":\"L3BnMA==\"}");
	pg_buf_reset(&b);
	pg_etcd_body_range(&b, "k", false, true, true);
	pg_buf_printf(&b, "%s", ""); /* NUL-terminates */
	assert_string_equal(b.p, "{\"key\":\"aw==\",\"serializable\":true,\"count_only\":true}");
	pg_buf_reset(&b);
	pg_etcd_body_put(&b, "k", "v", 1, 7587869324812345678);
	pg_buf_printf(&b, "%s", ""); /* NUL-terminates */
	assert_string_equal(
	    b.p, "{\"key\":\"aw==\",\"value\":\"dg==\",\"lease\":\"7587869324812345678\"}");
	pg_buf_reset(&b);
	pg_etcd_body_watch(&b, P, 42);
	pg_buf_printf(&b, "%s", ""); /* NUL-terminates */
	assert_string_equal(b.p,
	                    "{\"create_request\":{\"key\":\"L3BnLw==\",\"range_end\":\"L3BnMA==\","
	                    "\"start_revision\":\"42\",\"progress_notify\":true}}");
	pg_buf_reset(&b);
	pg_etcd_body_lease_grant(&b, 5);
	pg_buf_printf(&b, "%s", ""); /* NUL-terminates */
	assert_string_equal(b.p, "{\"TTL\":\"5\"}");
	pg_buf_reset(&b);
	pg_etcd_body_auth(&b, "root", "p\"w");
	pg_buf_printf(&b, "%s", ""); /* NUL-terminates */
	assert_string_equal(b.p, "{\"name\":\"root\",\"password\":\"p\\\"w\"}");
	pg_buf_free(&b);
}

/* A range answer as etcd 3.4 writes it. */
static const char range_answer[] =
    "{\"header\":{\"cluster_id\":\"15118495548433857066\",\"member_id\":\"1\",\"revision\":\"4\","
    "\"raft_term\":\"2\"},\"kvs\":[{\"key\":\"L3BnL2JhY2tlbmRzL2E=\",\"create_revision\":\"2\","
    "\"mod_revision\":\"2\",\"version\":\"1\",\"value\":"
    "\"eyJhZGRyZXNzIjoiMTI3LjAuMC4xOjcwMDEiLCJzdGF0ZSI6ImFjdGl2ZSJ9\"},"
    "{\"key\":\"L3BnL2NvbmZpZy9yb3V0aW5n\",\"mod_revision\":\"3\",\"value\":\"e30=\"},"
    "{\"key\":\"L3BnL2dhdGV3YXlzL2cx\",\"mod_revision\":\"4\",\"value\":\"e30=\"}],"
    "\"count\":\"3\"}";

static void test_parse_range(void **state)
{
	struct pg_etcd_resp r;
	struct pg_etcd_view v = {0};
	char err[128];

	(void)state;
	assert_int_equal(pg_etcd_parse(range_answer, strlen(range_answer), &r, err, sizeof(err)),
	                 0);
	assert_int_equal(r.revision, 4);
	assert_int_equal(r.count, 3);
	assert_int_equal(r.nkv, 3);
	assert_string_equal(r.kv[0].key, "/pg/backends/a");
	assert_string_equal(r.kv[0].val, "{\"address\":\"127.0.0.1:7001\",\"state\":\"active\"}");
	assert_int_equal(r.kv[0].mod_revision, 2);
	assert_int_equal(pg_etcd_view_from_range(&v, P, &r, err, sizeof(err)), 0);
	assert_int_equal(v.revision, 4);
	assert_int_equal(v.n, 2); /* gateways/ is not part of the view */
	assert_non_null(pg_etcd_view_get(&v, "backends/a"));
	assert_string_equal(pg_etcd_view_get(&v, "config/routing")->val, "{}");
	pg_etcd_resp_free(&r);
	pg_etcd_view_free(&v);
}

static void test_parse_errors_and_leases(void **state)
{
	static const char unary[] = "{\"error\":\"etcdserver: mvcc: required revision has been "
	                            "compacted\",\"code\":11,\"message\":\"etcdserver: mvcc: "
	                            "required revision has been compacted\"}";
	static const char stream[] = "{\"error\":{\"grpc_code\":16,\"http_code\":401,\"message\":"
	                             "\"etcdserver: invalid auth token\",\"http_status\":"
	                             "\"Unauthorized\"}}";
	static const char grant[] =
	    "{\"header\":{\"revision\":\"9\"},\"ID\":\"7587869324812345678\","
	    "\"TTL\":\"3\"}";
	static const char keep[] = "{\"result\":{\"header\":{\"revision\":\"9\"},\"ID\":"
	                           "\"7587869324812345678\",\"TTL\":\"3\"}}";
	struct pg_etcd_resp r;
	struct pg_etcd_view v = {0};
	char err[128];

	(void)state;
	assert_int_equal(pg_etcd_parse(unary, strlen(unary), &r, err, sizeof(err)), 0);
	assert_int_equal(r.code, PG_ETCD_CODE_COMPACTED);
	assert_non_null(strstr(r.error, "compacted"));
	/* an error answer never replaces the view */
	assert_int_equal(pg_etcd_view_from_range(&v, P, &r, err, sizeof(err)), -1);
	pg_etcd_resp_free(&r);
	assert_int_equal(pg_etcd_parse(stream, strlen(stream), &r, err, sizeof(err)), 0);
	assert_int_equal(r.code, PG_ETCD_CODE_UNAUTH);
	assert_string_equal(r.error, "etcdserver: invalid auth token");
	pg_etcd_resp_free(&r);
	for (int i = 0; i < 2; i++) {
		const char *s = i ? keep : grant;

		assert_int_equal(pg_etcd_parse(s, strlen(s), &r, err, sizeof(err)), 0);
		assert_true(r.lease_id == 7587869324812345678);
		assert_int_equal(r.ttl, 3);
		pg_etcd_resp_free(&r);
	}
	assert_int_equal(pg_etcd_parse("[1]", 3, &r, err, sizeof(err)), -1);
	assert_int_equal(pg_etcd_parse("{\"kvs\":[{\"key\":\"!!\"}]}", 22, &r, err, sizeof(err)),
	                 -1);
	assert_int_equal(
	    pg_etcd_parse("{\"header\":{\"revision\":\"x\"}}", 27, &r, err, sizeof(err)), -1);
}

/* One watch line with events; put events have no "type". */
static void line(struct pg_etcd_resp *r, const char *s)
{
	char err[128];

	assert_int_equal(pg_etcd_parse(s, strlen(s), r, err, sizeof(err)), 0);
}

static void test_watch_steps(void **state)
{
	struct pg_etcd_view v = {.revision = 4};
	struct pg_etcd_resp r;
	char *k = b64("/pg/backends/b"), *val = b64("{\"address\":\"127.0.0.1:7002\"}");
	char buf[512];

	(void)state;
	/* created, with the store already at 5: the event at 5 follows and must
	 * not be taken for a replay */
	line(&r, "{\"result\":{\"header\":{\"revision\":\"5\"},\"created\":true}}");
	assert_true(r.created);
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_NOTHING);
	assert_int_equal(v.revision, 4);
	pg_etcd_resp_free(&r);
	snprintf(buf, sizeof(buf),
	         "{\"result\":{\"header\":{\"revision\":\"5\"},\"events\":[{\"kv\":{\"key\":\"%s\","
	         "\"create_revision\":\"5\",\"mod_revision\":\"5\",\"version\":\"1\",\"value\":"
	         "\"%s\"}}]}}",
	         k, val);
	line(&r, buf);
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_CHANGED);
	assert_int_equal(v.revision, 5);
	assert_non_null(pg_etcd_view_get(&v, "backends/b"));
	/* the same event again (a watch resumed too early) is a replay */
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_NOTHING);
	pg_etcd_resp_free(&r);
	/* a lease expiry: a DELETE */
	snprintf(buf, sizeof(buf),
	         "{\"result\":{\"header\":{\"revision\":\"6\"},\"events\":[{\"type\":\"DELETE\","
	         "\"kv\":{\"key\":\"%s\",\"mod_revision\":\"6\"}}]}}",
	         k);
	line(&r, buf);
	assert_true(r.kv[0].deleted);
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_CHANGED);
	assert_null(pg_etcd_view_get(&v, "backends/b"));
	pg_etcd_resp_free(&r);
	/* a gateway's record changes nothing that routes */
	free(k);
	k = b64("/pg/gateways/g1");
	snprintf(buf, sizeof(buf),
	         "{\"result\":{\"header\":{\"revision\":\"7\"},\"events\":[{\"kv\":{\"key\":\"%s\","
	         "\"mod_revision\":\"7\",\"value\":\"e30=\"}}]}}",
	         k);
	line(&r, buf);
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_NOTHING);
	assert_int_equal(v.revision, 7);
	pg_etcd_resp_free(&r);
	/* a progress notification: everything up to its header has come */
	line(&r, "{\"result\":{\"header\":{\"revision\":\"8\"}}}");
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_NOTHING);
	assert_int_equal(v.revision, 8);
	pg_etcd_resp_free(&r);
	/* compaction cancels the watch: re-list, the view untouched */
	line(&r, "{\"result\":{\"header\":{\"revision\":\"9\"},\"canceled\":true,"
	         "\"compact_revision\":\"8\"}}");
	assert_int_equal(r.compact_revision, 8);
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_RELIST);
	assert_int_equal(v.revision, 8);
	pg_etcd_resp_free(&r);
	/* the store went back (restored from a snapshot) */
	line(&r, "{\"result\":{\"header\":{\"revision\":\"3\"},\"events\":[]}}");
	assert_int_equal(pg_etcd_view_step(&v, P, &r), PG_ETCD_RELIST);
	pg_etcd_resp_free(&r);
	free(k);
	free(val);
	pg_etcd_view_free(&v);
}

static void test_backends_derived(void **state)
{
	struct pg_etcd_view v = {0};
	char **list, addr[64], err[128];
	size_t n, bad;
	bool active;

	(void)state;
	assert_int_equal(pg_etcd_view_set(&v, "backends/z", "{\"address\":\"127.0.0.1:1\"}", 25),
	                 0);
	assert_int_equal(pg_etcd_view_set(&v, "backends/a",
	                                  "{\"address\":\"127.0.0.1:2\",\"state\":\"draining\"}",
	                                  44),
	                 0);
	assert_int_equal(pg_etcd_view_set(&v, "backends/m", "127.0.0.1:3", 11), 0); /* not JSON */
	assert_int_equal(pg_etcd_view_set(&v, "backends/b",
	                                  "{\"address\":\"127.0.0.1:4\",\"state\":\"active\"}", 42),
	                 0);
	assert_int_equal(pg_etcd_view_set(&v, "config/routing", "{}", 2), 0);
	assert_int_equal(pg_etcd_view_backends(&v, &list, &n, &bad), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bad, 1);
	assert_string_equal(list[0], "127.0.0.1:4"); /* key order: b, then z */
	assert_string_equal(list[1], "127.0.0.1:1");
	pg_etcd_list_free(list, n);
	assert_int_equal(pg_etcd_backend_parse("{\"address\":\"h:1\",\"state\":\"gone\"}", 33, addr,
	                                       sizeof(addr), NULL, &active, err, sizeof(err)),
	                 -1);
	assert_int_equal(pg_etcd_backend_parse("{\"state\":\"active\"}", 18, addr, sizeof(addr),
	                                       NULL, &active, err, sizeof(err)),
	                 -1);
	/* set replaces, NULL deletes */
	assert_int_equal(pg_etcd_view_set(&v, "backends/z", NULL, 0), 0);
	assert_int_equal(pg_etcd_view_set(&v, "config/routing", "{\"a\":1}", 7), 0);
	assert_string_equal(pg_etcd_view_get(&v, "config/routing")->val, "{\"a\":1}");
	assert_null(pg_etcd_view_get(&v, "backends/z"));
	pg_etcd_view_free(&v);
}

/* A record's pool: the backends file's "pool=NAME" for any but the
 * default; a bad name is a bad record; written back as read. */
static void test_backend_pools(void **state)
{
	static const char v1[] = "{\"address\":\"127.0.0.1:1\",\"pool\":\"chat-decode\"}",
	                  v2[] = "{\"address\":\"127.0.0.1:2\",\"pool\":\"default\"}",
	                  v3[] = "{\"address\":\"127.0.0.1:3\",\"pool\":\"no/such\"}",
	                  v4[] = "{\"address\":\"127.0.0.1:4\",\"pool\":7}";
	struct pg_etcd_view v = {0};
	struct pg_buf b = {0};
	char **list, addr[64], pool[PG_ETCD_POOL_MAX], err[128];
	size_t n, bad;
	bool active;

	(void)state;
	pg_etcd_view_set(&v, "backends/a", v1, sizeof(v1) - 1);
	pg_etcd_view_set(&v, "backends/b", v2, sizeof(v2) - 1);
	pg_etcd_view_set(&v, "backends/c", v3, sizeof(v3) - 1);
	pg_etcd_view_set(&v, "backends/d", v4, sizeof(v4) - 1);
	assert_int_equal(pg_etcd_view_backends(&v, &list, &n, &bad), 0);
	assert_int_equal(n, 2);
	assert_int_equal(bad, 2);
	assert_string_equal(list[0], "127.0.0.1:1 pool=chat-decode");
	assert_string_equal(list[1], "127.0.0.1:2");
	pg_etcd_list_free(list, n);
	pg_etcd_backend_json(&b, "127.0.0.1:1", "chat-decode", true);
	assert_int_equal(
	    pg_etcd_backend_parse(b.p, b.len, addr, sizeof(addr), pool, &active, err, sizeof(err)),
	    0);
	assert_string_equal(addr, "127.0.0.1:1");
	assert_string_equal(pool, "chat-decode");
	b.len = 0;
	pg_etcd_backend_json(&b, "127.0.0.1:1", NULL, false);
	assert_int_equal(
	    pg_etcd_backend_parse(b.p, b.len, addr, sizeof(addr), pool, &active, err, sizeof(err)),
	    0);
	assert_string_equal(pool, "");
	assert_false(active);
	pg_buf_free(&b);
	pg_etcd_view_free(&v);
}

static void test_state_file_roundtrip(void **state)
{
	struct pg_etcd_view v = {.revision = 123456789012}, w = {0};
	struct pg_buf b = {0};
	char err[128];

	(void)state;
	pg_etcd_view_set(&v, "backends/a", "{\"address\":\"127.0.0.1:2\"}", 25);
	pg_etcd_view_set(&v, "config/routing", "{\"RoutingStrategy\":\"RANDOM\"}\n", 29);
	pg_etcd_view_dump(&v, &b);
	assert_int_equal(pg_etcd_view_load(&w, b.p, b.len, err, sizeof(err)), 0);
	assert_true(w.revision == 123456789012);
	assert_int_equal(w.n, 2);
	for (size_t i = 0; i < 2; i++) {
		assert_string_equal(w.e[i].key, v.e[i].key);
		assert_int_equal(w.e[i].vlen, v.e[i].vlen);
		assert_memory_equal(w.e[i].val, v.e[i].val, v.e[i].vlen);
	}
	/* a broken file leaves the view as it was */
	assert_int_equal(pg_etcd_view_load(&w, "{\"revision\":\"1\"}", 16, err, sizeof(err)), -1);
	assert_int_equal(pg_etcd_view_load(&w, b.p, b.len - 5, err, sizeof(err)), -1);
	assert_int_equal(w.n, 2);
	pg_buf_free(&b);
	pg_etcd_view_free(&v);
	pg_etcd_view_free(&w);
}

static void test_gateway_record_and_endpoints(void **state)
{
	struct pg_etcd_gateway g, h;
	struct pg_buf b = {0};
	char hp[64], err[128];

	(void)state;
	memset(&g, 0, sizeof(g)); /* padding too: the records are compared whole */
	snprintf(g.id, sizeof(g.id), "gw-1");
	snprintf(g.address, sizeof(g.address), "127.0.0.1:8080");
	snprintf(g.version, sizeof(g.version), "0.1.0");
	g.revision = 77;
	g.digest = 0xfedcba9876543210ull;
	g.backends = 4;
	pg_etcd_gateway_json(&b, &g);
	assert_int_equal(pg_etcd_gateway_parse(b.p, b.len, &h, err, sizeof(err)), 0);
	assert_memory_equal(&g, &h, sizeof(g));
	pg_buf_free(&b);
	assert_int_equal(
	    pg_etcd_endpoint_parse("http://127.0.0.1:2379", hp, sizeof(hp), err, sizeof(err)), 0);
	assert_string_equal(hp, "127.0.0.1:2379");
	assert_int_equal(
	    pg_etcd_endpoint_parse("localhost:2379/", hp, sizeof(hp), err, sizeof(err)), 0);
	assert_string_equal(hp, "localhost:2379");
	assert_int_equal(pg_etcd_endpoint_parse("https://e:2379", hp, sizeof(hp), err, sizeof(err)),
	                 -1);
	assert_int_equal(
	    pg_etcd_endpoint_parse("http://e:2379/v3", hp, sizeof(hp), err, sizeof(err)), -1);
	assert_int_equal(pg_etcd_endpoint_parse("http://", hp, sizeof(hp), err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_base64),
	    cmocka_unit_test(test_bodies),
	    cmocka_unit_test(test_parse_range),
	    cmocka_unit_test(test_parse_errors_and_leases),
	    cmocka_unit_test(test_watch_steps),
	    cmocka_unit_test(test_backends_derived),
	    cmocka_unit_test(test_backend_pools),
	    cmocka_unit_test(test_state_file_roundtrip),
	    cmocka_unit_test(test_gateway_record_and_endpoints),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
