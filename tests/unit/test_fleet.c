// SPDX-License-Identifier: MIT
/*
 * Fleets of gateways, the pure parts: the message codec (round trip,
 * truncation and corruption at every byte), the peer table (update, stale,
 * restart, expiry, capacity), the per-slot sum with epochs, the address
 * map, the load-mode decision, the decision queue workers fill, and the
 * balancer counting peers' requests against the threshold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "router/strategy.h"
#include "balance_args.h"
#include "router/index.h"
#include "lib/fleet.h"
#include "lib/fleet_msg.h"
#include "state/fleetq.h"

static struct pg_fleet_hdr hdr(uint8_t type, const char *id, uint64_t boot, uint64_t seq)
{
	struct pg_fleet_hdr h = {
	    .type = type, .boot = boot, .seq = seq, .wall_ms = 1234, .interval_ms = 200};

	snprintf(h.id, sizeof(h.id), "%s", id);
	return h;
}

/* Every cut of a message of entries (len bytes) short of its end: the
 * header refused, or fewer entries decoded, then the fault. */
static void every_cut_fails(const uint8_t *buf, size_t len, size_t entries)
{
	for (size_t cut = 0; cut < len; cut++) {
		struct pg_fleet_dec d;
		struct pg_fleet_hdr g;
		struct pg_fleet_entry x;
		size_t n = 0;

		if (pg_fleet_dec_begin(&d, buf, cut, &g))
			continue;
		while (pg_fleet_dec_next(&d, g.type, &x))
			n++;
		assert_true(n < entries);
		assert_true(d.bad);
	}
}

static void test_codec_load(void **state)
{
	struct pg_fleet_hdr h = hdr(PG_FLEET_MSG_LOAD, "gw-a:9090", 7, 42), g;
	uint8_t buf[256];
	struct pg_fleet_enc e;
	struct pg_fleet_dec d;
	struct pg_fleet_entry x;

	(void)state;
	assert_int_equal(pg_fleet_enc_begin(&e, buf, sizeof(buf), &h), 0);
	assert_true(pg_fleet_enc_load(&e, "10.0.0.1:8000", &(struct pg_fleet_load){3, 2, 5000},
	                              &(struct pg_fleet_ages){1500, 700}));
	assert_true(pg_fleet_enc_load(&e, "[fd00::1]:8000",
	                              &(struct pg_fleet_load){-1, 0, UINT64_MAX},
	                              &(struct pg_fleet_ages){PG_WORK_AGE_NONE, 0}));
	assert_int_equal(e.count, 2);
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), 0);
	assert_string_equal(g.id, "gw-a:9090");
	assert_int_equal(g.type, PG_FLEET_MSG_LOAD);
	assert_int_equal(g.boot, 7);
	assert_int_equal(g.seq, 42);
	assert_int_equal(g.wall_ms, 1234);
	assert_int_equal(g.interval_ms, 200);
	assert_int_equal(g.count, 2);
	assert_true(pg_fleet_dec_next(&d, g.type, &x));
	assert_string_equal(x.addr, "10.0.0.1:8000");
	assert_int_equal(x.load.in_flight, 3);
	assert_int_equal(x.load.prefill_reqs, 2);
	assert_int_equal(x.load.prefill_tokens, 5000);
	assert_int_equal(x.ages.head_us, 1500);
	assert_int_equal(x.ages.first_us, 700);
	assert_true(pg_fleet_dec_next(&d, g.type, &x));
	assert_string_equal(x.addr, "[fd00::1]:8000");
	assert_int_equal(x.load.in_flight, -1);
	assert_true(x.load.prefill_tokens == UINT64_MAX);
	assert_true(x.ages.head_us == PG_WORK_AGE_NONE);
	assert_int_equal(x.ages.first_us, 0);
	assert_false(pg_fleet_dec_next(&d, g.type, &x));
	assert_false(d.bad);

	/* Every truncation is refused or yields fewer entries, flagged bad. */
	every_cut_fails(buf, e.len, 2);
	/* Wrong magic, version, type. */
	for (int i = 0; i < 4; i++) {
		uint8_t c[256];

		memcpy(c, buf, e.len);
		c[i] ^= 0x40;
		assert_int_equal(pg_fleet_dec_begin(&d, c, e.len, &g), -1);
	}
}

static void test_codec_cache_and_full(void **state)
{
	struct pg_fleet_hdr h = hdr(PG_FLEET_MSG_CACHE, "g", 1, 1), g;
	uint64_t chain[3] = {0x1122334455667788ull, 2, UINT64_MAX};
	uint8_t buf[128];
	struct pg_fleet_enc e;
	struct pg_fleet_dec d;
	struct pg_fleet_entry x;
	char longid[PG_FLEET_ID_MAX + 2];
	unsigned n = 0;

	(void)state;
	assert_int_equal(pg_fleet_enc_begin(&e, buf, sizeof(buf), &h), 0);
	while (
	    pg_fleet_enc_cache(&e, "10.0.0.1:8000", n % 2 ? 0 : PG_FLEET_CACHE_REQUEST, chain, 3))
		n++;
	assert_true(e.full);
	assert_int_equal(e.count, n);
	assert_true(e.len <= sizeof(buf));
	assert_true(sizeof(buf) - e.len < pg_fleet_cache_entry_size(13, 3));
	assert_false(pg_fleet_enc_cache(&e, "x", 0, chain, 0)); /* full stays full */
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), 0);
	for (unsigned i = 0; i < n; i++) {
		assert_true(pg_fleet_dec_next(&d, PG_FLEET_MSG_CACHE, &x));
		assert_int_equal(x.flags, i % 2 ? 0 : PG_FLEET_CACHE_REQUEST);
		assert_int_equal(x.n, 3);
		for (uint16_t k = 0; k < 3; k++)
			assert_true(pg_fleet_hash(&x, k) == chain[k]);
	}
	assert_false(pg_fleet_dec_next(&d, PG_FLEET_MSG_CACHE, &x));
	assert_false(d.bad);

	memset(longid, 'a', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	memcpy(h.id, longid, PG_FLEET_ID_MAX);
	h.id[PG_FLEET_ID_MAX] = '\0';
	assert_int_equal(pg_fleet_enc_begin(&e, buf, sizeof(buf), &h), 0); /* exactly the max */
	assert_int_equal(pg_fleet_enc_begin(&e, buf, 20, &h), -1);         /* no room */
	assert_false(pg_fleet_enc_load(&e, longid, &(struct pg_fleet_load){1, 0, 0},
	                               &(struct pg_fleet_ages){0, 0}) &&
	             e.count);
}

/* FIT: the first tokens a gateway learned from, as its peers learn them. */
static void test_codec_fit(void **state)
{
	struct pg_fleet_hdr h = hdr(PG_FLEET_MSG_FIT, "gw-b", 3, 9), g;
	const struct pg_fit_obs o[2] = {{true, 12000, 3, 412345}, {false, 1, 0, UINT32_MAX}};
	uint64_t w[2];
	uint8_t buf[128];
	struct pg_fleet_enc e;
	struct pg_fleet_dec d;
	struct pg_fleet_entry x;
	struct pg_fit_obs back;

	(void)state;
	/* as a worker queues it (two words) */
	for (int i = 0; i < 2; i++) {
		pg_fit_obs_pack(&o[i], w);
		pg_fit_obs_unpack(w, &back);
		assert_true(back.whole == o[i].whole && back.tokens == o[i].tokens &&
		            back.decoding == o[i].decoding && back.y_us == o[i].y_us);
	}
	assert_int_equal(pg_fleet_enc_begin(&e, buf, sizeof(buf), &h), 0);
	assert_true(pg_fleet_enc_fit(&e, "10.0.0.1:8000", &o[0]));
	assert_true(pg_fleet_enc_fit(&e, "10.0.0.2:8000", &o[1]));
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), 0);
	assert_int_equal(g.type, PG_FLEET_MSG_FIT);
	for (int i = 0; i < 2; i++) {
		assert_true(pg_fleet_dec_next(&d, g.type, &x));
		assert_true(x.obs.whole == o[i].whole);
		assert_int_equal(x.obs.tokens, o[i].tokens);
		assert_int_equal(x.obs.decoding, o[i].decoding);
		assert_true(x.obs.y_us == o[i].y_us);
	}
	assert_false(pg_fleet_dec_next(&d, g.type, &x));
	assert_false(d.bad);
	every_cut_fails(buf, e.len, 2);
	/* "whole" is a flag: anything else is a corrupt entry */
	buf[e.len - 13] = 2;
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), 0);
	assert_true(pg_fleet_dec_next(&d, g.type, &x));
	assert_false(pg_fleet_dec_next(&d, g.type, &x));
	assert_true(d.bad);
	/* a type past the last is not a message */
	buf[3] = PG_FLEET_MSG_TYPES;
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), -1);
}

/* FLOW: a tenant's label, key, work served and requests queued; every cut
 * of it decodes what it holds whole, then fails. */
static void test_codec_flow(void **state)
{
	struct pg_fleet_hdr h = hdr(PG_FLEET_MSG_FLOW, "gw-c", 5, 2), g;
	const struct pg_fleet_flow t[3] = {
	    {0x1234567890abcdefull, 90000, 3}, {42, 0, 0}, {0, UINT64_MAX, UINT32_MAX}};
	const char *label[3] = {"t-0123456789ab", "team-a", ""};
	uint8_t buf[160];
	struct pg_fleet_enc e;
	struct pg_fleet_dec d;
	struct pg_fleet_entry x;

	(void)state;
	assert_int_equal(pg_fleet_enc_begin(&e, buf, sizeof(buf), &h), 0);
	for (int i = 0; i < 3; i++)
		assert_true(pg_fleet_enc_flow(&e, label[i], &t[i]));
	assert_false(pg_fleet_enc_flow(&e, "a-label-that-does-not-fit", &t[0]));
	assert_true(e.full);
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), 0);
	assert_int_equal(g.type, PG_FLEET_MSG_FLOW);
	assert_int_equal(g.count, 3);
	for (int i = 0; i < 3; i++) {
		assert_true(pg_fleet_dec_next(&d, g.type, &x));
		assert_string_equal(x.addr, label[i]);
		assert_true(x.flow.key == t[i].key && x.flow.served == t[i].served);
		assert_int_equal(x.flow.queued, t[i].queued);
	}
	assert_false(pg_fleet_dec_next(&d, g.type, &x));
	assert_false(d.bad);
	every_cut_fails(buf, e.len, 3);
}

/* QUOTA: a tenant's label, key, second and counts (a count taken back is
 * negative); every cut decodes what it holds whole, then fails. */
static void test_codec_quota(void **state)
{
	struct pg_fleet_hdr h = hdr(PG_FLEET_MSG_QUOTA, "gw-q", 5, 2), g;
	const struct pg_fleet_quota t[2] = {{0x1234567890abcdefull, 1800000000, 3, 4000},
	                                    {42, UINT64_MAX, -1, INT32_MIN}};
	const char *label[2] = {"team-a", "t-0123456789ab"};
	uint8_t buf[128];
	struct pg_fleet_enc e;
	struct pg_fleet_dec d;
	struct pg_fleet_entry x;

	(void)state;
	assert_int_equal(pg_fleet_enc_begin(&e, buf, sizeof(buf), &h), 0);
	for (int i = 0; i < 2; i++)
		assert_true(pg_fleet_enc_quota(&e, label[i], &t[i]));
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), 0);
	assert_int_equal(g.type, PG_FLEET_MSG_QUOTA);
	for (int i = 0; i < 2; i++) {
		assert_true(pg_fleet_dec_next(&d, g.type, &x));
		assert_string_equal(x.addr, label[i]);
		assert_true(x.quota.key == t[i].key && x.quota.sec == t[i].sec);
		assert_int_equal(x.quota.requests, t[i].requests);
		assert_int_equal(x.quota.tokens, t[i].tokens);
	}
	assert_false(pg_fleet_dec_next(&d, g.type, &x));
	every_cut_fails(buf, e.len, 2);
}

static void test_addrmap(void **state)
{
	struct pg_fleet_addrmap m;
	const struct pg_fleet_addr *a;

	(void)state;
	pg_fleet_addrmap_reset(&m);
	assert_true(pg_fleet_addrmap_add(&m, "10.0.0.2:8000", 3, 9));
	assert_true(pg_fleet_addrmap_add(&m, "10.0.0.1:8000", 7, 1));
	pg_fleet_addrmap_seal(&m);
	a = pg_fleet_addrmap_find(&m, "10.0.0.2:8000");
	assert_non_null(a);
	assert_int_equal(a->id, 3);
	assert_int_equal(a->epoch, 9);
	assert_int_equal(pg_fleet_addrmap_find(&m, "10.0.0.1:8000")->id, 7);
	assert_null(pg_fleet_addrmap_find(&m, "10.0.0.3:8000"));
}

static struct pg_fleet_peers peers; /* big: not on the stack */

static void test_peers(void **state)
{
	uint16_t id[2] = {1, 2};
	uint32_t ep[2] = {5, 5}, cur[PG_MAX_BACKENDS] = {0}, np[PG_MAX_BACKENDS];
	const struct pg_fleet_load c1[2] = {{3, 1, 900}, {1, 0, 0}},
	                           c2[2] = {{4, 2, 100}, {-2, 0, 0}};
	static struct pg_fleet_load sum[PG_MAX_BACKENDS];
	struct pg_fleet_hdr a = hdr(PG_FLEET_MSG_LOAD, "a", 1, 10);
	struct pg_fleet_hdr b = hdr(PG_FLEET_MSG_LOAD, "b", 1, 1);
	char gone[PG_FLEET_ID_MAX + 1] = "";

	(void)state;
	cur[1] = cur[2] = 5;
	pg_fleet_peers_init(&peers);
	assert_int_equal(pg_fleet_peers_update(&peers, &a, id, ep, c1, 2, 1000), PG_FLEET_NEW_PEER);
	assert_int_equal(pg_fleet_peers_update(&peers, &b, id, ep, c2, 2, 1000), PG_FLEET_NEW_PEER);
	assert_int_equal(peers.n, 2);
	pg_fleet_peers_sum(&peers, cur, sum, np);
	assert_int_equal(sum[1].in_flight, 7);
	assert_int_equal(sum[1].prefill_reqs, 3); /* and their work */
	assert_int_equal(sum[1].prefill_tokens, 1000);
	assert_int_equal(sum[2].in_flight, 1); /* b's -2 counts as 0 */
	assert_int_equal(np[1], 2);
	assert_int_equal(sum[3].in_flight, 0);

	/* Replayed or older: ignored. Newer: replaces. */
	assert_int_equal(pg_fleet_peers_update(&peers, &a, id, ep, c2, 2, 1100), PG_FLEET_STALE);
	a.seq = 11;
	assert_int_equal(pg_fleet_peers_update(&peers, &a, id, ep, c2, 1, 1100), PG_FLEET_APPLIED);
	pg_fleet_peers_sum(&peers, cur, sum, np);
	assert_int_equal(sum[1].in_flight, 8);
	assert_int_equal(sum[2].in_flight, 0); /* a no longer lists slot 2 */
	/* A restart (new boot) is accepted with a lower seq. */
	a.boot = 2;
	a.seq = 1;
	assert_int_equal(pg_fleet_peers_update(&peers, &a, id, ep, c1, 2, 1150), PG_FLEET_NEW_PEER);
	assert_int_equal(peers.n, 2);

	/* A slot that got a new member since: the old count is not charged. */
	cur[1] = 6;
	pg_fleet_peers_sum(&peers, cur, sum, np);
	assert_int_equal(sum[1].in_flight, 0);
	assert_int_equal(np[1], 0);
	cur[1] = 5;

	/* Silent for 3 intervals (600 ms): dropped; a is fresher than b. */
	assert_int_equal(pg_fleet_peers_expire(&peers, 1599, gone), 0);
	assert_int_equal(pg_fleet_peers_expire(&peers, 1600, gone), 1);
	assert_string_equal(gone, "b");
	assert_int_equal(peers.n, 1);
	pg_fleet_peers_sum(&peers, cur, sum, np);
	assert_int_equal(sum[1].in_flight, 3);
	assert_int_equal(pg_fleet_peers_expire(&peers, 1750, NULL), 1);
	assert_int_equal(peers.n, 0);

	/* Capacity: the 65th peer is refused until one leaves. */
	for (unsigned i = 0; i < PG_FLEET_MAX_PEERS; i++) {
		char name[16];
		struct pg_fleet_hdr h;

		snprintf(name, sizeof(name), "p%u", i);
		h = hdr(PG_FLEET_MSG_LOAD, name, 1, 1);
		assert_int_equal(pg_fleet_peers_update(&peers, &h, id, ep, c1, 2, 5000),
		                 PG_FLEET_NEW_PEER);
	}
	assert_int_equal(pg_fleet_peers_update(&peers, &b, id, ep, c1, 2, 5000), PG_FLEET_FULL);
	pg_fleet_peers_clear(&peers);
	assert_int_equal(peers.n, 0);
	assert_int_equal(pg_fleet_peers_update(&peers, &b, id, ep, c1, 2, 5000), PG_FLEET_NEW_PEER);
	/* A short interval still gets the minimum TTL. */
	b.interval_ms = 10;
	b.seq = 2;
	pg_fleet_peers_update(&peers, &b, id, ep, c1, 2, 6000);
	assert_int_equal(pg_fleet_peers_expire(&peers, 6000 + PG_FLEET_PEER_TTL_MIN_MS - 1, NULL),
	                 0);
	assert_int_equal(pg_fleet_peers_expire(&peers, 6000 + PG_FLEET_PEER_TTL_MIN_MS, NULL), 1);
}

static void test_decide(void **state)
{
	struct pg_fleet_inputs in = {0};
	struct pg_fleet_decision d;

	(void)state;
	d = pg_fleet_decide(&in);
	assert_int_equal(d.mode, PG_FLEET_LOCAL);
	in.nats_configured = true;
	in.nats_connected = true;
	in.backends_reporting = true;
	assert_int_equal(pg_fleet_decide(&in).mode, PG_FLEET_NATS);
	in.nats_connected = false;
	assert_int_equal(pg_fleet_decide(&in).mode, PG_FLEET_BACKEND);
	in.backends_reporting = false;
	in.peers_seen = 3;
	d = pg_fleet_decide(&in);
	assert_int_equal(d.mode, PG_FLEET_SHARE);
	assert_int_equal(d.share, 4);
	in.fleet_size = 2; /* the flag wins over what was seen */
	assert_int_equal(pg_fleet_decide(&in).share, 2);
	in.fleet_size = 0;
	in.peers_seen = 0; /* alone as far as we know */
	assert_int_equal(pg_fleet_decide(&in).mode, PG_FLEET_LOCAL);
	in.nats_configured = false;
	in.fleet_size = 4;
	assert_int_equal(pg_fleet_decide(&in).mode, PG_FLEET_SHARE);
	in.backends_reporting = true;
	assert_int_equal(pg_fleet_decide(&in).mode, PG_FLEET_BACKEND);
	assert_string_equal(pg_fleet_mode_name(PG_FLEET_SHARE), "share");

	assert_int_equal(pg_fleet_threshold(10, 4), 2);
	assert_int_equal(pg_fleet_threshold(3, 4), 1);
	assert_int_equal(pg_fleet_threshold(10, 1), 10);
	assert_int_equal(pg_fleet_backend_peers(9, 4), 5);
	assert_int_equal(pg_fleet_backend_peers(2, 4), 0);
	assert_int_equal(pg_fleet_backend_peers(2, -1), 2);
}

struct seen {
	unsigned n;
	uint16_t id[8], len[8];
	uint64_t first[8];
	bool request[8];
};

static void collect(uint16_t id, uint32_t epoch, const uint64_t *chain, uint16_t n, bool request,
                    void *arg)
{
	struct seen *s = arg;

	assert_int_equal(epoch, 100 + id);
	if (s->n < 8) {
		s->id[s->n] = id;
		s->len[s->n] = n;
		s->first[s->n] = chain[0];
		s->request[s->n] = request;
	}
	s->n++;
}

static void test_fleetq(void **state)
{
	static uint64_t chain[PG_CA_MAX_BLOCKS + 64];
	struct pg_fleetq *q = pg_fleetq_create(2);
	struct seen s = {0};
	unsigned fit = 0;

	(void)state;
	assert_non_null(q);
	for (unsigned i = 0; i < PG_CA_MAX_BLOCKS + 64; i++)
		chain[i] = i + 1;
	pg_fleetq_push(q, 0, 1, 101, chain, 3, true);
	pg_fleetq_push(q, 1, 2, 102, chain + 5, 2, false);
	pg_fleetq_push(q, 0, 3, 103, chain + 9, PG_CA_MAX_BLOCKS + 50, false); /* capped */
	pg_fleetq_push(q, 7, 1, 101, chain, 3, true);                          /* no such worker */
	pg_fleetq_take(q, 0, collect, &s);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.id[0], 1);
	assert_int_equal(s.len[0], 3);
	assert_true(s.request[0]);
	assert_int_equal(s.id[1], 3);
	assert_int_equal(s.len[1], PG_CA_MAX_BLOCKS);
	assert_false(s.request[1]);
	assert_true(s.first[1] == 10);
	memset(&s, 0, sizeof(s));
	pg_fleetq_take(q, 0, collect, &s); /* taken: empty now */
	assert_int_equal(s.n, 0);
	pg_fleetq_take(q, 1, collect, &s);
	assert_int_equal(s.n, 1);
	assert_true(s.first[0] == 6);
	assert_int_equal(pg_fleetq_dropped(q), 0);

	/* Full: the rest is dropped and counted, never waited for. */
	for (unsigned i = 0; i < 100; i++)
		pg_fleetq_push(q, 0, 1, 101, chain, PG_CA_MAX_BLOCKS, true);
	memset(&s, 0, sizeof(s));
	pg_fleetq_take(q, 0, collect, &s);
	fit = s.n;
	assert_true(fit > 0 && fit < 100);
	assert_int_equal(pg_fleetq_dropped(q), 100 - fit);
	pg_fleetq_free(q);
}

/* A 4-block chain of its own for each seed. */
static void chain4(uint64_t seed, uint64_t c[4])
{
	for (int k = 0; k < 4; k++)
		c[k] = seed * 16 + (uint64_t)k + 1;
}

/* A prefix's share is the fleet's: a gateway whose own requests go through
 * a prefix one time in ten sees the others' too, one in ten of theirs;
 * each of their CACHE entries that begins a request counts one request on
 * its index clock, as on theirs. Counted without them (the uses of their
 * requests, not their number), one in ten of the fleet's looked like 4
 * in ten of its own: shared, with 8 instances, and cached everywhere. */
static void test_shared_across_gateways(void **state)
{
	static struct pg_backend be[PG_MAX_BACKENDS];
	__u64 clock = 0;
	struct pg_ca_index ix = {.slots = calloc(1 << 14, sizeof(struct pg_ca_slot)),
	                         .nslots = 1 << 14,
	                         .backends = be,
	                         .capacity_blocks = 100000,
	                         .requests = &clock};
	struct pg_fleet_hdr h = hdr(PG_FLEET_MSG_CACHE, "peer", 1, 1), g;
	static uint8_t buf[64 * 1024];
	struct pg_fleet_enc e;
	struct pg_fleet_dec d;
	struct pg_fleet_entry x;
	uint64_t c[4], hot[4];

	(void)state;
	assert_non_null(ix.slots);
	for (unsigned id = 1; id <= 8; id++)
		be[id].flags = PG_BACKEND_ACTIVE;
	chain4(77, hot);
	/* its own 100 requests: ticked and recorded (route.c) */
	for (unsigned r = 0; r < 100; r++) {
		chain4(r % 10 ? 1000 + r : 7, c);
		pg_ca_tick(&ix);
		pg_ca_record(&ix, c, 4, (uint16_t)(1 + r % 8));
	}
	/* the others' 300, each a CACHE entry beginning a request */
	assert_int_equal(pg_fleet_enc_begin(&e, buf, sizeof(buf), &h), 0);
	for (unsigned r = 0; r < 300; r++) {
		chain4(r % 10 ? 5000 + r : 7, c);
		assert_true(pg_fleet_enc_cache(&e, "10.0.0.1:8000", PG_FLEET_CACHE_REQUEST, c, 4));
	}
	assert_int_equal(pg_fleet_dec_begin(&d, buf, e.len, &g), 0);
	while (pg_fleet_dec_next(&d, PG_FLEET_MSG_CACHE, &x)) {
		uint64_t got[4];

		for (uint16_t k = 0; k < x.n; k++)
			got[k] = pg_fleet_hash(&x, k);
		if (x.flags & PG_FLEET_CACHE_REQUEST) /* as pg_fleet_on_cache */
			pg_ca_tick(&ix);
		pg_ca_record(&ix, got, x.n, 3);
	}
	assert_int_equal(clock, 400);
	chain4(7, c);
	assert_int_equal(pg_ca_shared(&ix, c, 4, 8), 0); /* 40 of 400: not one in eight */
	/* a prefix one in five of the fleet's requests go through is */
	for (unsigned r = 0; r < 100; r++) {
		pg_ca_tick(&ix);
		pg_ca_record(&ix, hot, 4, (uint16_t)(1 + r % 8));
	}
	assert_true(pg_ca_shared(&ix, hot, 4, 8) > 0);
	free(ix.slots);
}

static void test_balancer_counts_peers(void **state)
{
	static struct pg_backend t[PG_MAX_BACKENDS];
	struct pg_route_cfg cfg = {.strategy = PG_STRATEGY_PREFIX_AWARE,
	                           .concurrency_threshold = 4};
	uint16_t cand[2] = {1, 2};
	struct pg_choice out;

	(void)state;
	memset(t, 0, sizeof(t));
	t[1].flags = t[2].flags = t[3].flags = PG_BACKEND_ACTIVE;
	t[1].in_flight = 1;
	assert_int_equal(balance(&cfg, t, 3, cand, 2, NULL, 0, 0, false, &out), 1);
	t[1].peer_in_flight = 3; /* 1 + 3 reaches the threshold */
	assert_int_equal(balance(&cfg, t, 3, cand, 2, NULL, 0, 0, false, &out), 2);
	assert_int_equal(out.decision, PG_DEC_OVERFLOW);
	t[2].peer_in_flight = 4;
	t[3].peer_in_flight = 1; /* least outstanding counts peers too */
	assert_int_equal(balance(&cfg, t, 3, cand, 2, NULL, 0, 0, false, &out), 3);
	assert_int_equal(pg_backend_inflight(&t[1]), 4);
	cfg.strategy = PG_STRATEGY_LEAST_OUTSTANDING;
	t[3].peer_in_flight = 9;
	assert_int_equal(balance(&cfg, t, 3, cand, 2, NULL, 0, 0, false, &out), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_codec_load),
	    cmocka_unit_test(test_codec_cache_and_full),
	    cmocka_unit_test(test_codec_fit),
	    cmocka_unit_test(test_codec_flow),
	    cmocka_unit_test(test_codec_quota),
	    cmocka_unit_test(test_addrmap),
	    cmocka_unit_test(test_peers),
	    cmocka_unit_test(test_decide),
	    cmocka_unit_test(test_fleetq),
	    cmocka_unit_test(test_shared_across_gateways),
	    cmocka_unit_test(test_balancer_counts_peers),
	};

	return cmocka_run_group_tests_name("fleet", tests, NULL, NULL);
}
