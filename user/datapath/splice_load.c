// SPDX-License-Identifier: MIT
/*
 * Loader of the in-kernel response paths: open the BPF object, set its
 * knobs, load the programs a mode needs, attach them (sk_skb and sk_msg
 * verdicts to their sockmaps, sockops to a cgroup v2), pin the maps, and undo
 * it all in pg_splice_close. Contracts in splice.h; the programs in
 * bpf/splice.bpf.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "datapath/splice_internal.h"

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

void pg_splice_seterr(char *err, size_t errlen, const char *fmt, ...)
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
		pg_splice_seterr(err, errlen, "splice: mkdir %s: %s", sp->pin_path, strerror(-rc));
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
			pg_splice_seterr(err, errlen, "splice: pin %s: %s", path, strerror(errno));
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
	if (e == EPERM)
		return "no privilege (needs CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON, or root)";
	/* The verifier's answer: without CAP_PERFMON it refuses what these
	 * programs do, and as root it means a program this kernel cannot verify. */
	if (e == EACCES)
		return "a program was rejected by the verifier (without CAP_PERFMON, or as root: "
		       "a kernel this code was not verified on)";
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
			pg_splice_seterr(err, errlen, "splice: no cgroup v2 at %s (%s)", want,
			                 fd == -EMEDIUMTYPE ? "not a cgroup2 file system"
			                                    : strerror(-fd));
		return fd;
	}
	for (i = 0; i < sizeof(cgroup_probe) / sizeof(cgroup_probe[0]); i++) {
		*used = cgroup_probe[i];
		fd = open_cgroup2(cgroup_probe[i]);
		if (fd >= 0)
			return fd;
	}
	pg_splice_seterr(err, errlen, "splice: no cgroup v2 at %s or %s (mount -t cgroup2 none %s)",
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
			pg_splice_seterr(err, errlen, "splice: attach sk_skb verdict: %s",
			                 strerror(-rc));
			return rc;
		}
	}
	if (!(sp->modes & PG_SPLICE_MSG))
		return 0;
	rc = attach_verdict(bpf_program__fd(s->progs.splice_msg),
	                    bpf_map__fd(s->maps.splice_msgsocks), BPF_SK_MSG_VERDICT, &sp->msg_link,
	                    &sp->msg_attached);
	if (rc) {
		pg_splice_seterr(err, errlen, "splice: attach sk_msg verdict: %s", strerror(-rc));
		return rc;
	}
	rc = open_sockops_cgroup(cfg ? cfg->cgroup : NULL, &cg, err, errlen);
	if (rc < 0)
		return rc;
	sp->cgroup_fd = rc;
	sp->sockops_link = bpf_program__attach_cgroup(s->progs.splice_sockops, sp->cgroup_fd);
	if (!sp->sockops_link) {
		rc = -errno;
		pg_splice_seterr(err, errlen, "splice: attach sockops to %s: %s", cg,
		                 strerror(errno));
		return rc;
	}
	return 0;
}

int pg_splice_open(struct pg_splice **out, const char *pin_path, unsigned int modes,
                   const struct pg_splice_config *cfg, char *err, size_t errlen)
{
	struct pg_splice *sp;
	int rc;

	*out = NULL;
	pg_splice_seterr(err, errlen, "splice: ok");
	modes &= PG_SPLICE_SKB | PG_SPLICE_MSG;
	if (!modes || !pin_path || strlen(pin_path) >= sizeof(sp->pin_path)) {
		pg_splice_seterr(err, errlen, "splice: no mode requested or pin path too long");
		return -EINVAL;
	}
	if (!on_fs(pin_path, BPF_FS_MAGIC)) {
		pg_splice_seterr(err, errlen,
		                 "splice: no bpffs at %s (mount -t bpf bpf /sys/fs/bpf)", pin_path);
		return -ENOENT;
	}
	sp = calloc(1, sizeof(*sp));
	if (!sp) {
		pg_splice_seterr(err, errlen, "splice: out of memory");
		return -ENOMEM;
	}
	sp->modes = modes;
	sp->cgroup_fd = sp->skb_link = sp->msg_link = -1;
	snprintf(sp->pin_path, sizeof(sp->pin_path), "%s", pin_path);

	sp->skel = splice_bpf__open();
	if (!sp->skel) {
		rc = -errno;
		pg_splice_seterr(err, errlen, "splice: open BPF object: %s", strerror(errno));
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
		pg_splice_seterr(err, errlen, "splice: load BPF programs: %s: %s", strerror(-rc),
		                 load_hint(-rc));
		goto fail;
	}
	rc = pg_splice_events_init(sp, cfg, err, errlen);
	if (rc)
		goto fail;
	rc = attach_all(sp, cfg, err, errlen);
	if (rc)
		goto fail;
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
	pg_splice_events_fini(sp);
	if (sp->cgroup_fd >= 0)
		close(sp->cgroup_fd);
	splice_bpf__destroy(s);
	free(sp);
}

unsigned int pg_splice_modes(const struct pg_splice *sp)
{
	return sp->modes;
}
