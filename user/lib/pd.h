/* SPDX-License-Identifier: MIT */
/*
 * Prefill/decode disaggregation, pure: what each leg of a disaggregated
 * request is sent and what is taken from the prefill's answer, for the two
 * protocols the engines speak (doc/routing.md "Prefill/decode disaggregation").
 *
 * vLLM (NIXL, two steps): the prefill instance gets the request with
 * max_tokens 1 (max_completion_tokens too if the body has it), stream
 * false, no stream_options, and kv_transfer_params asking for a remote
 * decode; its JSON answer's kv_transfer_params object is copied into the
 * original request, which goes to the decode instance.
 *
 * SGLang (bootstrap, both at once): the same body, with bootstrap_host,
 * bootstrap_port (the prefill server's, configured) and bootstrap_room (a
 * random 63-bit number; arrays of them for a batch), goes to both.
 *
 * No I/O, no clock; edits are lib/jsonedit.h's, so every byte of the body
 * the protocol does not name reaches the instances as the client wrote it.
 */
#ifndef PG_PD_H
#define PG_PD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/buf.h"
#include "lib/json.h"

enum pg_pd {
	PG_PD_NONE = 0,   /* not disaggregated */
	PG_PD_VLLM = 1,   /* vllm: prefill, then decode with its kv_transfer_params */
	PG_PD_SGLANG = 2, /* sglang: both at once, matched by a bootstrap room */
};

/* "none", "vllm", "sglang". */
const char *pg_pd_name(enum pg_pd pd);
/* The protocol named s[0..n): 0 and *out, or -1. */
int pg_pd_parse(const char *s, size_t n, enum pg_pd *out);

/* A prompt of which fewer tokens than this are not cached on the chosen
 * decode instance is served by it alone unless the pool says otherwise
 * (pd-min-tokens): so short a prefill costs less than the transfer's round
 * trip, and hardly disturbs the decode steps beside it. */
#define PG_PD_MIN_TOKENS_DEFAULT 256

/*
 * Whether a request of prompt_tokens, of which the chosen decode instance
 * is believed to hold decode_matched, goes to the decode instance alone:
 * what it would prefill itself is under min_tokens (conditional
 * disaggregation on the tokens not cached, as llm-d and Dynamo do). A
 * share rule ("holds 80% of it") would leave a long prompt's fifth, many
 * thousand tokens, to prefill beside the decode instance's streams.
 */
bool pg_pd_decode_alone(uint32_t prompt_tokens, uint32_t decode_matched, uint32_t min_tokens);

/* vLLM: the prefill leg's body (js: the request's parse) into out. 0, or
 * -1 (not an object). */
int pg_pd_vllm_prefill_body(const struct pg_json *js, struct pg_buf *out);

/*
 * vLLM: the kv_transfer_params object of the prefill's answer ans (its
 * parse): 0 and its raw text in *p, *n (in ans's source), or -1 with *why
 * set: not a JSON object, no kv_transfer_params, not an object, or without
 * do_remote_prefill true and a remote_engine_id (a prefill that did not
 * keep the blocks for a remote decode).
 */
int pg_pd_vllm_params(const struct pg_json *ans, const char **p, size_t *n, const char **why);

/* vLLM: the decode leg's body: the request's with params (raw JSON text)
 * as its kv_transfer_params. 0, or -1. */
int pg_pd_vllm_decode_body(const struct pg_json *js, const char *params, size_t plen,
                           struct pg_buf *out);

/* SGLang: how many requests the body batches (a completions "prompt" or
 * "text" that is an array of strings or of token arrays, an "input_ids"
 * array of arrays): 0 for a single one. */
size_t pg_pd_sglang_batch(const struct pg_json *js);

/*
 * SGLang: the body both legs get: the request's with bootstrap_host
 * (host, a string), bootstrap_port and bootstrap_room (room, and room + i
 * for the i-th of a batch, each below 2^63), arrays of batch entries when
 * the body batches. 0, or -1.
 */
int pg_pd_sglang_body(const struct pg_json *js, const char *host, uint16_t port, uint64_t room,
                      struct pg_buf *out);

#endif /* PG_PD_H */
