// SPDX-License-Identifier: MIT
/*
 * cache_aware: the blocks and anchor of a key text (key.h) and the block
 * index (router/index.h: bound, aging, longest match, determinism). Its choice
 * rule is test_choice.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "router/view.h"
#include "router/index.h"
#include "lib/key.h"

static struct pg_backend backends[PG_MAX_BACKENDS];

static void members(unsigned n)
{
	memset(backends, 0, sizeof(backends));
	for (unsigned id = 1; id <= n; id++)
		backends[id].flags = PG_BACKEND_ACTIVE;
}

static struct pg_ca_index make_index(uint32_t nslots, uint32_t capacity_blocks)
{
	struct pg_ca_index ix = {
	    .slots = calloc(nslots, sizeof(struct pg_ca_slot)),
	    .nslots = nslots,
	    .backends = backends,
	    .capacity_blocks = capacity_blocks,
	};

	assert_non_null(ix.slots);
	return ix;
}

/* A chat body: a system prompt, then turns (user, assistant, ...). */
static char *chat(const char *system, const char *const *turns, size_t nturns)
{
	size_t cap = 1 << 20, len = 0;
	char *b = malloc(cap);

	assert_non_null(b);
	len += (size_t)snprintf(b + len, cap - len, "{\"model\":\"m\",\"messages\":[");
	if (system)
		len += (size_t)snprintf(b + len, cap - len,
		                        "{\"role\":\"system\",\"content\":\"%s\"},", system);
	for (size_t i = 0; i < nturns; i++)
		len +=
		    (size_t)snprintf(b + len, cap - len, "%s{\"role\":\"%s\",\"content\":\"%s\"}",
		                     i ? "," : "", i % 2 ? "assistant" : "user", turns[i]);
	snprintf(b + len, cap - len, "],\"max_tokens\":8,\"stream\":true}");
	return b;
}

static void blocks_of(const char *body, uint32_t prefix_length, struct pg_key *k,
                      struct pg_key_blocks *kb)
{
	pg_key_compute_blocks(PG_API_CHAT, (struct pg_str){NULL, 0}, body, strlen(body), true,
	                      prefix_length, k, kb);
}

static char *repeat(const char *word, size_t n)
{
	size_t wl = strlen(word);
	char *s = malloc(wl * n + 1);

	assert_non_null(s);
	for (size_t i = 0; i < n; i++)
		memcpy(s + i * wl, word, wl);
	s[wl * n] = 0;
	return s;
}

static void test_blocks_and_anchor(void **state)
{
	static struct pg_key_blocks a, b, c;
	struct pg_key ka, kb, kc, plain;
	char *sys = repeat("You are a careful assistant. ", 400); /* ~11.6 KB */
	char *u0 = repeat("first question ", 40), *a0 = repeat("an answer ", 60);
	char *u1 = repeat("second ", 50);
	const char *t1[] = {u0}, *t2[] = {u0, a0, u1}, *other[] = {"another conversation"};
	char *b1 = chat(sys, t1, 1), *b2 = chat(sys, t2, 3), *b3 = chat(sys, other, 1);

	(void)state;
	blocks_of(b1, 4096, &ka, &a);
	blocks_of(b2, 4096, &kb, &b);
	blocks_of(b3, 4096, &kc, &c);
	/* The key is PREFIX_AWARE's, whichever call computes it. */
	pg_key_compute(PG_API_CHAT, (struct pg_str){NULL, 0}, b2, strlen(b2), true, 4096, &plain,
	               NULL, 0, NULL);
	assert_int_equal(plain.hash, kb.hash);
	assert_int_equal(plain.length, kb.length);
	/* A conversation keeps its anchor from turn to turn, and its blocks
	 * extend the previous turn's chain. */
	assert_int_equal(a.anchor, b.anchor);
	assert_true(b.n > a.n && a.n > 0);
	assert_memory_equal(a.chain, b.chain, a.n * sizeof(a.chain[0]));
	assert_int_equal(ka.anchor, a.anchor);
	/* Behind the same long system prompt, another conversation has its
	 * own anchor (the PREFIX_AWARE keys are equal: the prompt is longer
	 * than PrefixLength), but shares the system prompt's blocks. */
	assert_int_equal(ka.hash, kc.hash);
	assert_int_not_equal(a.anchor, c.anchor);
	assert_true(c.n >= strlen(sys) / PG_CA_BLOCK - 1);
	assert_memory_equal(a.chain, c.chain, (strlen(sys) / PG_CA_BLOCK - 1) * sizeof(a.chain[0]));
	/* Deterministic. */
	blocks_of(b2, 4096, &kc, &c);
	assert_memory_equal(&b, &c, sizeof(b));
	/* No user message: the anchor is the PREFIX_AWARE key. */
	{
		const char *body = "{\"messages\":[{\"role\":\"system\",\"content\":\"only\"}]}";

		blocks_of(body, 4096, &ka, &a);
		assert_int_equal(a.anchor, ka.hash);
		assert_int_equal(a.n, 0);
	}
	/* Explicit keys: anchor = key, no blocks. */
	pg_key_compute_blocks(PG_API_CHAT, (struct pg_str){"tenant-7", 8}, b2, strlen(b2), true,
	                      4096, &ka, &a);
	assert_int_equal(a.anchor, ka.hash);
	assert_int_equal(a.n, 0);
	free(sys), free(u0), free(a0), free(u1), free(b1), free(b2), free(b3);
}

/* Stand-ins for chain hashes: distinct, never 0 (splitmix64). */
static void chain_of(uint64_t seed, uint32_t n, uint64_t *chain)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t z = seed * 1000003 + i + 0x9e3779b97f4a7c15ull;

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		chain[i] = (z ^ (z >> 31)) | 1;
	}
}

static void test_index_record_and_match(void **state)
{
	struct pg_ca_index ix;
	struct pg_ca_match m;
	uint64_t a[64], b[64];
	uint16_t h[PG_CA_WAYS];

	(void)state;
	members(4);
	ix = make_index(1024, 1000);
	chain_of(1, 64, a);
	memcpy(b, a, 32 * sizeof(a[0])); /* b shares a's first 32 blocks */
	chain_of(2, 32, b + 32);
	pg_ca_record(&ix, a, 64, 1);
	pg_ca_record(&ix, b, 40, 2);
	pg_ca_match(&ix, a, 64, NULL, NULL, &m);
	assert_int_equal(m.blocks, 64);
	assert_int_equal(m.n, 1);
	assert_int_equal(m.holder[0], 1);
	assert_true(m.probes <= 8); /* log2(64) + 1 */
	pg_ca_match(&ix, b, 64, NULL, NULL, &m);
	assert_int_equal(m.blocks, 40);
	assert_int_equal(m.holder[0], 2);
	/* The shared part has both holders. */
	assert_int_equal(pg_ca_holders(&ix, a[31], NULL, NULL, h), 2);
	/* Holders the caller's rule refuses do not match. */
	backends[1].flags = 0;
	pg_ca_match(&ix, a, 64, NULL, NULL, &m);
	assert_int_equal(m.blocks, 32);
	assert_int_equal(m.holder[0], 2);
	backends[1].flags = PG_BACKEND_ACTIVE;
	/* Nothing recorded: nothing matched. */
	chain_of(3, 16, b);
	pg_ca_match(&ix, b, 16, NULL, NULL, &m);
	assert_int_equal(m.blocks, 0);
	assert_int_equal(m.n, 0);
	free(ix.slots);
}

/* The bound: what one backend holds never exceeds its capacity, and a
 * prefix sent again stays (the engine's LRU touch). */
static void test_index_aging(void **state)
{
	struct pg_ca_index ix;
	uint64_t hot[8], cold[8], other[8];
	uint16_t h[PG_CA_WAYS];

	(void)state;
	members(2);
	ix = make_index(1 << 14, 100); /* 100 blocks per backend */
	chain_of(10, 8, hot);
	chain_of(11, 8, cold);
	pg_ca_record(&ix, hot, 8, 1);
	pg_ca_record(&ix, cold, 8, 1);
	assert_int_equal(backends[1].ca_clock, 16);
	/* Re-sending a held prefix does not advance the clock. */
	pg_ca_record(&ix, hot, 8, 1);
	assert_int_equal(backends[1].ca_clock, 16);
	/* 104 more new blocks (cold is now past the last 100 inserted), hot
	 * sent again every 40. */
	for (uint64_t s = 0; s < 13; s++) {
		chain_of(100 + s, 8, other);
		pg_ca_record(&ix, other, 8, 1);
		if (s % 5 == 4)
			pg_ca_record(&ix, hot, 8, 1);
	}
	assert_true(backends[1].ca_clock > 100);
	assert_int_equal(pg_ca_holders(&ix, hot[7], NULL, NULL, h), 1);  /* touched: kept */
	assert_int_equal(pg_ca_holders(&ix, cold[7], NULL, NULL, h), 0); /* aged out */
	/* Live prefixes per backend never exceed its capacity. */
	assert_true(pg_ca_occupancy(&ix) <= 100 + 8);
	/* A slot's new member holds none of the old one's prefixes. */
	pg_ca_forget(&ix, 1);
	assert_int_equal(pg_ca_holders(&ix, hot[7], NULL, NULL, h), 0);
	free(ix.slots);
}

/* A tiny table evicts, stays within its slots, and the same calls give
 * the same state. */
static void test_index_bound_and_determinism(void **state)
{
	struct pg_ca_index x, y;
	uint64_t c[32];
	unsigned ev = 0;

	(void)state;
	members(8);
	x = make_index(64, 1 << 20);
	y = make_index(64, 1 << 20);
	for (unsigned r = 0; r < 50; r++) {
		chain_of(r % 13, 32, c);
		ev += pg_ca_record(&x, c, 32, (uint16_t)(1 + r % 8));
	}
	members(8);
	for (unsigned r = 0; r < 50; r++) {
		chain_of(r % 13, 32, c);
		pg_ca_record(&y, c, 32, (uint16_t)(1 + r % 8));
	}
	assert_true(ev > 0);
	assert_true(pg_ca_occupancy(&x) <= 64);
	assert_memory_equal(x.slots, y.slots, 64 * sizeof(struct pg_ca_slot));
	/* Sizing from the capacity flag. */
	assert_int_equal(pg_ca_capacity_blocks(262144),
	                 262144 * PG_CA_CHARS_PER_TOKEN / PG_CA_BLOCK);
	assert_int_equal(pg_ca_slots_for(262144, 4096), 1u << 16);
	assert_int_equal(pg_ca_slots_for(1024, 4096), 4096);
	free(x.slots);
	free(y.slots);
}

/* cache_aware's size estimate and whole-text name of a key. */
static void test_tokens_and_whole(void **state)
{
	const char *turns1[] = {"how do I sort a list"}, *turns2[] = {"how do I sort a lisp"};
	char *long_text = repeat("abcd", 1000); /* 4,000 bytes */
	const char *turns3[] = {long_text};
	char *b1 = chat(NULL, turns1, 1), *b2 = chat(NULL, turns2, 1), *b3 = chat(NULL, turns3, 1);
	struct pg_key k1, k2, k3;
	struct pg_key_blocks *kb1 = malloc(sizeof(*kb1)), *kb2 = malloc(sizeof(*kb2)),
	                     *kb3 = malloc(sizeof(*kb3));

	(void)state;
	blocks_of(b1, 4096, &k1, kb1);
	blocks_of(b2, 4096, &k2, kb2);
	blocks_of(b3, 4096, &k3, kb3);
	/* shorter than a block: no chain, the whole text still named */
	assert_int_equal(kb1->n, 0);
	assert_true(kb1->whole && kb1->whole != kb2->whole);
	/* the text's bytes / 4: "user" US text RS */
	assert_int_equal(kb1->text_len, 4 + 1 + 20 + 1);
	assert_int_equal(k1.tokens, kb1->text_len / PG_CA_CHARS_PER_TOKEN);
	assert_int_equal(kb3->n, (4 + 1 + 4000 + 1) / PG_CA_BLOCK);
	assert_int_equal(k3.tokens, (4 + 1 + 4000 + 1) / PG_CA_CHARS_PER_TOKEN);
	/* raw bodies: their bytes */
	pg_key_compute_blocks(PG_API_RAW, (struct pg_str){NULL, 0}, long_text, 4000, true, 4096,
	                      &k3, kb3);
	assert_int_equal(k3.tokens, 1000);
	free(kb1);
	free(kb2);
	free(kb3);
	free(b1);
	free(b2);
	free(b3);
	free(long_text);
}

/* What each backend holds, longest first: tiers of the index. */
static void test_index_tiers(void **state)
{
	struct pg_ca_index ix;
	uint64_t a[10];
	uint16_t ids[8];
	uint32_t blocks[8], probes = 0;
	size_t n;

	(void)state;
	members(5);
	ix = make_index(1024, 1000);
	chain_of(1, 10, a);
	pg_ca_record(&ix, a, 10, 1);
	pg_ca_record(&ix, a, 6, 2);
	pg_ca_record(&ix, a, 6, 3);
	pg_ca_record(&ix, a, 2, 4);
	n = pg_ca_match_tiers(&ix, a, 10, NULL, NULL, 3, ids, blocks, &probes);
	assert_int_equal(n, 4);
	assert_int_equal(ids[0], 1);
	assert_int_equal(blocks[0], 10);
	assert_true((ids[1] == 2 && ids[2] == 3) || (ids[1] == 3 && ids[2] == 2));
	assert_int_equal(blocks[1], 6);
	assert_int_equal(blocks[2], 6);
	assert_int_equal(ids[3], 4);
	assert_int_equal(blocks[3], 2);
	assert_true(probes > 0 && probes <= 3 * 5);
	/* two tiers: the third is not read */
	n = pg_ca_match_tiers(&ix, a, 10, NULL, NULL, 2, ids, blocks, NULL);
	assert_int_equal(n, 3);
	/* the caller's rule leaves one out: the next holds it */
	backends[1].flags = 0;
	n = pg_ca_match_tiers(&ix, a, 10, NULL, NULL, 3, ids, blocks, NULL);
	assert_int_equal(n, 3);
	assert_int_equal(blocks[0], 6);
	free(ix.slots);
}

/* A head that more than one instance's share of the traffic passes
 * through is shared; a conversation's own history is not; the share is
 * recent. */
static void test_index_shared(void **state)
{
	__u64 clock = 0;
	struct pg_ca_index ix;
	uint64_t c[8], mine[8];

	(void)state;
	members(4);
	ix = make_index(1 << 14, 100000);
	ix.requests = &clock;
	chain_of(50, 8, mine);
	for (unsigned r = 0; r < 100; r++) {
		/* every request opens with the same 2 blocks; one in five is
		 * the same conversation's next turn */
		if (r % 5 == 0) {
			memcpy(c, mine, sizeof(c));
		} else {
			chain_of(1000 + r, 8, c);
		}
		c[0] = 7;
		c[1] = 8;
		pg_ca_tick(&ix);
		pg_ca_record(&ix, c, 8, (uint16_t)(1 + r % 4));
	}
	memcpy(c, mine, sizeof(c));
	c[0] = 7;
	c[1] = 8;
	/* the shared two blocks; the conversation (1 in 5 < 1 in 4) is not */
	assert_int_equal(pg_ca_shared(&ix, c, 8, 4), 2);
	/* with 8 instances, one in five is more than one instance's share */
	assert_int_equal(pg_ca_shared(&ix, c, 8, 8), 8);
	/* too few requests: nothing is shared yet */
	{
		__u64 k = 0;
		struct pg_ca_index fresh = make_index(1 << 10, 1000);

		fresh.requests = &k;
		for (int r = 0; r < PG_CA_SHARED_USES - 1; r++) {
			pg_ca_tick(&fresh);
			pg_ca_record(&fresh, c, 8, 1);
		}
		assert_int_equal(pg_ca_shared(&fresh, c, 8, 4), 0);
		free(fresh.slots);
	}
	/* no clock: never shared */
	ix.requests = NULL;
	assert_int_equal(pg_ca_shared(&ix, c, 8, 4), 0);
	ix.requests = &clock;
	/* cold for two windows: the share is what it was lately */
	clock += 2 * PG_CA_SHARE_WINDOW;
	assert_int_equal(pg_ca_shared(&ix, c, 8, 4), 0);
	free(ix.slots);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_blocks_and_anchor),
	    cmocka_unit_test(test_index_record_and_match),
	    cmocka_unit_test(test_index_aging),
	    cmocka_unit_test(test_index_bound_and_determinism),
	    cmocka_unit_test(test_tokens_and_whole),
	    cmocka_unit_test(test_index_tiers),
	    cmocka_unit_test(test_index_shared),
	};

	return cmocka_run_group_tests_name("cacheidx", tests, NULL, NULL);
}
