// SPDX-License-Identifier: MIT
/*
 * A request body held for its key (body.h): its size limit, a chunked
 * body decoded as it arrives, and its JSON parsed as it arrives.
 */
#include <stdlib.h>
#include "lib/buf.h"
#include "lib/forward.h"
#include "lib/http.h"
#include "lib/json.h"
#include "lib/key.h"
#include "lib/spare.h"
#include "proxy/body.h"
#include "proxy/input.h"
#include "proxy/worker_state.h"
#include "router/route.h"

bool pg_body_too_big(struct pg_worker *w, struct pg_client *c, uint64_t size)
{
	if (size <= w->gw->cfg->max_body)
		return false;
	pg_client_error(w, c, 413, "request body too large");
	return true;
}

enum pg_chunked_rc pg_body_chunk_step(struct pg_worker *w, struct pg_client *c, size_t off,
                                      size_t *used, size_t *doff, size_t *dlen)
{
	struct pg_exchange *x = &c->x;
	enum pg_chunked_rc rc =
	    pg_chunked_feed(&x->body, c->in + off, c->in_len - off, used, doff, dlen);

	if (rc == PG_CHUNKED_ERROR) {
		pg_client_error(w, c, 400, "bad chunked body");
		return rc;
	}
	x->body_seen += *dlen;
	/* what is decoded, and the chunk being read, against the limit */
	if (pg_body_too_big(w, c, x->body_seen + x->body.remaining))
		return PG_CHUNKED_ERROR;
	if (rc == PG_CHUNKED_DONE)
		x->ch_done = true;
	return rc;
}

int pg_body_chunked(struct pg_worker *w, struct pg_client *c)
{
	struct pg_exchange *x = &c->x;

	while (!x->ch_done && x->klen < x->key_need && x->ch_off < c->in_len) {
		size_t used, doff, dlen;
		enum pg_chunked_rc rc = pg_body_chunk_step(w, c, x->ch_off, &used, &doff, &dlen);

		if (rc == PG_CHUNKED_ERROR)
			return -1;
		if (rc == PG_CHUNKED_DATA)
			pg_bytes_append(&x->kbuf, &x->klen, &x->kcap, c->in + x->ch_off + doff,
			                dlen);
		x->ch_off += used;
	}
	return x->ch_done || x->klen >= x->key_need;
}

bool pg_body_take(struct pg_worker *w, struct pg_client *c, size_t n)
{
	struct pg_exchange *x = &c->x;

	if (x->hold.lent) { /* whole, where it arrived (client.c lend_body) */
		x->body.remaining = 0;
		return true;
	}
	if (x->body.kind == PG_FRAME_LENGTH && n) {
		size_t tail = c->in_len - n;

		x->held = c->in;
		x->hold = (struct pg_hold){.buf = c->in_buf, .cap = c->in_cap};
		x->held_len = n;
		c->in = c->in_buf = NULL;
		c->in_len = c->in_cap = 0;
		if (tail)
			pg_in_append(&w->spares, c, x->held + n, tail, 0);
		x->body.remaining -= n;
		return x->body.remaining == 0;
	}
	if (x->body.kind == PG_FRAME_LENGTH)
		return x->body.remaining == 0;
	if (x->body.kind == PG_FRAME_CHUNKED) {
		pg_fwd_chunk(x->kbuf, x->klen, &x->fwd, &x->fwd_len, &x->fwd_cap);
		if (x->ch_done)
			pg_fwd_last_chunk(&x->fwd, &x->fwd_len, &x->fwd_cap);
		pg_in_consume(c, x->ch_off);
		x->ch_off = 0;
		return x->ch_done;
	}
	return true;
}

/* Stop parsing ahead: the parse at routing, if any, is of the whole. */
static void give_up(struct pg_worker *w, struct pg_exchange *x)
{
	pg_parse_ahead_end(w, x);
	x->ahead_window = 0;
}

void pg_parse_ahead(struct pg_worker *w, struct pg_exchange *x, const struct pg_route_input *in)
{
	if (!x->ahead) {
		if (!x->ahead_window || in->complete || in->body_len < PG_PARSE_AHEAD_MIN)
			return;
		x->ahead = w->nahead_spare ? w->ahead_spare[--w->nahead_spare]
		                           : calloc(1, sizeof(*x->ahead));
		if (!x->ahead)
			abort();
		pg_json_stream_init(x->ahead, x->ahead_window); /* keeps a spare's tokens */
	}
	/* A chunked body that grows past what is keyed as JSON is keyed on its
	 * raw bytes: nothing more to parse. */
	if (!in->complete && in->body_len >= PG_KEY_JSON_BODY_MAX) {
		give_up(w, x);
		return;
	}
	pg_json_stream_feed(x->ahead, in->body, in->body_len, in->complete);
	/* The tokens are held for as long as the body takes to arrive, on every
	 * connection sending one: a body that makes more token bytes than its
	 * own (tiny members, ~3x; a chat body makes a few per cent) is parsed
	 * at routing instead, when the tokens live only for the decision. */
	if (x->ahead->js.ntok * sizeof(*x->ahead->js.tok) > in->body_len)
		give_up(w, x); /* ntok: a kept parse's array may be larger */
}

void pg_parse_ahead_end(struct pg_worker *w, struct pg_exchange *x)
{
	struct pg_json_stream *ps = x->ahead;

	if (!ps)
		return;
	x->ahead = NULL;
	if (w->nahead_spare < PG_AHEAD_SPARES && pg_json_tok_bytes(&ps->js) <= PG_SPARE_KEEP) {
		w->ahead_spare[w->nahead_spare++] = ps;
		return;
	}
	pg_json_stream_free(ps);
	free(ps);
}

void pg_parse_ahead_spares_free(struct pg_worker *w)
{
	while (w->nahead_spare) {
		struct pg_json_stream *ps = w->ahead_spare[--w->nahead_spare];

		pg_json_stream_free(ps);
		free(ps);
	}
}
