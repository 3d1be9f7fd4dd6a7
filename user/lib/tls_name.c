// SPDX-License-Identifier: MIT
/* The certificate for a server name (tls_name.h). */
#include <string.h>
#include <strings.h>
#include "lib/tls_name.h"

bool pg_tls_name_match(const char *pattern, const char *host, size_t len)
{
	size_t pl = strlen(pattern);
	const char *dot;

	if (len && host[len - 1] == '.')
		len--;
	if (!len || !pl)
		return false;
	if (pattern[0] != '*')
		return pl == len && !strncasecmp(pattern, host, len);
	/* "*.rest": one label, then exactly ".rest" */
	if (pl < 3 || pattern[1] != '.')
		return false;
	dot = memchr(host, '.', len);
	if (!dot || dot == host)
		return false;
	return (size_t)(host + len - dot) == pl - 1 && !strncasecmp(dot, pattern + 1, pl - 1);
}

unsigned pg_tls_sni_pick(const struct pg_tls_sni *t, size_t n, const char *host, size_t len)
{
	int wild = -1;

	for (size_t i = 0; i < n; i++) {
		if (!pg_tls_name_match(t[i].name, host, len))
			continue;
		if (t[i].name[0] != '*')
			return t[i].cert; /* exact: the first given */
		if (wild < 0)
			wild = t[i].cert;
	}
	return wild < 0 ? 0 : (unsigned)wild;
}
