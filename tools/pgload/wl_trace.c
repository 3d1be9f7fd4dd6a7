// SPDX-License-Identifier: MIT
/*
 * The trace workload (--workload trace): each request of a trace (trace.h)
 * becomes one request, sent at its own timestamp scaled by S.
 *
 *   prompt  its blocks' texts (pg_trace_block_text, keyed by --seed and the
 *           block id), the last cut so the prompt is input_length x 4 bytes:
 *           requests that share their first k block ids share their first
 *           k x 2,048 prompt bytes, as the trace says they share k x 512
 *           tokens.
 *   body    /v1/completions (the default path): {"prompt": the prompt};
 *           a path ending in /chat/completions: block 0's text (2,048
 *           bytes, or the whole prompt if shorter) as a system message and
 *           the rest as one user message (empty if nothing is left), so a
 *           router keyed on the system message sees every request alike.
 *           max_tokens = output_length (at least 1).
 *   header  X-Trace-Index: the request's index in the file.
 *
 * Bodies are built per request and freed when it ends; the trace itself is
 * the only lasting memory (24 bytes a request, 4 a block id).
 */
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "rng.h"

struct pg_trace_wl {
	const struct pg_opts *o;
	struct pg_trace t;
	size_t first, count; /* the part replayed */
	bool chat;           /* --path ends in /chat/completions */
	struct pg_trace_sum sum;
};

/* n bytes: a space, then pg_wl_text (trace.h: why the space). */
static void spaced_text(char *out, size_t n, uint64_t key)
{
	if (!n)
		return;
	out[0] = ' ';
	pg_wl_text(out + 1, n - 1, key);
}

void pg_trace_block_text(char *out, uint64_t seed, uint32_t id)
{
	spaced_text(out, PG_TRACE_BLOCK_BYTES, pg_mix(seed, TAG_TRACE_BLOCK, id));
}

/* Bytes [from, to) of request i's padding (its n bytes after the ids). */
static void pad_text(struct pg_buf *b, uint64_t seed, size_t i, size_t n, size_t from, size_t to)
{
	char *p = malloc(n);

	if (!p) {
		b->oom = true;
		return;
	}
	spaced_text(p, n, pg_mix(seed, TAG_TRACE_PAD, i));
	pg_buf_append(b, p + from, to - from);
	free(p);
}

size_t pg_trace_prompt(struct pg_buf *b, const struct pg_trace *t, uint64_t seed, size_t i,
                       size_t from, size_t to)
{
	const struct pg_trace_req *r = &t->req[i];
	const uint32_t *ids = t->ids + r->first_id;
	size_t len = (size_t)r->input_len * PG_TRACE_TOKEN_BYTES;
	size_t covered = (size_t)r->nids * PG_TRACE_BLOCK_BYTES;
	char block[PG_TRACE_BLOCK_BYTES];
	size_t pos = from;

	if (to > len)
		to = len;
	while (pos < to && pos < covered) {
		size_t k = pos / PG_TRACE_BLOCK_BYTES, off = pos % PG_TRACE_BLOCK_BYTES;
		size_t n = PG_TRACE_BLOCK_BYTES - off;
		char *d;

		if (n > to - pos)
			n = to - pos;
		if (n == PG_TRACE_BLOCK_BYTES) {
			d = pg_buf_extend(b, n); /* a whole block: drawn in place */
			if (d)
				pg_trace_block_text(d, seed, ids[k]);
		} else {
			/* Drawn whole and cut: a block's bytes never depend on
			 * how much of it a request uses. */
			pg_trace_block_text(block, seed, ids[k]);
			pg_buf_append(b, block + off, n);
		}
		pos += n;
	}
	if (pos >= to)
		return 0;
	pad_text(b, seed, i, len - covered, pos - covered, to - covered);
	return to - pos;
}

struct pg_trace_wl *pg_trace_wl_create(const struct pg_opts *o)
{
	struct pg_trace_wl *tw = calloc(1, sizeof(*tw));
	struct pg_trace_sum *s;
	size_t plen = strlen(o->path), clen = strlen("/chat/completions");

	if (!tw) {
		fprintf(stderr, "pgload: out of memory building the workload\n");
		return NULL;
	}
	tw->o = o;
	s = &tw->sum;
	tw->chat = plen >= clen && strcmp(o->path + plen - clen, "/chat/completions") == 0;
	if (pg_trace_load(&tw->t, o->trace_path) == -1)
		goto fail;
	if (o->trace_start >= tw->t.n) {
		fprintf(stderr, "pgload: --trace-start %llu: %s has %zu requests (0 .. %zu)\n",
		        (unsigned long long)o->trace_start, o->trace_path, tw->t.n, tw->t.n - 1);
		goto fail;
	}
	tw->first = (size_t)o->trace_start;
	tw->count = o->trace_requests ? (size_t)o->trace_requests : tw->t.n - tw->first;
	if (tw->count > tw->t.n - tw->first) {
		fprintf(stderr,
		        "pgload: --trace-requests %llu from --trace-start %zu runs past the end of "
		        "%s (%zu requests)\n",
		        (unsigned long long)o->trace_requests, tw->first, o->trace_path, tw->t.n);
		goto fail;
	}
	if (pg_trace_uncached(&tw->t, &s->uncached_tokens, &s->distinct_blocks) == -1) {
		fprintf(stderr, "pgload: out of memory reading --trace %s\n", o->trace_path);
		goto fail;
	}
	s->on = true;
	s->total = tw->t.n;
	s->first = tw->first;
	s->count = tw->count;
	s->span_s = pg_trace_span_s(&tw->t);
	for (size_t i = 0; i < tw->t.n; i++)
		s->input_tokens += tw->t.req[i].input_len;
	if (o->load > 0) {
		if (s->span_s <= 0 || !s->uncached_tokens) {
			fprintf(
			    stderr,
			    "pgload: --load: %s spans %.3f s with %llu uncached tokens; S = RHO x "
			    "C x D / W needs both above 0 (give --speedup instead)\n",
			    o->trace_path, s->span_s, (unsigned long long)s->uncached_tokens);
			goto fail;
		}
		s->speedup = o->load * o->capacity_tps * s->span_s / (double)s->uncached_tokens;
	} else {
		s->speedup = o->speedup > 0 ? o->speedup : 1.0;
	}
	s->mean_rate = s->span_s > 0 ? (double)s->total * s->speedup / s->span_s : 0;
	return tw;
fail:
	pg_trace_wl_destroy(tw);
	return NULL;
}

int pg_trace_wl_next(struct pg_trace_wl *tw, uint64_t idx, struct pg_wl_req *out)
{
	const struct pg_opts *o = tw->o;
	size_t i = tw->first + (size_t)idx, len, sys, pad;
	const struct pg_trace_req *r;
	struct pg_buf b = {0};

	if (idx >= tw->count)
		return -1; /* never: the schedule ends with the part */
	r = &tw->t.req[i];
	len = (size_t)r->input_len * PG_TRACE_TOKEN_BYTES;
	pg_buf_reserve(&b, len + 256);
	if (tw->chat) {
		sys = len < PG_TRACE_BLOCK_BYTES ? len : PG_TRACE_BLOCK_BYTES;
		pg_body_open(&b, o);
		pg_body_msg_open(&b, "system", true);
		pad = pg_trace_prompt(&b, &tw->t, o->seed, i, 0, sys);
		pg_body_msg_close(&b);
		pg_body_msg_open(&b, "user", false);
		pad += pg_trace_prompt(&b, &tw->t, o->seed, i, sys, len);
		pg_body_msg_close(&b);
		pg_body_close(&b, o, r->output_len ? r->output_len : 1);
	} else {
		pg_body_prompt_open(&b, o);
		pad = pg_trace_prompt(&b, &tw->t, o->seed, i, 0, len);
		pg_body_prompt_close(&b, o, r->output_len ? r->output_len : 1);
	}
	if (b.oom) {
		free(b.p);
		return -1;
	}
	tw->sum.built++;
	if (pad) {
		tw->sum.padded_requests++;
		tw->sum.padded_tokens += pad / PG_TRACE_TOKEN_BYTES;
	}
	*out = (struct pg_wl_req){
	    .body = b.p,
	    .len = b.len,
	    .owned = true,
	    .group = (uint32_t)i,
	    .traced = true,
	    .trace_index = i,
	};
	return 0;
}

int pg_trace_wl_at(const struct pg_trace_wl *tw, uint64_t k, uint64_t *off_ns)
{
	if (k >= tw->count)
		return 1;
	*off_ns = pg_trace_offset_ns(&tw->t, tw->first, (size_t)k, tw->sum.speedup);
	return 0;
}

void pg_trace_wl_sum(const struct pg_trace_wl *tw, struct pg_trace_sum *sum)
{
	*sum = tw->sum;
}

void pg_trace_wl_destroy(struct pg_trace_wl *tw)
{
	if (!tw)
		return;
	pg_trace_free(&tw->t);
	free(tw);
}
