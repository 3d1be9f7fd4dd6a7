// SPDX-License-Identifier: MIT
/* Address parsing and formatting (addr.h). Pure: no I/O, no DNS. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "lib/addr.h"

static void errf(char *err, size_t errlen, const char *s, const char *why)
{
	if (errlen)
		snprintf(err, errlen, "\"%s\": %s", s, why);
}

/* Decimal 1-65535, the whole of p. */
static int parse_port(const char *p, uint16_t *out)
{
	unsigned long port = 0;
	const char *q;

	for (q = p; *q >= '0' && *q <= '9' && port <= 65535; q++)
		port = port * 10 + (unsigned long)(*q - '0');
	if (q == p || *q || !port || port > 65535)
		return -1;
	*out = (uint16_t)port;
	return 0;
}

/* RFC 1123 host name labels (plus '_', which service names use), at most
 * 253 characters; not all digits and dots (that is a bad IPv4 literal). */
static bool valid_name(const char *h, size_t len)
{
	size_t label = 0;
	bool alpha = false;

	if (!len || len > PG_HOST_MAX - 1 || h[0] == '.' || h[0] == '-')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = h[i];

		if (c == '.') {
			if (!label || h[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
		if (!(c >= '0' && c <= '9'))
			alpha = true;
		if (++label > 63 || (label == 1 && c == '-'))
			return false;
	}
	return alpha && h[len - 1] != '-';
}

static void set_v4(union pg_sockaddr *a, uint32_t ip_be, uint16_t port)
{
	memset(a, 0, sizeof(*a));
	a->in.sin_family = AF_INET;
	a->in.sin_addr.s_addr = ip_be;
	a->in.sin_port = htons(port);
}

/* An IPv4-mapped IPv6 address is the IPv4 one: one spelling per backend. */
static void set_v6(union pg_sockaddr *a, const struct in6_addr *ip, uint16_t port)
{
	uint32_t v4;

	if (IN6_IS_ADDR_V4MAPPED(ip)) {
		memcpy(&v4, &ip->s6_addr[12], 4);
		set_v4(a, v4, port);
		return;
	}
	memset(a, 0, sizeof(*a));
	a->in6.sin6_family = AF_INET6;
	a->in6.sin6_addr = *ip;
	a->in6.sin6_port = htons(port);
}

int pg_hostport_parse(const char *s, struct pg_hostport *out, bool any_ok, char *err, size_t errlen)
{
	const char *colon, *end;
	char host[PG_HOST_MAX];
	struct in6_addr ip6;
	struct in_addr ip4;
	size_t hlen;

	memset(out, 0, sizeof(*out));
	if (!any_ok && (!strncasecmp(s, PG_TLS_SCHEME, strlen(PG_TLS_SCHEME)) ||
	                !strncasecmp(s, "http://", 7))) {
		const char *rest = s + (s[4] == ':' ? 7 : 8);
		char bare[PG_HOSTPORT_STRLEN + 8];
		bool bracket = rest[0] == '[';
		const char *last = strrchr(rest, bracket ? ']' : ':');

		if (!*rest || strstr(rest, "://") || strlen(rest) >= sizeof(bare) - 7) {
			errf(err, errlen, s, "expected one host after the scheme");
			return -1;
		}
		/* no port: the scheme's */
		if (!last || (bracket && last[1] != ':'))
			snprintf(bare, sizeof(bare), "%s:%u", rest, s[4] == ':' ? 80 : 443);
		else
			snprintf(bare, sizeof(bare), "%s", rest);
		if (pg_hostport_parse(bare, out, false, err, errlen))
			return -1;
		out->tls = s[4] != ':';
		return 0;
	}
	if (s[0] == '[') {
		end = strchr(s, ']');
		if (!end || end[1] != ':') {
			errf(err, errlen, s, "expected [IPV6]:PORT");
			return -1;
		}
		colon = end + 1;
		hlen = (size_t)(end - s - 1);
	} else {
		colon = strrchr(s, ':');
		if (colon && memchr(s, ':', (size_t)(colon - s))) {
			errf(err, errlen, s, "an IPv6 address needs brackets: [IPV6]:PORT");
			return -1;
		}
		if (!colon) {
			errf(err, errlen, s, any_ok ? "expected ADDR:PORT" : "expected HOST:PORT");
			return -1;
		}
		end = colon;
		hlen = (size_t)(colon - s);
	}
	if (parse_port(colon + 1, &out->port)) {
		errf(err, errlen, s, "port must be a decimal number 1-65535");
		return -1;
	}
	if (hlen >= sizeof(host))
		goto bad_host;
	memcpy(host, s[0] == '[' ? s + 1 : s, hlen);
	host[hlen] = 0;
	if (s[0] == '[') {
		if (inet_pton(AF_INET6, host, &ip6) != 1) {
			errf(err, errlen, s, "not an IPv6 address (zone ids are not supported)");
			return -1;
		}
		set_v6(&out->addr, &ip6, out->port);
		return 0;
	}
	if (!hlen) {
		if (!any_ok) {
			errf(err, errlen, s, "expected HOST:PORT");
			return -1;
		}
		set_v4(&out->addr, htonl(INADDR_ANY), out->port);
		return 0;
	}
	if (!strcasecmp(host, "localhost")) {
		set_v4(&out->addr, htonl(INADDR_LOOPBACK), out->port);
		return 0;
	}
	if (inet_pton(AF_INET, host, &ip4) == 1) {
		set_v4(&out->addr, ip4.s_addr, out->port);
		return 0;
	}
	if (!valid_name(host, hlen))
		goto bad_host;
	for (size_t i = 0; i < hlen; i++)
		out->name[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
	out->name[hlen] = 0;
	out->addr.sa.sa_family = AF_UNSPEC;
	return 0;
bad_host:
	errf(err, errlen, s,
	     "host must be an IPv4 address A.B.C.D, [IPV6], localhost or a DNS name");
	return -1;
}

int pg_addr_parse(const char *s, union pg_sockaddr *out, char *err, size_t errlen)
{
	struct pg_hostport h;

	if (pg_hostport_parse(s, &h, true, err, errlen))
		return -1;
	if (h.name[0]) {
		errf(err, errlen, s,
		     "host must be an IPv4 address A.B.C.D, [IPV6] or localhost (not a name)");
		return -1;
	}
	*out = h.addr;
	return 0;
}

char *pg_addr_format(const union pg_sockaddr *a, char *buf)
{
	char ip[INET6_ADDRSTRLEN];

	if (a->sa.sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof(ip));
		snprintf(buf, PG_ADDR_STRLEN, "[%s]:%u", ip, ntohs(a->in6.sin6_port));
	} else {
		inet_ntop(AF_INET, &a->in.sin_addr, ip, sizeof(ip));
		snprintf(buf, PG_ADDR_STRLEN, "%s:%u", ip, ntohs(a->in.sin_port));
	}
	return buf;
}

char *pg_hostport_format(const struct pg_hostport *h, char *buf)
{
	const char *scheme = h->tls ? PG_TLS_SCHEME : "";
	char a[PG_ADDR_STRLEN];

	if (h->name[0])
		snprintf(buf, PG_HOSTPORT_STRLEN, "%s%s:%u", scheme, h->name, h->port);
	else
		snprintf(buf, PG_HOSTPORT_STRLEN, "%s%s", scheme, pg_addr_format(&h->addr, a));
	return buf;
}

socklen_t pg_sockaddr_len(const union pg_sockaddr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
}

uint16_t pg_sockaddr_port(const union pg_sockaddr *a)
{
	return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in.sin_port);
}

int pg_sockaddr_cmp(const union pg_sockaddr *a, const union pg_sockaddr *b)
{
	int c = (int)a->sa.sa_family - (int)b->sa.sa_family;

	if (c)
		return c;
	if (a->sa.sa_family == AF_INET6) {
		c = memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16);
		return c ? c : (int)ntohs(a->in6.sin6_port) - (int)ntohs(b->in6.sin6_port);
	}
	c = memcmp(&a->in.sin_addr, &b->in.sin_addr, 4);
	return c ? c : (int)ntohs(a->in.sin_port) - (int)ntohs(b->in.sin_port);
}

bool pg_sockaddr_equal(const union pg_sockaddr *a, const union pg_sockaddr *b)
{
	return !pg_sockaddr_cmp(a, b);
}

bool pg_sockaddr_loopback(const union pg_sockaddr *a)
{
	if (a->sa.sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&a->in6.sin6_addr);
	return (ntohl(a->in.sin_addr.s_addr) >> 24) == 127;
}

bool pg_sockaddr_ip6(const union pg_sockaddr *a, uint8_t out[16])
{
	static const uint8_t mapped[12] = {[10] = 0xff, [11] = 0xff};

	if (a->sa.sa_family == AF_INET6) {
		memcpy(out, &a->in6.sin6_addr, 16);
		return true;
	}
	if (a->sa.sa_family != AF_INET)
		return false;
	memcpy(out, mapped, 12);
	memcpy(out + 12, &a->in.sin_addr, 4);
	return true;
}

bool pg_sockaddr_overlap(const union pg_sockaddr *a, const union pg_sockaddr *b)
{
	static const uint8_t any6[16], any4[16] = {[10] = 0xff, [11] = 0xff};
	uint8_t x[16], y[16];

	if (pg_sockaddr_port(a) != pg_sockaddr_port(b) || !pg_sockaddr_ip6(a, x) ||
	    !pg_sockaddr_ip6(b, y))
		return false;
	if (!memcmp(x, y, 16) || !memcmp(x, any6, 16) || !memcmp(y, any6, 16))
		return true;
	/* 0.0.0.0 takes every IPv4 address, mapped ones too */
	return (!memcmp(x, any4, 16) && !memcmp(y, any4, 12)) ||
	       (!memcmp(y, any4, 16) && !memcmp(x, any4, 12));
}

void pg_backend_addr_get(const struct pg_backend *b, union pg_sockaddr *out)
{
	memset(out, 0, sizeof(*out));
	if (b->family == AF_INET6) {
		out->in6.sin6_family = AF_INET6;
		memcpy(&out->in6.sin6_addr, b->addr, 16);
		out->in6.sin6_port = htons(b->port);
	} else {
		out->in.sin_family = AF_INET;
		memcpy(&out->in.sin_addr, b->addr, 4);
		out->in.sin_port = htons(b->port);
	}
}

void pg_backend_addr_set(struct pg_backend *b, const union pg_sockaddr *a)
{
	memset(b->addr, 0, sizeof(b->addr));
	if (a->sa.sa_family == AF_INET6) {
		memcpy(b->addr, &a->in6.sin6_addr, 16);
		b->port = ntohs(a->in6.sin6_port);
	} else {
		memcpy(b->addr, &a->in.sin_addr, 4);
		b->port = ntohs(a->in.sin_port);
	}
	b->family = a->sa.sa_family;
}
