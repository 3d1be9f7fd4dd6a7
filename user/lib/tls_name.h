/* SPDX-License-Identifier: MIT */
/*
 * Which certificate a TLS listener shows for the server name a client
 * asks for (SNI). Pure: names in, an index out.
 *
 * A name a certificate serves (tls_pem.h: its subjectAltName DNS names, or
 * its common name) matches the server name when equal (ASCII case ignored,
 * one trailing dot of the server name ignored), or when it is a wildcard
 * "*.rest" and the server name is one label, not empty, followed by
 * ".rest" (RFC 6125: the wildcard covers exactly one label). An exact
 * match wins over a wildcard; among equals, the certificate given first.
 * No match (or no server name): the first certificate, the default.
 */
#ifndef PG_TLS_NAME_H
#define PG_TLS_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One name of one certificate (index cert among those given). */
struct pg_tls_sni {
	const char *name;
	uint16_t cert;
};

/* Whether pattern (lower case) matches host[0, len). */
bool pg_tls_name_match(const char *pattern, const char *host, size_t len);

/* The certificate for server name host[0, len) among t[0, n): its index,
 * or 0 (the default) when none matches. */
unsigned pg_tls_sni_pick(const struct pg_tls_sni *t, size_t n, const char *host, size_t len);

#endif /* PG_TLS_NAME_H */
