/* SPDX-License-Identifier: MIT */
/*
 * Response-body scanning, pure (no I/O). pgload needs four facts from a
 * response, not a parsed document: when content starts, whether the stream
 * ended with `data: [DONE]`, and the usage numbers prompt_tokens,
 * completion_tokens and usage.prompt_tokens_details.cached_tokens. So
 * instead of a JSON parser it looks for `"key"` <ws> `:` <ws> <number> in
 * the usage object, which is the whole of the contract with the server:
 *
 *   streaming (SSE, vLLM/OpenAI chunk format): each `data:` line is one
 *   JSON chunk. A chunk is a content event when it holds `"content":`
 *   followed by a non-empty string (vLLM's first chunk carries only the
 *   role, with content ""), or, failing that, `"text":` followed by one
 *   (/v1/completions chunks: choices[].text). The usage chunk is the one
 *   where `"usage":` is followed by an object (other chunks may carry
 *   `"usage":null`).
 *
 *   non-streaming: the whole body (kept up to PG_SCAN_MAX_BODY) is scanned
 *   once at the end, from its last `"usage"` key (usage follows choices).
 *
 * A quoted key preceded by a backslash is inside a string and ignored.
 *
 * Reply capture (text_max > 0, for conversations that re-send what the
 * server said): the string value of each content event's `"content"` key
 * (or `"text"` key) (streaming: the deltas, in order; non-streaming: the
 * first one, the message's) is appended to text as raw JSON string bytes, escapes kept,
 * so it can be put back into a request body verbatim. text_over: the reply
 * passed text_max, a value was not a complete string, or a line or body
 * passed its cap (content may be lost): text is then not the reply.
 */
#ifndef PGLOAD_SSE_H
#define PGLOAD_SSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/buf.h"

#define PG_SCAN_MAX_LINE (1u << 20) /* longer SSE lines are skipped */
#define PG_SCAN_MAX_BODY (4u << 20) /* non-streaming body kept for the scan */

struct pg_scan {
	bool sse;
	bool overflow; /* a line/body exceeded the cap; its rest is skipped */
	bool done;     /* `data: [DONE]` seen */
	uint32_t content_events;
	int32_t prompt_tokens, cached_tokens, completion_tokens; /* -1 unknown */
	struct pg_buf buf;  /* SSE: the partial line; JSON: the body so far */
	size_t text_max;    /* reply capture: at most this many bytes; 0: off */
	bool text_over;     /* the capture is not the reply (see above) */
	struct pg_buf text; /* the reply's content, raw JSON string bytes */
};

/* Start scanning a new body, capturing up to text_max bytes of reply (0:
 * none); keeps the buffers allocated by earlier bodies. */
void pg_scan_reset(struct pg_scan *s, bool sse, size_t text_max);
/*
 * Feed the next decoded body bytes. Returns how many content events ended
 * inside them (the caller stamps TTFT when the total first becomes
 * non-zero), or -1 when out of memory.
 */
int pg_scan_feed(struct pg_scan *s, const char *p, size_t n);
/* The body is complete: scan what is still buffered. Returns like feed. */
int pg_scan_finish(struct pg_scan *s);
void pg_scan_free(struct pg_scan *s);

/*
 * The number after the first `"key"` : in p[0..n), or -1 when absent or not
 * a non-negative integer that fits in 31 bits.
 */
int32_t pg_json_number(const char *p, size_t n, const char *key);

/*
 * Find header `name` (case-insensitive) in a response head p[0..n) that
 * ends with CRLFCRLF. On success points *val at its value (*vlen bytes) without
 * surrounding whitespace and returns true.
 */
bool pg_head_header(const char *p, size_t n, const char *name, const char **val, size_t *vlen);

#endif /* PGLOAD_SSE_H */
