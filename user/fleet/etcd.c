// SPDX-License-Identifier: MIT
/*
 * The etcd thread and the hand-over of views to the control thread
 * (etcd.h). The admin write-through, /health and /metrics parts are in
 * etcd_admin.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "state/quotas.h"
#include "config/config.h"
#include "members/members.h"
#include "fleet/etcd.h"
#include "fleet/etcd_internal.h"
#include "state/pools.h"
#include "sys/log.h"

struct pg_etcd_state pg_etcd = {.efd = -1, .stopfd = -1};

bool pg_etcd_enabled(void)
{
	return pg_etcd.on;
}

int pg_etcd_event_fd(void)
{
	return pg_etcd.on ? pg_etcd.efd : -1;
}

static int view_copy(struct pg_etcd_view *dst, const struct pg_etcd_view *src)
{
	struct pg_etcd_view v = {.revision = src->revision};

	for (size_t i = 0; i < src->n; i++) {
		if (pg_etcd_view_set(&v, src->e[i].key, src->e[i].val, src->e[i].vlen)) {
			pg_etcd_view_free(&v);
			return -1;
		}
	}
	pg_etcd_view_free(dst);
	*dst = v;
	return 0;
}

/* Write the view to --etcd-state-file: a temporary file, then rename, so a
 * crash leaves the old file or the new one. */
static void save_state(const struct pg_etcd_view *v)
{
	const char *path = pg_etcd.cfg->state_file;
	struct pg_buf b = {0};
	char tmp[4096];
	int fd;

	if (!path)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	pg_etcd_view_dump(v, &b);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd == -1 || b.oom || write(fd, b.p, b.len) != (ssize_t)b.len || fsync(fd) ||
	    close(fd) || rename(tmp, path)) {
		pg_warn("--etcd-state-file %s: %s", path, strerror(errno));
		if (fd != -1)
			close(fd);
		unlink(tmp);
	}
	pg_buf_free(&b);
}

/* Hand a view to the control thread: the newest one replaces any not yet
 * applied (rebuilds coalesce). */
static void publish(const struct pg_etcd_view *v)
{
	uint64_t one = 1;

	pg_etcd.published_rev = v->revision;
	pthread_mutex_lock(&pg_etcd.lock);
	if (view_copy(&pg_etcd.pending, v))
		pg_error("etcd: out of memory; view not applied");
	else
		pg_etcd.have_pending = true;
	pthread_mutex_unlock(&pg_etcd.lock);
	if (write(pg_etcd.efd, &one, sizeof(one)) == -1 && errno != EAGAIN)
		pg_warn("etcd: eventfd: %s", strerror(errno));
	save_state(v);
}

/* The canonical, parseable addresses of a view's active backends, "ADDR
 * pool=NAME" for a pool other than the default one (a pool this gateway
 * does not have: skipped, told). */
static int canonical_backends(struct pg_gateway *gw, const struct pg_etcd_view *v, char ***out,
                              size_t *n)
{
	char **list, name[PG_HOSTPORT_STRLEN + PG_POOL_NAME_MAX + 8], e[400];
	size_t m, bad;
	struct pg_hostport hp;

	*n = 0;
	if (pg_etcd_view_backends(v, &list, &m, &bad))
		return -1;
	if (bad)
		pg_warn("etcd: %zu %s under %s/" PG_ETCD_BACKENDS_DIR " not JSON "
		        "{\"address\":...}: skipped",
		        bad, bad == 1 ? "value" : "values", pg_etcd.cfg->prefix);
	for (size_t i = 0; i < m; i++) {
		char *pool = strstr(list[i], " pool=");
		bool dup = false;

		if (pool)
			*pool = 0, pool += 6;
		if (pool && pg_pool_lookup(gw, pool, strlen(pool)) < 0) {
			pg_warn("etcd: backend %s: pool %s is not one of this gateway's: skipped",
			        list[i], pool);
			free(list[i]);
			continue;
		}
		if (pg_hostport_parse(list[i], &hp, false, e, sizeof(e))) {
			pg_warn("etcd: backend %s: %s: skipped", list[i], e);
			free(list[i]);
			continue;
		}
		pg_hostport_format(&hp, name);
		if (pool)
			snprintf(name + strlen(name), sizeof(name) - strlen(name), " pool=%s",
			         pool);
		free(list[i]);
		for (size_t k = 0; k < *n && !dup; k++)
			dup = !strcmp(list[k], name);
		list[*n] = dup ? NULL : strdup(name);
		if (!dup && !list[*n]) {
			pg_etcd_list_free(list, *n);
			return -1;
		}
		*n += !dup;
	}
	*out = list;
	return 0;
}

void pg_etcd_quotas(struct pg_gateway *gw)
{
	char err[512];

	if (pg_etcd.on && gw->quotas && gw->flow &&
	    pg_quotas_etcd(gw->quotas, gw->flow, &gw->cfg->flow, &pg_etcd.applied, err,
	                   sizeof(err)))
		pg_error("etcd: %s/%s; that quota not applied", pg_etcd.cfg->prefix, err);
}

void pg_etcd_apply(struct pg_gateway *gw)
{
	const struct pg_etcd_kv *route;
	struct pg_route_cfg rc;
	uint64_t junk;
	char **list, err[512];
	size_t n;
	bool have;

	if (read(pg_etcd.efd, &junk, sizeof(junk)) == -1 && errno != EAGAIN)
		pg_warn("etcd: eventfd: %s", strerror(errno));
	pthread_mutex_lock(&pg_etcd.lock);
	have = pg_etcd.have_pending;
	if (have) {
		pg_etcd_view_free(&pg_etcd.applied);
		pg_etcd.applied = pg_etcd.pending;
		pg_etcd.pending = (struct pg_etcd_view){0};
		pg_etcd.have_pending = false;
	}
	pthread_mutex_unlock(&pg_etcd.lock);
	if (!have)
		return;
	if (canonical_backends(gw, &pg_etcd.applied, &list, &n)) {
		pg_error("etcd: out of memory; membership unchanged");
	} else {
		if (pg_members_sync(gw, list, n, err, sizeof(err)) < 0)
			pg_error("etcd: %s", err);
		pg_etcd_list_free(list, n);
	}
	route = pg_etcd_view_get(&pg_etcd.applied, PG_ETCD_ROUTING_KEY);
	if (route && (!pg_etcd.route_text || strcmp(pg_etcd.route_text, route->val))) {
		free(pg_etcd.route_text);
		pg_etcd.route_text = strdup(route->val);
		if (pg_routing_config_parse(route->val, route->vlen, &rc, err, sizeof(err)))
			pg_error("etcd: %s/" PG_ETCD_ROUTING_KEY ": %s; routing config unchanged",
			         pg_etcd.cfg->prefix, err);
		else
			pg_control_set_routing(gw, &rc, "etcd");
	}
	pg_etcd_quotas(gw);
	__atomic_store_n(&pg_etcd.applied_rev, pg_etcd.applied.revision, __ATOMIC_RELAXED);
	pg_info("etcd: revision %lld applied: %u backend%s in the ring",
	        (long long)pg_etcd.applied.revision, gw->maps.state->nbackends,
	        gw->maps.state->nbackends == 1 ? "" : "s");
}

/* ---- the etcd thread ------------------------------------------------------ */

static void set_stale(bool stale, const char *why)
{
	bool was = __atomic_exchange_n(&pg_etcd.stale, stale, __ATOMIC_RELAXED);

	if (stale && !was)
		pg_warn("etcd: %s; routing on revision %lld until it answers again", why,
		        (long long)__atomic_load_n(&pg_etcd.applied_rev, __ATOMIC_RELAXED));
	else if (!stale && was)
		pg_info("etcd: reachable again");
}

/* Read every key under the prefix at one revision into v. */
static int list_all(struct pg_etcd_view *v, char *err, size_t errlen)
{
	struct pg_buf b = {0};
	struct pg_etcd_resp r;
	int rc;

	pg_etcd_body_range(&b, pg_etcd.prefix, true, false, false);
	rc = pg_etcd_call(&pg_etcd.cl, "/v3/kv/range", &b, &r, err, errlen);
	if (!rc)
		rc = pg_etcd_view_from_range(v, pg_etcd.prefix, &r, err, errlen);
	pg_etcd_resp_free(&r);
	pg_buf_free(&b);
	return rc;
}

struct watch_ctx {
	int changed, relist;
};

static int on_line(void *arg, const char *line, size_t len)
{
	struct watch_ctx *c = arg;
	struct pg_etcd_resp r;
	char err[200];
	int step;

	if (pg_etcd_parse(line, len, &r, err, sizeof(err))) {
		pg_warn("etcd watch: %s", err);
		c->relist = 1;
		return 0;
	}
	if (r.created)
		pg_etcd.w_created = true;
	step = pg_etcd_view_step(&pg_etcd.view, pg_etcd.prefix, &r);
	if (step == PG_ETCD_RELIST || step < 0) {
		if (r.compact_revision)
			pg_info("etcd watch: cancelled, revisions up to %lld compacted: re-listing",
			        (long long)r.compact_revision);
		else
			pg_info("etcd watch: %s (revision %lld, view at %lld): re-listing",
			        r.canceled || r.code ? (r.error[0] ? r.error : "cancelled")
			                             : "the revision went back",
			        (long long)r.revision, (long long)pg_etcd.view.revision);
		c->relist = 1;
	} else if (step == PG_ETCD_CHANGED) {
		c->changed = 1;
	}
	pg_etcd_resp_free(&r);
	return 0;
}

/* Open the watch from the view's revision + 1, first listing everything
 * if the view is not valid (never read, or dropped for a re-list). A watch
 * that broke resumes where the view stands: what happened meanwhile comes
 * as events, or as a cancel if it was compacted away. */
static int start_watch(char *err, size_t errlen)
{
	struct pg_buf b = {0};
	int64_t before = pg_etcd.view.revision;
	int rc;

	if (!pg_etcd.listed) {
		if (list_all(&pg_etcd.view, err, errlen))
			return -1;
		if (pg_etcd.view.revision < before)
			pg_warn("etcd: revision went back from %lld to %lld (restored?): using "
			        "the new state",
			        (long long)before, (long long)pg_etcd.view.revision);
		__atomic_fetch_add(&pg_etcd.lists, 1, __ATOMIC_RELAXED);
		pg_etcd.listed = true;
		if (pg_etcd.view.revision != pg_etcd.published_rev)
			publish(&pg_etcd.view);
	}
	pg_etcd_body_watch(&b, pg_etcd.prefix, pg_etcd.view.revision + 1);
	rc = pg_etcd_watch_open(&pg_etcd.cl, &pg_etcd.w, &b, err, errlen);
	pg_etcd.w_created = false;
	pg_etcd.w_opened_ms = pg_now_ms();
	pg_etcd.seen_newest = 0;
	pg_buf_free(&b);
	return rc;
}

/* The liveness check: a linearizable range needs a leader and a quorum. */
static int check(int64_t *newest, char *err, size_t errlen)
{
	struct pg_buf b = {0};
	struct pg_etcd_resp r;
	int rc;

	pg_etcd_body_range_newest(&b, pg_etcd.prefix);
	rc = pg_etcd_call(&pg_etcd.cl, "/v3/kv/range", &b, &r, err, errlen);
	*newest = !rc && r.nkv ? r.kv[0].mod_revision : 0;
	pg_etcd_resp_free(&r);
	pg_buf_free(&b);
	return rc;
}

/*
 * A watch can be open and dead: opened while etcd was starting, or on a
 * member cut off from the others. It is given up (and resumed) if it has
 * not answered "created" within two timeouts, or if the view is still
 * behind a key the previous check saw (a second ago: time enough for its
 * event to arrive).
 */
static bool watch_stuck(int64_t newest, uint64_t now)
{
	bool stuck = false;

	if (!pg_etcd.w_created && now > pg_etcd.w_opened_ms + 2ull * pg_etcd.cfg->timeout_ms) {
		pg_warn("etcd watch: not created after %u ms: reopening",
		        2 * pg_etcd.cfg->timeout_ms);
		stuck = true;
	} else if (pg_etcd.seen_newest > pg_etcd.view.revision) {
		pg_warn("etcd watch: at revision %lld, behind revision %lld that a check saw: "
		        "reopening",
		        (long long)pg_etcd.view.revision, (long long)pg_etcd.seen_newest);
		stuck = true;
	}
	pg_etcd.seen_newest = stuck ? 0 : newest;
	return stuck;
}

static void stop_watch(void)
{
	pg_etcd_watch_close(&pg_etcd.w);
}

static void *etcd_main(void *arg)
{
	struct pg_gateway *gw = arg;
	uint64_t next_try = 0, next_check = 0;
	int64_t newest;
	char err[512];

	while (!__atomic_load_n(&pg_etcd.quit, __ATOMIC_RELAXED)) {
		uint64_t now = pg_now_ms();

		if (pg_etcd.w.fd < 0 && now >= next_try) {
			if (start_watch(err, sizeof(err))) {
				stop_watch();
				set_stale(true, err);
				next_try = now + PG_ETCD_RETRY_MS;
			} else {
				next_check = 0; /* stale until a check passes */
			}
		}
		if (pg_etcd.w.fd >= 0) {
			struct watch_ctx c = {0};
			int rc = pg_etcd_watch_read(&pg_etcd.w, 100, on_line, &c, err, sizeof(err));

			if (c.changed && !c.relist)
				publish(&pg_etcd.view);
			if (rc < 0) {
				pg_warn("etcd watch: %s", err);
				next_try = pg_now_ms() + 100;
			} else if (c.relist) {
				__atomic_fetch_add(&pg_etcd.relists, 1, __ATOMIC_RELAXED);
				stop_watch();
				pg_etcd.listed = false;
				next_try = 0;
			}
		} else {
			struct pollfd pfd = {.fd = pg_etcd.stopfd, .events = POLLIN};

			poll(&pfd, 1, 100);
		}
		now = pg_now_ms();
		if (now >= next_check && pg_etcd.w.fd >= 0) {
			next_check = now + PG_ETCD_CHECK_MS;
			if (check(&newest, err, sizeof(err))) {
				/* The watch may be open on a member without quorum. */
				stop_watch();
				set_stale(true, err);
				next_try = pg_now_ms() + PG_ETCD_RETRY_MS;
			} else if (watch_stuck(newest, pg_now_ms())) {
				stop_watch();
				next_try = 0;
			} else {
				pg_etcd.last_ok_ms = pg_now_ms();
				__atomic_store_n(&pg_etcd.last_ok_atomic, pg_etcd.last_ok_ms,
				                 __ATOMIC_RELAXED);
				set_stale(false, NULL);
			}
		}
		__atomic_store_n(&pg_etcd.last_ok_atomic, pg_etcd.last_ok_ms, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&pg_etcd.stale, __ATOMIC_RELAXED))
			pg_etcd_gateway_record(gw, now);
	}
	stop_watch();
	pg_etcd_gateway_revoke();
	return NULL;
}

int pg_etcd_init(struct pg_gateway *gw, char *err, size_t errlen)
{
	struct pg_etcd_cfg *cfg = &gw->cfg->etcd;
	char e[512], le[512], *text;
	size_t len, plen;

	if (!cfg->endpoints)
		return 0;
	pg_etcd.cfg = cfg;
	pg_etcd.w.fd = -1;
	plen = strlen(cfg->prefix);
	while (plen > 1 && cfg->prefix[plen - 1] == '/')
		plen--;
	snprintf(pg_etcd.prefix, sizeof(pg_etcd.prefix), "%.*s/", (int)plen, cfg->prefix);
	snprintf(pg_etcd.routing_key, sizeof(pg_etcd.routing_key), "%s" PG_ETCD_ROUTING_KEY,
	         pg_etcd.prefix);
	if (pg_etcd_client_init(&pg_etcd.cl, cfg->endpoints, cfg->timeout_ms, cfg->user,
	                        cfg->password_file, err, errlen) ||
	    pg_etcd_client_init(&pg_etcd.admin_cl, cfg->endpoints, cfg->timeout_ms, cfg->user,
	                        cfg->password_file, err, errlen))
		return -1;
	pthread_mutex_init(&pg_etcd.lock, NULL);
	pg_etcd.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pg_etcd.stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (pg_etcd.efd == -1 || pg_etcd.stopfd == -1) {
		snprintf(err, errlen, "etcd: eventfd: %s", strerror(errno));
		return -1;
	}
	pg_etcd_gateway_init(gw);
	pg_etcd.on = true;
	pg_etcd.stale = true;
	if (!list_all(&pg_etcd.view, le, sizeof(le))) {
		pg_info("etcd: %zu keys under %s at revision %lld", pg_etcd.view.n, pg_etcd.prefix,
		        (long long)pg_etcd.view.revision);
		pg_etcd.stale = false;
		pg_etcd.last_ok_ms = pg_now_ms();
	} else if (cfg->state_file &&
	           !pg_read_file(cfg->state_file, PG_CONFIG_FILE_MAX, &text, &len, e, sizeof(e))) {
		if (pg_etcd_view_load(&pg_etcd.view, text, len, e, sizeof(e))) {
			snprintf(err, errlen, "--etcd-state-file %s: %s", cfg->state_file, e);
			free(text);
			return -1;
		}
		free(text);
		pg_warn("%s; starting on --etcd-state-file %s (revision %lld)", le, cfg->state_file,
		        (long long)pg_etcd.view.revision);
	} else {
		pg_warn("%s; no state file%s%s: no backends until etcd answers", le,
		        cfg->state_file ? ": " : "", cfg->state_file ? e : "");
	}
	__atomic_store_n(&pg_etcd.last_ok_atomic, pg_etcd.last_ok_ms, __ATOMIC_RELAXED);
	pg_etcd.listed = pg_etcd.view.revision > 0;
	if (pg_etcd.view.revision) {
		publish(&pg_etcd.view);
		pg_etcd_apply(gw);
	}
	return 0;
}

int pg_etcd_start(struct pg_gateway *gw, char *err, size_t errlen)
{
	int rc;

	if (!pg_etcd.on)
		return 0;
	rc = pthread_create(&pg_etcd.thread, NULL, etcd_main, gw);
	if (rc) {
		snprintf(err, errlen, "starting the etcd thread: %s", strerror(rc));
		return -1;
	}
	pg_etcd.running = true;
	return 0;
}

void pg_etcd_stop(void)
{
	uint64_t one = 1;

	if (!pg_etcd.running)
		return;
	__atomic_store_n(&pg_etcd.quit, true, __ATOMIC_RELAXED);
	if (write(pg_etcd.stopfd, &one, sizeof(one)) == -1)
		pg_warn("stopping the etcd thread: %s", strerror(errno));
	pthread_join(pg_etcd.thread, NULL);
	pg_etcd.running = false;
}
