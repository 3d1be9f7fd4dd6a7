// SPDX-License-Identifier: MIT
/*
 * Dropping privileges (privilege.h). Capabilities are set with the raw
 * capget/capset system calls (no libcap): the kernel interface is two
 * 32-bit words per set, _LINUX_CAPABILITY_VERSION_3.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "sys/log.h"
#include "sys/privilege.h"

/* How long every thread has to apply the capability sets. */
#define BROADCAST_TIMEOUT_MS 2000

static const char *const cap_names[] = {
    "chown",
    "dac_override",
    "dac_read_search",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "linux_immutable",
    "net_bind_service",
    "net_broadcast",
    "net_admin",
    "net_raw",
    "ipc_lock",
    "ipc_owner",
    "sys_module",
    "sys_rawio",
    "sys_chroot",
    "sys_ptrace",
    "sys_pacct",
    "sys_admin",
    "sys_boot",
    "sys_nice",
    "sys_resource",
    "sys_time",
    "sys_tty_config",
    "mknod",
    "lease",
    "audit_write",
    "audit_control",
    "setfcap",
    "mac_override",
    "mac_admin",
    "syslog",
    "wake_alarm",
    "block_suspend",
    "audit_read",
    "perfmon",
    "bpf",
    "checkpoint_restore",
};

const char *pg_priv_caps_name(uint64_t caps, char *buf, size_t len)
{
	size_t off = 0;

	if (!len)
		return buf;
	buf[0] = 0;
	if (!caps) {
		snprintf(buf, len, "none");
		return buf;
	}
	for (unsigned i = 0; i < 64 && off < len; i++) {
		if (!(caps >> i & 1))
			continue;
		if (i < sizeof(cap_names) / sizeof(cap_names[0]))
			off += (size_t)snprintf(buf + off, len - off, "%scap_%s", off ? "," : "",
			                        cap_names[i]);
		else
			off +=
			    (size_t)snprintf(buf + off, len - off, "%scap_%u", off ? "," : "", i);
	}
	return buf;
}

/* ---- /proc/PID/status ------------------------------------------------------ */

/* The value after "\nName:" (or at the start), or NULL. */
static const char *field(const char *text, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == ':')
			return p + n + 1;
	return NULL;
}

static int field_hex(const char *text, const char *name, uint64_t *out)
{
	const char *v = field(text, name);
	char *end;

	if (!v)
		return -1;
	errno = 0;
	*out = strtoull(v, &end, 16);
	return errno || end == v || (*end != '\n' && *end) ? -1 : 0;
}

/* The first two ids of "Uid:\t0\t0\t0\t0" (real, effective). */
static int field_ids(const char *text, const char *name, unsigned *real, unsigned *eff)
{
	const char *v = field(text, name);

	return v && sscanf(v, "%u %u", real, eff) == 2 ? 0 : -1;
}

int pg_priv_parse_status(const char *text, struct pg_task_creds *out)
{
	unsigned uid, euid, gid, egid;
	uint64_t nnp = 0;

	memset(out, 0, sizeof(*out));
	if (field_ids(text, "Uid", &uid, &euid) || field_ids(text, "Gid", &gid, &egid) ||
	    field_hex(text, "CapPrm", &out->prm) || field_hex(text, "CapEff", &out->eff) ||
	    field_hex(text, "CapInh", &out->inh))
		return -1;
	/* CapAmb: since 4.3, NoNewPrivs: since 4.10; absent means none / off. */
	if (field(text, "CapAmb") && field_hex(text, "CapAmb", &out->amb))
		return -1;
	if (field(text, "NoNewPrivs") && field_hex(text, "NoNewPrivs", &nnp))
		return -1;
	out->uid = uid;
	out->euid = euid;
	out->gid = gid;
	out->egid = egid;
	out->no_new_privs = nnp != 0;
	return 0;
}

static int read_status(const char *path, struct pg_task_creds *out)
{
	char text[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd == -1)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = 0;
	return pg_priv_parse_status(text, out);
}

/* ---- capabilities ------------------------------------------------------------ */

static int caps_get(uint64_t *eff, uint64_t *prm)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) == -1)
		return -1;
	*eff = (uint64_t)d[1].effective << 32 | d[0].effective;
	*prm = (uint64_t)d[1].permitted << 32 | d[0].permitted;
	return 0;
}

/* What every thread applies to itself (set before the signals are sent). */
static struct {
	struct __user_cap_data_struct data[2];
	int acked;  /* threads done (atomic) */
	int failed; /* of which capset failed; errno of the last in err (atomic) */
	int err;
} bc;

static void apply_caps(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	/* Only system calls here: this also runs in a signal handler. */
	memcpy(d, bc.data, sizeof(d));
	if (syscall(SYS_capset, &h, d) == -1) {
		__atomic_store_n(&bc.err, errno, __ATOMIC_RELAXED);
		__atomic_fetch_add(&bc.failed, 1, __ATOMIC_RELAXED);
	}
	prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	__atomic_fetch_add(&bc.acked, 1, __ATOMIC_RELEASE);
}

static void on_broadcast(int sig)
{
	int saved = errno;

	(void)sig;
	apply_caps();
	errno = saved;
}

/* Every thread (this one directly, the others through sig) sets its own
 * capability sets to keep. 0, or -1 with err set. */
static int broadcast_caps(uint64_t keep, char *err, size_t errlen)
{
	struct sigaction sa = {.sa_handler = on_broadcast, .sa_flags = SA_RESTART};
	const int sig = SIGRTMIN + 4;
	pid_t pid = getpid(), self = (pid_t)syscall(SYS_gettid);
	struct timespec ms = {0, 1000000};
	struct dirent *de;
	int sent = 0, waited = 0;
	DIR *d;

	memset(&bc, 0, sizeof(bc));
	bc.data[0].effective = bc.data[0].permitted = (uint32_t)keep;
	bc.data[1].effective = bc.data[1].permitted = (uint32_t)(keep >> 32);
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL) == -1) {
		snprintf(err, errlen, "sigaction: %s", strerror(errno));
		return -1;
	}
	d = opendir("/proc/self/task");
	if (!d) {
		snprintf(err, errlen, "/proc/self/task: %s", strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);

		if (tid <= 0 || tid == self)
			continue;
		if (syscall(SYS_tgkill, pid, tid, sig) == 0)
			sent++;
		else if (errno != ESRCH) /* ESRCH: the thread has just exited */
			pg_warn("privileges: signalling thread %d: %s", tid, strerror(errno));
	}
	closedir(d);
	apply_caps();
	while (__atomic_load_n(&bc.acked, __ATOMIC_ACQUIRE) < sent + 1 &&
	       waited++ < BROADCAST_TIMEOUT_MS)
		nanosleep(&ms, NULL);
	signal(sig, SIG_IGN);
	if (__atomic_load_n(&bc.acked, __ATOMIC_ACQUIRE) < sent + 1) {
		snprintf(err, errlen, "only %d of %d threads set their capabilities within %d ms",
		         __atomic_load_n(&bc.acked, __ATOMIC_ACQUIRE), sent + 1,
		         BROADCAST_TIMEOUT_MS);
		return -1;
	}
	if (bc.failed) {
		snprintf(err, errlen, "capset in %d thread(s): %s", bc.failed, strerror(bc.err));
		return -1;
	}
	return 0;
}

/* Every task of the process runs as p with exactly keep. Returns the number
 * of tasks checked, or -1 with err naming the first that does not. */
static int verify_tasks(const struct pg_priv *p, uint64_t keep, char *err, size_t errlen)
{
	struct pg_task_creds t;
	struct dirent *de;
	char path[64];
	int n = 0, rc = 0;
	DIR *d = opendir("/proc/self/task");

	if (!d) {
		snprintf(err, errlen, "/proc/self/task: %s", strerror(errno));
		return -1;
	}
	while (!rc && (de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.16s/status", de->d_name);
		if (read_status(path, &t)) {
			if (errno == ENOENT)
				continue; /* exited meanwhile */
			snprintf(err, errlen, "%s: unreadable", path);
			rc = -1;
		} else if (t.uid != p->uid || t.euid != p->uid || t.gid != p->gid ||
		           t.egid != p->gid || t.prm != keep || t.eff != keep || t.inh || t.amb ||
		           !t.no_new_privs) {
			snprintf(err, errlen,
			         "thread %s still has uid %u gid %u CapPrm %016llx CapEff %016llx "
			         "CapInh %016llx CapAmb %016llx NoNewPrivs %d",
			         de->d_name, (unsigned)t.uid, (unsigned)t.gid,
			         (unsigned long long)t.prm, (unsigned long long)t.eff,
			         (unsigned long long)t.inh, (unsigned long long)t.amb,
			         t.no_new_privs);
			rc = -1;
		}
		n++;
	}
	closedir(d);
	return rc ? rc : n;
}

/* ---- the public API ----------------------------------------------------------- */

int pg_priv_lookup(struct pg_priv *p, const char *user, char *err, size_t errlen)
{
	struct passwd pw, *res = NULL;
	char buf[4096], *end;
	unsigned long id;

	memset(p, 0, sizeof(*p));
	getpwnam_r(user, &pw, buf, sizeof(buf), &res);
	if (!res && *user) {
		id = strtoul(user, &end, 10);
		if (!*end)
			getpwuid_r((uid_t)id, &pw, buf, sizeof(buf), &res);
	}
	if (!res) {
		snprintf(err, errlen, "--user %s: no such user", user);
		return -1;
	}
	if (!pw.pw_uid) {
		snprintf(err, errlen, "--user %s: is root; name an unprivileged user", user);
		return -1;
	}
	snprintf(p->user, sizeof(p->user), "%s", pw.pw_name);
	p->uid = pw.pw_uid;
	p->gid = pw.pw_gid;
	return 0;
}

bool pg_priv_may_change(void)
{
	const uint64_t need = 1ull << CAP_SETUID | 1ull << CAP_SETGID;
	uint64_t eff, prm;

	return !caps_get(&eff, &prm) && (eff & need) == need;
}

int pg_priv_prepare(struct pg_priv *p, const char *user, char *err, size_t errlen)
{
	if (pg_priv_lookup(p, user, err, errlen))
		return -1;
	if (!pg_priv_may_change()) {
		snprintf(err, errlen,
		         "--user %s: changing user needs root (CAP_SETUID, CAP_SETGID)", user);
		return -1;
	}
	/* Inherited by every thread created from now on: nothing this process
	 * ever executes can gain privileges, and the setuid in pg_priv_drop
	 * keeps the permitted set so each thread can choose what stays. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 ||
	    prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == -1) {
		snprintf(err, errlen, "--user %s: prctl: %s", user, strerror(errno));
		return -1;
	}
	return 0;
}

int pg_priv_try_as(const struct pg_priv *p, const char *const *paths, const bool *dir, size_t n,
                   int *errs)
{
	int fds[2], status, e = 0;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) == -1)
		return -1;
	pid = fork();
	if (pid == -1) {
		e = errno;
		close(fds[0]);
		close(fds[1]);
		errno = e;
		return -1;
	}
	if (pid == 0) {
		/* The child has one thread: these apply to it alone, as
		 * pg_priv_drop's to every thread. */
		close(fds[0]);
		if (initgroups(p->user, p->gid) || setresgid(p->gid, p->gid, p->gid) ||
		    setresuid(p->uid, p->uid, p->uid)) {
			e = errno ? errno : EPERM;
			(void)!write(fds[1], &e, sizeof(e));
			_exit(1);
		}
		(void)!write(fds[1], &e, sizeof(e)); /* 0: became the user */
		for (size_t i = 0; i < n; i++) {
			int fd = dir[i] ? -1 : open(paths[i], O_RDONLY | O_CLOEXEC);

			e = 0;
			if (dir[i] ? access(paths[i], W_OK | X_OK) == -1 : fd == -1)
				e = errno;
			if (fd != -1)
				close(fd);
			(void)!write(fds[1], &e, sizeof(e));
		}
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &e, sizeof(e)) != (ssize_t)sizeof(e))
		e = EIO;
	for (size_t i = 0; !e && i < n; i++)
		if (read(fds[0], &errs[i], sizeof(errs[i])) != (ssize_t)sizeof(errs[i]))
			e = EIO;
	close(fds[0]);
	while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
		;
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}

int pg_priv_drop(const struct pg_priv *p, uint64_t keep, char *err, size_t errlen)
{
	uint64_t eff = 0, prm = 0;
	char had[1024], kept[256];
	int n;

	caps_get(&eff, &prm);
	/* glibc applies these to every thread of the process. */
	if (initgroups(p->user, p->gid) == -1) {
		snprintf(err, errlen, "--user %s: setting supplementary groups: %s", p->user,
		         strerror(errno));
		return -1;
	}
	if (setresgid(p->gid, p->gid, p->gid) == -1 || setresuid(p->uid, p->uid, p->uid) == -1) {
		snprintf(err, errlen, "--user %s: setresgid/setresuid: %s", p->user,
		         strerror(errno));
		return -1;
	}
	if (broadcast_caps(keep & prm, err, errlen))
		return -1;
	n = verify_tasks(p, keep & prm, err, errlen);
	if (n < 0)
		return -1;
	pg_info("privileges dropped: running as %s (uid %u, gid %u) in all %d threads, "
	        "no_new_privs set; capabilities kept: %s; dropped: %s",
	        p->user, (unsigned)p->uid, (unsigned)p->gid, n,
	        pg_priv_caps_name(keep & prm, kept, sizeof(kept)),
	        pg_priv_caps_name(prm & ~keep, had, sizeof(had)));
	return 0;
}

bool pg_priv_bpf_ops_need_cap(const struct pg_priv *p, int map_fd)
{
	static char value[65536]; /* larger than any of our map values */
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};
	int status, key = 0;
	pid_t pid = fork();

	if (pid == -1)
		return true; /* cannot tell: assume the old rule */
	if (pid == 0) {
		/* The child has one thread: these apply to it alone. */
		if (setresgid(p->gid, p->gid, p->gid) || setresuid(p->uid, p->uid, p->uid) ||
		    syscall(SYS_capset, &h, d))
			_exit(2);
		_exit(bpf_map_lookup_elem(map_fd, &key, value) && errno == EPERM ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return true;
	return WEXITSTATUS(status) != 0;
}
