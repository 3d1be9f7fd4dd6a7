// SPDX-License-Identifier: MIT
/*
 * The control thread (control.h): start-up and SIGHUP reading of the
 * configuration files, then the thread itself, which polls the admin
 * listener (its connections are in admin/admin_listener.c, their requests
 * answered by admin/admin.c), etcd's views and the DNS resolver.
 * Membership, ring rebuilds and the periodic drain / DOWN expiry are in
 * members/members.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include "admin/admin_listener.h"
#include "admin/metrics.h"
#include "config/config.h"
#include "control/control.h"
#include "control/control_internal.h"
#include "fleet/etcd.h"
#include "lib/addr.h"
#include "members/members.h"
#include "members/members_internal.h"
#include "members/resolve.h"
#include "state/pools.h"
#include "sys/log.h"
#include "state/host.h"
#include "tls/tls.h"

/* The control thread's state: process-wide (one gateway per process). */
static struct {
	struct pg_gateway *gw;
	char *route_text; /* --routing-config as last applied */
	size_t route_len;
	pthread_t thread;
	bool running;
	int sfd, efd;           /* signalfd, stop eventfd */
	int ifd;                /* inotify on --backends-file's directory, or -1 */
	const char *watch_base; /* the file's name in that directory */
	uint16_t admin_port;    /* the admin listener's, while it is open */
} ctl = {.sfd = -1, .efd = -1, .ifd = -1};

/* Read and parse --backends-file; errors name FILE:LINE. A line must name
 * one of the gateway's pools, and a pool that takes requests (reread: the
 * default pool's catch-all status was decided at start-up). */
static int read_backends_file(const struct pg_gateway *gw, bool reread, char ***list, size_t *n,
                              char *err, size_t errlen)
{
	const struct pg_pool_table *t = &gw->cfg->pools;
	const struct pg_backends_rules rules = {.pools = t,
	                                        .need_pool = reread && t->n > 1 && !t->catch_all};
	const char *path = gw->cfg->backends_file;
	char *text, e[512];
	size_t len;
	unsigned line;
	int off = 0;

	if (pg_read_file(path, PG_CONFIG_FILE_MAX, &text, &len, e, sizeof(e))) {
		snprintf(err, errlen, "--backends-file %s: %s", path, e);
		return -1;
	}
	if (pg_backends_parse_in(text, len, &rules, list, n, e, sizeof(e))) {
		if (sscanf(e, "line %u: %n", &line, &off) == 1 && off > 0)
			snprintf(err, errlen, "%s:%u: %s", path, line, e + off);
		else
			snprintf(err, errlen, "%s: %s", path, e);
		free(text);
		return -1;
	}
	free(text);
	return 0;
}

/* Remember the routing config file's content (it is applied again on
 * SIGHUP only if it changes). 1: it changed, 0: same, -1: unreadable. */
static int routing_file_changed(const char *path, char **text, size_t *len, char *err,
                                size_t errlen)
{
	char e[256];

	if (pg_read_file(path, PG_CONFIG_FILE_MAX, text, len, e, sizeof(e))) {
		snprintf(err, errlen, "--routing-config %s: %s", path, e);
		return -1;
	}
	if (ctl.route_text && ctl.route_len == *len && !memcmp(ctl.route_text, *text, *len)) {
		free(*text);
		return 0;
	}
	return 1;
}

static void keep_routing_text(char *text, size_t len)
{
	free(ctl.route_text);
	ctl.route_text = text;
	ctl.route_len = len;
}

int pg_control_init(struct pg_gateway *gw, char *err, size_t errlen)
{
	const struct pg_config *cfg = gw->cfg;
	const uint8_t origin = cfg->conf ? PG_ORIGIN_CONF : PG_ORIGIN_STATIC;
	struct pg_hostport hp;
	bool changed = false, names = false;
	char **list = NULL, *text;
	size_t n = 0, len;
	int rc = 0;

	pg_resolve_fini(); /* no answer may come for the names forgotten */
	pg_gateway_router(gw);
	pg_members_reset(gw);
	keep_routing_text(NULL, 0);
	if (!gw->pools && pg_pools_init(gw)) {
		snprintf(err, errlen, "model pools: out of memory");
		return -1;
	}
	for (unsigned p = 0; p < gw->maps.npools; p++) {
		const struct pg_route_cfg *r =
		    p < cfg->pools.n ? &cfg->pools.pool[p].route : &cfg->route;
		struct pg_state *st = &gw->maps.state[p];

		st->strategy = (uint32_t)r->strategy;
		st->prefix_length = r->prefix_length;
		st->concurrency_threshold = r->concurrency_threshold;
		st->ca_choices = r->new_choices;
		st->flow_queue_ms = r->flow_queue_ms;
		st->flow_deadline_ms = r->flow_deadline_ms;
	}

	/* The command line already applied the file: only remember it. */
	if (cfg->routing_config) {
		if (routing_file_changed(cfg->routing_config, &text, &len, err, errlen) < 0)
			return -1;
		keep_routing_text(text, len);
	}
	if (pg_resolve_init(cfg, err, errlen))
		return -1;
	/* --backend (the default pool), then each --pool's backend=; with a
	 * configuration file, these are the file's (and the flags' over it),
	 * which a reload syncs (control_reload.c) */
	for (unsigned p = 0; p <= cfg->pools.n && rc >= 0; p++) {
		char *const *list = p ? cfg->pools.pool[p - 1].backends : cfg->backends;
		size_t nb = p ? cfg->pools.pool[p - 1].nbackends : cfg->nbackends;
		unsigned pool = p ? p - 1 : 0;

		if (p && p - 1 >= gw->maps.npools)
			break;
		for (size_t i = 0; i < nb && rc >= 0; i++) {
			rc = pg_ctl_parse_addr(list[i], &hp, err, errlen);
			if (!rc && hp.name[0])
				rc = pg_ctl_name_add(gw, &hp, pool, origin, true, err, errlen);
			else if (!rc)
				rc = pg_ctl_add_one(gw, &hp.addr, &hp, pool, origin, true, &changed,
				                    err, errlen);
		}
	}
	if (rc >= 0 && cfg->backends_file) {
		rc = read_backends_file(gw, false, &list, &n, err, errlen);
		if (!rc)
			rc = pg_ctl_sync(gw, list, n, PG_ORIGIN_FILE, &changed, err, errlen);
		pg_backends_free(list, n);
	}
	if (rc < 0 || pg_etcd_init(gw, err, errlen))
		return -1;
	for (int k = 0; k < PG_MAX_NAMES; k++)
		names = names || pg_ctl.names[k].host[0];
	/* Start with the names' first answers where they come quickly; the
	 * rest join when they answer. */
	if (names)
		pg_resolve_settle(gw, PG_RESOLVE_SETTLE_MS);
	pg_control_rebuild_ring(gw);
	if (!pg_members_count(gw))
		pg_warn("no backends yet: requests get 502 until some are added "
		        "(POST /backends, or the backends file and SIGHUP)");
	return 0;
}

/* Re-read --backends-file and sync membership; why names the trigger. */
static int reload_backends(struct pg_gateway *gw, const char *why)
{
	const struct pg_config *cfg = gw->cfg;
	uint32_t before = pg_members_count(gw);
	char err[512], **list;
	size_t n;
	int changes;

	if (read_backends_file(gw, true, &list, &n, err, sizeof(err))) {
		pg_error("%s: %s; membership unchanged", why, err);
		return -1;
	}
	changes = pg_members_sync(gw, list, n, err, sizeof(err));
	pg_backends_free(list, n);
	if (changes < 0)
		pg_error("%s: %s", why, err);
	pg_info("%s: --backends-file %s: %u -> %u backends in the ring (%d added or drained)", why,
	        cfg->backends_file, before, pg_members_count(gw), changes < 0 ? 0 : changes);
	return changes < 0 ? -1 : 0;
}

/* The re-read --routing-config file rc applied to every pool without a
 * routing-config= of its own, as at start-up: the explicit flags over it,
 * then the pool's own fields. */
static void reroute(struct pg_gateway *gw, const struct pg_route_cfg *file)
{
	static const char *const flag[] = {"--strategy", "--prefix-length",
	                                   "--concurrency-threshold"};
	const struct pg_config *cfg = gw->cfg;
	struct pg_route_cfg rc;
	char why[160] = "--routing-config re-read";
	size_t n = strlen(why);
	bool first = true;

	/* the log line says which flags still override the file */
	for (unsigned i = 0; i < 3; i++) {
		if (!(cfg->route_flags_set & (PG_POOL_SET_STRATEGY << i)) || n >= sizeof(why))
			continue;
		n += (size_t)snprintf(why + n, sizeof(why) - n, "%s %s", first ? "; kept" : ",",
		                      flag[i]);
		first = false;
	}
	for (unsigned p = 0; p < gw->maps.npools; p++)
		if (pg_route_of_pool(cfg, p, file, &rc))
			pg_control_set_routing_pool(gw, p, &rc, why);
}

int pg_control_reload(struct pg_gateway *gw)
{
	const struct pg_config *cfg = gw->cfg;
	struct pg_route_cfg rc;
	char err[512], *text;
	size_t len;
	int ret = 0;

	/* with a configuration file, it says everything, --routing-config's
	 * content included (control_reload.c) */
	if (cfg->conf && pg_control_reload_conf(gw))
		ret = -1;
	if (cfg->backends_file && reload_backends(gw, "reload"))
		ret = -1;
	/* certificates and keys: read again whatever changed, or refused whole */
	if (gw->tls && (cfg->tls.on || cfg->tls.backend_ca || cfg->tls.backend_cert) &&
	    pg_tls_reload(gw, "SIGHUP", err, sizeof(err)))
		ret = -1;
	if (cfg->routing_config && !cfg->conf) {
		switch (routing_file_changed(cfg->routing_config, &text, &len, err, sizeof(err))) {
		case -1:
			pg_error("reload: %s; routing config unchanged", err);
			ret = -1;
			break;
		case 0:
			pg_info("reload: --routing-config %s unchanged", cfg->routing_config);
			break;
		default:
			if (pg_routing_config_parse(text, len, &rc, err, sizeof(err))) {
				pg_error(
				    "reload: --routing-config %s: %s; routing config unchanged",
				    cfg->routing_config, err);
				free(text);
				ret = -1;
				break;
			}
			keep_routing_text(text, len);
			reroute(gw, &rc);
		}
	}
	return ret;
}

/* ---- the thread ----------------------------------------------------- */

static void read_signals(struct pg_gateway *gw)
{
	struct signalfd_siginfo si;

	while (read(ctl.sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo != SIGHUP)
			continue;
		pg_info("SIGHUP: re-reading configuration files");
		pg_control_reload(gw);
	}
}

/*
 * Watch --backends-file for changes: its directory, for IN_CLOSE_WRITE
 * (written in place) and IN_MOVED_TO (an editor's or config manager's
 * write-then-rename, which a watch on the file itself would miss: the
 * watched inode is the replaced one). Also "..data", the symlink a
 * Kubernetes ConfigMap volume swaps. Without inotify, SIGHUP still works.
 */
static void watch_backends_file(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	ctl.watch_base = slash ? slash + 1 : path;
	ctl.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ctl.ifd == -1 || inotify_add_watch(ctl.ifd, dir, IN_CLOSE_WRITE | IN_MOVED_TO) == -1) {
		pg_warn("--backends-file %s: cannot watch %s for changes (%s): re-read on SIGHUP "
		        "only",
		        path, dir, strerror(errno));
		if (ctl.ifd != -1)
			close(ctl.ifd);
		ctl.ifd = -1;
		return;
	}
	pg_info("--backends-file %s: re-read when it changes, and on SIGHUP", path);
}

/* Drain the inotify queue; re-read the backends file once if it changed. */
static void read_inotify(struct pg_gateway *gw)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool changed = false;
	ssize_t n;

	while ((n = read(ctl.ifd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			if ((ev->mask & IN_Q_OVERFLOW) ||
			    (ev->len &&
			     (!strcmp(ev->name, ctl.watch_base) || !strcmp(ev->name, "..data"))))
				changed = true;
			p += sizeof(*ev) + ev->len;
		}
	}
	if (changed)
		reload_backends(gw, "inotify");
}

static void *control_main(void *arg)
{
	struct pg_gateway *gw = arg;
	struct pollfd pfd[4 + PG_ADMIN_POLL_FDS + PG_RESOLVE_MAX_FDS];
	uint64_t now = pg_now_ms(), next_tick = now + PG_CONTROL_TICK_MS;
	bool stop = false;

	while (!stop && !__atomic_load_n(&gw->stop, __ATOMIC_RELAXED)) {
		nfds_t n = 4;
		int nadmin, nres;

		pfd[0] = (struct pollfd){.fd = ctl.efd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = ctl.sfd, .events = POLLIN};
		pfd[2] = (struct pollfd){.fd = ctl.ifd, .events = POLLIN}; /* -1: ignored */
		pfd[3] = (struct pollfd){.fd = pg_etcd_event_fd(), .events = POLLIN};
		nadmin = pg_admin_pollfds(pfd + n, PG_ADMIN_POLL_FDS);
		n += (nfds_t)nadmin;
		nres = pg_resolve_pollfds(pfd + n, PG_RESOLVE_MAX_FDS);
		n += (nfds_t)nres;
		if (poll(pfd, n, (int)(next_tick > now ? next_tick - now : 0)) == -1 &&
		    errno != EINTR) {
			pg_error("control thread: poll: %s", strerror(errno));
			usleep(PG_CONTROL_TICK_MS * 1000);
		}
		if (pfd[0].revents)
			stop = true;
		if (pfd[1].revents)
			read_signals(gw);
		if (pfd[2].revents)
			read_inotify(gw);
		if (pfd[3].revents)
			pg_etcd_apply(gw);
		pg_resolve_process(gw, pfd + 4 + nadmin, nres);
		pg_admin_process(gw, pfd + 4, nadmin);
		now = pg_now_ms();
		if (now >= next_tick) {
			/* prefixgatectl tells a live gateway from maps left behind */
			__atomic_store_n(&gw->maps.state->heartbeat_ms, now, __ATOMIC_RELAXED);
			pg_metrics_sample(gw, now);
			pg_control_tick(gw, now);
			pg_tls_tick(gw, now); /* ticket keys' rotation */
			pg_admin_timeouts(now);
			pg_resolve_due(gw, now);
			next_tick = now + PG_CONTROL_TICK_MS;
		}
	}
	return NULL;
}

static void close_fds(void)
{
	pg_admin_close();
	if (ctl.sfd != -1)
		close(ctl.sfd);
	if (ctl.efd != -1)
		close(ctl.efd);
	if (ctl.ifd != -1)
		close(ctl.ifd);
	ctl.sfd = ctl.efd = ctl.ifd = -1;
	ctl.admin_port = 0;
	if (ctl.gw)
		ctl.gw->admin_port = 0;
}

int pg_control_start(struct pg_gateway *gw, char *err, size_t errlen)
{
	union pg_sockaddr sa;
	char name[PG_ADDR_STRLEN];
	const char *what;
	sigset_t hup;
	int rc;

	ctl.gw = gw;
	if (pg_admin_listen(&gw->cfg->admin, &sa, err, errlen))
		return -1;
	ctl.admin_port = gw->admin_port = pg_sockaddr_port(&sa);
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	what = "signalfd(SIGHUP)";
	ctl.sfd = signalfd(-1, &hup, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ctl.sfd == -1)
		goto fail;
	what = "eventfd";
	ctl.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctl.efd == -1)
		goto fail;
	if (gw->cfg->backends_file)
		watch_backends_file(gw->cfg->backends_file);
	rc = pthread_create(&ctl.thread, NULL, control_main, gw);
	if (rc) {
		errno = rc;
		what = "starting the control thread";
		goto fail;
	}
	ctl.running = true;
	if (pg_etcd_start(gw, err, errlen)) {
		pg_control_stop(gw);
		return -1;
	}
	pg_info("admin API on http://%s/ (metrics, backends, route, routing)",
	        pg_addr_format(&sa, name));
	return 0;
fail:
	snprintf(err, errlen, "--admin %s: %s: %s", pg_addr_format(&gw->cfg->admin, name), what,
	         strerror(errno));
	close_fds();
	return -1;
}

void pg_control_stop(struct pg_gateway *gw)
{
	uint64_t one = 1;

	(void)gw;
	pg_etcd_stop();
	if (!ctl.running)
		return;
	if (write(ctl.efd, &one, sizeof(one)) == -1)
		pg_warn("stopping the control thread: %s", strerror(errno));
	pthread_join(ctl.thread, NULL);
	ctl.running = false;
	close_fds();
	pg_resolve_fini();
}

uint16_t pg_control_admin_port(void)
{
	return ctl.admin_port;
}
