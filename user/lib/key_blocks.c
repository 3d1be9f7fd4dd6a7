// SPDX-License-Identifier: MIT
/* cache_aware's blocks of a key text (key.h, struct pg_key_blocks). */
#include <xxhash.h>
#if defined(__x86_64__) && __has_include(<xxh_x86dispatch.h>)
/* libxxhash's run-time choice of SSE2, AVX2 or AVX-512 for XXH3 (key.c) */
#include <xxh_x86dispatch.h>
#endif
#include "lib/key.h"

uint64_t pg_key_chain_next(uint64_t prev, const char *block)
{
	uint64_t h = (prev ^ prev >> 29) * 0xbf58476d1ce4e5b9ull ^ XXH3_64bits(block, PG_CA_BLOCK);

	return h ^ h >> 32;
}

/* The chain hashes of whole blocks of t[0..n), never 0 (an empty slot). */
static uint32_t block_chain(const char *t, size_t n, uint64_t *chain)
{
	const uint32_t nb =
	    n / PG_CA_BLOCK < PG_CA_MAX_BLOCKS ? (uint32_t)(n / PG_CA_BLOCK) : PG_CA_MAX_BLOCKS;
	uint64_t h = 0;

	for (uint32_t k = 0; k < nb; k++) {
		h = pg_key_chain_next(h, t + (size_t)k * PG_CA_BLOCK);
		chain[k] = h ? h : 1;
	}
	return nb;
}

void pg_key_blocks_of(struct pg_key_blocks *kb, const char *t, size_t n, size_t anchor_end)
{
	size_t tail;

	kb->anchor = XXH3_64bits(t, anchor_end);
	kb->anchor_len = (uint32_t)anchor_end;
	kb->n = block_chain(t, n, kb->chain);
	/* the whole text: what follows the last block, seeded with its chain
	 * hash (which names everything before) */
	tail = (size_t)kb->n * PG_CA_BLOCK;
	kb->whole =
	    XXH3_64bits_withSeed(t + tail, n - tail, (kb->n ? kb->chain[kb->n - 1] : 0) ^ 0x51ed27);
	kb->text_len = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	if (!kb->whole)
		kb->whole = 1;
}
