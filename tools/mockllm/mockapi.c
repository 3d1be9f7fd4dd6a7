// SPDX-License-Identifier: MIT
/*
 * The /mock/ endpoints: no real server has them. Benchmarks use them to
 * build reference routers that know each instance's real cache and queue
 * (the upper bound of routing on engines' KV events), and to change an
 * instance's speed in the middle of a run.
 *
 * POST /mock/match/v1/completions, /mock/match/v1/chat/completions: the body
 * is what the endpoint after /mock/match takes, parsed by the same code
 * (route_parse_prompt), and answered as that endpoint would answer a
 * malformed one (400). Nothing is submitted and the cache's LRU order is
 * not touched; the answer is what a request submitted now would meet
 * (sim_match, sim.c).
 *
 * GET /mock/speed: the speed factor in effect and the rates it gives.
 * POST /mock/speed {"factor": F}: from now on run at F times the configured
 * speed (after --time-scale and --speed); the prefill in progress keeps its
 * end time (sim_set_speed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "mockllm.h"

/* POST /mock/speed accepts factors in this range (as --speed does). */
#define SPEED_MIN 0.001
#define SPEED_MAX 1000.0

void mock_match(struct conn *c)
{
	struct mreq *m = &c->req;
	struct sim_match sm;
	char body[512];
	int n;

	if (!m->is_post) {
		out_error(c, 405, "use POST");
		return;
	}
	m->chat = m->route == R_MATCH_CHAT;
	/* only the prompt's blocks: what a prefill looks up */
	if (route_parse_prompt(c, false))
		return;
	sim_match_text(g_srv.sim, m->pr.text, m->pr.len, m->hashes, m->sim.nhashes,
	               m->prompt_tokens, g_srv.now, &sm);
	n = snprintf(body, sizeof(body),
	             "{\"prompt_tokens\":%u,\"cached_tokens\":%u,\"waiting\":%u,\"running\":%u,"
	             "\"queue_tokens\":%llu,\"prefill_tokens_per_s\":%.10g,"
	             "\"ttft_overhead_ms\":%.10g,\"predicted_ttft_ms\":%.10g}\n",
	             sm.prompt_tokens, sm.cached_tokens, sm.waiting, sm.running,
	             (unsigned long long)sm.queue_tokens, sm.prefill_tokens_per_s,
	             sm.ttft_overhead_ms, sm.predicted_ttft_ms);
	out_simple(c, 200, "application/json", body, (size_t)n);
}

/* "factor" of a JSON object body, in [SPEED_MIN, SPEED_MAX]; NULL, or why
 * not. */
static const char *parse_factor(const char *p, size_t len, double *f)
{
	static const char why[] = "want a JSON object {\"factor\": F}, F from 0.001 to 1000";
	struct pg_json js = {0};
	const char *err = why;
	char num[64], *end;
	int64_t v;

	if (pg_json_parse(&js, p, len) || js.tok[0].type != PG_JSON_OBJECT)
		goto out;
	v = pg_json_find(&js, 0, "factor", 6);
	if (v < 0 || js.tok[v].type != PG_JSON_NUMBER ||
	    js.tok[v].end - js.tok[v].start >= sizeof(num))
		goto out;
	memcpy(num, js.src + js.tok[v].start, js.tok[v].end - js.tok[v].start);
	num[js.tok[v].end - js.tok[v].start] = '\0';
	*f = strtod(num, &end);
	if (*end == '\0' && *f >= SPEED_MIN && *f <= SPEED_MAX)
		err = NULL;
out:
	pg_json_free(&js);
	return err;
}

void mock_speed(struct conn *c)
{
	struct mreq *m = &c->req;
	const struct sim_params *p;
	char body[256];
	double f;
	int n;

	if (m->is_post) {
		const char *err;

		mock_buf_ok(&m->body);
		err = parse_factor(m->body.p ? m->body.p : "", m->body.len, &f);
		if (err) {
			out_error(c, 400, err);
			return;
		}
		sim_set_speed(g_srv.sim, f);
	} else if (!m->is_get && !m->is_head) {
		out_error(c, 405, "use GET or POST");
		return;
	}
	p = sim_params_now(g_srv.sim);
	n = snprintf(body, sizeof(body),
	             "{\"factor\":%.10g,\"prefill_tokens_per_s\":%.10g,\"ttft_overhead_ms\":%.10g,"
	             "\"decode_ms_per_token\":%.10g}\n",
	             sim_speed(g_srv.sim), p->prefill_tokens_per_s, p->ttft_overhead_ms,
	             p->decode_ms_per_token);
	out_simple(c, 200, "application/json", body, (size_t)n);
}
