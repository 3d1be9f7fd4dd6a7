/* SPDX-License-Identifier: MIT */
/*
 * What an engine's answer says of its request, pure: the prompt, cached and
 * completion tokens it reports, read from the response body as it passes,
 * in pieces split anywhere. No I/O, no allocation, no clock; the state is
 * fixed and small (no copy of the body is kept): a JSON lexer that tracks
 * only the containers it needs and takes each number as it ends.
 *
 * Where each engine reports what (read from their code):
 * - vLLM, chat and completions: "usage": {"prompt_tokens", "completion_tokens",
 *   "prompt_tokens_details": {"cached_tokens"}}; the details only with
 *   --enable-prompt-tokens-details, and left out (null, or absent) when
 *   nothing was cached. A stream carries usage only with
 *   "stream_options": {"include_usage": true}, in a last event whose choices
 *   are empty (with continuous_usage_stats, in every event: the last wins).
 * - SGLang, OpenAI API: the same usage; cached_tokens only with
 *   --enable-cache-report, and again left out when 0. A request with
 *   "return_cached_tokens_details" gets "sglext": {"cached_tokens_details":
 *   {"device", "host", "storage"}} too (their sum is the cached tokens).
 *   Its native /generate: "meta_info": {"prompt_tokens", "completion_tokens",
 *   "cached_tokens", "cached_tokens_details"}, always.
 * - llama.cpp's server: usage as above (cached_tokens always, = cache_n), and
 *   "timings": {"prompt_n" (tokens computed), "cache_n" (tokens reused),
 *   "predicted_n"}, on the whole answer and on a stream's events (the last
 *   event's are the request's).
 * Each figure is taken from the first of usage, meta_info, timings (prompt:
 * prompt_n + cache_n) that has it; cached tokens last from
 * cached_tokens_details. A number counts when it is a non-negative integer
 * (saturated at UINT32_MAX); anything else (null, a string, a fraction)
 * is not a report.
 *
 * The body is a JSON value (a non-streamed answer) or server-sent events:
 * lines "data: VALUE" (CRLF, LF or CR), an event ending at a blank line (or
 * where a data line begins after a whole value), several data lines of an
 * event joined by LF, comments and other fields skipped. A data line that
 * begins with '[' is the end mark: exactly "[DONE]" says the stream ended
 * whole, anything else is skipped. An event's content, for the count of a
 * stream without usage: a non-empty choices[].delta.content (or
 * reasoning_content, reasoning) or choices[].text, once an event.
 *
 * The caller gives the body as it is meant (de-chunked, not compressed:
 * an answer with a Content-Encoding teaches nothing). Bytes that are not
 * of this form stop the lexer until the value's end (PG_USAGE_BROKEN):
 * what ended before it counts. The lexer is lenient where it costs
 * nothing (string contents and numbers are not validated), strict about
 * structure, and nests as deep as json.h (PG_JSON_MAX_DEPTH).
 */
#ifndef PG_USAGE_H
#define PG_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/json.h"

enum pg_usage_mode {
	PG_USAGE_AUTO = 0, /* JSON if the first byte past white space is '{' or '[' */
	PG_USAGE_JSON,     /* a non-streamed answer */
	PG_USAGE_SSE,      /* text/event-stream */
};

/* pg_usage.have: what was reported. */
#define PG_USAGE_PROMPT     0x01u /* prompt_tokens, as the engine counts them */
#define PG_USAGE_CACHED     0x02u /* cached_tokens */
#define PG_USAGE_COMPLETION 0x04u /* completion_tokens, exact ... */
#define PG_USAGE_COUNTED    0x08u /* ... or the stream's content events (an estimate) */
#define PG_USAGE_OBJECT     0x10u /* a "usage" object was there (see pg_usage_cached) */
#define PG_USAGE_DONE       0x20u /* the body ended whole: its value closed, or [DONE] */
#define PG_USAGE_BROKEN     0x40u /* bytes not of the form were skipped */
#define PG_USAGE_TIMINGS    0x80u /* a "timings" object: llama.cpp's server */

/* Where cached_tokens came from. */
enum pg_usage_src {
	PG_USAGE_SRC_NONE = 0,
	PG_USAGE_SRC_USAGE,   /* usage.prompt_tokens_details.cached_tokens */
	PG_USAGE_SRC_META,    /* meta_info.cached_tokens (SGLang /generate) */
	PG_USAGE_SRC_TIMINGS, /* timings.cache_n (llama.cpp) */
	PG_USAGE_SRC_DETAILS, /* cached_tokens_details' sum (SGLang) */
};

struct pg_usage {
	uint32_t have; /* PG_USAGE_* */
	uint32_t prompt_tokens, cached_tokens, completion_tokens;
	uint32_t events;    /* content events seen */
	uint8_t cached_src; /* enum pg_usage_src */
};

/* The figures the lexer takes, by where they were (internal). */
enum pg_usage_field {
	PG_UF_PROMPT,     /* usage.prompt_tokens */
	PG_UF_COMPLETION, /* usage.completion_tokens */
	PG_UF_CACHED,     /* usage.prompt_tokens_details.cached_tokens */
	PG_UF_M_PROMPT,   /* meta_info.* */
	PG_UF_M_COMPLETION,
	PG_UF_M_CACHED,
	PG_UF_T_PROMPT, /* timings.prompt_n, cache_n, predicted_n */
	PG_UF_T_CACHE,
	PG_UF_T_PREDICTED,
	PG_UF_DETAILS, /* cached_tokens_details: device + host + storage */
	PG_UF_COUNT,
};

/* Containers whose meaning is kept: deeper ones are only counted. */
#define PG_USAGE_CTX_DEPTH 6
/* Member names told apart: longer ones are none of ours. */
#define PG_USAGE_NAME_MAX 24

/* The parse. Zeroed is not valid: pg_usage_init. */
struct pg_usage_parse {
	uint32_t val[PG_UF_COUNT];
	uint32_t got; /* bit f: val[f] reported */
	uint32_t events, flags;
	uint64_t num;     /* the number being read */
	uint32_t details; /* cached_tokens_details' sum so far */
	uint8_t mode;     /* enum pg_usage_mode */
	/* server-sent events: where in a line */
	uint8_t line, field_pos, done_pos;
	bool cr, ev_data, ev_counted;
	/* the JSON lexer */
	uint8_t st, str, member, member_arg, num_bad, num_any, lit, lit_pos, name_len;
	bool details_any;
	uint16_t depth;
	uint64_t is_obj[PG_JSON_MAX_DEPTH / 64 + 1]; /* bit d: container d is an object */
	uint8_t ctx[PG_USAGE_CTX_DEPTH + 1];         /* what container d is */
	char name[PG_USAGE_NAME_MAX];
};

void pg_usage_init(struct pg_usage_parse *p, enum pg_usage_mode mode);

/* The body's next len bytes. */
void pg_usage_feed(struct pg_usage_parse *p, const void *data, size_t len);

/* What the bytes so far report (at any time; final once the body ended). */
void pg_usage_get(const struct pg_usage_parse *p, struct pg_usage *out);

/*
 * The cached tokens to learn from: those reported; or 0 where the answer
 * carried a usage object without them and reports says that this
 * instance's answers have carried cached_tokens before (vLLM and SGLang
 * leave them out when nothing was cached). false: the answer says nothing
 * of its cache.
 */
static inline bool pg_usage_cached(const struct pg_usage *u, bool reports, uint32_t *cached)
{
	if (u->have & PG_USAGE_CACHED) {
		*cached = u->cached_tokens;
		return true;
	}
	if (reports && (u->have & PG_USAGE_OBJECT) && (u->have & PG_USAGE_PROMPT)) {
		*cached = 0;
		return true;
	}
	return false;
}

#endif /* PG_USAGE_H */
