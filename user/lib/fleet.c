// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>
#include "lib/fleet.h"

void pg_fleet_addrmap_reset(struct pg_fleet_addrmap *m)
{
	m->n = 0;
}

bool pg_fleet_addrmap_add(struct pg_fleet_addrmap *m, const char *addr, uint16_t id, uint32_t epoch)
{
	size_t al = strnlen(addr, PG_FLEET_ADDR_MAX + 1);

	if (m->n >= PG_MAX_BACKENDS || al > PG_FLEET_ADDR_MAX)
		return false;
	memcpy(m->e[m->n].addr, addr, al + 1);
	m->e[m->n].id = id;
	m->e[m->n].epoch = epoch;
	m->n++;
	return true;
}

static int addr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct pg_fleet_addr *)a)->addr,
	              ((const struct pg_fleet_addr *)b)->addr);
}

void pg_fleet_addrmap_seal(struct pg_fleet_addrmap *m)
{
	qsort(m->e, m->n, sizeof(m->e[0]), addr_cmp);
}

const struct pg_fleet_addr *pg_fleet_addrmap_find(const struct pg_fleet_addrmap *m,
                                                  const char *addr)
{
	struct pg_fleet_addr key;
	size_t al = strnlen(addr, PG_FLEET_ADDR_MAX + 1);

	if (al > PG_FLEET_ADDR_MAX)
		return NULL;
	memcpy(key.addr, addr, al + 1);
	return bsearch(&key, m->e, m->n, sizeof(m->e[0]), addr_cmp);
}

void pg_fleet_peers_init(struct pg_fleet_peers *t)
{
	memset(t, 0, sizeof(*t));
}

static struct pg_fleet_peer *find_peer(struct pg_fleet_peers *t, const char *id)
{
	for (unsigned i = 0; i < PG_FLEET_MAX_PEERS; i++)
		if (t->p[i].id[0] && !strcmp(t->p[i].id, id))
			return &t->p[i];
	return NULL;
}

enum pg_fleet_update pg_fleet_peers_update(struct pg_fleet_peers *t, const struct pg_fleet_hdr *h,
                                           const uint16_t *id, const uint32_t *epoch,
                                           const struct pg_fleet_load *load, size_t n,
                                           uint64_t now_ms)
{
	struct pg_fleet_peer *p = find_peer(t, h->id);
	enum pg_fleet_update r = PG_FLEET_APPLIED;

	if (!h->id[0])
		return PG_FLEET_STALE;
	if (p && p->boot == h->boot && h->seq <= p->seq)
		return PG_FLEET_STALE;
	if (!p || p->boot != h->boot)
		r = PG_FLEET_NEW_PEER;
	if (!p) {
		for (unsigned i = 0; i < PG_FLEET_MAX_PEERS && !p; i++)
			if (!t->p[i].id[0])
				p = &t->p[i];
		if (!p)
			return PG_FLEET_FULL;
		memcpy(p->id, h->id, sizeof(p->id));
		t->n++;
	}
	p->boot = h->boot;
	p->seq = h->seq;
	p->last_ms = now_ms;
	p->interval_ms = h->interval_ms;
	memset(p->load, 0, sizeof(p->load));
	memset(p->epoch, 0, sizeof(p->epoch));
	for (size_t i = 0; i < n; i++) {
		if (!id[i] || id[i] >= PG_MAX_BACKENDS)
			continue;
		p->load[id[i]] = load[i];
		p->epoch[id[i]] = epoch[i];
	}
	return r;
}

static uint64_t ttl_ms(const struct pg_fleet_peer *p)
{
	uint64_t ttl = (uint64_t)p->interval_ms * PG_FLEET_PEER_TTL_INTERVALS;

	return ttl < PG_FLEET_PEER_TTL_MIN_MS ? PG_FLEET_PEER_TTL_MIN_MS : ttl;
}

unsigned pg_fleet_peers_expire(struct pg_fleet_peers *t, uint64_t now_ms, char *dropped)
{
	unsigned k = 0;

	for (unsigned i = 0; i < PG_FLEET_MAX_PEERS; i++) {
		struct pg_fleet_peer *p = &t->p[i];

		if (!p->id[0] || now_ms < p->last_ms || now_ms - p->last_ms < ttl_ms(p))
			continue;
		if (!k && dropped)
			memcpy(dropped, p->id, sizeof(p->id));
		p->id[0] = '\0';
		t->n--;
		k++;
	}
	return k;
}

void pg_fleet_peers_clear(struct pg_fleet_peers *t)
{
	for (unsigned i = 0; i < PG_FLEET_MAX_PEERS; i++)
		t->p[i].id[0] = '\0';
	t->n = 0;
}

void pg_fleet_peers_sum(const struct pg_fleet_peers *t, const uint32_t *cur_epoch,
                        struct pg_fleet_load *sum, uint32_t *npeers)
{
	memset(sum, 0, sizeof(*sum) * PG_MAX_BACKENDS);
	memset(npeers, 0, sizeof(*npeers) * PG_MAX_BACKENDS);
	for (unsigned i = 0; i < PG_FLEET_MAX_PEERS; i++) {
		const struct pg_fleet_peer *p = &t->p[i];

		if (!p->id[0])
			continue;
		for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
			const struct pg_fleet_load *l = &p->load[id];
			struct pg_fleet_load *s = &sum[id];

			if (!p->epoch[id] || p->epoch[id] != cur_epoch[id])
				continue;
			npeers[id]++;
			if (l->in_flight > 0 && s->in_flight <= INT32_MAX - l->in_flight)
				s->in_flight += l->in_flight;
			if (s->prefill_reqs <= UINT32_MAX - l->prefill_reqs)
				s->prefill_reqs += l->prefill_reqs;
			if (s->prefill_tokens <= UINT64_MAX - l->prefill_tokens)
				s->prefill_tokens += l->prefill_tokens;
		}
	}
}

const char *pg_fleet_mode_name(enum pg_fleet_mode m)
{
	static const char *const names[PG_FLEET_MODES] = {
	    [PG_FLEET_LOCAL] = "local",
	    [PG_FLEET_NATS] = "nats",
	    [PG_FLEET_BACKEND] = "backend",
	    [PG_FLEET_SHARE] = "share",
	};

	return (unsigned)m < PG_FLEET_MODES ? names[m] : "?";
}

struct pg_fleet_decision pg_fleet_decide(const struct pg_fleet_inputs *in)
{
	struct pg_fleet_decision d = {PG_FLEET_LOCAL, 1};
	unsigned n;

	if (!in->nats_configured && !in->fleet_size)
		return d;
	if (in->nats_configured && in->nats_connected) {
		d.mode = PG_FLEET_NATS;
		return d;
	}
	if (in->backends_reporting) {
		d.mode = PG_FLEET_BACKEND;
		return d;
	}
	n = in->fleet_size ? in->fleet_size : in->peers_seen + 1;
	if (n > 1) {
		d.mode = PG_FLEET_SHARE;
		d.share = n;
	}
	return d;
}

uint32_t pg_fleet_threshold(uint32_t t, unsigned share)
{
	uint32_t v = share > 1 ? t / share : t;

	return v ? v : 1;
}

int32_t pg_fleet_backend_peers(uint32_t reported, int32_t local)
{
	int64_t v = (int64_t)reported - (local > 0 ? local : 0);

	return v > 0 ? (int32_t)(v > INT32_MAX ? INT32_MAX : v) : 0;
}
