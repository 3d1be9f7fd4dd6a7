/* SPDX-License-Identifier: MIT */
/*
 * Simulated vLLM automatic prefix cache, pure: no I/O, no clock.
 *
 * A prompt is a sequence of tokens; every KV_BLOCK_TOKENS tokens form a block.
 * Block i's hash chains block i-1's hash with block i's token bytes, so equal
 * hashes mean equal prefixes up to and including that block. The cache holds
 * block hashes (the "KV" itself is imaginary) up to a capacity in tokens, and
 * evicts least recently used blocks. Touching a request's blocks goes from
 * its last block to its first, so within one prefix the deeper blocks are
 * always older and are evicted first (leaf-first, as vLLM frees a request's
 * blocks in reverse order): a prefix is never left with a hole that would
 * make its deeper blocks unreachable.
 */
#ifndef MOCKLLM_KVCACHE_H
#define MOCKLLM_KVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KV_TOKEN_BYTES  4  /* bytes of prompt text per simulated token */
#define KV_BLOCK_TOKENS 16 /* tokens per KV block, vLLM's default */
#define KV_BLOCK_BYTES  (KV_TOKEN_BYTES * KV_BLOCK_TOKENS)

struct kv_cache;

/* The blocks a cache of capacity_tokens holds: capacity_tokens /
 * KV_BLOCK_TOKENS, at least one. */
static inline uint64_t kv_capacity_blocks(uint64_t capacity_tokens)
{
	uint64_t n = capacity_tokens / KV_BLOCK_TOKENS;

	return n ? n : 1;
}

/* A cache holding at most kv_capacity_blocks(capacity_tokens) blocks.
 * Returns NULL on allocation failure. */
struct kv_cache *kv_create(uint64_t capacity_tokens);
void kv_destroy(struct kv_cache *kv);

/* Tokens of a prompt of len bytes: ceil(len / KV_TOKEN_BYTES). */
static inline uint64_t kv_prompt_tokens(size_t len)
{
	return (len + KV_TOKEN_BYTES - 1) / KV_TOKEN_BYTES;
}

/*
 * Chained hashes of the full blocks of text[0..len) that may be cached: like
 * vLLM, the last prompt token is always computed, so only blocks lying
 * entirely within the first (tokens - 1) tokens count. Writes at most max
 * hashes into out and returns how many blocks there are (call with max 0 to
 * size the array).
 */
size_t kv_block_hashes(const void *text, size_t len, uint64_t *out, size_t max);

/*
 * The same hashes for text that arrives in pieces (a prompt, then the output
 * it generated), without joining them. Start with kv_hasher_init(h, parent):
 * parent 0 hashes a text from its start; the hash of block i - 1 continues a
 * text whose first i blocks are hashed already, fed from byte
 * i x KV_BLOCK_BYTES on. A block is emitted once one more byte follows it,
 * which is kv_block_hashes' "last token always computed" rule: fed in any
 * pieces, a text gives exactly kv_block_hashes' hashes.
 */
struct kv_hasher {
	uint64_t parent;
	size_t fill; /* bytes of blk[] held; KV_BLOCK_BYTES: complete, not emitted */
	unsigned char blk[KV_BLOCK_BYTES];
};

void kv_hasher_init(struct kv_hasher *h, uint64_t parent);
/* Feed len bytes; writes the hashes of the blocks they complete into out,
 * stopping when max are written. Returns how many. */
size_t kv_hasher_feed(struct kv_hasher *h, const void *p, size_t len, uint64_t *out, size_t max);

/*
 * Number of leading blocks of hashes[0..n) present in the cache; the matched
 * blocks are touched (made most recently used, last block first).
 */
size_t kv_lookup(struct kv_cache *kv, const uint64_t *hashes, size_t n);
/*
 * What kv_lookup would return, without touching anything: a question about
 * the cache (mockllm's /mock/match, a waiting request's estimate) must not
 * change which blocks are evicted next.
 */
size_t kv_peek(const struct kv_cache *kv, const uint64_t *hashes, size_t n);

/*
 * Insert (or touch) every block of hashes[0..n), evicting least recently
 * used blocks beyond capacity. If n exceeds the capacity, only the first
 * capacity blocks are kept (a deeper block without its parent is useless).
 */
void kv_insert(struct kv_cache *kv, const uint64_t *hashes, size_t n);

size_t kv_blocks_held(const struct kv_cache *kv);
size_t kv_blocks_capacity(const struct kv_cache *kv);
uint64_t kv_evictions(const struct kv_cache *kv);

#endif /* MOCKLLM_KVCACHE_H */
