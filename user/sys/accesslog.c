// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "sys/accesslog.h"
#include "lib/names.h"
#include "sys/log.h"

#define RING_SLOTS 4096 /* per worker: ~100 ms of 40k requests/s */

struct ring {
	uint32_t head; /* written by the worker */
	char pad1[60];
	uint32_t tail; /* written by the logger */
	char pad2[60];
	struct pg_alog_rec rec[RING_SLOTS];
} __attribute__((aligned(64)));

struct pg_alog {
	const struct pg_gateway *gw;
	FILE *f;
	struct ring *rings; /* one per worker */
	unsigned nrings;
	pthread_t thread;
	int stop;
	uint64_t dropped;
};

static const char *const outcomes[] = {"ok", "client_abort", "backend_error", "gateway"};

uint64_t pg_alog_dropped(const struct pg_alog *l)
{
	return l ? __atomic_load_n(&l->dropped, __ATOMIC_RELAXED) : 0;
}

void pg_alog_record(struct pg_alog *l, unsigned worker, const struct pg_alog_rec *r)
{
	struct ring *g;
	uint32_t h;

	if (!l || worker >= l->nrings)
		return;
	g = &l->rings[worker];
	h = g->head;
	if (h - __atomic_load_n(&g->tail, __ATOMIC_ACQUIRE) == RING_SLOTS) {
		__atomic_fetch_add(&l->dropped, 1, __ATOMIC_RELAXED);
		return;
	}
	g->rec[h % RING_SLOTS] = *r;
	__atomic_store_n(&g->head, h + 1, __ATOMIC_RELEASE);
}

/* s[0..n) as a JSON string (request text: anything may be in it). */
static void json_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20 || ch >= 0x7f)
			fprintf(f, "\\u%04x", ch); /* bytes, not text: each one kept */
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void write_rec(const struct pg_alog *l, const struct pg_alog_rec *r)
{
	char when[32], backend[PG_ADDR_STRLEN] = "";
	time_t s = (time_t)(r->wall_ms / 1000);
	struct tm tm;

	gmtime_r(&s, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (r->backend)
		pg_backend_name(&l->gw->maps.backends[r->backend], backend, sizeof(backend));
	fprintf(l->f, "{\"time\":\"%s.%03" PRIu64 "Z\",\"request_id\":", when, r->wall_ms % 1000);
	json_str(l->f, r->id, r->id_len);
	fputs(",\"client\":", l->f);
	json_str(l->f, r->client, r->client_len);
	fputs(",\"method\":", l->f);
	json_str(l->f, r->method, r->method_len);
	fputs(",\"path\":", l->f);
	json_str(l->f, r->path, r->path_len);
	if (r->tenant_len) {
		fputs(",\"tenant\":", l->f);
		json_str(l->f, r->tenant, r->tenant_len);
	}
	if (r->used) { /* each figure the engine's, or estimated: listed */
		const char *sep = "";

		fputs(",\"usage\":{", l->f);
		for (unsigned f = 0; f < PG_ACCT_FIGS; f++)
			fprintf(l->f, "%s\"%s\":%" PRIu32, f ? "," : "", pg_acct_fig_names[f],
			        r->use.n[f]);
		fputs(",\"estimated\":[", l->f);
		for (unsigned f = 0; f < PG_ACCT_FIGS; f++)
			if (!(r->use.exact >> f & 1)) {
				fprintf(l->f, "%s\"%s\"", sep, pg_acct_fig_names[f]);
				sep = ",";
			}
		fputs("]}", l->f);
	}
	if (r->tls_version) /* static strings of OpenSSL's: no escape needed */
		fprintf(l->f, ",\"tls_version\":\"%s\",\"tls_cipher\":\"%s\"", r->tls_version,
		        r->tls_cipher ? r->tls_cipher : "");
	if (r->prefill) {
		char pre[PG_ADDR_STRLEN];

		fprintf(l->f, ",\"prefill\":\"%s\"",
		        pg_backend_name(&l->gw->maps.backends[r->prefill], pre, sizeof(pre)));
	}
	fprintf(l->f,
	        ",\"backend\":\"%s\",\"decision\":\"%s\","
	        "\"key_hash\":\"0x%016" PRIx64 "\",\"key_source\":\"%s\",\"status\":%u,"
	        "\"bytes_in\":%" PRIu64 ",\"bytes_out\":%" PRIu64 ",\"route_us\":%u,"
	        "\"queue_us\":%u,\"ttft_us\":%u,\"duration_us\":%u,\"attempts\":%u,"
	        "\"outcome\":\"%s\"}\n",
	        backend, r->backend ? pg_decision_name(r->decision) : "", r->key_hash,
	        pg_key_source_name(r->key_source), r->status, r->bytes_in, r->bytes_out,
	        r->route_us, r->queue_us, r->ttft_us, r->total_us, r->attempts,
	        r->outcome < 4 ? outcomes[r->outcome] : "");
}

static void drain(struct pg_alog *l)
{
	for (unsigned i = 0; i < l->nrings; i++) {
		struct ring *g = &l->rings[i];
		uint32_t t = g->tail, h = __atomic_load_n(&g->head, __ATOMIC_ACQUIRE);

		for (; t != h; t++)
			write_rec(l, &g->rec[t % RING_SLOTS]);
		__atomic_store_n(&g->tail, t, __ATOMIC_RELEASE);
	}
	fflush(l->f);
}

static void *logger_main(void *arg)
{
	const struct timespec tick = {.tv_nsec = 100 * 1000000};
	struct pg_alog *l = arg;

	while (!__atomic_load_n(&l->stop, __ATOMIC_RELAXED)) {
		nanosleep(&tick, NULL);
		drain(l);
	}
	drain(l);
	return NULL;
}

static void alog_free(struct pg_alog *l)
{
	if (l->f)
		fclose(l->f);
	free(l->rings);
	free(l);
}

int pg_alog_start(struct pg_gateway *gw, const char *path, char *err, size_t errlen)
{
	struct pg_alog *l;
	int rc;

	gw->alog = NULL;
	if (!path)
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "--access-log: out of memory");
		return -1;
	}
	l->gw = gw;
	l->nrings = gw->nworkers;
	l->rings = aligned_alloc(64, sizeof(*l->rings) * (l->nrings ? l->nrings : 1));
	if (!l->rings) {
		snprintf(err, errlen, "--access-log: out of memory");
		alog_free(l);
		return -1;
	}
	memset(l->rings, 0, sizeof(*l->rings) * l->nrings);
	l->f = fopen(path, "ae");
	if (!l->f) {
		snprintf(err, errlen, "--access-log %s: %s", path, strerror(errno));
		alog_free(l);
		return PG_ALOG_EFILE;
	}
	rc = pthread_create(&l->thread, NULL, logger_main, l);
	if (rc) {
		snprintf(err, errlen, "--access-log: starting the logger thread: %s", strerror(rc));
		alog_free(l);
		return -1;
	}
	gw->alog = l;
	pg_info("access log: %s (one JSON line per request)", path);
	return 0;
}

void pg_alog_stop(struct pg_gateway *gw)
{
	struct pg_alog *l = gw->alog;

	if (!l)
		return;
	__atomic_store_n(&l->stop, 1, __ATOMIC_RELAXED);
	pthread_join(l->thread, NULL);
	alog_free(l);
	gw->alog = NULL;
}
