// SPDX-License-Identifier: MIT
/* A per-sequence cache, as llama.cpp's server keeps one (slots.h). */
#include <stdlib.h>
#include <string.h>

#include "kvcache.h"
#include "prompt.h"
#include "slots.h"

struct slots *slots_create(uint32_t n)
{
	struct slots *ss;

	if (n < 1 || n > SLOTS_MAX)
		return NULL;
	ss = calloc(1, sizeof(*ss));
	if (!ss)
		return NULL;
	ss->s = calloc(n, sizeof(*ss->s));
	if (!ss->s) {
		free(ss);
		return NULL;
	}
	ss->n = n;
	return ss;
}

void slots_destroy(struct slots *ss)
{
	if (!ss)
		return;
	for (uint32_t i = 0; i < ss->n; i++)
		free(ss->s[i].text);
	free(ss->s);
	free(ss);
}

/* Common prefix of a slot and a prompt, in whole tokens. */
static uint64_t common_tokens(const struct slot *s, const char *text, size_t len)
{
	size_t n = s->len < len ? s->len : len, i = 0;

	while (i < n && s->text[i] == text[i])
		i++;
	return i / KV_TOKEN_BYTES;
}

int slots_choose(const struct slots *ss, const char *text, size_t len, uint32_t *cached)
{
	uint64_t tokens = kv_prompt_tokens(len), best_lcp = 0, lcp;
	int best = -1, lru = -1;

	for (uint32_t i = 0; i < ss->n; i++) {
		const struct slot *s = &ss->s[i];

		if (s->busy)
			continue;
		if (lru == -1 || s->used < ss->s[lru].used)
			lru = (int)i;
		lcp = common_tokens(s, text, len);
		/* llama.cpp: the longest common prefix, if similar enough */
		if (lcp > best_lcp && (double)lcp > SLOTS_SIMILARITY * (double)tokens) {
			best_lcp = lcp;
			best = (int)i;
		}
	}
	if (best == -1)
		best = lru;
	lcp = best == -1 ? 0 : common_tokens(&ss->s[best], text, len);
	if (tokens && lcp > tokens - 1)
		lcp = tokens - 1; /* the last prompt token is always computed */
	*cached = (uint32_t)lcp;
	return best;
}

void slots_take(struct slots *ss, int i)
{
	ss->s[i].busy = true;
}

static int room(struct slot *s, size_t need)
{
	char *p;
	size_t cap = s->cap ? s->cap : 256;

	if (need <= s->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	p = realloc(s->text, cap);
	if (!p)
		return -1;
	s->text = p;
	s->cap = cap;
	return 0;
}

int slots_set(struct slots *ss, int i, const char *text, size_t len)
{
	struct slot *s = &ss->s[i];

	s->len = 0;
	if (room(s, len))
		return -1;
	memcpy(s->text, text, len);
	s->len = len;
	return 0;
}

int slots_append_output(struct slots *ss, int i, uint32_t n)
{
	struct slot *s = &ss->s[i];

	if (room(s, s->len + (size_t)n * KV_TOKEN_BYTES))
		return -1;
	for (uint32_t k = 0; k < n; k++) {
		memcpy(s->text + s->len, prompt_output_token(k), KV_TOKEN_BYTES);
		s->len += KV_TOKEN_BYTES;
	}
	return 0;
}

void slots_truncate(struct slots *ss, int i, size_t len)
{
	if (len < ss->s[i].len)
		ss->s[i].len = len;
}

void slots_release(struct slots *ss, int i)
{
	ss->s[i].busy = false;
	ss->s[i].used = ++ss->tick;
}

uint32_t slots_held(const struct slots *ss)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < ss->n; i++)
		n += ss->s[i].len > 0;
	return n;
}
