// SPDX-License-Identifier: MIT
/*
 * mockllm prefix cache: tokenization arithmetic, chained block hashing
 * (equal prefixes hit, a divergence at block k leaves exactly k hits, equal
 * blocks under different parents do not hit), LRU eviction (leaf-first,
 * touched blocks survive), the non-touching peek (same count as a lookup,
 * eviction order unchanged), capacity accounting, and the incremental
 * hasher (the same hashes fed in pieces or continued from a block).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../tools/mockllm/kvcache.h"

#define MAXB 64

/* Deterministic text: byte i of prompt `seed`, distinct across seeds. */
static void fill(char *buf, size_t len, unsigned seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (char)('a' + x % 26);
	}
}

/* Block hashes of a prompt of nblocks cacheable blocks (+1 token). */
static size_t hashes_of(const char *text, size_t nblocks, uint64_t *out)
{
	return kv_block_hashes(text, nblocks * KV_BLOCK_BYTES + 1, out, MAXB);
}

static void test_prompt_tokens(void **state)
{
	static const struct {
		size_t len;
		uint64_t tokens;
		size_t blocks; /* cacheable: within the first tokens - 1 */
	} tab[] = {
	    {0, 0, 0},    {1, 1, 0},    {4, 1, 0},          {5, 2, 0},
	    {64, 16, 0},  {65, 17, 1},  {68, 17, 1},        {69, 18, 1},
	    {128, 32, 1}, {129, 33, 2}, {32000, 8000, 499}, {32001, 8001, 500},
	};
	static char text[32001];

	(void)state;
	fill(text, sizeof(text), 1);
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		assert_int_equal(kv_prompt_tokens(tab[i].len), tab[i].tokens);
		assert_int_equal(kv_block_hashes(text, tab[i].len, NULL, 0), tab[i].blocks);
	}
}

static void test_hashes_chain(void **state)
{
	char a[8 * KV_BLOCK_BYTES + 1], b[sizeof(a)];
	uint64_t ha[MAXB], hb[MAXB];

	(void)state;
	fill(a, sizeof(a), 1);
	memcpy(b, a, sizeof(a));
	hashes_of(a, 8, ha);
	hashes_of(b, 8, hb);
	assert_memory_equal(ha, hb, 8 * sizeof(uint64_t));
	/* change block 0 only: every later hash changes, as it chains */
	b[3] ^= 1;
	hashes_of(b, 8, hb);
	for (int i = 0; i < 8; i++)
		assert_true(ha[i] != hb[i]);
	/* the partial tail does not change the full blocks' hashes */
	memcpy(b, a, sizeof(a));
	b[sizeof(b) - 1] ^= 1;
	hashes_of(b, 8, hb);
	assert_memory_equal(ha, hb, 8 * sizeof(uint64_t));
}

static void test_divergence(void **state)
{
	static const size_t at[] = {0, 1, 2, 5, 7, 8};
	char a[8 * KV_BLOCK_BYTES + 1], b[sizeof(a)];
	uint64_t ha[MAXB], hb[MAXB];

	(void)state;
	fill(a, sizeof(a), 2);
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		struct kv_cache *kv = kv_create(100000);

		assert_non_null(kv);
		kv_insert(kv, ha, hashes_of(a, 8, ha));
		memcpy(b, a, sizeof(a));
		if (at[i] < 8) /* diverge inside block at[i] */
			b[at[i] * KV_BLOCK_BYTES + 17] ^= 0x20;
		assert_int_equal(kv_lookup(kv, hb, hashes_of(b, 8, hb)), at[i]);
		assert_int_equal(kv_lookup(kv, ha, 8), 8);
		kv_destroy(kv);
	}
}

static void test_same_block_other_parent(void **state)
{
	char a[4 * KV_BLOCK_BYTES + 1], b[sizeof(a)];
	uint64_t ha[MAXB], hb[MAXB];
	struct kv_cache *kv = kv_create(100000);

	(void)state;
	fill(a, sizeof(a), 3);
	memcpy(b, a, sizeof(a));
	b[0] ^= 1; /* blocks 1..3 have identical bytes, block 0 differs */
	kv_insert(kv, ha, hashes_of(a, 4, ha));
	assert_int_equal(kv_lookup(kv, hb, hashes_of(b, 4, hb)), 0);
	kv_destroy(kv);
}

static void test_lru_leaf_first(void **state)
{
	char p1[3 * KV_BLOCK_BYTES + 1], p2[sizeof(p1)];
	uint64_t h1[MAXB], h2[MAXB];
	struct kv_cache *kv = kv_create(4 * KV_BLOCK_TOKENS);

	(void)state;
	fill(p1, sizeof(p1), 4);
	fill(p2, sizeof(p2), 5);
	hashes_of(p1, 3, h1);
	hashes_of(p2, 3, h2);
	assert_int_equal(kv_blocks_capacity(kv), 4);
	kv_insert(kv, h1, 3);
	kv_insert(kv, h2, 3);
	/* two of p1's blocks went, deepest first: its root block remains */
	assert_int_equal(kv_blocks_held(kv), 4);
	assert_int_equal(kv_evictions(kv), 2);
	assert_int_equal(kv_lookup(kv, h1, 3), 1);
	assert_int_equal(kv_lookup(kv, h2, 3), 3);
	kv_destroy(kv);
}

static void test_lru_touch_on_hit(void **state)
{
	char p[3][2 * KV_BLOCK_BYTES + 1];
	uint64_t h[3][MAXB];
	struct kv_cache *kv = kv_create(4 * KV_BLOCK_TOKENS);

	(void)state;
	for (int i = 0; i < 3; i++) {
		fill(p[i], sizeof(p[i]), 10 + (unsigned)i);
		hashes_of(p[i], 2, h[i]);
	}
	kv_insert(kv, h[0], 2);
	kv_insert(kv, h[1], 2);
	assert_int_equal(kv_lookup(kv, h[0], 2), 2); /* p0 now most recent */
	kv_insert(kv, h[2], 2);
	assert_int_equal(kv_lookup(kv, h[1], 2), 0);
	assert_int_equal(kv_lookup(kv, h[0], 2), 2);
	assert_int_equal(kv_lookup(kv, h[2], 2), 2);
	assert_int_equal(kv_blocks_held(kv), 4);
	kv_destroy(kv);
}

/*
 * kv_peek counts what kv_lookup would (a divergence at block k: k), and
 * leaves the LRU order alone: where a lookup of p0 saves it from the next
 * eviction (test_lru_touch_on_hit), a peek does not.
 */
static void test_peek_does_not_touch(void **state)
{
	char p[3][2 * KV_BLOCK_BYTES + 1], q[sizeof(p[0])];
	uint64_t h[3][MAXB], hq[MAXB];
	struct kv_cache *kv = kv_create(4 * KV_BLOCK_TOKENS);

	(void)state;
	for (int i = 0; i < 3; i++) {
		fill(p[i], sizeof(p[i]), 10 + (unsigned)i);
		hashes_of(p[i], 2, h[i]);
	}
	memcpy(q, p[0], sizeof(q));
	q[KV_BLOCK_BYTES + 5] ^= 1; /* shares block 0 with p0 only */
	hashes_of(q, 2, hq);
	kv_insert(kv, h[0], 2);
	kv_insert(kv, h[1], 2);
	assert_int_equal(kv_peek(kv, h[0], 2), 2);
	assert_int_equal(kv_peek(kv, hq, 2), 1);
	assert_int_equal(kv_peek(kv, h[2], 2), 0);
	assert_int_equal(kv_peek(kv, h[0], 0), 0);
	kv_insert(kv, h[2], 2); /* p0 is still the least recently used: it goes */
	assert_int_equal(kv_peek(kv, h[0], 2), 0);
	assert_int_equal(kv_peek(kv, h[1], 2), 2);
	assert_int_equal(kv_peek(kv, h[2], 2), 2);
	assert_int_equal(kv_lookup(kv, h[1], 2), 2);
	assert_int_equal(kv_evictions(kv), 2);
	kv_destroy(kv);
}

static void test_capacity_accounting(void **state)
{
	static const struct {
		uint64_t cap_tokens;
		size_t cap_blocks;
	} tab[] = {{0, 1}, {15, 1}, {16, 1}, {33, 2}, {160, 10}, {100000, 6250}};
	char text[40 * KV_BLOCK_BYTES + 1];
	uint64_t h[MAXB];

	(void)state;
	fill(text, sizeof(text), 6);
	hashes_of(text, 40, h);
	for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
		struct kv_cache *kv = kv_create(tab[i].cap_tokens);
		size_t want = tab[i].cap_blocks < 40 ? tab[i].cap_blocks : 40;

		assert_int_equal(kv_blocks_capacity(kv), tab[i].cap_blocks);
		kv_insert(kv, h, 40);
		/* a prefix longer than the cache keeps its first blocks */
		assert_int_equal(kv_blocks_held(kv), want);
		assert_int_equal(kv_lookup(kv, h, 40), want);
		kv_insert(kv, h, 40); /* again: nothing new, nothing evicted */
		assert_int_equal(kv_blocks_held(kv), want);
		assert_int_equal(kv_evictions(kv), 0);
		kv_destroy(kv);
	}
}

/* Many prefixes through a small cache: held never exceeds capacity and
 * every eviction is accounted for. */
static void test_churn(void **state)
{
	struct kv_cache *kv = kv_create(10 * KV_BLOCK_TOKENS);
	char text[5 * KV_BLOCK_BYTES + 1];
	uint64_t h[MAXB];
	uint64_t inserted = 0;

	(void)state;
	for (unsigned s = 0; s < 200; s++) {
		size_t n;

		fill(text, sizeof(text), 100 + s % 7);
		n = hashes_of(text, 1 + s % 5, h);
		inserted += n - kv_lookup(kv, h, n);
		kv_insert(kv, h, n);
		assert_true(kv_blocks_held(kv) <= 10);
		assert_int_equal(kv_lookup(kv, h, n), n);
		assert_int_equal(inserted - kv_evictions(kv), kv_blocks_held(kv));
	}
	kv_destroy(kv);
}

/* kv_hasher: a text fed in any pieces gives kv_block_hashes' hashes, a
 * chain continued from block n (parent = hash n - 1, bytes from block n on)
 * gives the rest of them, and max stops it. */
static void test_hasher_pieces(void **state)
{
	static const size_t lens[] = {0, 1, 63, 64, 65, 127, 128, 129, 1000, 4096, 4097};
	static const size_t steps[] = {1, 3, 4, 64, 100, 5000};
	static char text[4097];
	uint64_t want[MAXB + 16], got[MAXB + 16];

	(void)state;
	fill(text, sizeof(text), 40);
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		size_t len = lens[l], n = kv_block_hashes(text, len, want, MAXB + 16);

		for (size_t st = 0; st < sizeof(steps) / sizeof(steps[0]); st++) {
			struct kv_hasher h;
			size_t got_n = 0;

			kv_hasher_init(&h, 0);
			for (size_t off = 0; off < len; off += steps[st]) {
				size_t take = len - off < steps[st] ? len - off : steps[st];

				got_n += kv_hasher_feed(&h, text + off, take, got + got_n,
				                        MAXB + 16 - got_n);
			}
			assert_int_equal(got_n, n);
			assert_memory_equal(got, want, n * sizeof(uint64_t));
		}
		for (size_t from = 1; from < n; from += 7) {
			struct kv_hasher h;
			size_t k;

			kv_hasher_init(&h, want[from - 1]);
			k = kv_hasher_feed(&h, text + from * KV_BLOCK_BYTES,
			                   len - from * KV_BLOCK_BYTES, got, MAXB + 16);
			assert_int_equal(k, n - from);
			assert_memory_equal(got, want + from, k * sizeof(uint64_t));
			kv_hasher_init(&h, want[from - 1]);
			assert_int_equal(kv_hasher_feed(&h, text + from * KV_BLOCK_BYTES,
			                                len - from * KV_BLOCK_BYTES, got, 1),
			                 1);
			assert_true(got[0] == want[from]);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_prompt_tokens),
	    cmocka_unit_test(test_hashes_chain),
	    cmocka_unit_test(test_divergence),
	    cmocka_unit_test(test_same_block_other_parent),
	    cmocka_unit_test(test_lru_leaf_first),
	    cmocka_unit_test(test_lru_touch_on_hit),
	    cmocka_unit_test(test_peek_does_not_touch),
	    cmocka_unit_test(test_capacity_accounting),
	    cmocka_unit_test(test_churn),
	    cmocka_unit_test(test_hasher_pieces),
	};

	return cmocka_run_group_tests_name("mockllm_kvcache", tests, NULL, NULL);
}
