/* SPDX-License-Identifier: MIT */
/*
 * Least privilege (--user NAME): once the BPF maps and programs are loaded,
 * the listeners bound and every thread started, the whole process becomes
 * NAME (its uid, gid and supplementary groups) and keeps only the
 * capabilities still needed at run time (usually none: the maps are
 * mmapped, the listeners open, and workers, the health checker and the
 * control thread only use sockets and read files).
 *
 * Credentials are per thread in Linux. glibc's setgroups/setgid/setuid
 * apply to every thread of the process (it signals each one), but capset()
 * and prctl() act on the calling thread only, so:
 *  - pg_priv_prepare() runs before any thread exists and sets the flags
 *    every thread then inherits (no_new_privs, keep-caps);
 *  - pg_priv_drop() changes ids through glibc, then has every thread
 *    (a real-time signal to each, as glibc does) set its own capability
 *    sets, then checks every /proc/self/task/TID/status (each task's Uid, Gid, CapPrm,
 *    CapEff, CapInh, CapAmb) and fails if any thread is left with more.
 */
#ifndef PG_PRIVILEGE_H
#define PG_PRIVILEGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Capability masks below: one bit per capability number (CAP_BPF, 39, is
 * 1ull << 39), as in /proc/PID/status. */
struct pg_priv {
	char user[64];
	uid_t uid;
	gid_t gid;
};

/*
 * Look user up (the passwd database: name or a decimal uid) into p: 0, or
 * -1 with err naming the cause ("--user nobody2: no such user", "... is
 * root").
 */
int pg_priv_lookup(struct pg_priv *p, const char *user, char *err, size_t errlen);

/* Whether this thread may become another user: CAP_SETUID and CAP_SETGID
 * effective (root has them, unless a bounding set took them away). */
bool pg_priv_may_change(void);

/*
 * Before any thread is created: pg_priv_lookup, check we may change to it
 * (pg_priv_may_change), set PR_SET_NO_NEW_PRIVS and PR_SET_KEEPCAPS on this
 * thread (inherited by every thread created after). 0, or -1 with err
 * naming the cause.
 */
int pg_priv_prepare(struct pg_priv *p, const char *user, char *err, size_t errlen);

/*
 * What p's user could do once pg_priv_drop made the process that user (its
 * uid, gid and supplementary groups), tried in a forked child: for each of
 * the n paths, open it for reading (dir[i] false), or search a directory
 * and create files in it (dir[i] true); errs[i] is 0 or the errno. 0, or
 * -1 with errno set when the child could not become the user (it needs
 * pg_priv_may_change).
 */
int pg_priv_try_as(const struct pg_priv *p, const char *const *paths, const bool *dir, size_t n,
                   int *errs);

/*
 * After everything privileged is done and every thread runs: become p's
 * user in every thread with exactly keep as permitted and effective
 * capabilities (inheritable and ambient empty), then verify every task of
 * the process. Logs what was dropped and what was kept. 0, or -1 with err
 * set: the caller must exit (some thread may still be privileged).
 */
int pg_priv_drop(const struct pg_priv *p, uint64_t keep, char *err, size_t errlen);

/*
 * Would an unprivileged p->user get EPERM from bpf(2) operations on the
 * already-open map fd (a lookup of key 0 of an array map)? Kernels before
 * 6.5 with kernel.unprivileged_bpf_disabled set refuse every bpf(2) command
 * without CAP_BPF; later ones only refuse creating maps and loading
 * programs. Tested in a forked child that drops to p->user. true: keep
 * CAP_BPF if map operations happen at run time (the splice data paths).
 */
bool pg_priv_bpf_ops_need_cap(const struct pg_priv *p, int map_fd);

/*
 * Parse one /proc/<pid>/status text (pure: unit-tested): the real uid
 * ("Uid:" first field), real gid, and the CapPrm / CapEff / CapInh / CapAmb
 * masks and NoNewPrivs. 0, or -1 if a field is missing or malformed.
 */
struct pg_task_creds {
	uid_t uid, euid;
	gid_t gid, egid;
	uint64_t prm, eff, inh, amb;
	bool no_new_privs;
};
int pg_priv_parse_status(const char *text, struct pg_task_creds *out);

/* "cap_net_admin,cap_bpf" (or "none") into buf. Returns buf. */
const char *pg_priv_caps_name(uint64_t caps, char *buf, size_t len);

#endif /* PG_PRIVILEGE_H */
