// SPDX-License-Identifier: MIT
/* A worker's listeners (worker.h): --listen's, and --tls-listen's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "proxy/worker.h"

/* SO_REUSEPORT would let a second gateway (same user) bind the same port and
 * silently take half the connections: check with a plain bind first. */
static bool listen_taken(const char *flag, const union pg_sockaddr *sa, char *err, size_t errlen)
{
	int fd = socket(sa->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	bool taken = false;
	char a[PG_ADDR_STRLEN];

	if (fd == -1)
		return false; /* the real bind will say what is wrong */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, &sa->sa, pg_sockaddr_len(sa)) == -1 && errno == EADDRINUSE) {
		snprintf(err, errlen,
		         "--%s %s: address already in use (another process "
		         "listens there)",
		         flag, pg_addr_format(sa, a));
		taken = true;
	}
	close(fd);
	return taken;
}

static int listener(const char *flag, const union pg_sockaddr *sa, char *err, size_t errlen)
{
	int fd = socket(sa->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	char a[PG_ADDR_STRLEN];

	if (fd == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* One listener per worker: the kernel spreads connections over them. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	if (bind(fd, &sa->sa, pg_sockaddr_len(sa)) == -1 || listen(fd, 4096) == -1) {
		snprintf(err, errlen, "--%s %s: %s", flag, pg_addr_format(sa, a), strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

void pg_listeners_close(struct pg_worker *w)
{
	for (int i = 0; i < PG_LISTENERS; i++)
		if (w->listen[i].fd != -1) {
			close(w->listen[i].fd);
			w->listen[i].fd = -1;
		}
}

int pg_listeners_open(struct pg_worker *w, char *err, size_t errlen)
{
	const struct pg_config *cfg = w->gw->cfg;

	w->listen[PG_LISTEN_PLAIN] = (struct pg_listen){.fd = -1};
	w->listen[PG_LISTEN_TLS] = (struct pg_listen){.fd = -1, .tls = true};
	if (w->id == 0 &&
	    (listen_taken("listen", &cfg->listen, err, errlen) ||
	     (cfg->tls.on && listen_taken("tls-listen", &cfg->tls.listen, err, errlen))))
		return -1;
	w->listen[PG_LISTEN_PLAIN].fd = listener("listen", &cfg->listen, err, errlen);
	if (w->listen[PG_LISTEN_PLAIN].fd == -1)
		return -1;
	if (cfg->tls.on && (w->listen[PG_LISTEN_TLS].fd =
	                        listener("tls-listen", &cfg->tls.listen, err, errlen)) == -1)
		return -1;
	return 0;
}
