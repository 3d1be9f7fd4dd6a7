/* SPDX-License-Identifier: MIT */
/*
 * The prompt of an OpenAI request, rendered to the text the simulated model
 * tokenizes, plus the request fields the simulation needs. Pure.
 *
 * Chat: the tools JSON (as sent) and "\n" first if present, then for each
 * message "<|ROLE|>\n" + content + "\n"; content is a string, or the "text"
 * of its parts joined by "\n", or empty; then "<|assistant|>\n", the
 * generation prompt a chat template adds (add_generation_prompt). So a
 * prompt followed by the text generated for it is a byte prefix of the next
 * turn's prompt, which renders that reply as an assistant message: the
 * output blocks the instance cached (sim.c) serve the next turn. Completions: the prompt string; a
 * list of strings is concatenated; token ids (a list of integers, or lists
 * of them) become 4 bytes each, little-endian, so one id is one token.
 */
#ifndef MOCKLLM_PROMPT_H
#define MOCKLLM_PROMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROMPT_DEFAULT_MAX_TOKENS 16
#define PROMPT_MAX_MAX_TOKENS     1000000

struct prompt_req {
	char *text; /* rendered prompt (malloc), len bytes, not NUL-terminated */
	size_t len;
	char model[128];     /* "model", "" if absent or too long */
	uint32_t max_tokens; /* max_tokens / max_completion_tokens, or the default */
	bool max_tokens_set; /* given by the client */
	bool stream;         /* "stream": true */
	bool include_usage;  /* "stream_options": {"include_usage": true} */
};

/*
 * Parse an OpenAI request body. chat: /v1/chat/completions, else
 * /v1/completions. Returns 0, or -1 with *err a static message for a 400
 * (out is then empty). Free with prompt_free().
 */
int prompt_parse(const char *body, size_t len, bool chat, struct prompt_req *out, const char **err);
void prompt_free(struct prompt_req *p);

/*
 * The simulated model's output token i: a fixed cycle of words of exactly
 * KV_TOKEN_BYTES (4) bytes each, so output is deterministic, needs no JSON
 * escaping, and n output tokens re-sent as history are n prompt tokens.
 * The responses and the cached output blocks both take their text from here.
 */
const char *prompt_output_token(uint32_t i);

/*
 * The KV block hashes of a request for prompt text[0..len) that will carry
 * max_tokens output tokens, into *out (malloc'd, at least one element): the
 * prompt's full blocks (kv_block_hashes; *nprompt of them), then those of
 * the prompt followed by its output (prompt_output_token 0, 1, ...), hashed
 * as one text, *ndone in all, at most max_blocks (the cache's capacity in
 * blocks; 0: output blocks are not hashed, *ndone = *nprompt). What
 * sim_req's hashes, nhashes and nhashes_done take. Returns 0, or -1 when out
 * of memory.
 */
int prompt_request_hashes(const char *text, size_t len, uint32_t max_tokens, uint64_t max_blocks,
                          uint64_t **out, size_t *nprompt, size_t *ndone);

#endif /* MOCKLLM_PROMPT_H */
