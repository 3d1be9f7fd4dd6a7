/* SPDX-License-Identifier: MIT */
/*
 * A per-sequence cache as llama.cpp's server keeps one (mockllm --slots N),
 * pure: N slots, each holding the tokens of one sequence, the last request
 * it served (its prompt, then the output it generated). A request takes an
 * idle slot: the one whose tokens share the longest common prefix with its
 * prompt, if that prefix is more than SLOTS_SIMILARITY of the prompt
 * (llama.cpp's --slot-prompt-similarity, its default); else the least
 * recently used idle slot. Its cached tokens are the common prefix of the
 * prompt with the slot it took (the last prompt token always computed);
 * the rest of the slot is overwritten. A sequence of any length fits a
 * slot (llama.cpp's context per slot is not simulated). Tokens are
 * KV_TOKEN_BYTES of text, as everywhere in mockllm.
 */
#ifndef MOCKLLM_SLOTS_H
#define MOCKLLM_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOTS_SIMILARITY 0.1
#define SLOTS_MAX        1024 /* --slots at most */

struct slot {
	char *text; /* what it holds: text[0..len) */
	size_t len, cap;
	uint64_t used; /* when last released (slots.tick): the LRU order */
	bool busy;     /* serving a request */
};

struct slots {
	struct slot *s;
	uint32_t n;
	uint64_t tick;
};

/* n slots (1..SLOTS_MAX), all empty; NULL when out of memory. */
struct slots *slots_create(uint32_t n);
void slots_destroy(struct slots *ss);

/* The idle slot a prompt text[0..len) would take, -1 if none is idle; its
 * cached tokens in *cached. Changes nothing. */
int slots_choose(const struct slots *ss, const char *text, size_t len, uint32_t *cached);

/* Slot i serves a request: busy until slots_release. */
void slots_take(struct slots *ss, int i);

/* Slot i holds text[0..len) now (its prefill is done). Returns -1 when out
 * of memory (it then holds nothing). */
int slots_set(struct slots *ss, int i, const char *text, size_t len);

/* The first n output tokens (prompt_output_token) follow in slot i, as
 * generated tokens stay in a llama.cpp slot. -1 when out of memory. */
int slots_append_output(struct slots *ss, int i, uint32_t n);

/* Slot i keeps its first len bytes only (a prefill cut short: what lay
 * past its common prefix was being overwritten). */
void slots_truncate(struct slots *ss, int i, size_t len);

/* Slot i is idle again, the most recently used. */
void slots_release(struct slots *ss, int i);

/* Slots that hold a sequence. */
uint32_t slots_held(const struct slots *ss);

#endif /* MOCKLLM_SLOTS_H */
