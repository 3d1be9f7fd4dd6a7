// SPDX-License-Identifier: MIT
/*
 * Unit tests of the address parser (lib/addr.h: every form, canonical
 * spelling, errors) and of the resolver-answer decisions (lib/addrset.h:
 * normalizing, old set vs new set, failure and "no such name" handling).
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include "lib/addr.h"
#include "lib/addrset.h"

/* Literals (pg_addr_parse): out is the canonical spelling, NULL an error. */
static void test_literals(void **state)
{
	static const struct {
		const char *in, *out;
		int family;
	} cases[] = {
	    {"127.0.0.1:8080", "127.0.0.1:8080", AF_INET},
	    {"localhost:1", "127.0.0.1:1", AF_INET},
	    {"LOCALHOST:65535", "127.0.0.1:65535", AF_INET},
	    {":80", "0.0.0.0:80", AF_INET},
	    {"10.20.30.40:00080", "10.20.30.40:80", AF_INET},
	    {"[::1]:8000", "[::1]:8000", AF_INET6},
	    {"[::]:8080", "[::]:8080", AF_INET6},
	    {"[2001:DB8:0:0:0:0:0:1]:443", "[2001:db8::1]:443", AF_INET6},
	    {"[fe80::1:2]:1", "[fe80::1:2]:1", AF_INET6},
	    {"[::ffff:10.0.0.1]:80", "10.0.0.1:80", AF_INET}, /* mapped: IPv4 */
	    {"1.2.3:80", NULL, 0},
	    {"1.2.3.4.5:80", NULL, 0},
	    {"01.2.3.4:80", NULL, 0},
	    {"256.1.1.1:80", NULL, 0},
	    {"1.2.3.4:", NULL, 0},
	    {"1.2.3.4:0", NULL, 0},
	    {"1.2.3.4:65536", NULL, 0},
	    {"1.2.3.4:+80", NULL, 0},
	    {"1.2.3.4:80 ", NULL, 0},
	    {" 1.2.3.4:80", NULL, 0},
	    {"", NULL, 0},
	    {":", NULL, 0},
	    {"::1:80", NULL, 0},  /* IPv6 needs brackets */
	    {"[::1]80", NULL, 0}, /* no colon after ] */
	    {"[::1]", NULL, 0},   /* no port */
	    {"[::1:80", NULL, 0}, /* no ] */
	    {"[1.2.3.4]:80", NULL, 0},
	    {"[fe80::1%eth0]:80", NULL, 0}, /* zone ids */
	    {"[]:80", NULL, 0},
	    {"1.2.3.4:99999999999999999999", NULL, 0},
	    {"host.example:80", NULL, 0}, /* a name: not a literal */
	};
	union pg_sockaddr a;
	char err[160], buf[PG_ADDR_STRLEN];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = pg_addr_parse(cases[i].in, &a, err, sizeof(err));

		if (rc != (cases[i].out ? 0 : -1))
			fail_msg("\"%s\": rc %d", cases[i].in, rc);
		if (!rc) {
			assert_int_equal(a.sa.sa_family, cases[i].family);
			assert_string_equal(pg_addr_format(&a, buf), cases[i].out);
		} else {
			assert_non_null(strstr(err, cases[i].in));
		}
	}
	/* errors say why */
	pg_addr_parse("::1:80", &a, err, sizeof(err));
	assert_string_equal(err, "\"::1:80\": an IPv6 address needs brackets: [IPV6]:PORT");
	pg_addr_parse("a.example:80", &a, err, sizeof(err));
	assert_non_null(strstr(err, "not a name"));
	pg_addr_parse("1.2.3.4:0", &a, err, sizeof(err));
	assert_string_equal(err, "\"1.2.3.4:0\": port must be a decimal number 1-65535");
}

/* Backends (pg_hostport_parse): literals and DNS names. */
static void test_hostport(void **state)
{
	static const struct {
		const char *in, *out; /* canonical; NULL: an error */
		bool name;
	} cases[] = {
	    {"10.0.0.1:8000", "10.0.0.1:8000", false},
	    {"[::1]:8000", "[::1]:8000", false},
	    {"localhost:8000", "127.0.0.1:8000", false},
	    {"vllm:8000", "vllm:8000", true},
	    {"VLLM.Default.svc.cluster.local:8000", "vllm.default.svc.cluster.local:8000", true},
	    {"_http._tcp.example:80", "_http._tcp.example:80", true},
	    {"a-b.c-d:1", "a-b.c-d:1", true},
	    {"1a.example:1", "1a.example:1", true},
	    {"x.example.:80", "x.example.:80", true}, /* fully qualified */
	    {":80", NULL, false},                     /* no host: listeners only */
	    {"-a.example:80", NULL, false},
	    {"a-.example:80", NULL, false},
	    {"a..example:80", NULL, false},
	    {".example:80", NULL, false},
	    {"a b:80", NULL, false},
	    {"a/b:80", NULL, false},
	    {"1.2.3:80", NULL, false}, /* all digits: a bad IPv4 literal, not a name */
	    {"999.1.1.1:80", NULL, false},
	    {"name:0", NULL, false},
	    {"name", NULL, false},
	};
	struct pg_hostport h;
	char err[400], buf[PG_HOSTPORT_STRLEN], longname[300];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = pg_hostport_parse(cases[i].in, &h, false, err, sizeof(err));

		if (rc != (cases[i].out ? 0 : -1))
			fail_msg("\"%s\": rc %d (%s)", cases[i].in, rc, rc ? err : "");
		if (rc)
			continue;
		assert_int_equal(h.name[0] != 0, cases[i].name);
		assert_string_equal(pg_hostport_format(&h, buf), cases[i].out);
	}
	/* ":PORT" where a listener is meant */
	assert_int_equal(pg_hostport_parse(":80", &h, true, err, sizeof(err)), 0);
	/* labels at most 63 characters, names at most 253 */
	memset(longname, 'a', 63);
	strcpy(longname + 63, ".example:1");
	assert_int_equal(pg_hostport_parse(longname, &h, false, err, sizeof(err)), 0);
	memset(longname, 'a', 64);
	strcpy(longname + 64, ".example:1");
	assert_int_equal(pg_hostport_parse(longname, &h, false, err, sizeof(err)), -1);
	for (int i = 0; i < 254; i++)
		longname[i] = i % 2 ? '.' : 'a';
	strcpy(longname + 253, ":1");
	assert_int_equal(pg_hostport_parse(longname, &h, false, err, sizeof(err)), 0);
	strcpy(longname + 253, "a:1");
	assert_int_equal(pg_hostport_parse(longname, &h, false, err, sizeof(err)), -1);
}

static void v4(union pg_sockaddr *a, const char *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->in.sin_family = AF_INET;
	inet_pton(AF_INET, ip, &a->in.sin_addr);
	a->in.sin_port = htons(port);
}

static void v6(union pg_sockaddr *a, const char *ip, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->in6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, ip, &a->in6.sin6_addr);
	a->in6.sin6_port = htons(port);
}

/* A backend slot round-trips its address; helpers compare and classify. */
static void test_backend_addr(void **state)
{
	struct pg_backend b = {0};
	union pg_sockaddr a, c;
	char buf[PG_ADDR_STRLEN];

	(void)state;
	v6(&a, "2001:db8::7", 8000);
	pg_backend_addr_set(&b, &a);
	assert_int_equal(b.family, AF_INET6);
	assert_int_equal(b.port, 8000);
	pg_backend_addr_get(&b, &c);
	assert_true(pg_sockaddr_equal(&a, &c));
	assert_string_equal(pg_addr_format(&c, buf), "[2001:db8::7]:8000");
	v4(&a, "10.1.2.3", 9);
	pg_backend_addr_set(&b, &a);
	assert_int_equal(b.family, AF_INET);
	assert_memory_equal(b.addr, "\x0a\x01\x02\x03\0\0\0\0", 8); /* the rest zeroed */
	pg_backend_addr_get(&b, &c);
	assert_string_equal(pg_addr_format(&c, buf), "10.1.2.3:9");
	assert_int_equal(pg_sockaddr_len(&c), sizeof(struct sockaddr_in));
	v4(&a, "127.9.9.9", 1);
	assert_true(pg_sockaddr_loopback(&a));
	v6(&a, "::1", 1);
	assert_true(pg_sockaddr_loopback(&a));
	v6(&a, "::2", 1);
	assert_false(pg_sockaddr_loopback(&a));
	v4(&a, "10.0.0.1", 1);
	v4(&c, "10.0.0.1", 2);
	assert_false(pg_sockaddr_equal(&a, &c)); /* the port counts */
}

/* One IPv6 spelling of every address: IPv4 mapped, IPv6 as it is. */
static void test_ip6(void **state)
{
	union pg_sockaddr a;
	uint8_t ip[16], m[16];

	(void)state;
	v4(&a, "127.0.0.1", 80);
	assert_true(pg_sockaddr_ip6(&a, ip));
	assert_memory_equal(ip, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f\0\0\x01", 16);
	/* the mapped spelling of a dual-stack socket's IPv4 peer is the same */
	a.in6.sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "::ffff:127.0.0.1", &a.in6.sin6_addr), 1);
	assert_true(pg_sockaddr_ip6(&a, m));
	assert_memory_equal(ip, m, 16);
	v6(&a, "::1", 80);
	assert_true(pg_sockaddr_ip6(&a, ip));
	assert_memory_equal(ip, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01", 16);
	v6(&a, "2001:db8::7", 80);
	assert_true(pg_sockaddr_ip6(&a, ip));
	assert_memory_equal(ip, &a.in6.sin6_addr, 16);
	memset(&a, 0, sizeof(a));
	a.sa.sa_family = AF_UNIX;
	assert_false(pg_sockaddr_ip6(&a, ip));
}

/* Two listeners that cannot both be bound: the same port, and one address
 * covering the other ([::] is dual-stack, as the gateway binds it). */
static void test_overlap(void **state)
{
	static const struct {
		const char *a, *b;
		bool overlap;
	} cases[] = {
	    {"127.0.0.1:8080", "127.0.0.1:8080", true},
	    {"127.0.0.1:8080", "127.0.0.1:8081", false},
	    {"0.0.0.0:9090", "127.0.0.1:9090", true},
	    {"127.0.0.2:9090", "127.0.0.1:9090", false},
	    {"[::]:9090", "127.0.0.1:9090", true},
	    {"[::]:9090", "[::1]:9090", true},
	    {"[::1]:9090", "127.0.0.1:9090", false},
	    {"0.0.0.0:9090", "[::1]:9090", false},
	    {"0.0.0.0:9090", "[::ffff:10.0.0.1]:9090", true},
	    {"[::ffff:127.0.0.1]:9090", "127.0.0.1:9090", true},
	    {"[::1]:9090", "[::1]:9090", true},
	    {"[2001:db8::1]:9090", "[::1]:9090", false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		union pg_sockaddr a, b;
		char e[128];

		assert_int_equal(pg_addr_parse(cases[i].a, &a, e, sizeof(e)), 0);
		assert_int_equal(pg_addr_parse(cases[i].b, &b, e, sizeof(e)), 0);
		if (pg_sockaddr_overlap(&a, &b) != cases[i].overlap ||
		    pg_sockaddr_overlap(&b, &a) != cases[i].overlap)
			fail_msg("%s and %s: expected %s", cases[i].a, cases[i].b,
			         cases[i].overlap ? "an overlap" : "none");
	}
}

/* Normalizing: canonical order whatever the answer's, duplicates once. */
static void test_normalize(void **state)
{
	union pg_sockaddr x[5], y[5];
	char a[PG_ADDR_STRLEN], b[PG_ADDR_STRLEN];

	(void)state;
	v6(&x[0], "2001:db8::1", 80);
	v4(&x[1], "10.0.0.2", 80);
	v4(&x[2], "10.0.0.1", 80);
	v4(&x[3], "10.0.0.2", 80);
	v6(&x[4], "::1", 80);
	y[0] = x[3], y[1] = x[4], y[2] = x[2], y[3] = x[0], y[4] = x[1];
	assert_int_equal(pg_addrset_normalize(x, 5), 4);
	assert_int_equal(pg_addrset_normalize(y, 5), 4);
	for (int i = 0; i < 4; i++)
		assert_string_equal(pg_addr_format(&x[i], a), pg_addr_format(&y[i], b));
	assert_string_equal(pg_addr_format(&x[0], a), "10.0.0.1:80");
	assert_string_equal(pg_addr_format(&x[3], a), "[2001:db8::1]:80");
	assert_int_equal(pg_addrset_normalize(x, 0), 0);
	assert_int_equal(pg_addrset_normalize(x, 1), 1);
}

/* Old set vs new set: what to add, what to drain. */
static void test_diff(void **state)
{
	union pg_sockaddr old[3], cur[3];
	size_t add[3], drain[3], nadd, ndrain;

	(void)state;
	v4(&old[0], "10.0.0.1", 80);
	v4(&old[1], "10.0.0.2", 80);
	/* 2 -> 3: one new */
	cur[0] = old[0], cur[1] = old[1];
	v4(&cur[2], "10.0.0.3", 80);
	pg_addrset_diff(old, 2, cur, 3, add, &nadd, drain, &ndrain);
	assert_int_equal(nadd, 1);
	assert_int_equal(add[0], 2);
	assert_int_equal(ndrain, 0);
	/* the same: nothing */
	pg_addrset_diff(old, 2, old, 2, add, &nadd, drain, &ndrain);
	assert_int_equal(nadd + ndrain, 0);
	/* {1,2} -> {2,3}: 3 added, 1 drained */
	cur[0] = old[1], cur[1] = cur[2];
	pg_addrset_diff(old, 2, cur, 2, add, &nadd, drain, &ndrain);
	assert_int_equal(nadd, 1);
	assert_int_equal(add[0], 1);
	assert_int_equal(ndrain, 1);
	assert_int_equal(drain[0], 0);
	/* to nothing, from nothing */
	pg_addrset_diff(old, 2, cur, 0, add, &nadd, drain, &ndrain);
	assert_int_equal(nadd, 0);
	assert_int_equal(ndrain, 2);
	pg_addrset_diff(old, 0, cur, 2, add, &nadd, drain, &ndrain);
	assert_int_equal(nadd, 2);
	assert_int_equal(ndrain, 0);
	/* another port is another member */
	v4(&cur[0], "10.0.0.1", 81);
	pg_addrset_diff(old, 1, cur, 1, add, &nadd, drain, &ndrain);
	assert_int_equal(nadd, 1);
	assert_int_equal(ndrain, 1);
}

/* Failures keep the last answer; "no such name" after a hold period. */
static void test_verdict(void **state)
{
	uint64_t nx = 0;

	(void)state;
	assert_int_equal(pg_dns_verdict(PG_DNS_OK, 3, 2, 1000, &nx), PG_DNS_APPLY);
	assert_int_equal(pg_dns_verdict(PG_DNS_FAIL, 0, 3, 2000, &nx), PG_DNS_KEEP);
	assert_int_equal(nx, 0);
	/* NXDOMAIN (or OK with no address) starts the hold... */
	assert_int_equal(pg_dns_verdict(PG_DNS_NONAME, 0, 3, 5000, &nx), PG_DNS_KEEP);
	assert_int_equal(nx, 5000);
	assert_int_equal(pg_dns_verdict(PG_DNS_OK, 0, 3, 5000 + PG_DNS_HOLD_NX_MS - 1, &nx),
	                 PG_DNS_KEEP);
	/* ... a failure meanwhile does not end it ... */
	assert_int_equal(pg_dns_verdict(PG_DNS_FAIL, 0, 3, 6000, &nx), PG_DNS_KEEP);
	assert_int_equal(nx, 5000);
	/* ... which empties the name once long enough */
	assert_int_equal(pg_dns_verdict(PG_DNS_NONAME, 0, 3, 5000 + PG_DNS_HOLD_NX_MS, &nx),
	                 PG_DNS_APPLY);
	/* an answer with addresses ends the run */
	assert_int_equal(pg_dns_verdict(PG_DNS_OK, 1, 0, 99000, &nx), PG_DNS_APPLY);
	assert_int_equal(nx, 0);
	/* nothing to keep: applied at once */
	assert_int_equal(pg_dns_verdict(PG_DNS_NONAME, 0, 0, 100000, &nx), PG_DNS_APPLY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_literals),     cmocka_unit_test(test_hostport),
	    cmocka_unit_test(test_backend_addr), cmocka_unit_test(test_normalize),
	    cmocka_unit_test(test_diff),         cmocka_unit_test(test_verdict),
	    cmocka_unit_test(test_ip6),          cmocka_unit_test(test_overlap),
	};

	return cmocka_run_group_tests_name("addr", tests, NULL, NULL);
}
