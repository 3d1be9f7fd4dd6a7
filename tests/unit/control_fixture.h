/* SPDX-License-Identifier: MIT */
/*
 * Shared by the control-thread tests (test_control.c) and the admin API
 * tests (test_admin.c): a gateway built in memory (shared memory maps, no
 * BPF, no root) with 3 --backend members, its setup and teardown, temporary
 * files, and one request through pg_admin_handle(). Header-only (static
 * functions): each test binary is built from its one source file.
 */
#ifndef PG_TEST_CONTROL_FIXTURE_H
#define PG_TEST_CONTROL_FIXTURE_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <cmocka.h>

#include "admin/admin.h"
#include "control/control.h"
#include "members/members.h"
#include "sys/log.h"
#include "state/host.h"

static struct pg_config cfg;
static struct pg_gateway gw;
static char *static_backends[] = {"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"};
static char file_path[64], routing_path[64];

static inline void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static inline void make_temp(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/pg-test-admin-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	write_file(path, text);
}

/* A gateway with 3 --backend members, 2 workers' stats, no files. */
static inline int setup(void **state)
{
	char err[256];

	(void)state;
	pg_log_level = PG_LOG_ERROR;
	memset(&cfg, 0, sizeof(cfg));
	memset(&gw, 0, sizeof(gw));
	cfg.route.strategy = PG_STRATEGY_PREFIX_AWARE;
	cfg.route.prefix_length = PG_PREFIX_LENGTH_DEFAULT;
	cfg.route.concurrency_threshold = PG_CONCURRENCY_DEFAULT;
	cfg.backends = static_backends;
	cfg.nbackends = 3;
	/* 127.0.0.1, port 0 (any: pg_addr_parse refuses 0) */
	cfg.admin.in.sin_family = AF_INET;
	cfg.admin.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	gw.cfg = &cfg;
	gw.nworkers = 2;
	gw.stats = calloc(2, sizeof(*gw.stats));
	if (!gw.stats || pg_maps_open(&gw.maps, false, "", 0, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return -1;
	}
	pg_gateway_router(&gw);
	file_path[0] = routing_path[0] = 0;
	return 0;
}

static inline int setup_init(void **state)
{
	char err[256];

	if (setup(state))
		return -1;
	if (pg_control_init(&gw, err, sizeof(err))) {
		fprintf(stderr, "pg_control_init: %s\n", err);
		return -1;
	}
	return 0;
}

static inline int teardown(void **state)
{
	(void)state;
	pg_control_stop(&gw);
	pg_maps_close(&gw.maps);
	free(gw.stats);
	if (file_path[0])
		unlink(file_path);
	if (routing_path[0])
		unlink(routing_path);
	return 0;
}

static inline struct pg_str S(const char *s) {
	return (struct pg_str){s, strlen(s)};
}

/* One request through pg_admin_handle; target may carry ?query. The reply
 * body is NUL-terminated for strstr. */
static inline int
req(const char *method, const char *target, const char *body, struct pg_admin_reply *r)
{
	const char *q = strchr(target, '?');
	struct pg_str path = {target, q ? (size_t)(q - target) : strlen(target)};
	struct pg_str query = q ? S(q + 1) : (struct pg_str){"", 0};
	int status = pg_admin_handle(&gw, S(method), path, query, body, body ? strlen(body) : 0, r);

	assert_int_equal(status, r->status);
	pg_buf_append(&r->body, "", 1);
	assert_false(r->body.oom);
	return status;
}

static inline size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static inline uint16_t flags(int id)
{
	return gw.maps.backends[id].flags;
}

#endif /* PG_TEST_CONTROL_FIXTURE_H */
