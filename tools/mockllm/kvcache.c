// SPDX-License-Identifier: MIT
/*
 * Simulated prefix cache: a fixed pool of block records, a chained hash table
 * keyed by block hash, and an intrusive LRU list (head = most recently used).
 * All links are 32-bit pool indices; KV_NIL ends a list.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "kvcache.h"

#define KV_NIL UINT32_MAX

struct kv_block {
	uint64_t hash;
	uint32_t chain;      /* next block in the same hash bucket */
	uint32_t prev, next; /* LRU neighbours */
};

struct kv_cache {
	struct kv_block *pool;
	uint32_t *bucket;
	uint32_t nbuckets; /* power of two, >= 2 * capacity */
	uint32_t capacity; /* blocks */
	uint32_t used;     /* pool[0..used) have been handed out at least once */
	uint32_t held;
	uint32_t free_head; /* recycled records, linked through .next */
	uint32_t lru_head, lru_tail;
	uint64_t evictions;
};

struct kv_cache *kv_create(uint64_t capacity_tokens)
{
	uint64_t cap = kv_capacity_blocks(capacity_tokens);
	struct kv_cache *kv;
	uint32_t nb = 16;

	if (cap > (1u << 28))
		return NULL;
	while (nb < 2 * cap)
		nb <<= 1;
	kv = calloc(1, sizeof(*kv));
	if (!kv)
		return NULL;
	kv->pool = calloc(cap, sizeof(*kv->pool));
	kv->bucket = malloc(nb * sizeof(*kv->bucket));
	if (!kv->pool || !kv->bucket) {
		kv_destroy(kv);
		return NULL;
	}
	memset(kv->bucket, 0xff, nb * sizeof(*kv->bucket));
	kv->nbuckets = nb;
	kv->capacity = (uint32_t)cap;
	kv->free_head = KV_NIL;
	kv->lru_head = kv->lru_tail = KV_NIL;
	return kv;
}

void kv_destroy(struct kv_cache *kv)
{
	if (!kv)
		return;
	free(kv->pool);
	free(kv->bucket);
	free(kv);
}

/* The parent hash first, then the block's token bytes. */
static uint64_t block_hash(uint64_t parent, const unsigned char *blk)
{
	unsigned char buf[8 + KV_BLOCK_BYTES];

	memcpy(buf, &parent, 8);
	memcpy(buf + 8, blk, KV_BLOCK_BYTES);
	return XXH3_64bits(buf, sizeof(buf));
}

size_t kv_block_hashes(const void *text, size_t len, uint64_t *out, size_t max)
{
	uint64_t tokens = kv_prompt_tokens(len);
	size_t n = tokens ? (size_t)((tokens - 1) / KV_BLOCK_TOKENS) : 0;
	const unsigned char *p = text;
	uint64_t parent = 0;

	for (size_t i = 0; i < n && i < max; i++) {
		parent = block_hash(parent, p + i * KV_BLOCK_BYTES);
		out[i] = parent;
	}
	return n;
}

void kv_hasher_init(struct kv_hasher *h, uint64_t parent)
{
	h->parent = parent;
	h->fill = 0;
}

size_t kv_hasher_feed(struct kv_hasher *h, const void *p, size_t len, uint64_t *out, size_t max)
{
	const unsigned char *b = p;
	size_t n = 0;

	while (len) {
		size_t take;

		if (h->fill == KV_BLOCK_BYTES) {
			/* a byte follows this complete block: it counts */
			if (n == max)
				break;
			h->parent = block_hash(h->parent, h->blk);
			out[n++] = h->parent;
			h->fill = 0;
		}
		take = KV_BLOCK_BYTES - h->fill;
		if (take > len)
			take = len;
		memcpy(h->blk + h->fill, b, take);
		h->fill += take;
		b += take;
		len -= take;
	}
	return n;
}

static uint32_t *bucket_of(const struct kv_cache *kv, uint64_t hash)
{
	/* the hash is already uniform: fold the high bits in for good measure */
	return &kv->bucket[(uint32_t)(hash ^ (hash >> 32)) & (kv->nbuckets - 1)];
}

static uint32_t find(const struct kv_cache *kv, uint64_t hash)
{
	uint32_t i = *bucket_of(kv, hash);

	while (i != KV_NIL && kv->pool[i].hash != hash)
		i = kv->pool[i].chain;
	return i;
}

static void lru_unlink(struct kv_cache *kv, uint32_t i)
{
	struct kv_block *b = &kv->pool[i];

	if (b->prev != KV_NIL)
		kv->pool[b->prev].next = b->next;
	else
		kv->lru_head = b->next;
	if (b->next != KV_NIL)
		kv->pool[b->next].prev = b->prev;
	else
		kv->lru_tail = b->prev;
}

static void lru_push_head(struct kv_cache *kv, uint32_t i)
{
	struct kv_block *b = &kv->pool[i];

	b->prev = KV_NIL;
	b->next = kv->lru_head;
	if (kv->lru_head != KV_NIL)
		kv->pool[kv->lru_head].prev = i;
	else
		kv->lru_tail = i;
	kv->lru_head = i;
}

static void touch(struct kv_cache *kv, uint32_t i)
{
	if (kv->lru_head == i)
		return;
	lru_unlink(kv, i);
	lru_push_head(kv, i);
}

/* Drop the least recently used block and recycle its record. */
static void evict_one(struct kv_cache *kv)
{
	uint32_t i = kv->lru_tail;
	uint32_t *link = bucket_of(kv, kv->pool[i].hash);

	while (*link != i)
		link = &kv->pool[*link].chain;
	*link = kv->pool[i].chain;
	lru_unlink(kv, i);
	kv->pool[i].next = kv->free_head;
	kv->free_head = i;
	kv->held--;
	kv->evictions++;
}

static void add(struct kv_cache *kv, uint64_t hash)
{
	uint32_t *head;
	uint32_t i;

	if (kv->held == kv->capacity)
		evict_one(kv);
	if (kv->free_head != KV_NIL) {
		i = kv->free_head;
		kv->free_head = kv->pool[i].next;
	} else {
		i = kv->used++;
	}
	head = bucket_of(kv, hash);
	kv->pool[i].hash = hash;
	kv->pool[i].chain = *head;
	*head = i;
	lru_push_head(kv, i);
	kv->held++;
}

size_t kv_peek(const struct kv_cache *kv, const uint64_t *hashes, size_t n)
{
	size_t hit = 0;

	while (hit < n && find(kv, hashes[hit]) != KV_NIL)
		hit++;
	return hit;
}

size_t kv_lookup(struct kv_cache *kv, const uint64_t *hashes, size_t n)
{
	size_t hit = kv_peek(kv, hashes, n);

	for (size_t i = hit; i-- > 0;)
		touch(kv, find(kv, hashes[i]));
	return hit;
}

void kv_insert(struct kv_cache *kv, const uint64_t *hashes, size_t n)
{
	if (n > kv->capacity)
		n = kv->capacity;
	/* Touch what is already there first so that adding the missing blocks
	 * cannot evict this same prefix's older blocks. */
	for (size_t i = n; i-- > 0;) {
		uint32_t b = find(kv, hashes[i]);

		if (b != KV_NIL)
			touch(kv, b);
	}
	for (size_t i = n; i-- > 0;) {
		uint32_t b = find(kv, hashes[i]);

		if (b == KV_NIL)
			add(kv, hashes[i]);
		else
			touch(kv, b);
	}
}

size_t kv_blocks_held(const struct kv_cache *kv)
{
	return kv->held;
}

size_t kv_blocks_capacity(const struct kv_cache *kv)
{
	return kv->capacity;
}

uint64_t kv_evictions(const struct kv_cache *kv)
{
	return kv->evictions;
}
