// SPDX-License-Identifier: MIT
/*
 * Snapshots of a running gateway, from its pinned BPF maps or its admin API.
 *
 * The maps are opened read-only (BPF_F_RDONLY) and mmapped read-only: this
 * tool can never disturb routing state. The live ring copy is read through
 * its seqlock exactly as the gateway's workers read it (user/state/maps.c), so a
 * ring rebuilt meanwhile is never counted half-built.
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include "config/config.h"
#include "ctl.h"
#include "lib/names.h"
#include "lib/json.h"

/* Seqlock read attempts before giving up (a rebuild takes ~1 ms). */
#define RING_READ_TRIES 1000

#define NMAPS 4

struct ctl_maps {
	int fd[NMAPS]; /* pg_backends, pg_rings, pg_state, pg_flow */
	const struct pg_backend *backends;
	const struct pg_ring *rings;
	const struct pg_state *state;
	const struct pg_flow_stats *flow;
	uint32_t npools; /* entries of pg_flow */
	size_t bytes[NMAPS];
	struct pg_ring *ring_copy; /* lookup fallback only */
	uint32_t state_id;         /* kernel id of pg_state: identifies the gateway run */
	char pin[256];
};

static const struct {
	const char *name;
	uint32_t value_size, entries;
} map_def[NMAPS] = {
    {"pg_backends", sizeof(struct pg_backend), PG_MAX_BACKENDS},
    {"pg_rings", sizeof(struct pg_ring), PG_RING_COPIES},
    {"pg_state", sizeof(struct pg_state), 1},
    {"pg_flow", sizeof(struct pg_flow_stats), 1},
};

double ctl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void maps_close(struct ctl_maps *m)
{
	const void *p[NMAPS] = {m->backends, m->rings, m->state, m->flow};

	for (int i = 0; i < NMAPS; i++) {
		if (p[i])
			munmap((void *)p[i], m->bytes[i]);
		if (m->fd[i] >= 0)
			close(m->fd[i]);
	}
	free(m->ring_copy);
	free(m);
}

/* Open <pin>/<name>, check it is the map this build knows, mmap it. A map
 * that cannot be mmapped is read with bpf_map_lookup_elem instead. */
static int map_open(struct ctl_maps *m, int i, const char *pin, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_obj_get_opts, gopts, .file_flags = BPF_F_RDONLY);
	struct bpf_map_info info = {0};
	uint32_t ilen = sizeof(info);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
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
	    (i == 0 ? info.max_entries != map_def[i].entries
	            : info.max_entries % map_def[i].entries ||
	                  info.max_entries > map_def[i].entries * PG_MAX_POOLS)) {
		snprintf(err, errlen,
		         "%s: not the map this prefixgatectl knows (array %u x %u-byte values "
		         "expected, found type %u, %u x %u): versions differ",
		         path, map_def[i].entries, map_def[i].value_size, info.type,
		         info.max_entries, info.value_size);
		return -1;
	}
	if (i == 2)
		m->state_id = info.id;
	if (i == 3)
		m->npools = info.max_entries;
	m->bytes[i] = ((size_t)info.value_size * info.max_entries + page - 1) / page * page;
	/* PREFIXGATECTL_NO_MMAP=1 takes the lookup path (so tests cover it) */
	if (!(info.map_flags & BPF_F_MMAPABLE) || getenv("PREFIXGATECTL_NO_MMAP"))
		return 0;
	p = mmap(NULL, m->bytes[i], PROT_READ, MAP_SHARED, m->fd[i], 0);
	if (p == MAP_FAILED)
		return 0; /* read by lookups */
	if (i == 0)
		m->backends = p;
	else if (i == 1)
		m->rings = p;
	else if (i == 2)
		m->state = p;
	else
		m->flow = p;
	return 0;
}

static int lookup(struct ctl_maps *m, int i, uint32_t key, void *val, char *err, size_t errlen)
{
	if (bpf_map_lookup_elem(m->fd[i], &key, val)) {
		snprintf(err, errlen, "reading %s[%u]: %s", map_def[i].name, key, strerror(errno));
		return -1;
	}
	return 0;
}

/* The live ring copy, consistent (its seqlock was even and unchanged across
 * the copy), into *out. */
static int read_ring(struct ctl_maps *m, uint64_t *gen_io, struct pg_ring *out, char *err,
                     size_t errlen)
{
	struct pg_state st;

	for (int t = 0; t < RING_READ_TRIES; t++) {
		uint64_t gen, s1;

		if (t)
			usleep(100);
		if (m->state) {
			gen = __atomic_load_n(&m->state->ring_generation, __ATOMIC_ACQUIRE);
		} else {
			if (lookup(m, 2, 0, &st, err, errlen))
				return -1;
			gen = st.ring_generation;
		}
		if (m->rings) {
			const struct pg_ring *r = &m->rings[gen & 1];

			s1 = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
			if (s1 & 1)
				continue;
			memcpy(out, r, sizeof(*out));
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (__atomic_load_n(&r->seq, __ATOMIC_RELAXED) != s1)
				continue;
		} else {
			/* A lookup copies without the seqlock: the copy is whole
			 * if seq was even before it and unchanged after it. */
			if (lookup(m, 1, (uint32_t)(gen & 1), out, err, errlen))
				return -1;
			s1 = out->seq;
			if (s1 & 1)
				continue;
			if (lookup(m, 1, (uint32_t)(gen & 1), m->ring_copy, err, errlen))
				return -1;
			if (m->ring_copy->seq != s1)
				continue;
		}
		*gen_io = gen;
		return 0;
	}
	snprintf(err, errlen, "the live ring kept changing across %d reads", RING_READ_TRIES);
	return -1;
}

/* Flow control's counters, summed over the pools. */
static int read_flow(struct ctl_maps *m, struct pg_flow_stats *sum, char *err, size_t errlen)
{
	memset(sum, 0, sizeof(*sum));
	for (uint32_t p = 0; p < m->npools; p++) {
		struct pg_flow_stats f;

		if (m->flow)
			memcpy(&f, &m->flow[p], sizeof(f));
		else if (lookup(m, 3, p, &f, err, errlen))
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

static int snapshot_once(struct ctl_maps *m, struct ctl_snapshot *s, char *err, size_t errlen)
{
	static struct pg_ring ring; /* 512 KiB: not on the stack */
	struct pg_backend b;
	struct pg_state st;
	uint64_t gen = 0, slots[PG_MAX_BACKENDS] = {0};

	if (m->state)
		memcpy(&st, m->state, sizeof(st));
	else if (lookup(m, 2, 0, &st, err, errlen))
		return -1;
	if (read_ring(m, &gen, &ring, err, errlen))
		return -1;
	s->taken = ctl_now();
	s->source = CTL_SRC_MAPS;
	s->have_routing = true;
	s->strategy = st.strategy;
	s->prefix_length = st.prefix_length;
	s->concurrency_threshold = st.concurrency_threshold;
	s->new_choices = st.ca_choices;
	s->have_ring = s->have_ring_members = true;
	s->ring_generation = gen;
	s->ring_members = ring.nbackends;
	s->remapped = (double)st.remapped_ppm / 1e6;
	s->have_flow = true;
	s->flow_queue_ms = st.flow_queue_ms;
	if (read_flow(m, &s->flow, err, errlen))
		return -1;
	for (uint32_t i = 0; i < PG_RING_SLOTS; i++)
		if (ring.slot[i][0] < PG_MAX_BACKENDS)
			slots[ring.slot[i][0]]++;
	s->n = 0;
	for (unsigned id = 1; id < PG_MAX_BACKENDS; id++) {
		struct ctl_backend *c = &s->b[s->n];
		union pg_sockaddr a;

		if (m->backends) {
			const struct pg_backend *p = &m->backends[id];

			b.flags = __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE);
			if (!(b.flags & PG_BACKEND_ACTIVE))
				continue;
			memcpy(b.addr, p->addr, sizeof(b.addr));
			b.family = p->family;
			b.port = p->port;
			b.epoch = p->epoch;
			b.in_flight = __atomic_load_n(&p->in_flight, __ATOMIC_RELAXED);
			b.down_until_ms = __atomic_load_n(&p->down_until_ms, __ATOMIC_RELAXED);
			b.failures = __atomic_load_n(&p->failures, __ATOMIC_RELAXED);
			for (int d = 0; d < PG_DEC_MAX; d++)
				b.requests[d] = __atomic_load_n(&p->requests[d], __ATOMIC_RELAXED);
		} else {
			if (lookup(m, 0, id, &b, err, errlen))
				return -1;
			if (!(b.flags & PG_BACKEND_ACTIVE))
				continue;
		}
		memset(c, 0, sizeof(*c));
		c->id = id;
		pg_backend_addr_get(&b, &a);
		pg_addr_format(&a, c->addr);
		c->draining = b.flags & PG_BACKEND_DRAINING;
		/* same clock as the gateway's pg_now_ms(): CLOCK_MONOTONIC */
		c->down = (b.flags & PG_BACKEND_DOWN) && s->taken * 1000 < (double)b.down_until_ms;
		c->in_flight = b.in_flight;
		c->epoch = b.epoch;
		c->failures = b.failures;
		memcpy(c->requests, b.requests, sizeof(c->requests));
		c->ring_slots = (int64_t)slots[id];
		s->n++;
	}
	return 0;
}

static int live_generation(struct ctl_maps *m, uint64_t *gen, char *err, size_t errlen)
{
	struct pg_state st;

	if (m->state) {
		*gen = __atomic_load_n(&m->state->ring_generation, __ATOMIC_ACQUIRE);
		return 0;
	}
	if (lookup(m, 2, 0, &st, err, errlen))
		return -1;
	*gen = st.ring_generation;
	return 0;
}

/*
 * The ring is read before the backend table. Every membership change
 * rebuilds the ring (a new generation), and a drained member's slot is
 * cleared only after a ring without it was published: so if the generation
 * is unchanged once the table is read, every member of the ring copy read is
 * in the table read, and the slot shares add up. Otherwise read again.
 */
static int maps_snapshot(struct ctl_maps *m, struct ctl_snapshot *s, char *err, size_t errlen)
{
	uint64_t gen;

	for (int t = 0; t < RING_READ_TRIES; t++) {
		if (snapshot_once(m, s, err, errlen) || live_generation(m, &gen, err, errlen))
			return -1;
		if (gen == s->ring_generation)
			return 0;
	}
	snprintf(err, errlen, "the ring generation kept changing across %d reads", RING_READ_TRIES);
	return -1;
}

/* ---- sources ---------------------------------------------------------------- */

static int maps_open(struct ctl_source *s, const char *pin, char *err, size_t errlen)
{
	struct ctl_maps *m = calloc(1, sizeof(*m));

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	m->fd[0] = m->fd[1] = m->fd[2] = m->fd[3] = -1;
	snprintf(m->pin, sizeof(m->pin), "%s", pin);
	for (int i = 0; i < NMAPS; i++) {
		if (map_open(m, i, pin, err, errlen)) {
			maps_close(m);
			return -1;
		}
	}
	if (!m->rings && !(m->ring_copy = malloc(sizeof(*m->ring_copy)))) {
		snprintf(err, errlen, "out of memory");
		maps_close(m);
		return -1;
	}
	s->maps = m;
	s->kind = CTL_SRC_MAPS;
	return 0;
}

/* Does a live gateway write the maps (prefixgate.h)? Else why not. */
static bool maps_live(struct ctl_maps *m, char *why, size_t len)
{
	struct pg_state st;
	struct timespec ts;
	char err[256];
	uint64_t now;
	int alive;

	if (m->state)
		memcpy(&st, m->state, sizeof(st));
	else if (lookup(m, 2, 0, &st, err, sizeof(err))) {
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

int ctl_source_open(struct ctl_source *s, const struct ctl_opts *o, char *err, size_t errlen)
{
	char merr[1024] = "", aerr[512];

	memset(s, 0, sizeof(*s));
	s->o = o;
	if (o->source != CTL_SRC_API) {
		if (!maps_open(s, o->pin_path, merr, sizeof(merr))) {
			if (maps_live(s->maps, s->stale_why, sizeof(s->stale_why)))
				return 0;
			/* Left behind by a gateway that is gone: a live one's API
			 * says more (auto), else they are shown as stale. */
			if (o->source == CTL_SRC_AUTO && !ctl_api_check(o, aerr, sizeof(aerr))) {
				fprintf(
				    stderr,
				    "prefixgatectl: the maps pinned at %s are stale (%s); using "
				    "the admin API at %s\n",
				    o->pin_path, s->stale_why, o->admin);
				ctl_source_close(s);
				s->kind = CTL_SRC_API;
				s->stale_why[0] = '\0';
				return 0;
			}
			s->stale = true;
			fprintf(stderr, "prefixgatectl: the maps pinned at %s are stale (%s)%s%s\n",
			        o->pin_path, s->stale_why,
			        o->source == CTL_SRC_AUTO ? "; and the admin API: " : "",
			        o->source == CTL_SRC_AUTO ? aerr : "");
			return 0;
		}
		if (o->source == CTL_SRC_MAPS) {
			snprintf(err, errlen, "%s", merr);
			return -1;
		}
	}
	if (ctl_api_check(o, aerr, sizeof(aerr))) {
		if (merr[0])
			snprintf(err, errlen, "%s; and the admin API fallback failed: %s", merr,
			         aerr);
		else
			snprintf(err, errlen, "%s", aerr);
		return -1;
	}
	if (merr[0])
		fprintf(stderr, "prefixgatectl: %s; using the admin API at %s\n", merr, o->admin);
	s->kind = CTL_SRC_API;
	return 0;
}

void ctl_source_close(struct ctl_source *s)
{
	if (s->maps)
		maps_close(s->maps);
	s->maps = NULL;
}

int ctl_source_check(struct ctl_source *s, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_obj_get_opts, gopts, .file_flags = BPF_F_RDONLY);
	struct bpf_map_info info = {0};
	uint32_t ilen = sizeof(info);
	char path[300];
	int fd, rc = 0;

	if (s->kind != CTL_SRC_MAPS)
		return 0;
	snprintf(path, sizeof(path), "%s/pg_state", s->maps->pin);
	fd = bpf_obj_get_opts(path, &gopts);
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &ilen) || info.id != s->maps->state_id) {
		snprintf(err, errlen, "prefixgate %s: the maps under %s are gone or were replaced",
		         fd < 0 && errno == ENOENT ? "stopped" : "restarted", s->maps->pin);
		rc = -1;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

int ctl_snapshot_take(struct ctl_source *s, struct ctl_snapshot *snap, char *err, size_t errlen)
{
	memset(snap, 0, sizeof(*snap));
	if (s->kind == CTL_SRC_MAPS) {
		snap->stale = s->stale;
		snprintf(snap->stale_why, sizeof(snap->stale_why), "%s",
		         s->stale ? s->stale_why : "");
		return maps_snapshot(s->maps, snap, err, errlen);
	}
	return ctl_api_snapshot(s->o, snap, err, errlen);
}
