// SPDX-License-Identifier: MIT
/*
 * Operations: the --user / --admin-token / --shutdown-timeout / overload
 * flags, the admin token check, /proc status parsing for the privilege
 * drop, the admission counter and the overload answers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "admin/admin.h"
#include "config/config.h"
#include "sys/lifecycle.h"
#include "sys/privilege.h"
#include "state/host.h"

/* ---- flags ------------------------------------------------------------------- */

static int parse(struct pg_config *cfg, char *err, size_t errlen, ...)
{
	char *argv[16] = {"prefixgate"};
	int argc = 1, rc;
	va_list ap;
	FILE *out = fopen("/dev/null", "w");

	va_start(ap, errlen);
	while (argc < 15 && (argv[argc] = va_arg(ap, char *)))
		argc++;
	va_end(ap);
	rc = pg_config_parse(cfg, argc, argv, out, err, errlen);
	fclose(out);
	return rc;
}

static void test_defaults(void **state)
{
	struct pg_config cfg;
	char err[256];

	(void)state;
	assert_int_equal(parse(&cfg, err, sizeof(err), NULL), 0);
	assert_null(cfg.user);
	assert_null(cfg.admin_token);
	assert_int_equal(cfg.shutdown_timeout_s, 10);
	assert_int_equal(cfg.max_in_flight, 0);
	assert_int_equal(cfg.max_connections, 65536);
	pg_config_free(&cfg);
}

static void test_flags_ok(void **state)
{
	struct pg_config cfg;
	char err[256];

	(void)state;
	assert_int_equal(parse(&cfg, err, sizeof(err), "--user", "nobody", "--admin",
	                       "0.0.0.0:9000", "--admin-token", "0123456789abcdef",
	                       "--shutdown-timeout=0", "--max-in-flight", "100",
	                       "--max-connections", "7", NULL),
	                 0);
	assert_string_equal(cfg.user, "nobody");
	assert_string_equal(cfg.admin_token, "0123456789abcdef");
	assert_int_equal(cfg.shutdown_timeout_s, 0);
	assert_int_equal(cfg.max_in_flight, 100);
	assert_int_equal(cfg.max_connections, 7);
	pg_config_free(&cfg);
}

static void test_token_file(void **state)
{
	char path[] = "/tmp/pg-test-token-XXXXXX", err[256];
	const char text[] = "  tok-0123456789abcdef-xyz \n\n";
	struct pg_config cfg;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
	close(fd);
	assert_int_equal(parse(&cfg, err, sizeof(err), "--admin-token", "aaaaaaaaaaaaaaaaaaaa",
	                       "--admin-token-file", path, NULL),
	                 0);
	assert_string_equal(cfg.admin_token, "tok-0123456789abcdef-xyz");
	pg_config_free(&cfg);
	unlink(path);
}

static const struct {
	const char *a[4];
	const char *want; /* in the error */
} bad_flags[] = {
    {{"--admin", "0.0.0.0:9000"}, "--admin-token"},
    {{"--admin", ":9000"}, "not a loopback"},
    {{"--admin", "10.0.0.1:9000"}, "--admin-token"},
    {{"--admin-token", "short"}, "16-256"},
    {{"--admin-token", "0123456789 abcdef"}, "visible ASCII"},
    {{"--admin-token-file", "/nonexistent/pg"}, "--admin-token-file /nonexistent/pg"},
    {{"--shutdown-timeout", "3601"}, "--shutdown-timeout: 3601 is out of range 0-3600"},
    {{"--max-in-flight", "-1"}, "--max-in-flight"},
    {{"--max-connections", "0"}, "--max-connections: 0 is out of range"},
    {{"--user"}, "--user: missing value"},
};

static void test_flags_bad(void **state)
{
	struct pg_config cfg;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
		int rc = parse(&cfg, err, sizeof(err), bad_flags[i].a[0], bad_flags[i].a[1],
		               bad_flags[i].a[2], NULL);

		if (rc != 2 || !strstr(err, bad_flags[i].want))
			fail_msg("case %zu: rc %d, err \"%s\", want \"%s\"", i, rc, err,
			         bad_flags[i].want);
	}
}

/* ---- admin token ------------------------------------------------------------ */

static int admin_status(struct pg_gateway *gw, const char *request)
{
	struct pg_admin_conn c = {0};
	struct pg_buf out = {0};
	int status = -1;

	pg_buf_append(&c.in, request, strlen(request));
	if (pg_admin_input(gw, &c, &out))
		sscanf(out.p, "HTTP/1.1 %d", &status);
	if (status == 401 && !memmem(out.p, out.len, "WWW-Authenticate: Bearer", 24))
		status = -401;
	pg_buf_free(&out);
	pg_admin_conn_free(&c);
	return status;
}

static void test_admin_token(void **state)
{
	static const struct {
		const char *auth; /* Authorization header line, or "" */
		int status;
	} cases[] = {
	    {"", 401},
	    {"Authorization: Bearer 0123456789abcdef\r\n", 200},
	    {"authorization: bearer 0123456789abcdef\r\n", 200},
	    {"Authorization: Bearer 0123456789abcdeF\r\n", 401},
	    {"Authorization: Bearer 0123456789abcde\r\n", 401},
	    {"Authorization: Bearer 0123456789abcdefg\r\n", 401},
	    {"Authorization: Basic 0123456789abcdef\r\n", 401},
	    {"Authorization: 0123456789abcdef\r\n", 401},
	    {"Authorization: Bearer\r\n", 401},
	};
	struct pg_config cfg = {0};
	struct pg_gateway gw = {0};
	char req[256], err[128];

	(void)state;
	gw.cfg = &cfg;
	gw.nworkers = 1;
	gw.stats = calloc(1, sizeof(*gw.stats));
	assert_int_equal(pg_maps_open(&gw.maps, false, "", 0, err, sizeof(err)), 0);
	pg_gateway_router(&gw);
	for (int with = 0; with < 2; with++) {
		cfg.admin_token = with ? "0123456789abcdef" : NULL;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			int want = with ? cases[i].status : 200;

			snprintf(req, sizeof(req), "GET /backends HTTP/1.1\r\nHost: x\r\n%s\r\n",
			         cases[i].auth);
			if (admin_status(&gw, req) != want)
				fail_msg("token %d case %zu: got %d want %d", with, i,
				         admin_status(&gw, req), want);
		}
	}
	/* Refused at the head: a large body is never waited for. */
	cfg.admin_token = "0123456789abcdef";
	assert_int_equal(admin_status(&gw, "POST /backends HTTP/1.1\r\nHost: x\r\n"
	                                   "Content-Length: 1000000\r\n\r\n"),
	                 401);
	pg_maps_close(&gw.maps);
	free(gw.stats);
}

/* ---- /proc status -------------------------------------------------------------- */

static void test_parse_status(void **state)
{
	const char *text = "Name:\tprefixgate\nUmask:\t0022\nUid:\t999\t998\t999\t999\n"
	                   "Gid:\t995\t995\t995\t995\nGroups:\t995 \nCapInh:\t0000000000000000\n"
	                   "CapPrm:\t0000008000000000\nCapEff:\t0000008000001000\n"
	                   "CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"
	                   "NoNewPrivs:\t1\nSeccomp:\t0\n";
	struct pg_task_creds t;
	char buf[128];

	(void)state;
	assert_int_equal(pg_priv_parse_status(text, &t), 0);
	assert_int_equal(t.uid, 999);
	assert_int_equal(t.euid, 998);
	assert_int_equal(t.gid, 995);
	assert_int_equal(t.prm, 1ull << 39);
	assert_int_equal(t.eff, 1ull << 39 | 1ull << 12);
	assert_int_equal(t.inh, 0);
	assert_true(t.no_new_privs);
	assert_string_equal(pg_priv_caps_name(t.eff, buf, sizeof(buf)), "cap_net_admin,cap_bpf");
	assert_string_equal(pg_priv_caps_name(0, buf, sizeof(buf)), "none");
	assert_int_equal(pg_priv_parse_status("Name:\tx\nUid:\t1\t1\t1\t1\n", &t), -1);
	assert_int_equal(pg_priv_parse_status("Uid:\t1\t1\nGid:\t1\t1\nCapInh:\tzz\n"
	                                      "CapPrm:\t0\nCapEff:\t0\n",
	                                      &t),
	                 -1);
	/* Not fooled by a field name inside another line. */
	assert_int_equal(pg_priv_parse_status("Name:\tUid:\t0\t0\nUid:\t5\t5\nGid:\t5\t5\n"
	                                      "CapInh:\t0\nCapPrm:\t0\nCapEff:\t0\n",
	                                      &t),
	                 0);
	assert_int_equal(t.uid, 5);
	assert_false(t.no_new_privs);
}

/* ---- admission -------------------------------------------------------------------- */

static void test_admit(void **state)
{
	struct pg_config cfg = {0};
	struct pg_gateway gw = {0};

	(void)state;
	gw.cfg = &cfg;
	/* Cap off: always admitted, nothing counted. */
	for (int i = 0; i < 5; i++)
		assert_true(pg_admit(&gw));
	pg_admit_release(&gw);
	assert_int_equal(gw.admitted, 0);
	assert_false(pg_overloaded(&gw));
	cfg.max_in_flight = 3;
	for (int i = 0; i < 3; i++)
		assert_true(pg_admit(&gw));
	assert_true(pg_overloaded(&gw));
	assert_false(pg_admit(&gw));
	assert_int_equal(gw.admitted, 3);
	pg_admit_release(&gw);
	assert_false(pg_overloaded(&gw));
	assert_true(pg_admit(&gw));
	cfg.max_connections = 2;
	assert_false(pg_conn_over_cap(&gw, 1));
	assert_true(pg_conn_over_cap(&gw, 2));
	cfg.max_connections = 0;
	assert_false(pg_conn_over_cap(&gw, 1000000));
}

/* The canned answers declare their body's exact length. */
static void test_overload_replies(void **state)
{
	static const char *const replies[] = {PG_OVERLOAD_REPLY, PG_CONN_CAP_REPLY};

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		const char *body = strstr(replies[i], "\r\n\r\n") + 4, *cl;

		cl = strstr(replies[i], "Content-Length: ");
		assert_non_null(cl);
		assert_int_equal(strtoul(cl + 16, NULL, 10), strlen(body));
		assert_non_null(strstr(replies[i], "\r\nRetry-After: 1\r\n"));
		assert_int_equal(strncmp(replies[i], "HTTP/1.1 503 ", 13), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_defaults),    cmocka_unit_test(test_flags_ok),
	    cmocka_unit_test(test_token_file),  cmocka_unit_test(test_flags_bad),
	    cmocka_unit_test(test_admin_token), cmocka_unit_test(test_parse_status),
	    cmocka_unit_test(test_admit),       cmocka_unit_test(test_overload_replies),
	};

	return cmocka_run_group_tests_name("ops", tests, NULL, NULL);
}
