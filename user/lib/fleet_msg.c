// SPDX-License-Identifier: MIT
#include <string.h>
#include "lib/fleet_msg.h"

#define HDR_FIXED (2 + 1 + 1 + 1 + 8 + 8 + 8 + 4 + 2) /* all but the id bytes */

static void put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int pg_fleet_enc_begin(struct pg_fleet_enc *e, void *buf, size_t cap, const struct pg_fleet_hdr *h)
{
	size_t idl = strnlen(h->id, PG_FLEET_ID_MAX + 1);
	uint8_t *p = buf;

	memset(e, 0, sizeof(*e));
	if (idl > PG_FLEET_ID_MAX || cap < HDR_FIXED + idl)
		return -1;
	p[0] = 'P';
	p[1] = 'G';
	p[2] = PG_FLEET_MSG_VERSION;
	p[3] = h->type;
	p[4] = (uint8_t)idl;
	memcpy(p + 5, h->id, idl);
	p += 5 + idl;
	put_u64(p, h->boot);
	put_u64(p + 8, h->seq);
	put_u64(p + 16, h->wall_ms);
	put_u32(p + 24, h->interval_ms);
	put_u16(p + 28, 0);
	e->p = buf;
	e->cap = cap;
	e->count_off = 5 + idl + 28;
	e->len = e->count_off + 2;
	return 0;
}

/* Room for need more bytes and one more entry, else full. */
static bool room(struct pg_fleet_enc *e, size_t need)
{
	if (e->full || e->count == UINT16_MAX || e->cap - e->len < need) {
		e->full = true;
		return false;
	}
	return true;
}

static size_t put_addr(struct pg_fleet_enc *e, const char *addr, size_t al)
{
	e->p[e->len] = (uint8_t)al;
	memcpy(e->p + e->len + 1, addr, al);
	return 1 + al;
}

static void counted(struct pg_fleet_enc *e)
{
	e->count++;
	put_u16(e->p + e->count_off, e->count);
}

#define LOAD_FIXED  (4 + 4 + 8 + 4 + 4) /* a LOAD entry past its address */
#define FIT_FIXED   (1 + 4 + 4 + 4)     /* a FIT entry past its address */
#define FLOW_FIXED  (8 + 8 + 4)         /* a FLOW entry past its label */
#define QUOTA_FIXED (8 + 8 + 4 + 4)     /* a QUOTA entry past its label */

bool pg_fleet_enc_load(struct pg_fleet_enc *e, const char *addr, const struct pg_fleet_load *l,
                       const struct pg_fleet_ages *ages)
{
	size_t al = strnlen(addr, PG_FLEET_ADDR_MAX + 1);

	if (al > PG_FLEET_ADDR_MAX || !room(e, 1 + al + LOAD_FIXED))
		return false;
	e->len += put_addr(e, addr, al);
	put_u32(e->p + e->len, (uint32_t)l->in_flight);
	put_u32(e->p + e->len + 4, l->prefill_reqs);
	put_u64(e->p + e->len + 8, l->prefill_tokens);
	put_u32(e->p + e->len + 16, ages->head_us);
	put_u32(e->p + e->len + 20, ages->first_us);
	e->len += LOAD_FIXED;
	counted(e);
	return true;
}

bool pg_fleet_enc_fit(struct pg_fleet_enc *e, const char *addr, const struct pg_fit_obs *o)
{
	size_t al = strnlen(addr, PG_FLEET_ADDR_MAX + 1);

	if (al > PG_FLEET_ADDR_MAX || !room(e, 1 + al + FIT_FIXED))
		return false;
	e->len += put_addr(e, addr, al);
	e->p[e->len] = o->whole;
	put_u32(e->p + e->len + 1, o->tokens);
	put_u32(e->p + e->len + 5, o->decoding);
	put_u32(e->p + e->len + 9, o->y_us);
	e->len += FIT_FIXED;
	counted(e);
	return true;
}

bool pg_fleet_enc_flow(struct pg_fleet_enc *e, const char *label, const struct pg_fleet_flow *t)
{
	size_t al = strnlen(label, PG_FLEET_ADDR_MAX + 1);

	if (al > PG_FLEET_ADDR_MAX || !room(e, 1 + al + FLOW_FIXED))
		return false;
	e->len += put_addr(e, label, al);
	put_u64(e->p + e->len, t->key);
	put_u64(e->p + e->len + 8, t->served);
	put_u32(e->p + e->len + 16, t->queued);
	e->len += FLOW_FIXED;
	counted(e);
	return true;
}

bool pg_fleet_enc_quota(struct pg_fleet_enc *e, const char *label, const struct pg_fleet_quota *q)
{
	size_t al = strnlen(label, PG_FLEET_ADDR_MAX + 1);

	if (al > PG_FLEET_ADDR_MAX || !room(e, 1 + al + QUOTA_FIXED))
		return false;
	e->len += put_addr(e, label, al);
	put_u64(e->p + e->len, q->key);
	put_u64(e->p + e->len + 8, q->sec);
	put_u32(e->p + e->len + 16, (uint32_t)q->requests);
	put_u32(e->p + e->len + 20, (uint32_t)q->tokens);
	e->len += QUOTA_FIXED;
	counted(e);
	return true;
}

size_t pg_fleet_cache_entry_size(size_t addr_len, uint16_t n)
{
	return 1 + addr_len + 1 + 2 + (size_t)n * 8;
}

bool pg_fleet_enc_cache(struct pg_fleet_enc *e, const char *addr, uint8_t flags,
                        const uint64_t *chain, uint16_t n)
{
	size_t al = strnlen(addr, PG_FLEET_ADDR_MAX + 1);

	if (al > PG_FLEET_ADDR_MAX || !room(e, pg_fleet_cache_entry_size(al, n)))
		return false;
	e->len += put_addr(e, addr, al);
	e->p[e->len] = flags;
	put_u16(e->p + e->len + 1, n);
	e->len += 3;
	for (uint16_t i = 0; i < n; i++, e->len += 8)
		put_u64(e->p + e->len, chain[i]);
	counted(e);
	return true;
}

int pg_fleet_dec_begin(struct pg_fleet_dec *d, const void *buf, size_t len, struct pg_fleet_hdr *h)
{
	const uint8_t *p = buf;
	size_t idl;

	memset(d, 0, sizeof(*d));
	memset(h, 0, sizeof(*h));
	if (len < HDR_FIXED || p[0] != 'P' || p[1] != 'G' || p[2] != PG_FLEET_MSG_VERSION)
		return -1;
	if (p[3] < PG_FLEET_MSG_LOAD || p[3] >= PG_FLEET_MSG_TYPES)
		return -1;
	idl = p[4];
	if (idl > PG_FLEET_ID_MAX || len < HDR_FIXED + idl)
		return -1;
	h->type = p[3];
	h->id_len = (uint8_t)idl;
	memcpy(h->id, p + 5, idl);
	p += 5 + idl;
	h->boot = get_u64(p);
	h->seq = get_u64(p + 8);
	h->wall_ms = get_u64(p + 16);
	h->interval_ms = get_u32(p + 24);
	h->count = get_u16(p + 28);
	d->p = buf;
	d->len = len;
	d->off = HDR_FIXED + idl;
	d->left = h->count;
	return 0;
}

static bool fault(struct pg_fleet_dec *d)
{
	d->bad = true;
	d->left = 0;
	return false;
}

bool pg_fleet_dec_next(struct pg_fleet_dec *d, uint8_t type, struct pg_fleet_entry *out)
{
	size_t al, need;

	if (!d->left)
		return false;
	if (d->off >= d->len)
		return fault(d);
	al = d->p[d->off];
	if (al > PG_FLEET_ADDR_MAX || d->len - d->off < 1 + al)
		return fault(d);
	memcpy(out->addr, d->p + d->off + 1, al);
	out->addr[al] = '\0';
	if (memchr(out->addr, '\0', al))
		return fault(d);
	d->off += 1 + al;
	memset(&out->load, 0, sizeof(out->load));
	memset(&out->ages, 0, sizeof(out->ages));
	memset(&out->obs, 0, sizeof(out->obs));
	memset(&out->flow, 0, sizeof(out->flow));
	memset(&out->quota, 0, sizeof(out->quota));
	out->flags = 0;
	out->n = 0;
	out->chain = NULL;
	if (type == PG_FLEET_MSG_LOAD) {
		if (d->len - d->off < LOAD_FIXED)
			return fault(d);
		out->load.in_flight = (int32_t)get_u32(d->p + d->off);
		out->load.prefill_reqs = get_u32(d->p + d->off + 4);
		out->load.prefill_tokens = get_u64(d->p + d->off + 8);
		out->ages.head_us = get_u32(d->p + d->off + 16);
		out->ages.first_us = get_u32(d->p + d->off + 20);
		d->off += LOAD_FIXED;
	} else if (type == PG_FLEET_MSG_FIT) {
		if (d->len - d->off < FIT_FIXED || d->p[d->off] > 1)
			return fault(d);
		out->obs.whole = d->p[d->off];
		out->obs.tokens = get_u32(d->p + d->off + 1);
		out->obs.decoding = get_u32(d->p + d->off + 5);
		out->obs.y_us = get_u32(d->p + d->off + 9);
		d->off += FIT_FIXED;
	} else if (type == PG_FLEET_MSG_FLOW) {
		if (d->len - d->off < FLOW_FIXED)
			return fault(d);
		out->flow.key = get_u64(d->p + d->off);
		out->flow.served = get_u64(d->p + d->off + 8);
		out->flow.queued = get_u32(d->p + d->off + 16);
		d->off += FLOW_FIXED;
	} else if (type == PG_FLEET_MSG_QUOTA) {
		if (d->len - d->off < QUOTA_FIXED)
			return fault(d);
		out->quota.key = get_u64(d->p + d->off);
		out->quota.sec = get_u64(d->p + d->off + 8);
		out->quota.requests = (int32_t)get_u32(d->p + d->off + 16);
		out->quota.tokens = (int32_t)get_u32(d->p + d->off + 20);
		d->off += QUOTA_FIXED;
	} else {
		if (d->len - d->off < 3)
			return fault(d);
		out->flags = d->p[d->off];
		out->n = get_u16(d->p + d->off + 1);
		need = (size_t)out->n * 8;
		if (d->len - d->off - 3 < need)
			return fault(d);
		out->chain = d->p + d->off + 3;
		d->off += 3 + need;
	}
	d->left--;
	return true;
}

uint64_t pg_fleet_hash(const struct pg_fleet_entry *e, uint16_t i)
{
	return get_u64(e->chain + (size_t)i * 8);
}
