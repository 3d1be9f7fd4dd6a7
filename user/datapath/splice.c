// SPDX-License-Identifier: MIT
/*
 * Loader and per-connection API of the in-kernel response paths. The
 * contract of each function is in splice.h; the kernel side and its ordering
 * arguments are in bpf/splice.bpf.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/sock_diag.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "datapath/splice.h"
#include "splice.skel.h"

#ifndef BPF_FS_MAGIC
#define BPF_FS_MAGIC 0xcafe4a11
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* Where sockops attaches when the caller names no cgroup, first match wins:
 * the cgroup2 mount of a hybrid hierarchy, then that of a cgroup v2 only
 * host (systemd's default). */
static const char *const cgroup_probe[] = {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"};

struct pg_splice {
	struct splice_bpf *skel;
	unsigned int modes;
	int cgroup_fd;
	/* sk_skb / sk_msg verdicts: link fds, or -1 when attached the old way
	 * (bpf_prog_attach, kernels before sockmap links) and detached by hand */
	int skb_link, msg_link;
	int skb_attached, msg_attached;
	struct bpf_link *sockops_link;
	struct ring_buffer *events;
	void (*event_fn)(void *ctx, const struct pg_splice_event *ev);
	void *event_ctx;
	char pin_path[256];
};

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* statfs of path, or of its nearest existing parent: does it live on fs `magic`? */
static int on_fs(const char *path, long magic)
{
	char p[256];
	struct statfs st;
	char *slash;

	snprintf(p, sizeof(p), "%s", path);
	for (;;) {
		if (statfs(p, &st) == 0)
			return (long)st.f_type == magic;
		slash = strrchr(p, '/');
		if (!slash || slash == p)
			return statfs("/", &st) == 0 && (long)st.f_type == magic;
		*slash = '\0';
	}
}

static int mkdir_p(const char *path)
{
	char p[256];
	size_t i;

	snprintf(p, sizeof(p), "%s", path);
	for (i = 1; p[i]; i++) {
		if (p[i] != '/')
			continue;
		p[i] = '\0';
		if (mkdir(p, 0700) == -1 && errno != EEXIST)
			return -errno;
		p[i] = '/';
	}
	if (mkdir(p, 0700) == -1 && errno != EEXIST)
		return -errno;
	return 0;
}

static __u32 map_id(int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return 0;
	return info.id;
}

/* Remove <pin_path>/<name> only if it still pins our map (a later run may own it). */
static void unpin_ours(const char *pin_path, struct bpf_map *map)
{
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", pin_path, bpf_map__name(map));
	fd = bpf_obj_get(path);
	if (fd == -1)
		return;
	if (map_id(fd) == map_id(bpf_map__fd(map)))
		unlink(path);
	close(fd);
}

static int pin_maps(struct pg_splice *sp, char *err, size_t errlen)
{
	struct bpf_map *map;
	char path[512];
	int rc;

	rc = mkdir_p(sp->pin_path);
	if (rc) {
		seterr(err, errlen, "splice: mkdir %s: %s", sp->pin_path, strerror(-rc));
		return rc;
	}
	bpf_object__for_each_map(map, sp->skel->obj)
	{
		if (bpf_map__is_internal(map)) /* .rodata: the knobs, not state */
			continue;
		snprintf(path, sizeof(path), "%s/%s", sp->pin_path, bpf_map__name(map));
		/* A pin left by a run that died: its sockets are gone with it. */
		unlink(path);
		rc = bpf_obj_pin(bpf_map__fd(map), path);
		if (rc) {
			rc = -errno;
			seterr(err, errlen, "splice: pin %s: %s", path, strerror(errno));
			return rc;
		}
	}
	return 0;
}

/* Attach a verdict program to a sockmap: a link when the kernel has sockmap
 * links (closed with the process), else the old attach (undone in close). */
static int attach_verdict(int prog_fd, int map_fd, enum bpf_attach_type type, int *link,
                          int *attached)
{
	*link = bpf_link_create(prog_fd, map_fd, type, NULL);
	if (*link >= 0) {
		*attached = 1;
		return 0;
	}
	*link = -1;
	if (bpf_prog_attach(prog_fd, map_fd, type, 0))
		return -errno;
	*attached = 1;
	return 0;
}

static void detach_verdict(int prog_fd, int map_fd, enum bpf_attach_type type, int *link,
                           int *attached)
{
	if (!*attached)
		return;
	if (*link >= 0)
		close(*link);
	else
		bpf_prog_detach2(prog_fd, map_fd, type);
	*link = -1;
	*attached = 0;
}

/* Name the likely cause of a load failure for the operator. */
static const char *load_hint(int e)
{
	if (e == EPERM || e == EACCES)
		return "no privilege (needs CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON, or root)";
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		return "kernel BTF missing (/sys/kernel/btf/vmlinux; needs CONFIG_DEBUG_INFO_BTF)";
	return "missing kernel feature (sockmap, sk_msg, sockops or bpf_skc_to_tcp_sock)";
}

/* path opened as a directory on a cgroup2 file system: an fd, or -errno
 * (-EMEDIUMTYPE: a directory of another file system). */
static int open_cgroup2(const char *path)
{
	struct statfs st;
	int fd, rc;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd == -1)
		return -errno;
	if (fstatfs(fd, &st) == -1)
		rc = -errno;
	else if ((long)st.f_type != CGROUP2_SUPER_MAGIC)
		rc = -EMEDIUMTYPE;
	else
		return fd;
	close(fd);
	return rc;
}

/*
 * The cgroup the sockops program attaches to: want, or the first cgroup2
 * mount of cgroup_probe. Only sockets of processes in it (or below) are
 * seen, so the same-host backends must run there. An fd with *used set, or
 * -errno with err naming every path tried.
 */
static int open_sockops_cgroup(const char *want, const char **used, char *err, size_t errlen)
{
	size_t i;
	int fd;

	if (want) {
		*used = want;
		fd = open_cgroup2(want);
		if (fd < 0)
			seterr(err, errlen, "splice: no cgroup v2 at %s (%s)", want,
			       fd == -EMEDIUMTYPE ? "not a cgroup2 file system" : strerror(-fd));
		return fd;
	}
	for (i = 0; i < sizeof(cgroup_probe) / sizeof(cgroup_probe[0]); i++) {
		*used = cgroup_probe[i];
		fd = open_cgroup2(cgroup_probe[i]);
		if (fd >= 0)
			return fd;
	}
	seterr(err, errlen, "splice: no cgroup v2 at %s or %s (mount -t cgroup2 none %s)",
	       cgroup_probe[0], cgroup_probe[1], cgroup_probe[1]);
	return -ENOENT;
}

static int attach_all(struct pg_splice *sp, const struct pg_splice_config *cfg, char *err,
                      size_t errlen)
{
	struct splice_bpf *s = sp->skel;
	const char *cg;
	int rc;

	if (sp->modes & PG_SPLICE_SKB) {
		rc = attach_verdict(bpf_program__fd(s->progs.splice_skb),
		                    bpf_map__fd(s->maps.splice_backends), BPF_SK_SKB_VERDICT,
		                    &sp->skb_link, &sp->skb_attached);
		if (rc) {
			seterr(err, errlen, "splice: attach sk_skb verdict: %s", strerror(-rc));
			return rc;
		}
	}
	if (!(sp->modes & PG_SPLICE_MSG))
		return 0;
	rc = attach_verdict(bpf_program__fd(s->progs.splice_msg),
	                    bpf_map__fd(s->maps.splice_msgsocks), BPF_SK_MSG_VERDICT, &sp->msg_link,
	                    &sp->msg_attached);
	if (rc) {
		seterr(err, errlen, "splice: attach sk_msg verdict: %s", strerror(-rc));
		return rc;
	}
	rc = open_sockops_cgroup(cfg ? cfg->cgroup : NULL, &cg, err, errlen);
	if (rc < 0)
		return rc;
	sp->cgroup_fd = rc;
	sp->sockops_link = bpf_program__attach_cgroup(s->progs.splice_sockops, sp->cgroup_fd);
	if (!sp->sockops_link) {
		rc = -errno;
		seterr(err, errlen, "splice: attach sockops to %s: %s", cg, strerror(errno));
		return rc;
	}
	return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct pg_splice *sp = ctx;

	if (size >= sizeof(struct pg_splice_event) && sp->event_fn)
		sp->event_fn(sp->event_ctx, data);
	return 0;
}

int pg_splice_open(struct pg_splice **out, const char *pin_path, unsigned int modes,
                   const struct pg_splice_config *cfg, char *err, size_t errlen)
{
	struct pg_splice *sp;
	int rc;

	*out = NULL;
	seterr(err, errlen, "splice: ok");
	modes &= PG_SPLICE_SKB | PG_SPLICE_MSG;
	if (!modes || !pin_path || strlen(pin_path) >= sizeof(sp->pin_path)) {
		seterr(err, errlen, "splice: no mode requested or pin path too long");
		return -EINVAL;
	}
	if (!on_fs(pin_path, BPF_FS_MAGIC)) {
		seterr(err, errlen, "splice: no bpffs at %s (mount -t bpf bpf /sys/fs/bpf)",
		       pin_path);
		return -ENOENT;
	}
	sp = calloc(1, sizeof(*sp));
	if (!sp) {
		seterr(err, errlen, "splice: out of memory");
		return -ENOMEM;
	}
	sp->modes = modes;
	sp->cgroup_fd = sp->skb_link = sp->msg_link = -1;
	snprintf(sp->pin_path, sizeof(sp->pin_path), "%s", pin_path);

	sp->skel = splice_bpf__open();
	if (!sp->skel) {
		rc = -errno;
		seterr(err, errlen, "splice: open BPF object: %s", strerror(errno));
		goto fail;
	}
	if (cfg && cfg->skb_budget)
		sp->skel->rodata->skb_budget = cfg->skb_budget;
	if (cfg && cfg->msg_budget)
		sp->skel->rodata->msg_budget = cfg->msg_budget;
	/* Load only what is used: the skb program needs kernel BTF (CO-RE). */
	bpf_program__set_autoload(sp->skel->progs.splice_skb, !!(modes & PG_SPLICE_SKB));
	bpf_program__set_autoload(sp->skel->progs.splice_msg, !!(modes & PG_SPLICE_MSG));
	bpf_program__set_autoload(sp->skel->progs.splice_sockops, !!(modes & PG_SPLICE_MSG));
	rc = splice_bpf__load(sp->skel);
	if (rc) {
		rc = rc < 0 ? rc : -errno;
		seterr(err, errlen, "splice: load BPF programs: %s: %s", strerror(-rc),
		       load_hint(-rc));
		goto fail;
	}
	rc = attach_all(sp, cfg, err, errlen);
	if (rc)
		goto fail;
	sp->events =
	    ring_buffer__new(bpf_map__fd(sp->skel->maps.splice_events), on_event, sp, NULL);
	if (!sp->events) {
		rc = -errno;
		seterr(err, errlen, "splice: ring buffer: %s", strerror(errno));
		goto fail;
	}
	rc = pin_maps(sp, err, errlen);
	if (rc)
		goto fail;
	*out = sp;
	return 0;
fail:
	pg_splice_close(sp);
	return rc;
}

void pg_splice_close(struct pg_splice *sp)
{
	struct bpf_map *map;
	struct splice_bpf *s;

	if (!sp)
		return;
	s = sp->skel;
	if (s) {
		bpf_link__destroy(sp->sockops_link);
		detach_verdict(bpf_program__fd(s->progs.splice_msg),
		               bpf_map__fd(s->maps.splice_msgsocks), BPF_SK_MSG_VERDICT,
		               &sp->msg_link, &sp->msg_attached);
		detach_verdict(bpf_program__fd(s->progs.splice_skb),
		               bpf_map__fd(s->maps.splice_backends), BPF_SK_SKB_VERDICT,
		               &sp->skb_link, &sp->skb_attached);
		if (s->obj && bpf_map__fd(s->maps.splice_peers) >= 0) {
			bpf_object__for_each_map(map, s->obj)
			{
				if (!bpf_map__is_internal(map))
					unpin_ours(sp->pin_path, map);
			}
		}
		rmdir(sp->pin_path); /* only if empty: other modules may pin there */
	}
	ring_buffer__free(sp->events);
	if (sp->cgroup_fd >= 0)
		close(sp->cgroup_fd);
	splice_bpf__destroy(s);
	free(sp);
}

unsigned int pg_splice_modes(const struct pg_splice *sp)
{
	return sp->modes;
}

int pg_splice_events_fd(const struct pg_splice *sp)
{
	return ring_buffer__epoll_fd(sp->events);
}

int pg_splice_events_consume(struct pg_splice *sp,
                             void (*fn)(void *ctx, const struct pg_splice_event *ev), void *ctx)
{
	int n;

	sp->event_fn = fn;
	sp->event_ctx = ctx;
	n = ring_buffer__consume(sp->events);
	sp->event_fn = NULL;
	return n;
}

int pg_splice_cookie(int fd, __u64 *cookie)
{
	socklen_t len = sizeof(*cookie);

	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, cookie, &len) == -1)
		return -errno;
	return 0;
}

/* Put a client socket in splice_clients (already there is fine). */
static int add_client(struct pg_splice *sp, int client_fd, __u64 *key)
{
	__u64 v = (__u64)client_fd;
	int rc;

	rc = pg_splice_cookie(client_fd, key);
	if (rc)
		return rc;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_clients), key, &v, BPF_NOEXIST) &&
	    errno != EEXIST)
		return -errno;
	return 0;
}

/* Bytes ever queued on a TCP socket (acked + still queued), and acked alone. */
static int tcp_acked(int fd, __u64 *acked)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == -1)
		return -errno;
	if (len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return -ENOTSUP;
	*acked = ti.tcpi_bytes_acked;
	return 0;
}

/*
 * Bytes the socket has carried (acknowledged + still queued) and, of those,
 * acknowledged. The two come from two calls; an ACK between them would
 * make the sum short by what it acknowledged, so the acknowledged count is
 * read on both sides of SIOCOUTQ until it did not move (loopback ACKs
 * arrive all the time while data flows).
 */
static int tcp_carried(int fd, __u64 *queued, __u64 *acked)
{
	__u64 a0, a1;
	int outq, rc, i;

	rc = tcp_acked(fd, &a1);
	for (i = 0; !rc && i < 8; i++) {
		a0 = a1;
		if (ioctl(fd, SIOCOUTQ, &outq) == -1)
			return -errno;
		rc = tcp_acked(fd, &a1);
		if (!rc && a1 == a0) {
			*acked = a1;
			*queued = a1 + (__u64)outq;
			return 0;
		}
	}
	return rc ? rc : -EAGAIN;
}

int pg_splice_carried(int fd, __u64 *carried)
{
	__u64 acked;

	return tcp_carried(fd, carried, &acked);
}

int pg_splice_send_room(int fd, __u64 *room)
{
	__u32 mem[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mem);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) == -1)
		return -errno;
	if (len < sizeof(__u32) * (SK_MEMINFO_WMEM_QUEUED + 1))
		return -ENOTSUP;
	*room = mem[SK_MEMINFO_SNDBUF] > mem[SK_MEMINFO_WMEM_QUEUED]
	            ? mem[SK_MEMINFO_SNDBUF] - mem[SK_MEMINFO_WMEM_QUEUED]
	            : 0;
	return 0;
}

int pg_splice_pair(struct pg_splice *sp, int backend_fd, int client_fd, __u64 budget,
                   const struct pg_frame *frame)
{
	struct pg_splice_peer peer = {.budget = budget};
	int peers = bpf_map__fd(sp->skel->maps.splice_peers);
	__u64 bkey, v = (__u64)backend_fd, acked;
	char c;
	int rc;

	if (!(sp->modes & PG_SPLICE_SKB))
		return -EOPNOTSUPP;
	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	if (frame)
		peer.frame = *frame;
	rc = add_client(sp, client_fd, &peer.client_key);
	if (rc)
		return rc;
	rc = tcp_carried(client_fd, &peer.base, &acked);
	if (rc)
		return rc;
	if (bpf_map_update_elem(peers, &bkey, &peer, BPF_NOEXIST))
		return -errno;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_backends), &bkey, &v,
	                        BPF_NOEXIST)) {
		rc = -errno;
		bpf_map_delete_elem(peers, &bkey);
		return rc;
	}
	/* Bytes queued before insertion wait for the next packet unless a read
	 * runs the verdict over them; MSG_PEEK so that nothing is consumed. */
	if (recv(backend_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == -1 && errno != EAGAIN &&
	    errno != EWOULDBLOCK)
		return 0; /* the fd's own error is for the proxy's next read to see */
	return 0;
}

int pg_splice_unpair(struct pg_splice *sp, int backend_fd)
{
	__u64 bkey;
	int rc, gone;

	if (!(sp->modes & PG_SPLICE_SKB))
		return -EOPNOTSUPP;
	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	/* The socket first, so the program no longer runs, then its state. */
	gone = bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_backends), &bkey) == 0;
	if (bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_peers), &bkey) == 0)
		gone = 1;
	return gone ? 0 : -ENOENT;
}

int pg_splice_progress(struct pg_splice *sp, int backend_fd, int client_fd,
                       struct pg_splice_progress *out)
{
	__u64 bkey, queued, acked;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	/* Counters first, client second: a byte counted as redirected is then
	 * either queued already or not, never missed by the comparison. */
	if (bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_peers), &bkey, &out->peer))
		return -errno;
	rc = tcp_carried(client_fd, &queued, &acked);
	if (rc)
		return rc;
	out->queued = queued > out->peer.base ? queued - out->peer.base : 0;
	out->acked = acked > out->peer.base ? acked - out->peer.base : 0;
	out->drained = out->queued >= out->peer.redirected;
	return 0;
}

int pg_splice_port_add(struct pg_splice *sp, __u16 port)
{
	__u32 k = port, v = 1;

	if (!(sp->modes & PG_SPLICE_MSG))
		return -EOPNOTSUPP;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_ports), &k, &v, BPF_ANY))
		return -errno;
	return 0;
}

int pg_splice_port_del(struct pg_splice *sp, __u16 port)
{
	__u32 k = port;

	if (!(sp->modes & PG_SPLICE_MSG))
		return -EOPNOTSUPP;
	if (bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_ports), &k))
		return -errno;
	return 0;
}

/* The route key of proxy_fd -> backend, from proxy_fd's bound address. */
static int route_key(int proxy_fd, const struct sockaddr_in *backend, struct pg_splice_tuple *t)
{
	struct sockaddr_in local;
	socklen_t len = sizeof(local);

	memset(t, 0, sizeof(*t));
	if (getsockname(proxy_fd, (struct sockaddr *)&local, &len) == -1)
		return -errno;
	if (local.sin_family != AF_INET || backend->sin_family != AF_INET)
		return -EAFNOSUPPORT;
	if (!local.sin_port || !local.sin_addr.s_addr)
		return -EDESTADDRREQ; /* not bound: bind to 127.0.0.1:0 first */
	t->backend_ip4 = backend->sin_addr.s_addr;
	t->proxy_ip4 = local.sin_addr.s_addr;
	t->backend_port = ntohs(backend->sin_port);
	t->proxy_port = ntohs(local.sin_port);
	return 0;
}

/* The msg path's route key of a proxy-side socket, or why there is none. */
static int msg_route_key(const struct pg_splice *sp, int proxy_fd, const struct sockaddr_in *backend,
                         struct pg_splice_tuple *t)
{
	if (!(sp->modes & PG_SPLICE_MSG))
		return -EOPNOTSUPP;
	return route_key(proxy_fd, backend, t);
}

int pg_splice_route_add(struct pg_splice *sp, int proxy_fd, const struct sockaddr_in *backend,
                        int client_fd, __u64 budget, const struct pg_frame *frame)
{
	struct pg_splice_peer route = {.budget = budget}, old;
	struct pg_splice_tuple t;
	int rc;

	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	if (frame)
		route.frame = *frame;
	rc = add_client(sp, client_fd, &route.client_key);
	if (rc)
		return rc;
	/* A connected, idle connection keeps the base its sockops entry recorded:
	 * the gate counts the backend's bytes from there. */
	if (!bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t, &old))
		route.base = old.base;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t, &route, BPF_ANY))
		return -errno;
	return 0;
}

int pg_splice_route_get(struct pg_splice *sp, int proxy_fd, const struct sockaddr_in *backend,
                        struct pg_splice_peer *out)
{
	struct pg_splice_tuple t;
	int rc;

	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	if (bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t, out))
		return -errno;
	return 0;
}

int pg_splice_route_del(struct pg_splice *sp, int proxy_fd, const struct sockaddr_in *backend)
{
	struct pg_splice_tuple t;
	int rc;

	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_gates), &t);
	if (bpf_map_delete_elem(bpf_map__fd(sp->skel->maps.splice_routes), &t))
		return -errno;
	return 0;
}

int pg_splice_route_gate(struct pg_splice *sp, int proxy_fd, const struct sockaddr_in *backend,
                         __u64 gate, const struct pg_frame *frame, __u64 budget)
{
	struct pg_splice_gate g = {.gate = gate, .budget = budget};
	struct pg_splice_tuple t;
	int rc;

	if (frame)
		g.frame = *frame;
	rc = msg_route_key(sp, proxy_fd, backend, &t);
	if (rc)
		return rc;
	if (bpf_map_update_elem(bpf_map__fd(sp->skel->maps.splice_gates), &t, &g, BPF_ANY))
		return -errno;
	return 0;
}

int pg_splice_peer_get(struct pg_splice *sp, int backend_fd, struct pg_splice_peer *out)
{
	__u64 bkey;
	int rc;

	rc = pg_splice_cookie(backend_fd, &bkey);
	if (rc)
		return rc;
	if (bpf_map_lookup_elem(bpf_map__fd(sp->skel->maps.splice_peers), &bkey, out))
		return -errno;
	return 0;
}
