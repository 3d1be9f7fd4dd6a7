/* SPDX-License-Identifier: MIT */
/*
 * What a resolver answer does to the members a DNS name stands for: pure
 * decisions, no I/O (members/backend_names.c applies them, members/resolve.c asks).
 *
 * A name's members are the addresses of its last applied answer, kept in
 * canonical order (family, address, port), so a member's identity, its
 * resolved address:port, does not depend on the order of the answer.
 */
#ifndef PG_ADDRSET_H
#define PG_ADDRSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/addr.h"

/* An answer of "no such name" / "no address" persisting this long empties
 * the name (HAProxy's "hold nx" default); until then the last answer stays. */
#define PG_DNS_HOLD_NX_MS 30000

enum pg_dns_status {
	PG_DNS_OK = 0,     /* addresses */
	PG_DNS_NONAME = 1, /* NXDOMAIN, or the name has no A / AAAA record */
	PG_DNS_FAIL = 2,   /* timeout, SERVFAIL, refused, no server...: unknown */
};

enum pg_dns_verdict {
	PG_DNS_APPLY = 0, /* the answer (maybe empty) becomes the name's set */
	PG_DNS_KEEP = 1,  /* keep the last answer */
};

/* Sort v into canonical order and drop duplicates; returns the new count. */
size_t pg_addrset_normalize(union pg_sockaddr *v, size_t n);

/*
 * Both sets normalized. add[0..*nadd) gets the indexes into cur of the
 * addresses not in old (to add), drain[0..*ndrain) the indexes into old of
 * those not in cur (to drain). add holds ncur entries, drain nold.
 */
void pg_addrset_diff(const union pg_sockaddr *old, size_t nold, const union pg_sockaddr *cur,
                     size_t ncur, size_t *add, size_t *nadd, size_t *drain, size_t *ndrain);

/*
 * Apply an answer or keep the last one. st with naddrs addresses (PG_DNS_OK
 * with none counts as PG_DNS_NONAME); nold: addresses the name has now;
 * *nx_since_ms: when the current run of "no such name" answers began (0:
 * none), updated. A failure always keeps the last answer; "no such name"
 * keeps it for PG_DNS_HOLD_NX_MS, then empties the name.
 */
enum pg_dns_verdict pg_dns_verdict(enum pg_dns_status st, size_t naddrs, size_t nold,
                                   uint64_t now_ms, uint64_t *nx_since_ms);

#endif /* PG_ADDRSET_H */
