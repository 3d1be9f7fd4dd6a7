// SPDX-License-Identifier: MIT
/*
 * Ring table tests: the table's bytes pinned for fixed memberships, every
 * scan (portable, AVX-512) against a plain reference, edge scores, and
 * pg_ring_update against a full build.
 */
#include "ring_fixture.h"

/*
 * The ring's definition, written plainly: every member's score in the slot,
 * then the best PG_RING_CANDIDATES by (score desc, id asc). Gateways that
 * share a membership must agree on the table (identical bytes), so this is
 * a format: pg_ring_build may compute it any way it likes but must produce
 * exactly this.
 */
static uint64_t ref_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static void ref_build(struct pg_ring *r, const struct pg_ring_member *m, size_t n)
{
	r->nbackends = (uint32_t)n;
	for (uint32_t s = 0; s < PG_RING_SLOTS; s++) {
		const uint64_t salt =
		    ref_mix64((uint64_t)s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
		uint64_t best_sc[PG_RING_CANDIDATES];
		uint16_t best_id[PG_RING_CANDIDATES];

		/* K rounds of "best not yet taken": O(K n), no ordering of m. */
		for (size_t k = 0; k < PG_RING_CANDIDATES; k++) {
			int found = 0;

			best_id[k] = 0;
			best_sc[k] = 0;
			for (size_t i = 0; i < n; i++) {
				const uint64_t sc = ref_mix64(m[i].seed ^ salt);
				int taken = 0;

				for (size_t j = 0; j < k; j++)
					taken |= best_id[j] == m[i].id;
				if (taken)
					continue;
				if (!found || sc > best_sc[k] ||
				    (sc == best_sc[k] && m[i].id < best_id[k])) {
					best_sc[k] = sc;
					best_id[k] = m[i].id;
					found = 1;
				}
			}
			r->slot[s][k] = found ? best_id[k] : 0;
		}
	}
}

/* Memberships the table is pinned for (see test_pinned_tables). */
enum fleet_kind {
	FLEET_SEQ,      /* identities 0..n-1, ids 1..n in order */
	FLEET_SPARSE,   /* identities 3i+1, ids from 255 down, shuffled */
	FLEET_RANDOM,   /* arbitrary 64-bit seeds, ids shuffled over 1..255 */
	FLEET_DUPSEEDS, /* random seeds, every third one repeated */
};

/* The id space the pinned memberships use (PG_MAX_BACKENDS when they were
 * taken): the same members must keep giving the same rings. */
#define PIN_IDS 256
_Static_assert(PIN_IDS <= PG_MAX_BACKENDS, "pinned ids are valid ids");

static size_t fleet(struct pg_ring_member *m, enum fleet_kind kind, size_t n, uint64_t st)
{
	uint16_t ids[PIN_IDS - 1];

	for (size_t i = 0; i < PIN_IDS - 1; i++)
		ids[i] = (uint16_t)(i + 1);
	for (size_t i = PIN_IDS - 2; i > 0; i--) {
		size_t j = next_rand(&st) % (i + 1);
		uint16_t t = ids[i];

		ids[i] = ids[j];
		ids[j] = t;
	}
	for (size_t i = 0; i < n; i++) {
		switch (kind) {
		case FLEET_SEQ:
			m[i].id = (uint16_t)(i + 1);
			m[i].seed = ident_seed((unsigned)i);
			break;
		case FLEET_SPARSE:
			m[i].id = (uint16_t)(PIN_IDS - 1 - i);
			m[i].seed = ident_seed((unsigned)(3 * i + 1));
			break;
		case FLEET_RANDOM:
			m[i].id = ids[i];
			m[i].seed = next_rand(&st);
			break;
		case FLEET_DUPSEEDS:
			m[i].id = ids[i];
			m[i].seed = i % 3 == 2 ? m[i - 1].seed : next_rand(&st);
			break;
		}
	}
	if (kind == FLEET_SPARSE)
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = next_rand(&st) % (i + 1);
			struct pg_ring_member t = m[i];

			m[i] = m[j];
			m[j] = t;
		}
	return n;
}

static uint64_t ring_digest(const struct pg_ring *r)
{
	return XXH3_64bits_withSeed(r->slot, sizeof(r->slot), r->nbackends);
}

/* Every way pg_ring_build can scan: each must give the same table. */
static const enum pg_ring_scan scans[] = {PG_RING_SCAN_AUTO, PG_RING_SCAN_PORTABLE,
                                          PG_RING_SCAN_AVX512};
static const char *const scan_names[] = {"auto", "portable", "avx512"};

/* ref_build and every scan agree on m; returns how many scans ran. */
static size_t check_against_ref(const struct pg_ring_member *m, size_t n)
{
	static struct pg_ring want, got;
	size_t ran = 0;

	memset(&want, 0x5a, sizeof(want));
	ref_build(&want, m, n);
	for (size_t sc = 0; sc < sizeof(scans) / sizeof(scans[0]); sc++) {
		memset(&got, 0xa5, sizeof(got));
		if (pg_ring_build_with(&got, m, n, scans[sc]))
			continue;
		ran++;
		if (memcmp(got.slot, want.slot, sizeof(got.slot)) || got.nbackends != n)
			print_message("# %s scan differs from the reference, %zu members\n",
			              scan_names[sc], n);
		assert_int_equal(got.nbackends, n);
		assert_memory_equal(got.slot, want.slot, sizeof(got.slot));
	}
	return ran;
}

/*
 * The table for fixed memberships, as digests of its bytes (slot array,
 * seeded with nbackends). These pin the definition across versions: a
 * change here changes which backend every gateway picks for a key, and the
 * agreement between gateways of different versions with it.
 */
static void test_pinned_tables(void **state)
{
	static const struct {
		enum fleet_kind kind;
		size_t n;
		uint64_t digest;
	} pins[] = {
	    {FLEET_SEQ, 1, 0x2e4764733f41d750ull},
	    {FLEET_SEQ, 2, 0x5f47f38a5196189full},
	    {FLEET_SEQ, 3, 0xc10430acb898b262ull},
	    {FLEET_SEQ, 4, 0xbfe777bf0d18380full},
	    {FLEET_SEQ, 5, 0xf8ff9334c75c91c7ull},
	    {FLEET_SEQ, 7, 0xc54c16d018b901eaull},
	    {FLEET_SEQ, 16, 0x410aaa06b40c4699ull},
	    {FLEET_SEQ, 64, 0xbcb43c11acea71e5ull},
	    {FLEET_SEQ, 255, 0xea4b591b4d513a9eull},
	    {FLEET_SPARSE, 9, 0x6332cce1452ba477ull},
	    {FLEET_SPARSE, 100, 0x1c6d6751ea73744bull},
	    {FLEET_SPARSE, 255, 0xac5aa551967bc030ull},
	    {FLEET_RANDOM, 6, 0x6fa3e3b6d3de7da6ull},
	    {FLEET_RANDOM, 33, 0x508e877fc6a581a8ull},
	    {FLEET_RANDOM, 255, 0x81146f2b77f7704aull},
	    {FLEET_DUPSEEDS, 5, 0x40c64fee7a9282afull},
	    {FLEET_DUPSEEDS, 48, 0x2685d7bf7012a0d8ull},
	    {FLEET_DUPSEEDS, 255, 0xde1d13d8d95015c4ull},
	};
	struct pg_ring *r = new_ring();
	struct pg_ring_member m[PG_MAX_BACKENDS - 1];
	int bad = 0;

	(void)state;
	for (size_t sc = 0; sc < sizeof(scans) / sizeof(scans[0]); sc++) {
		for (size_t t = 0; t < sizeof(pins) / sizeof(pins[0]); t++) {
			uint64_t d;

			fleet(m, pins[t].kind, pins[t].n, 1000 + t);
			if (pg_ring_build_with(r, m, pins[t].n, scans[sc])) {
				print_message("# %s scan: not on this CPU, not checked\n",
				              scan_names[sc]);
				break;
			}
			d = ring_digest(r);
			if (d != pins[t].digest) {
				print_message("# %s scan, pin %zu (kind %d, %zu members): digest "
				              "0x%016llxull, want 0x%016llxull\n",
				              scan_names[sc], t, (int)pins[t].kind, pins[t].n,
				              (unsigned long long)d,
				              (unsigned long long)pins[t].digest);
				bad++;
			}
		}
	}
	assert_int_equal(bad, 0);
	free(r);
}

/* pg_ring_build against ref_build, byte for byte, over many memberships. */
static void test_matches_reference(void **state)
{
	static const size_t sizes[] = {1, 2, 3, 4, 5, 6, 8, 11, 31, 64, 97, 200, 255};
	struct pg_ring_member m[PG_MAX_BACKENDS - 1];

	(void)state;
	for (int kind = FLEET_SEQ; kind <= FLEET_DUPSEEDS; kind++)
		for (size_t t = 0; t < sizeof(sizes) / sizeof(sizes[0]); t++) {
			/* Only a sample of the sizes at full slot count, kept quick. */
			if ((t + (size_t)kind) % 3)
				continue;
			fleet(m, (enum fleet_kind)kind, sizes[t], 77 + t);
			assert_true(check_against_ref(m, sizes[t]) >= 2);
		}
}

/* Seed that scores exactly 0 in slot s: mix64 is a bijection with
 * mix64(0) == 0, so seed ^ salt(s) == 0. */
static uint64_t zero_score_seed(uint32_t s)
{
	return ref_mix64((uint64_t)s * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
}

/*
 * Scores at the edges of the scans' shortcuts: a member scoring 0 (the
 * value of an unused entry), all members on one seed (every score tied, so
 * none passes a threshold meant for random scores), one seed shared by the
 * first K, a fleet just past the size where the threshold starts.
 */
static void test_edge_scores(void **state)
{
	struct pg_ring_member m[PG_MAX_BACKENDS - 1];

	(void)state;
	for (size_t n = 1; n <= 6; n++) {
		fleet(m, FLEET_RANDOM, n, 5 + n);
		m[n - 1].seed = zero_score_seed((uint32_t)(977 * n));
		check_against_ref(m, n);
	}
	fleet(m, FLEET_RANDOM, 40, 3);
	m[17].seed = zero_score_seed(12345);
	m[18].seed = zero_score_seed(12346);
	check_against_ref(m, 40);

	fleet(m, FLEET_RANDOM, 20, 4);
	for (size_t i = 1; i < 20; i++)
		m[i].seed = m[0].seed;
	check_against_ref(m, 20);

	fleet(m, FLEET_RANDOM, 50, 6);
	for (size_t i = 1; i < PG_RING_CANDIDATES; i++)
		m[i].seed = m[0].seed;
	check_against_ref(m, 50);

	for (size_t n = 9; n <= 13; n++) {
		fleet(m, FLEET_RANDOM, n, 9 + n);
		check_against_ref(m, n);
	}
}

/*
 * pg_ring_update against pg_ring_build, byte for byte, along a random
 * history: members joining and leaving one or a few at a time, an id taking
 * a new identity, the list reordered, shared seeds, a seed scoring 0, bulk
 * changes (built in full) and an empty fleet.
 */
static void test_update_matches_build(void **state)
{
	static struct pg_ring_last last;
	static struct pg_ring_member m[PG_MAX_BACKENDS - 1];
	struct pg_ring *a = new_ring(), *b = new_ring();
	bool used[PG_MAX_BACKENDS] = {false};
	uint64_t st = 99;
	size_t n = 0, updated = 0, steps = 0;

	(void)state;
	memset(&last, 0, sizeof(last));
	for (int round = 0; round < 90; round++) {
		const unsigned op = (unsigned)(next_rand(&st) % 10);
		/* Grow to ~60 members, then to ~250 for the last rounds. */
		const size_t target = round < 70 ? 60 : 250;
		size_t k = 1 + next_rand(&st) % 3;

		if (round == 45)
			k = n; /* everyone leaves */
		else if (round == 70 || n == 0)
			k = target > n ? target - n : 1; /* bulk join */
		if (round == 45 || (op < 4 && n > 12)) {
			for (size_t i = 0; i < k && n > 0; i++) { /* leave */
				size_t j = next_rand(&st) % n;

				used[m[j].id] = false;
				m[j] = m[--n];
			}
		} else if (op < 8 || n < target / 2) {
			for (size_t i = 0; i < k && n < PG_MAX_BACKENDS - 1; i++) { /* join */
				uint16_t id;

				do
					id = (uint16_t)(1 + next_rand(&st) % (PG_MAX_BACKENDS - 1));
				while (used[id]);
				used[id] = true;
				m[n].id = id;
				m[n].seed = next_rand(&st);
				if (n > 0 && next_rand(&st) % 8 == 0)
					m[n].seed =
					    m[next_rand(&st) % n].seed; /* shared identity */
				else if (next_rand(&st) % 8 == 0)
					m[n].seed = zero_score_seed(
					    (uint32_t)(next_rand(&st) % PG_RING_SLOTS));
				n++;
			}
		} else if (op == 8 && n > 0) { /* an id now names another identity */
			m[next_rand(&st) % n].seed = next_rand(&st);
		} else { /* same members, another order */
			for (size_t i = n; i > 1; i--) {
				size_t j = next_rand(&st) % i;
				struct pg_ring_member t = m[i - 1];

				m[i - 1] = m[j];
				m[j] = t;
			}
		}
		memset(a, 0xa5, sizeof(*a));
		updated += pg_ring_update(a, &last, m, n);
		steps++;
		pg_ring_build(b, m, n);
		if (memcmp(a->slot, b->slot, sizeof(a->slot)))
			fail_msg("round %d (%zu members): update differs from build", round, n);
		assert_int_equal(a->nbackends, n);
	}
	print_message("# %zu of %zu steps updated, the rest built in full\n", updated, steps);
	assert_true(updated * 2 > steps);
	free(a);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pinned_tables),
	    cmocka_unit_test(test_matches_reference),
	    cmocka_unit_test(test_edge_scores),
	    cmocka_unit_test(test_update_matches_build),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
