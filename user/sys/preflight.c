// SPDX-License-Identifier: MIT
/* What start-up needs of the system, checked before anything starts
 * (preflight.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "sys/preflight.h"
#include "sys/privilege.h"

/* Add n's error: "--NAME VALUE: what", or, from the file, "NAME VALUE:
 * what" at its line (as the configuration's own errors read). */
static void fail(struct pg_conf_errs *errs, const struct pg_need *n, const char *value,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void fail(struct pg_conf_errs *errs, const struct pg_need *n, const char *value,
                 const char *fmt, ...)
{
	char what[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	pg_conf_err_add(errs, n->line, "%s%s %s: %s", n->line ? "" : "--", n->name, value, what);
}

/* The directory of path into buf ("." for a bare name). */
static const char *dir_of(const char *path, char *buf, size_t cap)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, cap, ".");
	else if (slash == path)
		snprintf(buf, cap, "/");
	else
		snprintf(buf, cap, "%.*s", (int)(slash - path), path);
	return buf;
}

/* The access log is opened for appending, created if missing: 0, or the
 * errno that open would meet. */
static int appendable(const char *path)
{
	char dir[4096];
	struct stat st;

	if (stat(path, &st) == 0)
		return S_ISDIR(st.st_mode) ? EISDIR : access(path, W_OK) ? errno : 0;
	if (errno != ENOENT)
		return errno;
	return access(dir_of(path, dir, sizeof(dir)), W_OK | X_OK) ? errno : 0;
}

/* --check: an address this process cannot bind whenever it starts. */
static void bindable(const struct pg_need *n, struct pg_conf_errs *errs)
{
	char a[PG_ADDR_STRLEN];
	int fd = socket(n->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, e = 0;

	if (fd == -1) {
		fail(errs, n, pg_addr_format(&n->addr, a), "%s", strerror(errno));
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, &n->addr.sa, pg_sockaddr_len(&n->addr)) == -1)
		e = errno;
	close(fd);
	if (e == EACCES)
		fail(errs, n, pg_addr_format(&n->addr, a),
		     "%s (a port below 1024 needs root or CAP_NET_BIND_SERVICE)", strerror(e));
	else if (e == EADDRNOTAVAIL)
		fail(errs, n, pg_addr_format(&n->addr, a), "%s (no interface has this address)",
		     strerror(e));
}

/* --user: the user, the right to become it, and what it must read and
 * write once it is (each RELOAD and STATE need). */
static void user_checks(const struct pg_config *cfg, const struct pg_need *u,
                        struct pg_conf_errs *errs)
{
	const char *paths[PG_NEEDS_MAX];
	const struct pg_need *of[PG_NEEDS_MAX];
	bool dir[PG_NEEDS_MAX];
	char sdir[4096], err[256]; /* the one STATE need's directory */
	int res[PG_NEEDS_MAX];
	struct pg_priv p;
	size_t k = 0;

	if (pg_priv_lookup(&p, u->value, err, sizeof(err))) {
		pg_conf_err_add(errs, u->line, "%s", u->line ? err + 2 : err);
		return;
	}
	if (!pg_priv_may_change()) {
		fail(errs, u, u->value, "changing user needs root (CAP_SETUID, CAP_SETGID)");
		return;
	}
	for (size_t i = 0; i < cfg->nneeds; i++) {
		const struct pg_need *n = &cfg->needs[i];

		if (n->kind != PG_NEED_RELOAD && n->kind != PG_NEED_STATE)
			continue;
		of[k] = n;
		dir[k] = n->kind == PG_NEED_STATE;
		paths[k] = dir[k] ? dir_of(n->value, sdir, sizeof(sdir)) : n->value;
		k++;
	}
	if (!k)
		return;
	if (pg_priv_try_as(&p, paths, dir, k, res)) {
		fail(errs, u, u->value, "cannot check what %s may read: %s", p.user,
		     strerror(errno));
		return;
	}
	for (size_t i = 0; i < k; i++) {
		if (!res[i])
			continue;
		if (dir[i])
			fail(
			    errs, of[i], of[i]->value,
			    "%s (--user) cannot write in %s (%s), and writes it once it runs: give "
			    "%s a directory of its own",
			    p.user, paths[i], strerror(res[i]), p.user);
		else
			fail(errs, of[i], of[i]->value,
			     "%s (--user) cannot read it (%s), and a reload reads it again as %s: "
			     "make it readable by %s",
			     p.user, strerror(res[i]), p.user, p.user);
	}
}

size_t pg_preflight(const struct pg_config *cfg, bool check, struct pg_conf_errs *errs)
{
	const size_t before = errs->n;
	int e, fd;

	for (size_t i = 0; i < cfg->nneeds; i++) {
		const struct pg_need *n = &cfg->needs[i];

		switch (n->kind) {
		case PG_NEED_USER:
			user_checks(cfg, n, errs);
			break;
		case PG_NEED_BIND:
			if (check)
				bindable(n, errs);
			break;
		case PG_NEED_APPEND:
			if ((e = appendable(n->value)))
				fail(errs, n, n->value, "%s", strerror(e));
			break;
		case PG_NEED_READ:
			fd = open(n->value, O_RDONLY | O_CLOEXEC);
			if (fd == -1)
				fail(errs, n, n->value, "%s", strerror(errno));
			else
				close(fd);
			break;
		case PG_NEED_STATE: {
			char dir[4096];

			/* as --user's user when there is one (user_checks) */
			if (!cfg->user && access(dir_of(n->value, dir, sizeof(dir)), W_OK | X_OK))
				fail(errs, n, n->value, "its directory %s: %s", dir,
				     strerror(errno));
			break;
		}
		case PG_NEED_RELOAD: /* read already, by this process; as --user's: above */
			break;
		}
	}
	return errs->n - before;
}
