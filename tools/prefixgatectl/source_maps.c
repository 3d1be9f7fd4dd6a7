// SPDX-License-Identifier: MIT
/*
 * Snapshots from the BPF maps a gateway pins (source.c picks the source).
 *
 * The maps are opened read-only (BPF_F_RDONLY) and mmapped read-only: this
 * tool can never disturb routing state. Each pool's live ring copy is read
 * through its seqlock exactly as the gateway's workers read it
 * (user/state/maps.c), so a ring rebuilt meanwhile is never counted
 * half-built. What is shown is computed as the gateway computes it for the
 * admin API (a backend's health word: pg_backend_health; a pool's models:
 * the pg_pools map's list), so both sources print the same.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "ctl.h"
#include "router/strategy.h"

/* Seqlock read attempts before giving up (a rebuild takes ~1 ms). */
#define RING_READ_TRIES 1000

enum { M_BACKENDS, M_RINGS, M_STATE, M_POOLS, M_FLOW, NMAPS };

struct ctl_maps {
	int fd[NMAPS];
	const void *map[NMAPS]; /* mmapped, or NULL: read by lookups */
	size_t bytes[NMAPS];
	unsigned npools;       /* pg_state's entries */
	struct pg_ring *ring;  /* one ring copy, read into */
	struct pg_ring *ring2; /* lookup path: the second read of a copy */
	uint32_t state_id;     /* kernel id of pg_state: identifies the gateway run */
	char pin[256];
};

static const struct {
	const char *name;
	uint32_t value_size, entries; /* rings and state: per pool */
} map_def[NMAPS] = {
    [M_BACKENDS] = {"pg_backends", sizeof(struct pg_backend), PG_MAX_BACKENDS},
    [M_RINGS] = {"pg_rings", sizeof(struct pg_ring), PG_RING_COPIES},
    [M_STATE] = {"pg_state", sizeof(struct pg_state), 1},
    [M_POOLS] = {"pg_pools", sizeof(struct pg_pool), PG_MAX_POOLS},
    [M_FLOW] = {"pg_flow", sizeof(struct pg_flow_stats), 1},
};

void ctl_maps_close(struct ctl_maps *m)
{
	if (!m)
		return;
	for (int i = 0; i < NMAPS; i++) {
		if (m->map[i])
			munmap((void *)m->map[i], m->bytes[i]);
		if (m->fd[i] >= 0)
			close(m->fd[i]);
	}
	free(m->ring);
	free(m->ring2);
	free(m);
}

uint32_t ctl_maps_state_id(const struct ctl_maps *m)
{
	return m->state_id;
}

const char *ctl_maps_pin(const struct ctl_maps *m)
{
	return m->pin;
}

/* Open <pin>/<name>, check it is the map this build knows, mmap it. A map
 * that cannot be mmapped is read with bpf_map_lookup_elem instead. */
static int map_open(struct ctl_maps *m, int i, const char *pin, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_obj_get_opts, gopts, .file_flags = BPF_F_RDONLY);
	struct bpf_map_info info = {0};
	uint32_t ilen = sizeof(info);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	bool per_pool = i == M_RINGS || i == M_STATE || i == M_FLOW;
	char path[300];
	void *p;

	snprintf(path, sizeof(path), "%s/%s", pin, map_def[i].name);
	m->fd[i] = bpf_obj_get_opts(path, &gopts);
	if (m->fd[i] < 0) {
		int e = errno;

		if (e == ENOENT)
			snprintf(err, errlen,
			         "no prefixgate maps pinned under %s (no %s there): prefixgate "
			         "is not running, runs with --no-bpf, or uses another "
			         "--bpf-pin-path (give it with --pin-path)",
			         pin, map_def[i].name);
		else
			snprintf(err, errlen, "opening pinned map %s: %s%s", path, strerror(e),
			         e == EPERM || e == EACCES ? " (needs root or CAP_BPF)" : "");
		return -1;
	}
	if (bpf_obj_get_info_by_fd(m->fd[i], &info, &ilen)) {
		snprintf(err, errlen, "%s: reading map info: %s", path, strerror(errno));
		return -1;
	}
	/* Rings and state have one set of entries per model pool; pool 0 (the
	 * default pool, the whole gateway without pools) comes first. */
	if (info.type != BPF_MAP_TYPE_ARRAY || info.key_size != 4 ||
	    info.value_size != map_def[i].value_size ||
	    (!per_pool ? info.max_entries != map_def[i].entries
	               : !info.max_entries || info.max_entries % map_def[i].entries ||
	                     info.max_entries > map_def[i].entries * PG_MAX_POOLS)) {
		snprintf(err, errlen,
		         "%s: not the map this prefixgatectl knows (array %u x %u-byte values "
		         "expected, found type %u, %u x %u): versions differ",
		         path, map_def[i].entries, map_def[i].value_size, info.type,
		         info.max_entries, info.value_size);
		return -1;
	}
	if (i == M_STATE) {
		m->state_id = info.id;
		m->npools = info.max_entries;
	}
	m->bytes[i] = ((size_t)info.value_size * info.max_entries + page - 1) / page * page;
	/* PREFIXGATECTL_NO_MMAP=1 takes the lookup path (so tests cover it) */
	if (!(info.map_flags & BPF_F_MMAPABLE) || getenv("PREFIXGATECTL_NO_MMAP"))
		return 0;
	p = mmap(NULL, m->bytes[i], PROT_READ, MAP_SHARED, m->fd[i], 0);
	if (p != MAP_FAILED)
		m->map[i] = p; /* else read by lookups */
	return 0;
}

int ctl_maps_open(struct ctl_maps **out, const char *pin, char *err, size_t errlen)
{
	struct ctl_maps *m = calloc(1, sizeof(*m));

	if (!m || !(m->ring = malloc(sizeof(*m->ring))) ||
	    !(m->ring2 = malloc(sizeof(*m->ring2)))) {
		snprintf(err, errlen, "out of memory");
		if (m)
			free(m->ring);
		free(m);
		return -1;
	}
	for (int i = 0; i < NMAPS; i++)
		m->fd[i] = -1;
	snprintf(m->pin, sizeof(m->pin), "%s", pin);
	for (int i = 0; i < NMAPS; i++) {
		if (map_open(m, i, pin, err, errlen)) {
			ctl_maps_close(m);
			return -1;
		}
	}
	if (m->npools * PG_RING_COPIES > m->bytes[M_RINGS] / sizeof(struct pg_ring)) {
		snprintf(err, errlen, "%s: pg_rings has fewer copies than pg_state has pools", pin);
		ctl_maps_close(m);
		return -1;
	}
	*out = m;
	return 0;
}

/* Entry key of map i into val (value_size bytes), from the mmapped map or
 * by a lookup. */
static int entry(struct ctl_maps *m, int i, uint32_t key, void *val, char *err, size_t errlen)
{
	if (m->map[i]) {
		memcpy(val, (const char *)m->map[i] + (size_t)key * map_def[i].value_size,
		       map_def[i].value_size);
		return 0;
	}
	if (bpf_map_lookup_elem(m->fd[i], &key, val)) {
		snprintf(err, errlen, "reading %s[%u]: %s", map_def[i].name, key, strerror(errno));
		return -1;
	}
	return 0;
}

static int generation(struct ctl_maps *m, unsigned p, uint64_t *gen, char *err, size_t errlen)
{
	struct pg_state st;

	if (m->map[M_STATE]) {
		*gen =
		    __atomic_load_n(&((const struct pg_state *)m->map[M_STATE])[p].ring_generation,
		                    __ATOMIC_ACQUIRE);
		return 0;
	}
	if (entry(m, M_STATE, p, &st, err, errlen))
		return -1;
	*gen = st.ring_generation;
	return 0;
}

/* Pool p's live ring copy, consistent (its seqlock was even and unchanged
 * across the copy), into m->ring; its generation into *gen. */
static int read_ring(struct ctl_maps *m, unsigned p, uint64_t *gen, char *err, size_t errlen)
{
	for (int t = 0; t < RING_READ_TRIES; t++) {
		uint32_t copy;
		uint64_t s1;

		if (t)
			usleep(100);
		if (generation(m, p, gen, err, errlen))
			return -1;
		copy = p * PG_RING_COPIES + (uint32_t)(*gen & 1);
		if (m->map[M_RINGS]) {
			const struct pg_ring *r = (const struct pg_ring *)m->map[M_RINGS] + copy;

			s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
			if (s1 & 1)
				continue;
			memcpy(m->ring, r, sizeof(*m->ring));
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&r->seq, __ATOMIC_RELAXED) != s1)
				continue;
		} else {
			/* A lookup copies without the seqlock: the copy is whole
			 * if seq was even before it and unchanged after it. */
			if (entry(m, M_RINGS, copy, m->ring, err, errlen))
				return -1;
			s1 = m->ring->seq;
			if ((s1 & 1) || entry(m, M_RINGS, copy, m->ring2, err, errlen))
				continue;
			if (m->ring2->seq != s1)
				continue;
		}
		return 0;
	}
	snprintf(err, errlen, "the live ring kept changing across %d reads", RING_READ_TRIES);
	return -1;
}

/* Pool p: its pg_pools and pg_state entries; its ring's first candidates
 * counted into slots[]. */
static int read_pool(struct ctl_maps *m, unsigned p, struct ctl_pool *c, uint64_t *slots, char *err,
                     size_t errlen)
{
	struct pg_pool pool;
	struct pg_state st;
	uint64_t gen;

	if (entry(m, M_POOLS, p, &pool, err, errlen) || entry(m, M_STATE, p, &st, err, errlen) ||
	    read_ring(m, p, &gen, err, errlen))
		return -1;
	memset(c, 0, sizeof(*c));
	pool.name[sizeof(pool.name) - 1] = 0;
	pool.models[sizeof(pool.models) - 1] = 0;
	pool.paths[sizeof(pool.paths) - 1] = 0;
	snprintf(c->name, sizeof(c->name), "%s", pool.name[0] ? pool.name : "default");
	c->catch_all = pool.flags & PG_POOL_CATCH_ALL;
	c->nmodels = pool.nmodels;
	c->npaths = pool.npaths;
	memcpy(c->models, pool.models, sizeof(c->models));
	memcpy(c->paths, pool.paths, sizeof(c->paths));
	c->strategy = st.strategy;
	c->prefix_length = st.prefix_length;
	c->concurrency_threshold = st.concurrency_threshold;
	c->new_choices = st.ca_choices;
	c->ring_generation = gen;
	c->remapped = (double)st.remapped_ppm / 1e6;
	c->members = st.nbackends;
	for (uint32_t i = 0; i < PG_RING_SLOTS; i++)
		if (m->ring->slot[i][0] < PG_MAX_BACKENDS)
			slots[m->ring->slot[i][0]]++;
	return 0;
}

/* Backend id into *b: the mmapped entry's fields with atomic loads (the
 * workers update them in place), else a lookup. */
static int read_backend(struct ctl_maps *m, unsigned id, struct pg_backend *b, char *err,
                        size_t errlen)
{
	const struct pg_backend *p;

	if (!m->map[M_BACKENDS])
		return entry(m, M_BACKENDS, id, b, err, errlen);
	p = (const struct pg_backend *)m->map[M_BACKENDS] + id;
	b->flags = __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE);
	if (!(b->flags & PG_BACKEND_ACTIVE))
		return 0;
	memcpy(b->addr, p->addr, sizeof(b->addr));
	b->family = p->family;
	b->port = p->port;
	b->epoch = p->epoch;
	b->pool = p->pool;
	b->in_flight = __atomic_load_n(&p->in_flight, __ATOMIC_RELAXED);
	b->down_until_ms = __atomic_load_n(&p->down_until_ms, __ATOMIC_RELAXED);
	b->failures = __atomic_load_n(&p->failures, __ATOMIC_RELAXED);
	for (int d = 0; d < PG_DEC_MAX; d++)
		b->requests[d] = __atomic_load_n(&p->requests[d], __ATOMIC_RELAXED);
	return 0;
}

/* Flow control's counters (pg_flow), summed over the pools, and the
 * default pool's InstanceQueueMs. */
static int read_flow(struct ctl_maps *m, struct ctl_snapshot *s, char *err, size_t errlen)
{
	struct pg_flow_stats *sum = &s->flow;
	struct pg_state st;

	if (entry(m, M_STATE, 0, &st, err, errlen))
		return -1;
	s->have_flow = true;
	s->flow_queue_ms = st.flow_queue_ms;
	memset(sum, 0, sizeof(*sum));
	for (unsigned p = 0; p < m->npools; p++) {
		struct pg_flow_stats f;

		if (entry(m, M_FLOW, p, &f, err, errlen))
			return -1;
		sum->queued += f.queued;
		for (int c = 0; c < PG_FLOW_CLASSES; c++)
			sum->queued_class[c] += f.queued_class[c];
		sum->queued_bytes += f.queued_bytes;
		sum->enqueued += f.enqueued;
		sum->dispatched += f.dispatched;
		sum->wait_ms_total += f.wait_ms_total;
		sum->expired += f.expired;
		sum->late += f.late;
		sum->shed += f.shed;
		sum->refused += f.refused;
		sum->gone += f.gone;
		sum->bypassed += f.bypassed;
	}
	return 0;
}

static int snapshot_once(struct ctl_maps *m, struct ctl_snapshot *s, uint64_t *gens, char *err,
                         size_t errlen)
{
	static uint64_t slots[PG_MAX_BACKENDS];
	uint64_t now_ms;

	memset(slots, 0, sizeof(slots));
	s->taken = ctl_now();
	s->source = CTL_SRC_MAPS;
	s->npools = m->npools;
	for (unsigned p = 0; p < m->npools; p++) {
		if (read_pool(m, p, &s->pool[p], slots, err, errlen))
			return -1;
		gens[p] = s->pool[p].ring_generation;
	}
	if (read_flow(m, s, err, errlen))
		return -1;
	/* same clock as the gateway's pg_now_ms(): CLOCK_MONOTONIC */
	now_ms = (uint64_t)(s->taken * 1000);
	s->n = 0;
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		struct ctl_backend *c = &s->b[s->n];
		struct pg_backend b;
		union pg_sockaddr a;
		char tmp[PG_ADDR_STRLEN];

		if (read_backend(m, id, &b, err, errlen))
			return -1;
		if (!(b.flags & PG_BACKEND_ACTIVE))
			continue;
		memset(c, 0, sizeof(*c));
		c->id = id;
		pg_backend_addr_get(&b, &a);
		snprintf(c->addr, sizeof(c->addr), "%s%s",
		         b.flags & PG_BACKEND_TLS ? PG_TLS_SCHEME : "", pg_addr_format(&a, tmp));
		snprintf(c->health, sizeof(c->health), "%s", pg_backend_health(&b, now_ms));
		c->healthy = pg_backend_healthy(&b, now_ms);
		c->pool = b.pool < m->npools ? b.pool : 0;
		c->in_flight = b.in_flight;
		c->epoch = b.epoch;
		c->failures = b.failures;
		memcpy(c->requests, b.requests, sizeof(c->requests));
		c->ring_slots = (int64_t)slots[id];
		s->n++;
	}
	return 0;
}

/*
 * The rings are read before the backend table. Every membership change
 * rebuilds its pool's ring (a new generation), and a drained member's slot
 * is cleared only after a ring without it was published: so if no
 * generation changed once the table is read, every member of the rings read
 * is in the table read, and the slot shares add up. Otherwise read again.
 */
int ctl_maps_snapshot(struct ctl_maps *m, struct ctl_snapshot *s, char *err, size_t errlen)
{
	uint64_t gens[PG_MAX_POOLS], gen;

	for (int t = 0; t < RING_READ_TRIES; t++) {
		bool same = true;

		if (snapshot_once(m, s, gens, err, errlen))
			return -1;
		for (unsigned p = 0; p < m->npools && same; p++) {
			if (generation(m, p, &gen, err, errlen))
				return -1;
			same = gen == gens[p];
		}
		if (same)
			return 0;
	}
	snprintf(err, errlen, "the ring generation kept changing across %d reads", RING_READ_TRIES);
	return -1;
}

bool ctl_maps_live(struct ctl_maps *m, char *why, size_t len)
{
	struct pg_state st;
	struct timespec ts;
	char err[256];
	uint64_t now;
	int alive;

	if (entry(m, M_STATE, 0, &st, err, sizeof(err))) {
		snprintf(why, len, "%.120s", err);
		return false;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	alive = st.pid && (kill((pid_t)st.pid, 0) == 0 || errno == EPERM);
	switch (pg_state_liveness(&st, now, alive)) {
	case PG_STATE_LIVE:
		return true;
	case PG_STATE_EXITED:
		snprintf(why, len, "the gateway that wrote them exited");
		break;
	default:
		if (!alive)
			snprintf(why, len, "their gateway, pid %u, is not running", st.pid);
		else
			snprintf(why, len, "no heartbeat from their gateway (pid %u) for %.1f s",
			         st.pid, (double)(now - st.heartbeat_ms) / 1000);
	}
	return false;
}
