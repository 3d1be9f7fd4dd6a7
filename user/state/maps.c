// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "sys/log.h"
#include "state/maps.h"
#include "lib/ring.h"
#include "prefixgate.skel.h"

#define BPFFS "/sys/fs/bpf"

static size_t map_bytes(size_t value_size, size_t entries)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	/* BPF array maps lay values out at 8-byte strides from the start of the
	 * mmapped area; our structs are multiples of 8. */
	return (value_size * entries + page - 1) / page * page;
}

static uint64_t pg_maps_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* libbpf's warnings while the maps are loaded are held back: a load
 * refused for want of privilege (the fall-back to shared memory) is said
 * once, in our words; any other failure shows them (open_bpf). */
static struct {
	bool hold;
	unsigned n;
	char line[4][256];
} held;

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[512];
	const char *p = line;

	if (level == LIBBPF_DEBUG && pg_log_level < PG_LOG_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	if (!strncmp(p, "libbpf: ", 8))
		p += 8; /* libbpf names itself in most lines: once is enough */
	if (level == LIBBPF_WARN && held.hold) {
		if (held.n < 4)
			snprintf(held.line[held.n++], sizeof(held.line[0]), "%.255s", p);
		level = LIBBPF_DEBUG;
	}
	pg_log(level == LIBBPF_WARN ? PG_LOG_WARN : PG_LOG_DEBUG, "libbpf: %s", p);
	return 0;
}

/* bpffs must hold the pin path; mount it at /sys/fs/bpf if nothing is there
 * (a fresh machine), as a privileged daemon may. */
static int ensure_bpffs(const char *pin_path, char *err, size_t errlen)
{
	struct statfs st;

	if (strncmp(pin_path, BPFFS "/", sizeof(BPFFS)) != 0)
		return 0; /* somewhere else: the user's business */
	if (statfs(BPFFS, &st) == 0 && st.f_type == BPF_FS_MAGIC)
		return 0;
	if (mount("bpf", BPFFS, "bpf", 0, NULL) == -1) {
		snprintf(err, errlen, "bpffs is not mounted at %s and mounting it failed: %s",
		         BPFFS, strerror(errno));
		return -errno;
	}
	pg_info("mounted bpffs at %s", BPFFS);
	return 0;
}

static int lock_pin_path(struct pg_maps *m, const char *pin_path, char *err, size_t errlen)
{
	if (mkdir(pin_path, 0700) == -1 && errno != EEXIST) {
		snprintf(err, errlen, "--bpf-pin-path %s: %s", pin_path, strerror(errno));
		return -errno;
	}
	m->lock_fd = open(pin_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (m->lock_fd == -1) {
		snprintf(err, errlen, "--bpf-pin-path %s: %s", pin_path, strerror(errno));
		return -errno;
	}
	if (flock(m->lock_fd, LOCK_EX | LOCK_NB) == -1) {
		int e = errno;

		snprintf(err, errlen,
		         "--bpf-pin-path %s is in use by another running prefixgate "
		         "(each gateway needs its own pin path)",
		         pin_path);
		close(m->lock_fd);
		m->lock_fd = -1;
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	return 0;
}

static void *map_mmap(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Remove the pins of our maps under pin_path (after a version whose maps no
 * longer match; we hold the pin path's lock, so nobody uses them). */
static void unpin_stale(struct prefixgate_bpf *skel, const char *pin_path)
{
	struct bpf_map *map;
	char path[512];

	bpf_object__for_each_map(map, skel->obj)
	{
		snprintf(path, sizeof(path), "%s/%s", pin_path, bpf_map__name(map));
		if (unlink(path) == 0)
			pg_warn("removed %s: pinned by another prefixgate version, its layout "
			        "differs from this one's",
			        path);
	}
}

/* Open and load the skeleton, creating the maps or reusing those pinned
 * under pin_path. */
static int load_skel(struct pg_maps *m, const char *pin_path, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pin_path);
	int rc = 0;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (m->skel) {
			unpin_stale(m->skel, pin_path);
			prefixgate_bpf__destroy(m->skel);
		}
		m->skel = prefixgate_bpf__open_opts(&opts);
		if (!m->skel) {
			rc = -errno;
			snprintf(err, errlen, "opening the BPF object failed: %s", strerror(errno));
			return rc;
		}
		/* A pinned index of another size fails to load: replaced below. */
		bpf_map__set_max_entries(m->skel->maps.pg_cache_index, m->ca_slots);
		/* Likewise rings and state of another pool count. */
		bpf_map__set_max_entries(m->skel->maps.pg_rings, PG_RING_COPIES * m->npools);
		bpf_map__set_max_entries(m->skel->maps.pg_state, m->npools);
		bpf_map__set_max_entries(m->skel->maps.pg_flow, m->npools);
		rc = prefixgate_bpf__load(m->skel);
		/* Only a layout mismatch is worth a second try. */
		if (!rc || rc == -EPERM || rc == -EACCES)
			break;
	}
	if (rc)
		snprintf(err, errlen, "creating BPF maps under %s failed: %s%s", pin_path,
		         strerror(-rc),
		         rc == -EPERM || rc == -EACCES
		             ? " (needs root or CAP_BPF; --no-bpf runs without)"
		             : "");
	return rc;
}

static int open_bpf(struct pg_maps *m, const char *pin_path, char *err, size_t errlen)
{
	struct prefixgate_bpf *skel;
	char path[512];
	bool reused;
	int rc;

	libbpf_set_print(libbpf_log);
	rc = ensure_bpffs(pin_path, err, errlen);
	if (rc)
		return rc;
	rc = lock_pin_path(m, pin_path, err, errlen);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/pg_state", pin_path);
	reused = access(path, F_OK) == 0;
	held.hold = true;
	held.n = 0;
	rc = load_skel(m, pin_path, err, errlen);
	held.hold = false;
	if (rc && rc != -EPERM && rc != -EACCES)
		for (unsigned i = 0; i < held.n; i++)
			pg_warn("libbpf: %s", held.line[i]);
	if (rc)
		return rc;
	skel = m->skel;
	if (reused)
		pg_info("reusing the maps pinned at %s by a previous run; their counts are reset",
		        pin_path);
	m->backends = map_mmap(bpf_map__fd(skel->maps.pg_backends),
	                       map_bytes(sizeof(struct pg_backend), PG_MAX_BACKENDS));
	m->rings = map_mmap(bpf_map__fd(skel->maps.pg_rings),
	                    map_bytes(sizeof(struct pg_ring), PG_RING_COPIES * m->npools));
	m->state = map_mmap(bpf_map__fd(skel->maps.pg_state),
	                    map_bytes(sizeof(struct pg_state), m->npools));
	m->pools = map_mmap(bpf_map__fd(skel->maps.pg_pools),
	                    map_bytes(sizeof(struct pg_pool), PG_MAX_POOLS));
	m->flow = map_mmap(bpf_map__fd(skel->maps.pg_flow),
	                   map_bytes(sizeof(struct pg_flow_stats), m->npools));
	m->ca = map_mmap(bpf_map__fd(skel->maps.pg_cache_index),
	                 map_bytes(sizeof(struct pg_ca_slot), m->ca_slots));
	if (!m->backends || !m->rings || !m->state || !m->ca || !m->pools || !m->flow) {
		rc = -errno;
		snprintf(err, errlen, "mmap of a BPF map failed: %s", strerror(errno));
		return rc;
	}
	return 0;
}

static int open_shm(struct pg_maps *m, char *err, size_t errlen)
{
	const int prot = PROT_READ | PROT_WRITE, fl = MAP_SHARED | MAP_ANONYMOUS;

	m->backends =
	    mmap(NULL, map_bytes(sizeof(struct pg_backend), PG_MAX_BACKENDS), prot, fl, -1, 0);
	m->rings = mmap(NULL, map_bytes(sizeof(struct pg_ring), PG_RING_COPIES * m->npools), prot,
	                fl, -1, 0);
	m->state = mmap(NULL, map_bytes(sizeof(struct pg_state), m->npools), prot, fl, -1, 0);
	m->ca = mmap(NULL, map_bytes(sizeof(struct pg_ca_slot), m->ca_slots), prot, fl, -1, 0);
	m->pools = mmap(NULL, map_bytes(sizeof(struct pg_pool), PG_MAX_POOLS), prot, fl, -1, 0);
	m->flow = mmap(NULL, map_bytes(sizeof(struct pg_flow_stats), m->npools), prot, fl, -1, 0);
	if (m->backends == MAP_FAILED || m->rings == MAP_FAILED || m->state == MAP_FAILED ||
	    m->ca == MAP_FAILED || m->pools == MAP_FAILED || m->flow == MAP_FAILED) {
		snprintf(err, errlen, "shared memory: %s", strerror(errno));
		m->backends = NULL;
		m->rings = NULL;
		m->state = NULL;
		m->ca = NULL;
		m->pools = NULL;
		m->flow = NULL;
		return -ENOMEM;
	}
	return 0;
}

int pg_maps_open(struct pg_maps *m, bool use_bpf, const char *pin_path, uint32_t ca_slots,
                 char *err, size_t errlen)
{
	return pg_maps_open_pools(m, use_bpf, pin_path, ca_slots, 1, err, errlen);
}

int pg_maps_open_pools(struct pg_maps *m, bool use_bpf, const char *pin_path, uint32_t ca_slots,
                       unsigned npools, char *err, size_t errlen)
{
	int rc;

	memset(m, 0, sizeof(*m));
	m->lock_fd = -1;
	m->npools = npools >= 1 && npools <= PG_MAX_POOLS ? npools : 1;
	m->ca_slots = ca_slots ? ca_slots : PG_CA_SLOTS_MIN;
	snprintf(m->pin_path, sizeof(m->pin_path), "%s", pin_path);
	m->bpf = use_bpf;
	rc = use_bpf ? open_bpf(m, pin_path, err, errlen) : open_shm(m, err, errlen);
	if (rc) {
		pg_maps_close(m);
		return rc;
	}
	/* We hold the pin path alone: whatever a previous run left is stale. */
	memset(m->backends, 0, sizeof(struct pg_backend) * PG_MAX_BACKENDS);
	memset(m->rings, 0, sizeof(struct pg_ring) * PG_RING_COPIES * m->npools);
	memset(m->state, 0, sizeof(struct pg_state) * m->npools);
	memset(m->pools, 0, sizeof(struct pg_pool) * PG_MAX_POOLS);
	memset(m->ca, 0, sizeof(struct pg_ca_slot) * m->ca_slots);
	memset(m->flow, 0, sizeof(struct pg_flow_stats) * m->npools);
	m->state->ca_slots = m->ca_slots;
	m->state->heartbeat_ms = pg_maps_now_ms();
	m->state->pid = (__u32)getpid(); /* prefixgatectl: a live gateway (prefixgate.h) */
	return 0;
}

void pg_maps_close(struct pg_maps *m)
{
	if (m->backends)
		munmap(m->backends, map_bytes(sizeof(struct pg_backend), PG_MAX_BACKENDS));
	if (m->rings)
		munmap(m->rings, map_bytes(sizeof(struct pg_ring), PG_RING_COPIES * m->npools));
	if (m->state) {
		/* The maps outlive us: say that no gateway writes them now. */
		__atomic_store_n(&m->state->pid, 0, __ATOMIC_RELEASE);
		munmap(m->state, map_bytes(sizeof(struct pg_state), m->npools));
	}
	if (m->pools)
		munmap(m->pools, map_bytes(sizeof(struct pg_pool), PG_MAX_POOLS));
	m->pools = NULL;
	if (m->flow)
		munmap(m->flow, map_bytes(sizeof(struct pg_flow_stats), m->npools));
	m->flow = NULL;
	if (m->ca)
		munmap(m->ca, map_bytes(sizeof(struct pg_ca_slot), m->ca_slots));
	m->ca = NULL;
	m->backends = NULL;
	m->rings = NULL;
	m->state = NULL;
	if (m->skel) {
		/* The pins stay: bpftool can still read the last state, and the
		 * next run on this pin path reuses the maps (resetting them). */
		prefixgate_bpf__destroy(m->skel);
		m->skel = NULL;
	}
	if (m->lock_fd != -1) {
		close(m->lock_fd);
		m->lock_fd = -1;
	}
}

int pg_maps_state_fd(const struct pg_maps *m)
{
	return m->skel ? bpf_map__fd(m->skel->maps.pg_state) : -1;
}

size_t pg_maps_pool_candidates(const struct pg_maps *m, unsigned pool, uint64_t key_hash,
                               uint16_t out[PG_RING_CANDIDATES])
{
	const struct pg_state *st = &m->state[pool];
	const struct pg_ring *rings = &m->rings[(size_t)pool * PG_RING_COPIES];

	for (;;) {
		uint64_t gen = __atomic_load_n(&st->ring_generation, __ATOMIC_ACQUIRE);
		const struct pg_ring *r = &rings[gen & 1];
		uint64_t s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
		size_t n;

		if (s1 & 1)
			continue; /* being rewritten: gen is about to change */
		n = pg_ring_candidates(r, key_hash, out);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->seq, __ATOMIC_RELAXED) == s1)
			return n;
	}
}

struct pg_ring *pg_maps_pool_ring_begin(struct pg_maps *m, unsigned pool)
{
	uint64_t gen = __atomic_load_n(&m->state[pool].ring_generation, __ATOMIC_RELAXED);
	struct pg_ring *r = &m->rings[(size_t)pool * PG_RING_COPIES + ((gen + 1) & 1)];

	__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELAXED); /* odd: being written */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return r;
}

void pg_maps_pool_ring_publish(struct pg_maps *m, unsigned pool, struct pg_ring *r)
{
	uint64_t gen = __atomic_load_n(&m->state[pool].ring_generation, __ATOMIC_RELAXED) + 1;

	r->generation = gen;
	__atomic_store_n(&r->seq, r->seq + 1, __ATOMIC_RELEASE); /* even: complete */
	__atomic_store_n(&m->state[pool].ring_generation, gen, __ATOMIC_RELEASE);
}

const struct pg_ring *pg_maps_pool_live_ring(const struct pg_maps *m, unsigned pool)
{
	return &m->rings[(size_t)pool * PG_RING_COPIES +
	                 (__atomic_load_n(&m->state[pool].ring_generation, __ATOMIC_ACQUIRE) & 1)];
}
