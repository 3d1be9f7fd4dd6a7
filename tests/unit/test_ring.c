// SPDX-License-Identifier: MIT
/*
 * Ring tests: the stability and balance promises of the routing contract,
 * checked over 100k keys from a fixed-seed generator.
 */
#include "ring_fixture.h"

static void test_seed_is_xxh3(void **state)
{
	(void)state;
	assert_true(pg_ring_seed("10.0.0.1:8000", 13) == XXH3_64bits("10.0.0.1:8000", 13));
	assert_true(pg_ring_seed("10.0.0.1:8000", 13) != pg_ring_seed("10.0.0.2:8000", 13));
}

static void test_empty_ring(void **state)
{
	struct pg_ring *r = new_ring();
	uint16_t c[PG_RING_CANDIDATES];

	(void)state;
	pg_ring_build(r, NULL, 0);
	assert_int_equal(r->nbackends, 0);
	for (size_t i = 0; i < 1000; i++)
		assert_int_equal(pg_ring_candidates(r, keys()[i], c), 0);
	for (uint32_t s = 0; s < PG_RING_SLOTS; s++)
		for (size_t k = 0; k < PG_RING_CANDIDATES; k++)
			assert_int_equal(r->slot[s][k], 0);
	free(r);
}

static void test_one_member(void **state)
{
	struct pg_ring *r = new_ring();
	struct pg_ring_member m = {.id = 9, .seed = ident_seed(0)};
	uint16_t c[PG_RING_CANDIDATES];

	(void)state;
	pg_ring_build(r, &m, 1);
	assert_int_equal(r->nbackends, 1);
	for (size_t i = 0; i < 1000; i++) {
		assert_int_equal(pg_ring_candidates(r, keys()[i], c), 1);
		assert_int_equal(c[0], 9);
	}
	free(r);
}

/* Build touches only slot and nbackends; candidates reads slot hash >> 48. */
static void test_build_and_lookup_fields(void **state)
{
	struct pg_ring *r = new_ring();
	struct pg_ring_member m[3];
	uint16_t c[PG_RING_CANDIDATES];

	(void)state;
	members(m, 3);
	r->seq = 7;
	r->generation = 11;
	pg_ring_build(r, m, 3);
	assert_int_equal(r->seq, 7);
	assert_int_equal(r->generation, 11);
	assert_int_equal(r->nbackends, 3);

	r->slot[0xbeef][0] = 5;
	r->slot[0xbeef][1] = 6;
	r->slot[0xbeef][2] = 0;
	r->slot[0xbeef][3] = 8; /* after the first 0: not a candidate */
	assert_int_equal(pg_ring_candidates(r, 0xbeef000000000000ull, c), 2);
	assert_int_equal(c[0], 5);
	assert_int_equal(c[1], 6);
	assert_int_equal(pg_ring_candidates(r, 0xbeefffffffffffffull, c), 2);
	memcpy(r->slot[0xffff], (uint16_t[PG_RING_CANDIDATES]){3, 1, 2, 4}, sizeof(r->slot[0]));
	assert_int_equal(pg_ring_candidates(r, UINT64_MAX, c), 4);
	assert_int_equal(c[0], 3);
	assert_int_equal(c[3], 4);
	free(r);
}

/* Every slot: min(n, K) distinct member ids, then zeros. */
static void test_candidates_distinct(void **state)
{
	static const size_t sizes[] = {1, 2, 3, 4, 5, 7, 64, 255};
	struct pg_ring *r = new_ring();
	struct pg_ring_member m[255];

	(void)state;
	for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
		const size_t n = sizes[t];
		const size_t want = n < PG_RING_CANDIDATES ? n : PG_RING_CANDIDATES;

		members(m, n);
		pg_ring_build(r, m, n);
		for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
			for (size_t k = 0; k < PG_RING_CANDIDATES; k++) {
				uint16_t id = r->slot[s][k];

				if (k >= want) {
					assert_int_equal(id, 0);
					continue;
				}
				assert_in_range(id, 1, n);
				for (size_t j = 0; j < k; j++)
					assert_int_not_equal(r->slot[s][j], id);
			}
		}
	}
	free(r);
}

/* Balance of keys per member: max/min. 7 is the acceptance criterion. */
static void test_balance(void **state)
{
	static const struct {
		size_t n;
		double max_ratio;
	} cases[] = {
	    {2, 1.05},
	    {3, 1.06},
	    {7, 1.10},
	    {64, 1.35},
	};
	struct pg_ring *r = new_ring();
	struct pg_ring_member m[64];

	(void)state;
	for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
		double keys_ratio, slots_ratio;

		members(m, cases[t].n);
		pg_ring_build(r, m, cases[t].n);
		keys_ratio = key_spread(r, m, cases[t].n);
		slots_ratio = slot_spread(r, m, cases[t].n);
		print_message("# %zu members: max/min keys %.4f, slots %.4f\n", cases[t].n,
		              keys_ratio, slots_ratio);
		assert_true(keys_ratio <= cases[t].max_ratio);
		assert_true(slots_ratio <= cases[t].max_ratio);
	}
	free(r);
}

/* 7 -> 8: at most 1.15/8 of keys move, all to the new member. */
static void test_add_member(void **state)
{
	struct pg_ring *a = new_ring(), *b = new_ring();
	struct pg_ring_member m[8];
	size_t moved = 0;
	uint64_t ppm;

	(void)state;
	members(m, 8);
	pg_ring_build(a, m, 7);
	pg_ring_build(b, m, 8);
	for (size_t i = 0; i < NKEYS; i++) {
		uint16_t before = owner(a, keys()[i]), after = owner(b, keys()[i]);

		if (before != after) {
			assert_int_equal(after, m[7].id);
			moved++;
		}
	}
	print_message("# add 8th: %zu of %d keys moved (%.4f of 1/8)\n", moved, NKEYS,
	              moved * 8.0 / NKEYS);
	assert_true(moved * 8.0 <= 1.15 * NKEYS);
	assert_true(moved * 8.0 >= 0.85 * NKEYS);
	ppm = pg_ring_moved_ppm(a, b);
	assert_true(ppm * 8.0 <= 1.15e6 && ppm * 8.0 >= 0.85e6);
	free(a);
	free(b);
}

/*
 * Removing any one of 7: only its keys move, they spread over all the others,
 * and in every slot the others keep their order (the old second candidate
 * becomes the first), with one newcomer appended at the end.
 */
static void test_remove_member(void **state)
{
	struct pg_ring *a = new_ring(), *b = new_ring();
	struct pg_ring_member m[7], rest[6];

	(void)state;
	members(m, 7);
	pg_ring_build(a, m, 7);
	for (size_t gone = 0; gone < 7; gone++) {
		const uint16_t gid = m[gone].id;
		unsigned got[PG_MAX_BACKENDS] = {0};
		size_t nr = 0, owned = 0;

		for (size_t i = 0; i < 7; i++)
			if (i != gone)
				rest[nr++] = m[i];
		pg_ring_build(b, rest, nr);

		for (size_t i = 0; i < NKEYS; i++) {
			uint16_t before = owner(a, keys()[i]), after = owner(b, keys()[i]);

			assert_int_not_equal(after, gid);
			if (before == gid) {
				owned++;
				got[after]++;
			} else {
				assert_int_equal(before, after);
			}
		}
		/* Fair share of the orphaned keys is owned/6 each. */
		for (size_t i = 0; i < nr; i++)
			assert_true(got[rest[i].id] * 6.0 >= 0.7 * owned);

		for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
			const uint16_t *old = a->slot[s], *new = b->slot[s];
			size_t j = 0;

			for (size_t k = 0; k < PG_RING_CANDIDATES; k++) {
				if (old[k] == gid)
					continue;
				if (j < PG_RING_CANDIDATES - 1)
					assert_int_equal(new[j], old[k]);
				j++;
			}
			if (j == PG_RING_CANDIDATES - 1) { /* gid was listed */
				if (old[0] == gid)
					assert_int_equal(new[0], old[1]);
				assert_int_not_equal(new[3], 0);
				assert_int_not_equal(new[3], gid);
			} else {
				assert_int_equal(new[3], old[3]);
			}
		}
	}
	free(a);
	free(b);
}

/* Same identities, any order, any id assignment: same key -> identity map. */
static void test_order_and_ids_irrelevant(void **state)
{
	struct pg_ring *a = new_ring(), *b = new_ring();
	struct pg_ring_member m[7], p[7];
	uint64_t seed_a[PG_MAX_BACKENDS] = {0}, seed_b[PG_MAX_BACKENDS] = {0};
	uint64_t st = 7;

	(void)state;
	members(m, 7);
	for (int round = 0; round < 5; round++) {
		memcpy(p, m, sizeof(m));
		for (size_t i = 6; i > 0; i--) {
			size_t j = next_rand(&st) % (i + 1);
			struct pg_ring_member t = p[i];

			p[i] = p[j];
			p[j] = t;
		}
		/* New ids, in the shuffled order, from a different range. */
		for (size_t i = 0; i < 7; i++)
			p[i].id = (uint16_t)(200 + 3 * i + round);

		pg_ring_build(a, m, 7);
		pg_ring_build(b, p, 7);
		for (size_t i = 0; i < 7; i++) {
			seed_a[m[i].id] = m[i].seed;
			seed_b[p[i].id] = p[i].seed;
		}
		for (uint32_t s = 0; s < PG_RING_SLOTS; s++)
			for (size_t k = 0; k < PG_RING_CANDIDATES; k++)
				assert_true(seed_a[a->slot[s][k]] == seed_b[b->slot[s][k]]);
		assert_int_not_equal(pg_ring_moved_ppm(a, b), 0); /* ids differ */
	}
	free(a);
	free(b);
}

/* Duplicate identities still give an order-independent table. */
static void test_duplicate_seed_order(void **state)
{
	struct pg_ring *a = new_ring(), *b = new_ring();
	struct pg_ring_member m[3] = {
	    {.id = 5, .seed = ident_seed(1)},
	    {.id = 3, .seed = ident_seed(1)},
	    {.id = 4, .seed = ident_seed(2)},
	};
	struct pg_ring_member p[3] = {m[2], m[1], m[0]};

	(void)state;
	pg_ring_build(a, m, 3);
	pg_ring_build(b, p, 3);
	assert_memory_equal(a->slot, b->slot, sizeof(a->slot));
	/* Equal scores: the lower id ranks first, in every slot. */
	for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
		const uint16_t *c = a->slot[s];

		assert_true((c[0] == 3 && c[1] == 5) || (c[1] == 3 && c[2] == 5));
	}
	free(a);
	free(b);
}

static void test_moved_ppm(void **state)
{
	struct pg_ring *a = new_ring(), *b = new_ring();
	struct pg_ring_member m[4];

	(void)state;
	members(m, 4);
	pg_ring_build(a, m, 4);
	pg_ring_build(b, m, 4);
	assert_int_equal(pg_ring_moved_ppm(a, b), 0);
	pg_ring_build(b, NULL, 0);
	assert_int_equal(pg_ring_moved_ppm(a, b), 1000000);
	/* One slot of 65536 differs: 15 ppm (rounded down). */
	pg_ring_build(b, m, 4);
	b->slot[0][0] = (uint16_t)(a->slot[0][0] % 4 + 1);
	assert_int_equal(pg_ring_moved_ppm(a, b), 1000000 / PG_RING_SLOTS);
	free(a);
	free(b);
}

/* The digest names placement by identity: the same addresses under other
 * ids and in another order give the same digest, another set another one. */
static void test_digest_by_identity(void **state)
{
	struct pg_ring *a = new_ring(), *b = new_ring();
	struct pg_ring_member m[5], p[5];
	uint64_t sa[PG_MAX_BACKENDS] = {0}, sb[PG_MAX_BACKENDS] = {0};

	(void)state;
	members(m, 5);
	for (size_t i = 0; i < 5; i++) {
		p[i] = m[4 - i];
		p[i].id = (uint16_t)(200 - i * 7); /* ids as another gateway might assign */
	}
	for (size_t i = 0; i < 5; i++) {
		sa[m[i].id] = m[i].seed;
		sb[p[i].id] = p[i].seed;
	}
	pg_ring_build(a, m, 5);
	pg_ring_build(b, p, 5);
	assert_true(memcmp(a->slot, b->slot, sizeof(a->slot)) != 0); /* ids differ */
	assert_true(pg_ring_digest(a, sa) == pg_ring_digest(b, sb));
	pg_ring_build(b, p, 4);
	assert_true(pg_ring_digest(a, sa) != pg_ring_digest(b, sb));
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_seed_is_xxh3),
	    cmocka_unit_test(test_empty_ring),
	    cmocka_unit_test(test_one_member),
	    cmocka_unit_test(test_build_and_lookup_fields),
	    cmocka_unit_test(test_candidates_distinct),
	    cmocka_unit_test(test_balance),
	    cmocka_unit_test(test_add_member),
	    cmocka_unit_test(test_remove_member),
	    cmocka_unit_test(test_order_and_ids_irrelevant),
	    cmocka_unit_test(test_duplicate_seed_order),
	    cmocka_unit_test(test_moved_ppm),
	    cmocka_unit_test(test_digest_by_identity),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
