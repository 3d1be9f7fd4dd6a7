// SPDX-License-Identifier: MIT
/*
 * mockllm as one instance of a prefill/decode pair: --role prefill|decode,
 * --pd-protocol vllm|sglang (the legs themselves: pdreq.h).
 *
 * vLLM (NIXL). A prefill instance serves a prefill leg as a plain
 * completion of its one token, prefix cache as always, and adds to its
 * answer kv_transfer_params naming its prompt's full blocks
 * (remote_block_ids), its engine id, its side address and tp_size 1. The
 * blocks stay pinned (kvxfer.h) until a decode pulls them or
 * --kv-transfer-ttl-ms (model time) passes. A decode instance, given those
 * parameters, checks that they name as many blocks as its prompt has,
 * dials the prefill's side port and pulls; the prefill checks engine,
 * ids, staleness and X-Request-Id and answers. The pull takes (blocks the
 * decode does not hold in its own cache) x 16 tokens at
 * --kv-transfer-tokens-per-s; then the request is submitted with those
 * blocks brought along (sim.h nhashes_held): only what is left (the last
 * partial block, at least one token) is prefilled, its first token comes
 * after that and the TTFT overhead, and it streams as any request. The
 * response head waits for the KV, so a refused or failed pull is an HTTP
 * error: 400 when the prefill refused (the parameters are wrong: unknown,
 * stale, pulled, another engine's, another request's, another prompt's),
 * 500 when the pull failed (side port unreachable, closed, no answer in
 * --kv-wait-timeout-ms), as vLLM's kv_load_failure_policy "fail" ends a
 * request whose KV did not load; with --kv-load-failure-policy recompute
 * a failed pull (not a refused one) is recomputed locally instead.
 *
 * SGLang (bootstrap). A prefill instance serves a prefill leg as a plain
 * completion of one token (the router drops it) and, when it is done,
 * hands the KV to each of its rooms (rooms.h), held for a decode that has
 * not registered yet until --kv-transfer-ttl-ms. A decode instance dials
 * the bootstrap port, registers its rooms and waits, at most
 * --kv-wait-timeout-ms (500 when it passes); then, as above, the transfer
 * time (the whole prompt's blocks) and the decode.
 *
 * Both: a decode checks that the KV it gets is its prompt's (block count,
 * and the last block's hash, which chains all before it): a router that
 * mixes up two requests' parameters is told (400), where real engines
 * would decode garbage.
 *
 * The side protocol (the stand-in for NIXL and SGLang's transfer engine):
 * ASCII lines ending in LF, one connection per decode request.
 *   vLLM, on the prefill's --kv-port. The decode sends
 *     PULL <engine_id> <X-Request-Id hash, 16 hex, or -> <skip> <id>,<id>,...
 *   (skip: leading blocks it holds itself); the prefill answers one line
 *   and closes:
 *     OK <blocks> <last block hash, 16 hex>
 *     ERR <reason> <message>   (reason: engine unknown stale pulled mismatch
 *                               request_id bad)
 *   SGLang, on the prefill's --bootstrap-port. The decode sends
 *     ROOM <room>              (one line per room of its request)
 *   and the prefill answers, for each room, when its KV is there:
 *     KV <room> <blocks> <last block hash>
 *     ERR <room> <reason> <message>   (reason: duplicate done expired bad)
 *   The decode closes once it has every room's KV, or gives up.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "mockllm.h"

struct pd_state g_pd = {.lfd = -1};

static uint64_t model_ns(double ms)
{
	double ns = ms * 1e6 / g_pd.cfg.time_scale;

	return ns < 1e18 ? (uint64_t)ns : (uint64_t)1e18;
}

void pd_setup(const char *listen_host, const char *id)
{
	uint32_t rnd = 0;

	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
	snprintf(g_pd.engine, sizeof(g_pd.engine), "%.40s-%08x", id, rnd);
	for (char *p = g_pd.engine; *p; p++)
		if (*p == '/') /* --id allows it, a remote_engine_id does not */
			*p = '_';
	if (!strcmp(listen_host, "0.0.0.0") || !listen_host[0])
		snprintf(g_pd.host, sizeof(g_pd.host), "127.0.0.1");
	else if (!strcmp(listen_host, "::"))
		snprintf(g_pd.host, sizeof(g_pd.host), "::1");
	else
		snprintf(g_pd.host, sizeof(g_pd.host), "%s", listen_host);
	xfer_init(&g_pd.xfer, g_pd.engine, model_ns(g_pd.cfg.ttl_ms));
	rooms_init(&g_pd.rooms, model_ns(g_pd.cfg.ttl_ms));
	if (g_pd.cfg.role != PD_ROLE_PREFILL)
		return;
	if (side_listen(listen_host, g_pd.cfg.side_port, &g_pd.port) == -1) {
		fprintf(stderr, "mockllm: %s %s port %d: %m\n", listen_host,
		        g_pd.cfg.proto == PD_PROTO_VLLM ? "--kv-port" : "--bootstrap-port",
		        g_pd.cfg.side_port);
		exit(1);
	}
	fprintf(stderr, "mockllm: %s prefill (%s), engine %s, %s %s port %u\n", id,
	        g_pd.cfg.proto == PD_PROTO_VLLM ? "vllm" : "sglang", g_pd.engine,
	        g_pd.cfg.proto == PD_PROTO_VLLM ? "kv side channel on" : "bootstrap server on",
	        g_pd.host, g_pd.port);
}

int pd_parse(struct conn *c)
{
	struct mreq *m = &c->req;
	char err[PD_ERR_MAX];

	if (g_pd.cfg.role == PD_ROLE_MIXED)
		return 0;
	mock_buf_ok(&m->body);
	if (pd_req_parse(m->body.p ? m->body.p : "", m->body.len, m->chat, g_pd.cfg.role,
	                 g_pd.cfg.proto, g_pd.port, &m->pd, err)) {
		out_error(c, 400, err);
		return -1;
	}
	return 0;
}

/* --- the decode side ------------------------------------------------------ */

static void wait_start(struct conn *c, struct side *s)
{
	c->req.side = s;
	c->req.pd_wait = true;
	g_pd.waiting++;
	conn_set_timer(c, CT_PD_WAIT, model_ns(g_pd.cfg.wait_ms));
}

/* The wait is over: the side connection closed, the timer stopped. */
static void wait_end(struct conn *c)
{
	struct mreq *m = &c->req;

	if (m->side) {
		side_disown(m->side);
		side_close(m->side);
		m->side = NULL;
	}
	if (m->pd_wait) {
		m->pd_wait = false;
		g_pd.waiting--;
	}
	if (c->tkind == CT_PD_WAIT || c->tkind == CT_PD_XFER) {
		heap_remove(&g_srv.timers, &c->timer);
		c->tkind = CT_NONE;
	}
}

static void pd_fail(struct conn *c, enum pd_result r, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* End c's request with an error answer. */
static void pd_fail(struct conn *c, enum pd_result r, int status, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	g_pd.results[r]++;
	wait_end(c);
	out_error(c, status, msg);
}

/* The KV of c's prompt arrived: blocks of it, `fresh` of them transferred;
 * the request goes on after the transfer time. */
static void kv_arrived(struct conn *c, uint32_t blocks, uint32_t fresh)
{
	struct mreq *m = &c->req;
	double tokens = (double)fresh * KV_BLOCK_TOKENS;

	if (m->side) {
		side_disown(m->side);
		side_close(m->side);
		m->side = NULL;
	}
	m->sim.nhashes_held = blocks;
	g_pd.kv_tokens += (uint64_t)tokens;
	g_pd.results[PDR_OK]++;
	conn_set_timer(c, CT_PD_XFER, model_ns(tokens / g_pd.cfg.kv_tokens_per_s * 1000));
}

/* Whether blocks/last_hash are the KV of c's prompt. */
static bool is_mine(const struct mreq *m, uint32_t blocks, uint64_t last_hash)
{
	return blocks == m->sim.nhashes && (!blocks || last_hash == m->hashes[blocks - 1]);
}

/* A vLLM pull failed (not refused), counted as r. 0: go on without the KV
 * (--kv-load-failure-policy recompute); -1: answered. */
static int pull_failed(struct conn *c, enum pd_result r, const char *why)
{
	struct mreq *m = &c->req;

	if (!g_pd.cfg.recompute) {
		pd_fail(c, r, 500, "kv_transfer_params: pulling the KV from %s port %u failed: %s",
		        m->pd.host, m->pd.port, why);
		return -1;
	}
	g_pd.results[r]++;
	wait_end(c);
	m->sim.nhashes_held = 0;
	return 0;
}

static int pull_begin(struct conn *c)
{
	struct mreq *m = &c->req;
	struct sim_match sm;
	struct pg_buf b = {0};
	const char *err;
	struct side *s;
	size_t skip;

	if (m->pd.nblocks != m->sim.nhashes) {
		pd_fail(c, PDR_REFUSED, 400,
		        "kv_transfer_params.remote_block_ids names %zu blocks, this prompt has %zu "
		        "full blocks of %d tokens (another request's parameters?)",
		        m->pd.nblocks, m->sim.nhashes, KV_BLOCK_TOKENS);
		return -1;
	}
	if (!m->pd.nblocks)
		return 0; /* nothing was pinned: the prompt is prefilled here */
	sim_match(g_srv.sim, m->hashes, m->sim.nhashes, m->prompt_tokens, g_srv.now, &sm);
	skip = sm.cached_tokens / KV_BLOCK_TOKENS;
	m->pd_skip = (uint32_t)skip;
	s = side_dial(m->pd.host, m->pd.port, c, &err);
	if (!s)
		return pull_failed(c, PDR_FAILED, err);
	pg_buf_printf(&b, "PULL %s ", m->pd.engine);
	if (m->rid)
		pg_buf_printf(&b, "%016" PRIx64, m->rid);
	else
		pg_buf_puts(&b, "-");
	pg_buf_printf(&b, " %zu ", skip);
	for (size_t k = 0; k < m->pd.nblocks; k++)
		pg_buf_printf(&b, k ? ",%" PRIu64 : "%" PRIu64, m->pd.block_ids[k]);
	pg_buf_puts(&b, "\n");
	mock_buf_ok(&b);
	wait_start(c, s);
	side_send(s, b.p, b.len);
	pg_buf_free(&b);
	return 1;
}

static int rooms_begin(struct conn *c)
{
	struct mreq *m = &c->req;
	const char *err;
	struct side *s = side_dial(m->pd.host, m->pd.port, c, &err);
	char line[64];

	if (!s) {
		pd_fail(c, PDR_FAILED, 500,
		        "bootstrap_host %s, bootstrap_port %u: cannot reach the prefill: %s",
		        m->pd.host, m->pd.port, err);
		return -1;
	}
	wait_start(c, s);
	m->rooms_got = 0;
	for (size_t k = 0; k < m->pd.nrooms; k++) {
		int n = snprintf(line, sizeof(line), "ROOM %" PRIu64 "\n", m->pd.room[k]);

		side_send(s, line, (size_t)n);
	}
	return 1;
}

int pd_begin(struct conn *c)
{
	switch (c->req.pd.leg) {
	case PD_LEG_VLLM_DECODE:
		return pull_begin(c);
	case PD_LEG_SGLANG_DECODE:
		return rooms_begin(c);
	case PD_LEG_SGLANG_PREFILL:
		/* the prefill computes the first token only; the decode the rest */
		c->req.pr.max_tokens = 1;
		return 0;
	case PD_LEG_PLAIN:
	case PD_LEG_VLLM_PREFILL:
		break;
	}
	return 0;
}

/* The prefill's answer to c's pull. */
static void pull_answer(struct conn *c, char *line)
{
	struct mreq *m = &c->req;
	unsigned blocks;
	uint64_t h;
	char reason[32];
	int off = 0;

	if (sscanf(line, "OK %u %" SCNx64, &blocks, &h) == 2) {
		if (!is_mine(m, blocks, h)) {
			pd_fail(c, PDR_REFUSED, 400,
			        "kv_transfer_params: the KV pulled from %s port %u is another "
			        "prompt's (%u blocks, the last hashed %016" PRIx64
			        "; this prompt's: %zu, %016" PRIx64
			        "): another request's parameters?",
			        m->pd.host, m->pd.port, blocks, h, m->sim.nhashes,
			        m->sim.nhashes ? m->hashes[m->sim.nhashes - 1] : 0);
			return;
		}
		kv_arrived(c, blocks, blocks - m->pd_skip);
	} else if (sscanf(line, "ERR %31s %n", reason, &off) == 1 && off > 0) {
		pd_fail(c, PDR_REFUSED, 400,
		        "kv_transfer_params: the prefill at %s port %u refused the pull (%s): %s",
		        m->pd.host, m->pd.port, reason, line + off);
	} else if (pull_failed(c, PDR_FAILED, "an answer that is not the side protocol's") == 0) {
		route_go(c);
	}
}

/* A line about one of c's rooms. */
static void room_answer(struct conn *c, char *line)
{
	struct mreq *m = &c->req;
	unsigned blocks;
	uint64_t room, h, all;
	char reason[32];
	int off = 0;
	size_t k;

	if (sscanf(line, "KV %" SCNu64 " %u %" SCNx64, &room, &blocks, &h) == 3) {
		for (k = 0; k < m->pd.nrooms && m->pd.room[k] != room; k++)
			;
		if (k == m->pd.nrooms || (m->rooms_got >> k & 1)) {
			pd_fail(
			    c, PDR_FAILED, 500,
			    "bootstrap_room: the prefill at %s port %u handed over room %" PRIu64
			    ", not one of this request's",
			    m->pd.host, m->pd.port, room);
			return;
		}
		if (!is_mine(m, blocks, h)) {
			pd_fail(c, PDR_REFUSED, 400,
			        "bootstrap_room %" PRIu64
			        ": the KV the prefill at %s port %u handed "
			        "over is another prompt's (%u blocks, the last hashed %016" PRIx64
			        "; this prompt's: %zu, %016" PRIx64 "): the legs' bodies differ?",
			        room, m->pd.host, m->pd.port, blocks, h, m->sim.nhashes,
			        m->sim.nhashes ? m->hashes[m->sim.nhashes - 1] : 0);
			return;
		}
		m->rooms_got |= 1ull << k;
		all = m->pd.nrooms == 64 ? UINT64_MAX : (1ull << m->pd.nrooms) - 1;
		if (m->rooms_got == all)
			kv_arrived(c, blocks, blocks);
	} else if (sscanf(line, "ERR %" SCNu64 " %31s %n", &room, reason, &off) == 2 && off > 0) {
		pd_fail(c, PDR_REFUSED, 400,
		        "bootstrap_room %" PRIu64 ": the prefill at %s port %u refused it (%s): %s",
		        room, m->pd.host, m->pd.port, reason, line + off);
	} else {
		pd_fail(c, PDR_FAILED, 500,
		        "bootstrap_room: the prefill at %s port %u answered outside the protocol",
		        m->pd.host, m->pd.port);
	}
}

/* --- the prefill side ----------------------------------------------------- */

static void answer(struct side *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void answer(struct side *s, const char *fmt, ...)
{
	char line[XFER_WHY_MAX + 96];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(line))
		n = (int)sizeof(line) - 1;
	side_send(s, line, (size_t)n);
}

/* PULL <engine> <rid|-> <skip> <ids> */
static void serve_pull(struct side *s, char *line)
{
	char engine[PD_ENGINE_MAX], rid_s[24];
	uint64_t rid = 0, *ids = NULL, h = 0;
	size_t skip, n = 0, cap = 0;
	char why[XFER_WHY_MAX], *p, *end;
	uint32_t blocks = 0;
	enum xfer_result r;
	int off = 0;

	if (sscanf(line, "PULL %127s %23s %zu %n", engine, rid_s, &skip, &off) != 3 || !off) {
		answer(s, "ERR bad a pull is PULL ENGINE RID SKIP IDS\n");
		goto out;
	}
	if (strcmp(rid_s, "-"))
		rid = strtoull(rid_s, NULL, 16);
	for (p = line + off; *p;) {
		uint64_t id = strtoull(p, &end, 10);

		if (end == p || (*end && *end != ',')) {
			answer(s, "ERR bad block ids are decimal integers separated by commas\n");
			goto out;
		}
		if (n == cap) {
			uint64_t *v = realloc(ids, (cap = cap ? 2 * cap : 64) * sizeof(*v));

			if (!v) {
				answer(s, "ERR bad out of memory\n");
				goto out;
			}
			ids = v;
		}
		ids[n++] = id;
		p = *end ? end + 1 : end;
	}
	r = xfer_pull(&g_pd.xfer, g_srv.now, engine, rid, ids, n, skip, &blocks, &h, why);
	if (r == XFER_OK)
		answer(s, "OK %u %016" PRIx64 "\n", blocks, h);
	else
		answer(s, "ERR %s %s\n", xfer_reason(r), why);
out:
	free(ids);
	side_close_when_sent(s);
}

static const char *room_why(enum room_result r)
{
	switch (r) {
	case ROOM_DUPLICATE:
		return "another decode registered this room";
	case ROOM_DONE:
		return "this room's KV was handed over already";
	case ROOM_EXPIRED:
		return "this room's KV waited longer than --kv-transfer-ttl-ms and was dropped";
	default:
		return "";
	}
}

/* ROOM <room> */
static void serve_room(struct side *s, const char *line)
{
	struct room_kv kv;
	uint64_t room;
	int rc;

	if (sscanf(line, "ROOM %" SCNu64, &room) != 1) {
		answer(s, "ERR 0 bad a registration is ROOM NUMBER\n");
		return;
	}
	rc = rooms_register(&g_pd.rooms, room, s, g_srv.now, &kv);
	if (rc == ROOM_MATCHED)
		answer(s, "KV %" PRIu64 " %u %016" PRIx64 "\n", room, kv.blocks, kv.last_hash);
	else if (rc == ROOM_WAITING && side_add_room(s, room) == 0)
		return;
	else if (rc == ROOM_WAITING || rc == -1)
		answer(s, "ERR %" PRIu64 " bad out of memory\n", room);
	else
		answer(s, "ERR %" PRIu64 " %s %s\n", room, room_result_name(rc), room_why(rc));
}

void pd_side_line(struct side *s, char *line, size_t n)
{
	struct conn *c = side_owner(s);

	(void)n;
	if (side_is_server(s)) {
		if (g_pd.cfg.proto == PD_PROTO_VLLM)
			serve_pull(s, line);
		else
			serve_room(s, line);
		return;
	}
	if (!c) {
		side_close(s);
		return;
	}
	if (c->req.pd.leg == PD_LEG_VLLM_DECODE)
		pull_answer(c, line);
	else
		room_answer(c, line);
}

void pd_side_gone(struct side *s, const char *why)
{
	struct conn *c = side_owner(s);
	size_t n;
	const uint64_t *rooms = side_rooms(s, &n);

	for (size_t k = 0; k < n; k++)
		rooms_unregister(&g_pd.rooms, rooms[k], s);
	side_close(s);
	if (!c)
		return;
	if (c->req.pd.leg == PD_LEG_VLLM_DECODE) {
		if (pull_failed(c, PDR_FAILED,
		                why ? why : "the side connection closed before the answer") == 0)
			route_go(c);
		return;
	}
	pd_fail(c, PDR_FAILED, 500,
	        "bootstrap_room: the prefill at %s port %u closed the connection (%s) before "
	        "handing over every room's KV",
	        c->req.pd.host, c->req.pd.port, why ? why : "end of stream");
}

/* --- a prefill leg's end, timers, release ---------------------------------- */

void pd_prefill_done(struct conn *c)
{
	struct mreq *m = &c->req;
	struct room_kv kv = {.blocks = (uint32_t)m->sim.nhashes};

	if (m->pd_done)
		return;
	m->pd_done = true;
	if (kv.blocks)
		kv.last_hash = m->hashes[kv.blocks - 1];
	if (m->pd.leg == PD_LEG_VLLM_PREFILL) {
		m->pd_first = kv.blocks
		                  ? xfer_pin(&g_pd.xfer, g_srv.now, kv.blocks, kv.last_hash, m->rid)
		                  : 0;
		m->pd_blocks = m->pd_first ? kv.blocks : 0;
		return;
	}
	if (m->pd.leg != PD_LEG_SGLANG_PREFILL)
		return;
	for (size_t k = 0; k < m->pd.nrooms; k++) {
		void *waiter = NULL;

		if (rooms_ready(&g_pd.rooms, m->pd.room[k], &kv, g_srv.now, &waiter) ==
		    ROOM_MATCHED)
			answer(waiter, "KV %" PRIu64 " %u %016" PRIx64 "\n", m->pd.room[k],
			       kv.blocks, kv.last_hash);
	}
}

void pd_params_json(struct conn *c, struct pg_buf *b)
{
	const struct mreq *m = &c->req;

	pd_kv_params_json(b, g_pd.engine, m->pd_first, m->pd_blocks, g_pd.host, g_pd.port);
}

void pd_timer(struct conn *c, int kind)
{
	struct mreq *m = &c->req;

	if (kind == CT_PD_XFER) {
		wait_end(c);
		route_go(c);
		return;
	}
	/* CT_PD_WAIT: no KV in time */
	if (m->pd.leg == PD_LEG_SGLANG_DECODE) {
		pd_fail(c, PDR_TIMED_OUT, 500,
		        "bootstrap_room %" PRIu64 "%s: no KV from the prefill at %s port %u within "
		        "%g ms (--kv-wait-timeout-ms)",
		        m->pd.room[0], m->pd.nrooms > 1 ? " (and others)" : "", m->pd.host,
		        m->pd.port, g_pd.cfg.wait_ms);
		return;
	}
	if (pull_failed(c, PDR_TIMED_OUT, "no answer within --kv-wait-timeout-ms") == 0)
		route_go(c);
}

void pd_release(struct conn *c)
{
	wait_end(c);
	pd_req_free(&c->req.pd);
}
