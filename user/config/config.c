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
#include "config/config_internal.h"

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

int pg_backends_parse(const char *text, size_t len, char ***out, size_t *n, char *err,
                      size_t errlen)
{
	char **v = NULL, line[PG_HOSTPORT_STRLEN + PG_POOL_NAME_MAX + 8],
	     aerr[PG_HOSTPORT_STRLEN + 100], *pool;
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
		pool = strrchr(line, ' ');
		if (!pool)
			pool = strrchr(line, '\t');
		if (pool && !strncmp(pool + 1, "pool=", 5)) {
			*pool = 0;
			pool += 6;
			line[strcspn(line, " \t")] = 0;
		} else {
			pool = NULL;
		}
		if (pool && (!*pool || strlen(pool) >= PG_POOL_NAME_MAX)) {
			pg_errf(err, errlen, "line %u: pool=NAME: a name of 1-%d characters",
			        lineno, PG_POOL_NAME_MAX - 1);
			goto fail;
		}
		if (pg_hostport_parse(line, &a, false, aerr, sizeof(aerr))) {
			pg_errf(err, errlen, "line %u: %s", lineno, aerr);
			goto fail;
		}
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
