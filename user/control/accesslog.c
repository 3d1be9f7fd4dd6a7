// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "control/accesslog.h"
#include "control/metrics.h"
#include "sys/log.h"

#define RING_SLOTS 4096 /* per worker: ~100 ms of 40k requests/s */

struct ring {
	uint32_t head; /* written by the worker */
	char pad1[60];
	uint32_t tail; /* written by the logger */
	char pad2[60];
	struct pg_alog_rec rec[RING_SLOTS];
} __attribute__((aligned(64)));

static struct {
	struct pg_gateway *gw;
	FILE *f;
	struct ring *rings;
	unsigned nrings;
	pthread_t thread;
	int stop;
	uint64_t dropped;
} al;

static const char *const sources[] = {"raw", "messages", "header", "prompt_cache_key"};
static const char *const outcomes[] = {"ok", "client_abort", "backend_error", "gateway"};

bool pg_alog_enabled(void)
{
	return al.f != NULL;
}

uint64_t pg_alog_dropped(void)
{
	return __atomic_load_n(&al.dropped, __ATOMIC_RELAXED);
}

void pg_alog_push(unsigned worker, const struct pg_alog_rec *r)
{
	struct ring *g;
	uint32_t h;

	if (!al.f || worker >= al.nrings)
		return;
	g = &al.rings[worker];
	h = g->head;
	if (h - __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE) == RING_SLOTS) {
		__atomic_fetch_add(&al.dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	g->rec[h % RING_SLOTS] = *r;
	__atomic_store_n(&g->head, h + 1, __ATOMIC_RELEASE);
}

static void write_rec(const struct pg_alog_rec *r)
{
	char when[32], backend[32] = "";
	time_t s = (time_t)(r->wall_ms / 1000);
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (r->backend)
		pg_backend_name(&al.gw->maps.backends[r->backend], backend, sizeof(backend));
	fprintf(al.f,
		"{\"time\":\"%s.%03" PRIu64 "Z\",\"backend\":\"%s\",\"decision\":\"%s\","
		"\"key_hash\":\"0x%016" PRIx64 "\",\"key_source\":\"%s\",\"status\":%u,"
		"\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64 ",\"route_us\":%u,"
		"\"duration_us\":%u,\"attempts\":%u,\"outcome\":\"%s\"}\n",
		when, r->wall_ms % 1000, backend,
		r->backend ? pg_decision_name(r->decision) : "",
		r->key_hash, r->key_source < 4 ? sources[r->key_source] : "", r->status,
		r->bytes_in, r->bytes_out, r->route_us, r->total_us, r->attempts,
		r->outcome < 4 ? outcomes[r->outcome] : "");
}

static void drain(void)
{
	for (unsigned i = 0; i < al.nrings; i++) {
		struct ring *g = &al.rings[i];
		uint32_t t = g->tail, h = __atomic_load_n(&g->head, __ATOMIC_ACQUIRE);

		for (; t != h; t++)
			write_rec(&g->rec[t % RING_SLOTS]);
		__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
	}
	fflush(al.f);
}

static void *logger_main(void *arg)
{
	const struct timespec tick = {.tv_nsec = 100 * 1000000};

	(void)arg;
	while (!__atomic_load_n(&al.stop, __ATOMIC_RELAXED)) {
		nanosleep(&tick, NULL);
		drain();
	}
	drain();
	return NULL;
}

int pg_alog_start(struct pg_gateway *gw, const char *path, char *err, size_t errlen)
{
	int rc;

	if (!path)
		return 0;
	al.gw = gw;
	al.nrings = gw->nworkers;
	al.rings = aligned_alloc(64, sizeof(*al.rings) * al.nrings);
	if (!al.rings) {
		snprintf(err, errlen, "--access-log: out of memory");
		return -1;
	}
	memset(al.rings, 0, sizeof(*al.rings) * al.nrings);
	al.f = fopen(path, "ae");
	if (!al.f) {
		snprintf(err, errlen, "--access-log %s: %s", path, strerror(errno));
		free(al.rings);
		al.rings = NULL;
		return -1;
	}
	rc = pthread_create(&al.thread, NULL, logger_main, NULL);
	if (rc) {
		snprintf(err, errlen, "--access-log: starting the logger thread: %s", strerror(rc));
		fclose(al.f);
		al.f = NULL;
		free(al.rings);
		al.rings = NULL;
		return -1;
	}
	pg_info("access log: %s (one JSON line per request)", path);
	return 0;
}

void pg_alog_stop(void)
{
	if (!al.f)
		return;
	__atomic_store_n(&al.stop, 1, __ATOMIC_RELAXED);
	pthread_join(al.thread, NULL);
	fclose(al.f);
	al.f = NULL;
	free(al.rings);
	al.rings = NULL;
}
