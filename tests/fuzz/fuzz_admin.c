// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over the admin API (user/admin/admin.c) on a real gateway
 * state: shared-memory maps (pg_maps_open without BPF), three members added
 * through members.h, two workers' statistics. No sockets, no threads.
 *
 * Input: one mode byte, then
 *   mode even: "METHOD TARGET\nBODY" handed to pg_admin_handle (method up
 *              to the first space, target up to the first LF, split at '?'
 *              into path and query; the rest is the body);
 *   mode odd:  raw HTTP bytes fed to pg_admin_input in pieces whose sizes
 *              come from the input, as admin_listener.c feeds it from a socket.
 *
 * Invariants: the reply's status is returned and is a known HTTP status,
 * with a content type, an Allow on 405, no allocation failure; a JSON
 * reply parses as JSON and an error reply is {"error": string}; framing
 * answers at most once with one complete HTTP response whose
 * Content-Length matches its body. Nothing leaks (LeakSanitizer). A request
 * that changed membership or the routing config is undone before the next
 * input (the table is rebuilt), so every input starts from the same state.
 */
#include <stdbool.h>
#include <string.h>
#include "admin/admin.h"
#include "control/control.h"
#include "members/members.h"
#include "fuzz.h"
#include "lib/json.h"
#include "sys/log.h"
#include "state/host.h"

static char *members[] = {"10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"};
static struct pg_config cfg;
static struct pg_gateway gw;
static struct pg_backend backends0[PG_MAX_BACKENDS];
static struct pg_route_cfg route0;

/* The start state: the members, some traffic counted, one member down. */
static void reset(void)
{
	char err[256];

	memset(gw.maps.backends, 0, PG_MAX_BACKENDS * sizeof(*gw.maps.backends));
	FUZZ_CHECK(pg_control_init(&gw, err, sizeof(err)) == 0);
	gw.maps.backends[1].in_flight = 3;
	gw.maps.backends[1].requests[PG_DEC_AFFINITY] = 10;
	gw.maps.backends[2].failures = 2;
	gw.maps.backends[3].flags |= PG_BACKEND_DOWN;
	gw.maps.backends[3].down_until_ms = pg_now_ms() + 3600 * 1000;
	memcpy(backends0, gw.maps.backends, sizeof(backends0));
	pg_router_cfg(&gw.router, 0, &route0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char err[256];

	(void)argc;
	(void)argv;
	pg_log_level = -1; /* silent: membership changes log at info */
	cfg.route.strategy = PG_STRATEGY_PREFIX_AWARE;
	cfg.route.prefix_length = PG_PREFIX_LENGTH_DEFAULT;
	cfg.route.concurrency_threshold = PG_CONCURRENCY_DEFAULT;
	cfg.backends = members;
	cfg.nbackends = 3;
	/* 127.0.0.1, port 0 (any: pg_addr_parse refuses 0) */
	cfg.admin.in.sin_family = AF_INET;
	cfg.admin.in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	gw.cfg = &cfg;
	gw.nworkers = 2;
	gw.stats = calloc(2, sizeof(*gw.stats));
	FUZZ_CHECK(gw.stats);
	gw.stats[0].requests = 5;
	gw.stats[1].route_lat[3] = 7;
	if (pg_maps_open(&gw.maps, false, "", 0, err, sizeof(err))) {
		fprintf(stderr, "pg_maps_open: %s\n", err);
		abort();
	}
	pg_gateway_router(&gw);
	reset();
	return 0;
}

static bool known_status(int s)
{
	static const int ok[] = {200, 201, 202, 400, 404, 405, 409, 413,
	                         414, 417, 431, 500, 501, 503, 505, 507};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (s == ok[i])
			return true;
	return false;
}

static void check_json_body(int status, const char *p, size_t n)
{
	struct pg_json js = {0};
	int64_t e;

	FUZZ_CHECK(pg_json_parse(&js, p, n) == 0);
	if (status >= 400) {
		FUZZ_CHECK(js.tok[0].type == PG_JSON_OBJECT);
		e = pg_json_find(&js, 0, "error", 5);
		FUZZ_CHECK(e > 0 && js.tok[e].type == PG_JSON_STRING);
	}
	pg_json_free(&js);
}

static void check_reply(int status, const struct pg_admin_reply *r)
{
	FUZZ_CHECK(status == r->status);
	FUZZ_CHECK(known_status(status));
	FUZZ_CHECK(r->content_type != NULL && !r->body.oom);
	FUZZ_CHECK(pg_http_reason(status) != NULL);
	if (status == 405)
		FUZZ_CHECK(r->allow != NULL);
	if (!strcmp(r->content_type, "application/json"))
		check_json_body(status, r->body.p, r->body.len);
	else
		FUZZ_CHECK(status == 200 && r->body.len > 0);
}

static void handle(const char *s, size_t n)
{
	const char *sp = memchr(s, ' ', n), *nl, *q;
	struct pg_str method, path, query = {"", 0};
	struct pg_admin_reply r;
	size_t off;
	int status;

	if (!sp)
		sp = s + n;
	method = (struct pg_str){s, (size_t)(sp - s)};
	off = sp < s + n ? (size_t)(sp - s) + 1 : n;
	nl = memchr(s + off, '\n', n - off);
	path = (struct pg_str){s + off, nl ? (size_t)(nl - (s + off)) : n - off};
	q = memchr(path.p, '?', path.len);
	if (q) {
		query = (struct pg_str){q + 1, path.len - (size_t)(q + 1 - path.p)};
		path.len = (size_t)(q - path.p);
	}
	off = nl ? (size_t)(nl - s) + 1 : n;
	status = pg_admin_handle(&gw, method, path, query, n > off ? s + off : NULL, n - off, &r);
	check_reply(status, &r);
	pg_buf_free(&r.body);
}

static void framing(const char *s, size_t n, struct fuzz_rng *rng)
{
	struct pg_admin_conn c = {0};
	struct pg_buf out = {0};
	struct pg_http_response resp;
	size_t got = 0, piece, off = 0;
	bool done = false;
	ssize_t h;

	while (got < n && !done) {
		piece = fuzz_piece(rng, n - got);
		pg_buf_append(&c.in, s + got, piece);
		got += piece;
		done = pg_admin_input(&gw, &c, &out);
	}
	FUZZ_CHECK(!out.oom && !c.in.oom);
	/* at most one interim 100 Continue, then (if done) one final reply */
	h = pg_http_parse_response(out.p, out.len, false, &resp);
	if (h > 0 && resp.status == 100) {
		FUZZ_CHECK(out.len >= (size_t)h);
		off = (size_t)h;
		h = pg_http_parse_response(out.p + off, out.len - off, false, &resp);
	}
	if (!done) {
		FUZZ_CHECK(off == out.len);
	} else {
		FUZZ_CHECK(h > 0 && known_status(resp.status));
		FUZZ_CHECK(resp.body == PG_BODY_LENGTH ||
		           (resp.body == PG_BODY_NONE && out.len == off + (size_t)h));
		if (resp.body == PG_BODY_LENGTH)
			FUZZ_CHECK(resp.content_length == out.len - off - (size_t)h);
		FUZZ_CHECK(!resp.keep_alive);
	}
	pg_admin_conn_free(&c);
	pg_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pg_route_cfg rc;
	struct fuzz_rng rng;

	if (size < 1)
		return 0;
	if (data[0] & 1) {
		fuzz_rng_seed(&rng, data, size);
		framing((const char *)data + 1, size - 1, &rng);
	} else {
		handle((const char *)data + 1, size - 1);
	}
	pg_router_cfg(&gw.router, 0, &rc);
	if (memcmp(backends0, gw.maps.backends, sizeof(backends0)) ||
	    memcmp(&rc, &route0, sizeof(rc)))
		reset();
	return 0;
}
