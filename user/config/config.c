// SPDX-License-Identifier: MIT
/*
 * Configuration parsing (see config.h): addresses, the backends file,
 * reading a config file. The command line is config_flags.c. No global
 * state: unit tests call the parsers many times.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "config/config.h"

void pg_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* ---- addresses and backends ------------------------------------------- */

void pg_backends_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int pg_backend_add(char ***v, size_t *n, const struct pg_hostport *h, size_t *dup)
{
	char buf[PG_HOSTPORT_STRLEN], **nv;

	pg_hostport_format(h, buf);
	for (size_t i = 0; i < *n; i++) {
		size_t l = strlen(buf);

		/* an entry may name its pool after the address (pg_backends_parse) */
		if (!strncmp((*v)[i], buf, l) && ((*v)[i][l] == 0 || (*v)[i][l] == ' ')) {
			*dup = i;
			return 1;
		}
	}
	if (*n >= PG_MAX_BACKENDS - 1)
		return 2;
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return -1;
	*v = nv;
	nv[*n] = strdup(buf);
	if (!nv[*n])
		return -1;
	(*n)++;
	return 0;
}

/* " pool=NAME" appended to the canonical address *s. */
static int pool_suffix(char **s, const char *pool)
{
	size_t l = strlen(*s);
	char *ns = realloc(*s, l + 6 + strlen(pool) + 1);

	if (!ns)
		return -1;
	sprintf(ns + l, " pool=%s", pool);
	*s = ns;
	return 0;
}

/* The words after a line's address: at most one pool=NAME, naming a pool r
 * allows. *pool: the name, or NULL. 0, or -1 with err naming the line. */
static int line_words(char *rest, unsigned lineno, const struct pg_backends_rules *r,
                      const char *addr, char **pool, char *err, size_t errlen)
{
	char names[PG_MAX_POOLS * PG_POOL_NAME_MAX], *save = NULL;
	const struct pg_pool_table *t = r ? r->pools : NULL;

	*pool = NULL;
	for (char *w = strtok_r(rest, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
		if (strncmp(w, "pool=", 5)) {
			pg_errf(err, errlen,
			        "line %u: unexpected \"%.64s\" after the address (a line is "
			        "HOST:PORT [pool=NAME])",
			        lineno, w);
			return -1;
		}
		if (*pool) {
			pg_errf(err, errlen, "line %u: pool= given twice", lineno);
			return -1;
		}
		*pool = w + 5;
		if (!pg_pool_name_ok(*pool, strlen(*pool))) {
			pg_errf(err, errlen,
			        "line %u: pool=%.64s: a name is 1-%d of A-Z a-z 0-9 _ . -", lineno,
			        *pool, PG_POOL_NAME_MAX - 1);
			return -1;
		}
	}
	if (*pool && !strcmp(*pool, "default"))
		*pool = NULL; /* the default pool is also where a line without pool= goes */
	if (*pool && t && pg_pool_find(t, *pool, strlen(*pool)) < 0) {
		pg_errf(err, errlen, "line %u: pool=%s: no such pool (the pools: %s)", lineno,
		        *pool, pg_pool_table_names(t, true, names, sizeof(names)));
		return -1;
	}
	if (!*pool && r && r->need_pool) {
		pg_errf(err, errlen,
		        "line %u: %s: the default pool takes no requests (it was not the "
		        "catch-all at start-up): give pool=NAME, one of %s",
		        lineno, addr,
		        t ? pg_pool_table_names(t, false, names, sizeof(names)) : "the pools");
		return -1;
	}
	return 0;
}

int pg_backends_parse_in(const char *text, size_t len, const struct pg_backends_rules *rules,
                         char ***out, size_t *n, char *err, size_t errlen)
{
	char **v = NULL, line[PG_HOSTPORT_STRLEN + PG_POOL_NAME_MAX + 80],
	     aerr[PG_HOSTPORT_STRLEN + 100], *pool, *rest;
	size_t nv = 0, pos = 0, *lines = NULL, dup;
	unsigned lineno = 0;
	struct pg_hostport a;

	/* lines[i]: the line backend i came from, to name it in duplicates */
	lines = calloc(PG_MAX_BACKENDS, sizeof(*lines));
	if (!lines)
		goto oom;
	while (pos < len) {
		const char *b = text + pos, *nl = memchr(b, '\n', len - pos), *e, *hash;
		size_t l = nl ? (size_t)(nl - b) : len - pos;

		pos += l + 1;
		lineno++;
		hash = memchr(b, '#', l);
		e = hash ? hash : b + l;
		while (b < e && (*b == ' ' || *b == '\t' || *b == '\r'))
			b++;
		while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
			e--;
		if (b == e)
			continue;
		if ((size_t)(e - b) >= sizeof(line) || memchr(b, 0, (size_t)(e - b))) {
			pg_errf(err, errlen, "line %u: not a HOST:PORT", lineno);
			goto fail;
		}
		memcpy(line, b, (size_t)(e - b));
		line[e - b] = 0;
		/* HOST:PORT, then the words after it */
		rest = line + strcspn(line, " \t");
		if (*rest)
			*rest++ = 0;
		if (pg_hostport_parse(line, &a, false, aerr, sizeof(aerr))) {
			pg_errf(err, errlen, "line %u: %s", lineno, aerr);
			goto fail;
		}
		if (line_words(rest, lineno, rules, line, &pool, err, errlen))
			goto fail;
		switch (pg_backend_add(&v, &nv, &a, &dup)) {
		case 0:
			lines[nv - 1] = lineno;
			if (pool && pool_suffix(&v[nv - 1], pool))
				goto oom;
			break;
		case 1:
			pg_errf(err, errlen, "line %u: %s duplicates line %zu", lineno, v[dup],
			        lines[dup]);
			goto fail;
		case 2:
			pg_errf(err, errlen, "line %u: more than %d backends", lineno,
			        PG_MAX_BACKENDS - 1);
			goto fail;
		default:
			goto oom;
		}
	}
	free(lines);
	*out = v;
	*n = nv;
	return 0;
oom:
	pg_errf(err, errlen, "out of memory");
fail:
	free(lines);
	pg_backends_free(v, nv);
	return -1;
}

int pg_backends_parse(const char *text, size_t len, char ***out, size_t *n, char *err,
                      size_t errlen)
{
	return pg_backends_parse_in(text, len, NULL, out, n, err, errlen);
}

int pg_read_file(const char *path, size_t max, char **buf, size_t *len, char *err, size_t errlen)
{
	size_t n = 0;
	ssize_t r;
	char *b = malloc(max + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd == -1 || !b) {
		pg_errf(err, errlen, "%s", fd == -1 ? strerror(errno) : "out of memory");
		goto fail;
	}
	while ((r = read(fd, b + n, max + 1 - n)) > 0 && (n += (size_t)r) <= max)
		;
	if (r == -1) {
		pg_errf(err, errlen, "read: %s", strerror(errno));
		goto fail;
	}
	if (n > max) {
		pg_errf(err, errlen, "larger than %zu bytes", max);
		goto fail;
	}
	close(fd);
	b[n] = 0;
	*buf = b;
	*len = n;
	return 0;
fail:
	if (fd != -1)
		close(fd);
	free(b);
	return -1;
}
