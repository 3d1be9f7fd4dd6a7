// SPDX-License-Identifier: MIT
/* Resolver answers against a name's members (addrset.h). Pure: no I/O. */
#include <stdlib.h>
#include "lib/addrset.h"

static int cmp(const void *a, const void *b)
{
	return pg_sockaddr_cmp(a, b);
}

size_t pg_addrset_normalize(union pg_sockaddr *v, size_t n)
{
	size_t k = 0;

	if (n < 2)
		return n;
	qsort(v, n, sizeof(*v), cmp);
	for (size_t i = 1; i < n; i++)
		if (pg_sockaddr_cmp(&v[k], &v[i]))
			v[++k] = v[i];
	return k + 1;
}

void pg_addrset_diff(const union pg_sockaddr *old, size_t nold, const union pg_sockaddr *cur,
                     size_t ncur, size_t *add, size_t *nadd, size_t *drain, size_t *ndrain)
{
	size_t i = 0, j = 0;

	*nadd = *ndrain = 0;
	/* A merge of two sorted lists. */
	while (i < nold || j < ncur) {
		int c = i == nold ? 1 : j == ncur ? -1 : pg_sockaddr_cmp(&old[i], &cur[j]);

		if (c < 0)
			drain[(*ndrain)++] = i++;
		else if (c > 0)
			add[(*nadd)++] = j++;
		else
			i++, j++;
	}
}

enum pg_dns_verdict pg_dns_verdict(enum pg_dns_status st, size_t naddrs, size_t nold,
                                   uint64_t now_ms, uint64_t *nx_since_ms)
{
	if (st == PG_DNS_OK && !naddrs)
		st = PG_DNS_NONAME;
	switch (st) {
	case PG_DNS_OK:
		*nx_since_ms = 0;
		return PG_DNS_APPLY;
	case PG_DNS_NONAME:
		if (!nold) /* nothing to keep */
			return PG_DNS_APPLY;
		if (!*nx_since_ms)
			*nx_since_ms = now_ms ? now_ms : 1;
		return now_ms - *nx_since_ms >= PG_DNS_HOLD_NX_MS ? PG_DNS_APPLY : PG_DNS_KEEP;
	default:
		return PG_DNS_KEEP;
	}
}
