/* SPDX-License-Identifier: MIT */
/*
 * Addresses: the one parser of every address the gateway is given (--listen,
 * --admin, --backend, --backends-file lines, the admin API, other membership
 * sources), their canonical spelling, and the address of a pg_backend slot.
 * Pure: no I/O, never resolves a name (a name is returned as a name; the
 * control thread resolves it, members/resolve.c).
 *
 * Forms (PORT: decimal 1-65535):
 *   A.B.C.D:PORT        IPv4 literal
 *   [IPV6]:PORT         IPv6 literal (an IPv4-mapped one is taken as IPv4)
 *   localhost:PORT      127.0.0.1, without DNS (as always)
 *   :PORT               all IPv4 interfaces (listeners; 0.0.0.0)
 *   NAME:PORT           a DNS name (backends only): letters, digits, '-',
 *                       '_' and '.' labels, at most 253 characters, not
 *                       all-numeric (so a mistyped IPv4 literal is an error)
 * A backend may be written as a URL of its scheme: https://HOST[:PORT] is
 * reached over TLS (port 443 unless given), http://HOST[:PORT] is the plain
 * form (port 80 unless given); nothing may follow the port.
 */
#ifndef PG_ADDR_H
#define PG_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "prefixgate.h"

/* An IPv4 or IPv6 socket address (sa.sa_family says which). */
union pg_sockaddr {
	struct sockaddr sa;
	struct sockaddr_in in;
	struct sockaddr_in6 in6;
};

/* "https://" + "[" + IPv6 text (45) + "]:65535" + NUL, room to spare: an
 * address, or a backend's name (pg_backend_name). */
#define PG_ADDR_STRLEN 64
/* A DNS name, at most 253 characters, + NUL. */
#define PG_HOST_MAX 254
/* The scheme of a TLS backend, as its canonical spelling begins. */
#define PG_TLS_SCHEME "https://"
/* "https://NAME:PORT" + NUL: a canonical backend string of any form. */
#define PG_HOSTPORT_STRLEN (PG_HOST_MAX + 6 + sizeof(PG_TLS_SCHEME) - 1)

/* A parsed backend address: a literal (name[0] == 0) or a DNS name. */
struct pg_hostport {
	union pg_sockaddr addr; /* a literal; for a name, only the port is set */
	char name[PG_HOST_MAX]; /* the name, lower case; "" for a literal */
	uint16_t port;          /* host byte order */
	bool tls;               /* https:// : reached over TLS */
};

/* A literal address (any form above but NAME:PORT). 0, or -1 with err naming
 * the input ("\"x\": ..."). */
int pg_addr_parse(const char *s, union pg_sockaddr *out, char *err, size_t errlen);

/* Any form above (":PORT" only if any_ok; a scheme only if not). 0, or -1
 * with err set. */
int pg_hostport_parse(const char *s, struct pg_hostport *out, bool any_ok, char *err,
                      size_t errlen);

/* Canonical "A.B.C.D:PORT" / "[IPV6]:PORT" of a into buf (PG_ADDR_STRLEN
 * bytes); returns buf. */
char *pg_addr_format(const union pg_sockaddr *a, char *buf);
/* Canonical spelling of h (PG_HOSTPORT_STRLEN bytes): the literal's, or
 * "name:PORT", after "https://" for a TLS one. Returns buf. */
char *pg_hostport_format(const struct pg_hostport *h, char *buf);

/* The length to pass to bind/connect for a. */
socklen_t pg_sockaddr_len(const union pg_sockaddr *a);
/* The port of a, host byte order. */
uint16_t pg_sockaddr_port(const union pg_sockaddr *a);
/* Same family, address and port. */
bool pg_sockaddr_equal(const union pg_sockaddr *a, const union pg_sockaddr *b);
/* a and b cannot both be bound: the same port, and the same address or
 * one that covers the other (0.0.0.0 every IPv4 one, [::] every one: the
 * gateway's listeners are dual-stack). */
bool pg_sockaddr_overlap(const union pg_sockaddr *a, const union pg_sockaddr *b);
/* A loopback address: 127.0.0.0/8 or ::1. */
bool pg_sockaddr_loopback(const union pg_sockaddr *a);
/* a's address as 16 IPv6 bytes (network order), an IPv4 one IPv4-mapped
 * (::ffff:a.b.c.d): one spelling whatever the socket's family. false (out
 * untouched) for another family. */
bool pg_sockaddr_ip6(const union pg_sockaddr *a, uint8_t out[16]);
/* Order by family, address bytes, port (memcmp-like): sorts resolver
 * answers into a canonical order. */
int pg_sockaddr_cmp(const union pg_sockaddr *a, const union pg_sockaddr *b);

/* A backend slot's address (family, addr, port) to / from a socket address. */
void pg_backend_addr_get(const struct pg_backend *b, union pg_sockaddr *out);
void pg_backend_addr_set(struct pg_backend *b, const union pg_sockaddr *a);

#endif /* PG_ADDR_H */
