// SPDX-License-Identifier: MIT
/*
 * --pool NAME:KEY=VALUE keys of prefill/decode disaggregation (lib/pd.h,
 * doc/routing.md "Prefill/decode disaggregation"): pd=vllm|sglang, prefill=ADDR
 * [@BOOTSTRAP_PORT],... (the pool's own members), decode=ADDR,... (the
 * members of its decode set, pool NAME-decode, made here), pd-min-tokens=N,
 * bootstrap-port=PORT. Pure parsing into the pool table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "config/config.h"
#include "config/config_internal.h"
#include "lib/modelpool.h"
#include "lib/pd.h"

static int port_of(const char *s, size_t n, uint16_t *out)
{
	unsigned v = 0;

	if (!n || n > 5)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (!v || v > 65535)
		return -1;
	*out = (uint16_t)v;
	return 0;
}

/* The decode set of pool p: found, or made (NAME-decode, declared). */
static int decode_pool(struct pg_pool_table *t, unsigned p, char *err, size_t errlen)
{
	char name[PG_POOL_NAME_MAX + 8];
	int q;

	if (t->pool[p].decode)
		return (int)t->pool[p].decode;
	snprintf(name, sizeof(name), "%s-decode", t->pool[p].name);
	if (strlen(name) >= PG_POOL_NAME_MAX) {
		pg_errf(err, errlen, "decode: its pool's name %s is longer than %d", name,
		        PG_POOL_NAME_MAX - 1);
		return -1;
	}
	q = pg_pool_find(t, name, strlen(name));
	if (q >= 0 && (!t->pool[q].decode_set || t->pool[q].prefill != p)) {
		pg_errf(err, errlen, "decode: pool %s exists and is not this pool's decode set",
		        name);
		return -1;
	}
	if (q < 0) {
		if (t->n >= PG_MAX_POOLS) {
			pg_errf(err, errlen,
			        "decode: %s would be pool %d: more than %d besides default (%d "
			        "with it, the most a gateway has; a decode set is a pool)",
			        name, PG_MAX_POOLS, PG_MAX_POOLS - 1, PG_MAX_POOLS);
			return -1;
		}
		q = (int)t->n++;
		strcpy(t->pool[q].name, name);
		t->pool[q].declared = true;
		t->pool[q].decode_set = true;
		t->pool[q].prefill = p;
	}
	t->pool[p].decode = (unsigned)q;
	return q;
}

/* One item of prefill=: ADDR or ADDR@PORT. */
static int prefill_item(struct pg_pool_table *t, unsigned p, const char *it, size_t len, char sep,
                        bool merge, char *err, size_t errlen)
{
	struct pg_pool_cfg *pc = &t->pool[p];
	const char *at = memchr(it, '@', len);
	const size_t had = pc->nbackends;
	struct pg_bootstrap *nb;
	uint16_t port;

	if (at && port_of(at + 1, len - (size_t)(at + 1 - it), &port)) {
		pg_errf(err, errlen, "prefill%c%.*s: @PORT is its bootstrap port, 1-65535", sep,
		        (int)len, it);
		return -1;
	}
	if (pg_pool_add_item(t, p, "backend", it, at ? (size_t)(at - it) : len, merge, err, errlen))
		return -1;
	/* (merged: an instance given before, by the file, with its port then) */
	if (!at || pc->nbackends == had)
		return 0;
	nb = realloc(pc->bootstraps, (pc->nbootstraps + 1) * sizeof(*nb));
	if (!nb) {
		pg_errf(err, errlen, "out of memory");
		return -1;
	}
	pc->bootstraps = nb;
	/* the address as pg_pool_add_item made it canonical: its last backend */
	nb[pc->nbootstraps].addr = strdup(pc->backends[pc->nbackends - 1]);
	nb[pc->nbootstraps++].port = port;
	return nb[pc->nbootstraps - 1].addr ? 0 : (pg_errf(err, errlen, "out of memory"), -1);
}

int pg_pool_pd_key(struct pg_pool_table *t, unsigned p, const char *key, const char *val, char sep,
                   bool merge, char *err, size_t errlen)
{
	struct pg_pool_cfg *pc = &t->pool[p];
	enum pg_pd pd;
	int q;

	if (!strcmp(key, "pd")) {
		if (pg_pd_parse(val, strlen(val), &pd) || pd == PG_PD_NONE) {
			pg_errf(err, errlen, "pd%c%s: the protocol is vllm or sglang", sep, val);
			return -1;
		}
		pc->pd = (uint8_t)pd;
		return 0;
	}
	if (!strcmp(key, "pd-min-tokens") || !strcmp(key, "bootstrap-port")) {
		char *end;
		unsigned long v = strtoul(val, &end, 10);
		bool tokens = key[0] == 'p';

		if (!*val || *end || v > (tokens ? 1000000000ul : 65535ul) || (!tokens && !v)) {
			pg_errf(err, errlen, "%s%c%s: expected %s", key, sep, val,
			        tokens ? "0-1000000000 tokens" : "a port, 1-65535");
			return -1;
		}
		if (tokens) {
			pc->pd_min_tokens = (uint32_t)v;
			pc->pd_min_set = true;
		} else
			pc->bootstrap_port = (uint16_t)v;
		return 0;
	}
	if (pc->decode_set) {
		pg_errf(err, errlen, "%s: pool %s is a decode set", key, pc->name);
		return -1;
	}
	q = key[0] == 'd' ? decode_pool(t, p, err, errlen) : (int)p;
	if (q < 0)
		return -1;
	for (const char *it = val;; it++) {
		const char *end = strchr(it, ',');
		size_t len = end ? (size_t)(end - it) : strlen(it);

		if (key[0] == 'p'
		        ? prefill_item(t, p, it, len, sep, merge, err, errlen)
		        : pg_pool_add_item(t, (unsigned)q, "backend", it, len, merge, err, errlen))
			return -1;
		if (!end)
			break;
		it = end;
	}
	return 0;
}

int pg_pools_pd_finish(struct pg_pool_table *t, unsigned skip, unsigned *pool, char *err,
                       size_t errlen)
{
	for (unsigned p = 0; p < t->n; p++) {
		struct pg_pool_cfg *pc = &t->pool[p];
		const char *e = NULL;

		if (pc->pd && !pc->pd_min_set)
			pc->pd_min_tokens = PG_PD_MIN_TOKENS_DEFAULT;
		/* a decode set is chosen in by load in work and where the
		 * conversation's cache is, unless it says otherwise */
		if (pc->decode_set &&
		    !(pc->route_set & (PG_POOL_SET_STRATEGY | PG_POOL_SET_FILE))) {
			pc->own.strategy = PG_STRATEGY_CACHE_AWARE;
			pc->route.strategy = PG_STRATEGY_CACHE_AWARE;
			pc->route_set |= PG_POOL_SET_STRATEGY;
		}
		if (skip >> p & 1)
			continue; /* its own errors are told already */
		if (pc->pd && !pc->decode)
			e = "needs its decode instances (decode=ADDR,...)";
		else if (pc->decode && !pc->pd)
			e = "decode= needs the protocol (pd=vllm or pd=sglang)";
		else if ((pc->nbootstraps || pc->bootstrap_port) && pc->pd != PG_PD_SGLANG)
			e = "bootstrap ports are SGLang's (pd=sglang)";
		else if (pc->pd == PG_PD_SGLANG && !pc->bootstrap_port &&
		         pc->nbootstraps < pc->nbackends)
			e = "pd=sglang needs each prefill instance's bootstrap port "
			    "(prefill=ADDR@PORT, or bootstrap-port=PORT for all)";
		if (e) {
			*pool = p;
			if (pc->pd && !pc->decode)
				pg_errf(err, errlen, "--pool %s: pd=%s %s", pc->name,
				        pg_pd_name((enum pg_pd)pc->pd), e);
			else
				pg_errf(err, errlen, "--pool %s: %s", pc->name, e);
			return -1;
		}
	}
	return 0;
}
