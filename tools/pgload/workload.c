// SPDX-License-Identifier: MIT
/*
 * Request bodies for each workload, all OpenAI chat requests (but trace's,
 * which may be completions):
 *
 *   {"model":M,"messages":[...],"max_tokens":N,"stream":true,
 *    "stream_options":{"include_usage":true}}      (stream fields: not with --no-stream)
 *
 * Text is pseudo-random lowercase words (pg_wl_text, text.c); a token is
 * counted as 4 bytes of text (how mockllm tokenizes), so T tokens are
 * exactly 4T bytes.
 *
 *   shared-prefix  system message (--system-tokens, same for every request),
 *                  then a user message: document d + "\n\nQuestion: " + a
 *                  random --question-tokens question unique to the request.
 *                  d ~ Zipf(--zipf) over --docs documents of --doc-tokens.
 *   hot-prefix     as shared-prefix, but document 0 is chosen with
 *                  probability --hot-share, else Zipf over documents 1..N-1.
 *   no-prefix      same shape and sizes, but the system message and the
 *                  document are unique to the request: nothing is shared.
 *   multi-turn     --conversations conversations are live at once. Each has
 *                  U ~ uniform[--min-turns, --max-turns] user turns; user turn
 *                  lengths ~ lognormal(median --user-tokens, sigma 0.8) and
 *                  assistant turns ~ lognormal(median --assistant-tokens, sigma
 *                  0.8), clamped to [4, 16 x median] tokens. Request t carries
 *                  user 0, assistant 0, ..., user t (no system message).
 *                  Assistant turn t is, with --history server (the default),
 *                  the reply the server sent to request t, re-sent verbatim
 *                  (raw JSON string bytes: sse.c), and request t asks for
 *                  max_tokens = the drawn assistant length of turn t, so the
 *                  history grows as drawn and, with mockllm's output caching,
 *                  what an instance generated is what the next turn re-sends;
 *                  a turn whose response failed (not a complete 2xx, or a
 *                  reply longer than PG_REPLY_MAX) ends its conversation, as
 *                  there is no reply to re-send. With --history replay it is
 *                  the conversation's own drawn text (a replayed ShareGPT
 *                  log, which the server never generated) and max_tokens is
 *                  --max-tokens. A conversation's next turn is ready only
 *                  after its previous response ended; a finished (or ended)
 *                  conversation is replaced by a new one.
 *   agentic        an agent loop: every request starts with the same long
 *                  block, then a conversation. The block is a "tools" array
 *                  (placed before "messages") of --tools function definitions,
 *                  each with a --tool-tokens description and two described
 *                  parameters, and a --system-tokens system message (default
 *                  10,000 for this workload: ~12,000 tokens in all). Both are
 *                  drawn once from --seed and are byte-identical in every
 *                  request. Then conversations exactly as multi-turn (same
 *                  options, same lifecycle), each request re-sending its
 *                  conversation's whole history: only what follows the shared
 *                  block tells conversations apart.
 *   short-chat     ShareGPT-like chats whose whole history stays short: as
 *                  multi-turn with other defaults (256 conversations, 2..6
 *                  turns, medians 24 user / 48 assistant tokens), an optional
 *                  shared --system-tokens system message (default 0), and a
 *                  bound: no request carries more than --history-tokens
 *                  (default 800) tokens of message text, system included. A
 *                  conversation whose next turn would cross it ends there; a
 *                  first user turn that alone would is cut to fit and is the
 *                  conversation's only turn. 800 tokens are 3,200
 *                  bytes: under the gateway's default 4,096-code-point
 *                  PrefixLength, so every turn of a conversation has its own
 *                  prefix key.
 *   fixed          one body of exactly --body-bytes bytes, sent every time.
 *   trace          a request trace replayed at its own times: wl_trace.c.
 *
 * multi-turn, agentic and short-chat share the conversation machinery: turn
 * t's messages are turn t-1's plus the assistant turn t-1 and user turn t,
 * byte for byte; a conversation's shape and text are functions of (--seed,
 * its id) and, with --history server, of its replies; ids are handed out in
 * the order conversations start. Memory: a conversation keeps its replies,
 * each at most PG_REPLY_MAX(its drawn length) bytes, so at most
 * MAX_TURNS_LIMIT x PG_REPLY_MAX(16 x --assistant-tokens) bytes.
 */
#include "workload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "lib/buf.h"
#include "rng.h"
#include "trace.h"

#define TURN_SIGMA      0.8
#define MAX_TURNS_LIMIT 64

struct conv {
	uint32_t id;
	uint32_t nturns, next;
	uint32_t user[MAX_TURNS_LIMIT], assistant[MAX_TURNS_LIMIT]; /* tokens */
	/* --history server: the replies to turns 0..next-1, back to back; reply
	 * t ends at reply_end[t] */
	struct pg_buf replies;
	size_t reply_end[MAX_TURNS_LIMIT];
};

struct pg_workload {
	const struct pg_opts *o;
	char *system;        /* shared system message text */
	char **docs;         /* generated on first use */
	struct pg_zipf zipf; /* over all docs, or docs 1..N-1 for hot-prefix */
	char *fixed;         /* fixed body */
	size_t fixed_len;
	/* conversations (multi-turn, agentic, short-chat) */
	char *head; /* body up to the first conversation message */
	size_t head_len;
	bool head_has_msg; /* head ends with a message (agentic's system) */
	struct conv *convs;
	uint32_t *ready; /* FIFO of conversation slots ready for their next turn */
	size_t ready_head, ready_n;
	uint32_t next_conv_id;
	struct pg_trace_wl *trace;
};

static const char *doc_text(struct pg_workload *w, uint32_t d)
{
	size_t n = (size_t)w->o->doc_tokens * 4;

	if (!w->docs[d]) {
		w->docs[d] = malloc(n);
		if (!w->docs[d])
			return NULL;
		pg_wl_text(w->docs[d], n, pg_mix(w->o->seed, TAG_DOC, d));
	}
	return w->docs[d];
}

static uint32_t pick_doc(struct pg_workload *w, uint64_t idx)
{
	const struct pg_opts *o = w->o;
	struct pg_rng r;

	pg_rng_seed(&r, pg_mix(o->seed, TAG_PICK, idx));
	if (o->workload == WL_HOT_PREFIX) {
		if (o->docs == 1 || pg_rng_unit(&r) < o->hot_share)
			return 0;
		return 1 + (uint32_t)pg_zipf_sample(&w->zipf, &r);
	}
	return (uint32_t)pg_zipf_sample(&w->zipf, &r);
}

/* shared-prefix, hot-prefix and no-prefix. */
static int prefix_body(struct pg_workload *w, uint64_t idx, struct pg_wl_req *out)
{
	const struct pg_opts *o = w->o;
	size_t sys_n = (size_t)o->system_tokens * 4, doc_n = (size_t)o->doc_tokens * 4;
	struct pg_buf b = {0};
	const char *doc = NULL;
	uint32_t d = 0;

	if (o->workload != WL_NO_PREFIX) {
		d = pick_doc(w, idx);
		doc = doc_text(w, d);
		if (!doc)
			return -1;
	}
	pg_buf_reserve(&b, sys_n + doc_n + (size_t)o->question_tokens * 4 + 512);
	pg_body_open(&b, o);
	if (sys_n) {
		pg_body_msg_open(&b, "system", true);
		if (doc)
			pg_buf_append(&b, w->system, sys_n);
		else
			pg_body_text(&b, sys_n, pg_mix(o->seed, TAG_UNIQUE_SYS, idx));
		pg_body_msg_close(&b);
	}
	pg_body_msg_open(&b, "user", sys_n == 0);
	if (doc)
		pg_buf_append(&b, doc, doc_n);
	else
		pg_body_text(&b, doc_n, pg_mix(o->seed, TAG_UNIQUE_DOC, idx));
	pg_buf_puts(&b, "\\n\\nQuestion: ");
	pg_body_text(&b, (size_t)o->question_tokens * 4, pg_mix(o->seed, TAG_QUESTION, idx));
	pg_body_msg_close(&b);
	pg_body_close(&b, o, o->max_tokens);
	if (b.oom) {
		free(b.p);
		return -1;
	}
	*out = (struct pg_wl_req){.body = b.p, .len = b.len, .owned = true, .group = d};
	return 0;
}

static uint32_t clamp_tokens(double x, unsigned median)
{
	double hi = 16.0 * median;

	if (x < 4)
		x = 4;
	if (x > hi)
		x = hi;
	return (uint32_t)lround(x);
}

/* Draw conversation id's shape into slot c. */
static void conv_new(struct pg_workload *w, struct conv *c, uint32_t id)
{
	const struct pg_opts *o = w->o;
	struct pg_rng r;

	pg_rng_seed(&r, pg_mix(o->seed, TAG_CONV, id));
	c->id = id;
	c->next = 0;
	pg_buf_reset(&c->replies);
	c->nturns = (uint32_t)pg_rng_range(&r, o->min_turns, o->max_turns);
	for (uint32_t t = 0; t < c->nturns; t++) {
		c->user[t] =
		    clamp_tokens(pg_rng_lognormal(&r, o->user_tokens, TURN_SIGMA), o->user_tokens);
		c->assistant[t] = clamp_tokens(
		    pg_rng_lognormal(&r, o->assistant_tokens, TURN_SIGMA), o->assistant_tokens);
	}
	if (o->workload == WL_SHORT_CHAT) {
		/* Request t carries system + user 0..t + assistant 0..t-1. */
		uint32_t budget = o->history_tokens - o->system_tokens, used = 0;

		for (uint32_t t = 0; t < c->nturns; t++) {
			if (used + c->user[t] > budget) {
				if (t == 0)
					c->user[0] = budget;
				c->nturns = t ? t : 1;
				break;
			}
			used += c->user[t] + c->assistant[t];
		}
	}
}

static uint64_t turn_key(const struct pg_opts *o, uint32_t conv, uint32_t turn, int assistant)
{
	return pg_mix(o->seed, TAG_TURN,
	              ((uint64_t)conv << 16) | (turn << 1) | (uint64_t)assistant);
}

static int turn_body(struct pg_workload *w, struct pg_wl_req *out)
{
	const struct pg_opts *o = w->o;
	bool server = o->history == PG_HIST_SERVER;
	struct pg_buf b = {0};
	uint32_t slot;
	struct conv *c;

	if (!w->ready_n)
		return 1;
	slot = w->ready[w->ready_head];
	c = &w->convs[slot];
	pg_buf_reserve(&b, w->head_len + 4096);
	pg_buf_append(&b, w->head, w->head_len);
	for (uint32_t t = 0; t <= c->next; t++) {
		pg_body_msg_open(&b, "user", t == 0 && !w->head_has_msg);
		pg_body_text(&b, (size_t)c->user[t] * 4, turn_key(o, c->id, t, 0));
		pg_body_msg_close(&b);
		if (t == c->next)
			break;
		pg_body_msg_open(&b, "assistant", false);
		if (server) {
			size_t from = t ? c->reply_end[t - 1] : 0;

			pg_buf_append(&b, c->replies.p + from, c->reply_end[t] - from);
		} else {
			pg_body_text(&b, (size_t)c->assistant[t] * 4, turn_key(o, c->id, t, 1));
		}
		pg_body_msg_close(&b);
	}
	pg_body_close(&b, o, server ? c->assistant[c->next] : o->max_tokens);
	if (b.oom) {
		free(b.p);
		return -1;
	}
	w->ready_head = (w->ready_head + 1) % o->conversations;
	w->ready_n--;
	*out = (struct pg_wl_req){
	    .body = b.p,
	    .len = b.len,
	    .owned = true,
	    .group = c->id,
	    .turn = c->next,
	    .slot = slot,
	    .reply_max = server ? PG_REPLY_MAX(c->assistant[c->next]) : 0,
	};
	return 0;
}

/* The conversation workloads: the body up to the first conversation
 * message, and the conversations. */
static int conv_init(struct pg_workload *w)
{
	const struct pg_opts *o = w->o;
	struct pg_buf b = {0};
	size_t sys_n = (size_t)o->system_tokens * 4;

	if (o->max_turns > MAX_TURNS_LIMIT) {
		fprintf(stderr, "pgload: --max-turns is at most %d\n", MAX_TURNS_LIMIT);
		return 1;
	}
	if (o->workload == WL_SHORT_CHAT && o->system_tokens + 4 > o->history_tokens) {
		fprintf(stderr,
		        "pgload: --history-tokens %u leaves no room after --system-tokens %u\n",
		        o->history_tokens, o->system_tokens);
		return 1;
	}
	if (o->workload != WL_MULTI_TURN && sys_n) {
		w->system = malloc(sys_n);
		if (!w->system)
			return -1;
		pg_wl_text(w->system, sys_n, pg_mix(o->seed, TAG_SYSTEM, 0));
	}
	pg_buf_puts(&b, "{\"model\":\"");
	pg_buf_puts(&b, o->model);
	pg_buf_puts(&b, "\",");
	if (o->workload == WL_AGENTIC) {
		pg_body_tools_head(&b, o, w->system);
		w->head_has_msg = true;
	} else {
		pg_buf_puts(&b, "\"messages\":[");
		if (w->system) {
			pg_body_msg_open(&b, "system", true);
			pg_buf_append(&b, w->system, sys_n);
			pg_body_msg_close(&b);
			w->head_has_msg = true;
		}
	}
	if (b.oom) {
		free(b.p);
		return -1;
	}
	w->head = b.p;
	w->head_len = b.len;
	w->convs = calloc(o->conversations, sizeof(*w->convs));
	w->ready = calloc(o->conversations, sizeof(*w->ready));
	if (!w->convs || !w->ready)
		return -1;
	for (uint32_t i = 0; i < o->conversations; i++) {
		conv_new(w, &w->convs[i], i);
		w->ready[i] = i;
	}
	w->ready_n = o->conversations;
	w->next_conv_id = o->conversations;
	return 0;
}

static bool is_conv(enum wl_kind k)
{
	return k == WL_MULTI_TURN || k == WL_AGENTIC || k == WL_SHORT_CHAT;
}

static int fixed_init(struct pg_workload *w)
{
	const struct pg_opts *o = w->o;
	struct pg_buf b = {0};
	size_t env, fill;

	pg_body_open(&b, o);
	pg_body_msg_open(&b, "user", true);
	env = b.len;
	pg_body_msg_close(&b);
	pg_body_close(&b, o, o->max_tokens);
	if (b.oom)
		return -1;
	if (o->body_bytes < b.len + 1) {
		fprintf(stderr, "pgload: --body-bytes %zu is below the smallest request (%zu)\n",
		        o->body_bytes, b.len + 1);
		free(b.p);
		return -1;
	}
	fill = o->body_bytes - b.len;
	/* Rebuild with the content in place. */
	b.len = env;
	pg_body_text(&b, fill, pg_mix(o->seed, TAG_FIXED, 0));
	pg_body_msg_close(&b);
	pg_body_close(&b, o, o->max_tokens);
	if (b.oom)
		return -1;
	w->fixed = b.p;
	w->fixed_len = b.len;
	return 0;
}

struct pg_workload *pg_wl_create(const struct pg_opts *o)
{
	struct pg_workload *w = calloc(1, sizeof(*w));
	int rc = 0;

	if (!w)
		goto oom;
	w->o = o;
	switch (o->workload) {
	case WL_SHARED_PREFIX:
	case WL_HOT_PREFIX:
	case WL_NO_PREFIX:
		w->system = malloc((size_t)o->system_tokens * 4 + 1);
		w->docs = calloc(o->docs, sizeof(*w->docs));
		if (!w->system || !w->docs)
			goto oom;
		pg_wl_text(w->system, (size_t)o->system_tokens * 4, pg_mix(o->seed, TAG_SYSTEM, 0));
		if (o->workload == WL_HOT_PREFIX)
			rc = o->docs > 1 ? pg_zipf_init(&w->zipf, o->docs - 1, o->zipf_s) : 0;
		else
			rc = pg_zipf_init(&w->zipf, o->docs, o->zipf_s);
		if (rc == -1)
			goto oom;
		break;
	case WL_MULTI_TURN:
	case WL_AGENTIC:
	case WL_SHORT_CHAT:
		rc = conv_init(w);
		if (rc == -1)
			goto oom;
		if (rc)
			goto fail;
		break;
	case WL_FIXED:
		if (fixed_init(w) == -1)
			goto fail;
		break;
	case WL_TRACE:
		w->trace = pg_trace_wl_create(o);
		if (!w->trace)
			goto fail;
		break;
	}
	return w;
oom:
	fprintf(stderr, "pgload: out of memory building the workload\n");
fail:
	pg_wl_destroy(w);
	return NULL;
}

int pg_wl_next(struct pg_workload *w, uint64_t idx, struct pg_wl_req *out)
{
	switch (w->o->workload) {
	case WL_MULTI_TURN:
	case WL_AGENTIC:
	case WL_SHORT_CHAT:
		return turn_body(w, out);
	case WL_FIXED:
		*out = (struct pg_wl_req){.body = w->fixed, .len = w->fixed_len};
		return 0;
	case WL_TRACE:
		return pg_trace_wl_next(w->trace, idx, out);
	default:
		return prefix_body(w, idx, out);
	}
}

/* --history server: keep the reply to c's current turn; false when there
 * is none to keep (the turn failed, or no memory for it). ok means it was
 * captured whole, so within the turn's reply_max (pg_wl_done). */
static bool keep_reply(struct conv *c, bool ok, const char *reply, size_t len)
{
	if (!ok)
		return false;
	if (len)
		pg_buf_append(&c->replies, reply, len);
	c->reply_end[c->next] = c->replies.len;
	return !c->replies.oom;
}

void pg_wl_done(struct pg_workload *w, struct pg_wl_req *r, bool ok, const char *reply, size_t len)
{
	if (r->owned)
		free(r->body);
	r->body = NULL;
	if (is_conv(w->o->workload)) {
		struct conv *c = &w->convs[r->slot];
		bool end = w->o->history == PG_HIST_SERVER && !keep_reply(c, ok, reply, len);

		if (end || ++c->next == c->nturns)
			conv_new(w, c, w->next_conv_id++);
		w->ready[(w->ready_head + w->ready_n) % w->o->conversations] = r->slot;
		w->ready_n++;
	}
}

int pg_wl_at(const struct pg_workload *w, uint64_t k, uint64_t *off_ns)
{
	return w->trace ? pg_trace_wl_at(w->trace, k, off_ns) : 1;
}

void pg_wl_trace_sum(const struct pg_workload *w, struct pg_trace_sum *sum)
{
	if (w->trace)
		pg_trace_wl_sum(w->trace, sum);
	else
		*sum = (struct pg_trace_sum){0};
}

unsigned pg_wl_target(const struct pg_opts *o, uint64_t idx)
{
	struct pg_rng r;

	if (o->ntargets <= 1)
		return 0;
	pg_rng_seed(&r, pg_mix(o->seed, TAG_TARGET, idx));
	return (unsigned)pg_rng_range(&r, 0, o->ntargets - 1);
}

void pg_wl_destroy(struct pg_workload *w)
{
	if (!w)
		return;
	if (w->docs)
		for (unsigned i = 0; i < w->o->docs; i++)
			free(w->docs[i]);
	free(w->docs);
	free(w->system);
	free(w->head);
	pg_zipf_free(&w->zipf);
	free(w->fixed);
	if (w->convs)
		for (unsigned i = 0; i < w->o->conversations; i++)
			pg_buf_free(&w->convs[i].replies);
	free(w->convs);
	free(w->ready);
	pg_trace_wl_destroy(w->trace);
	free(w);
}
