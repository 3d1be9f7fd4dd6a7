/* SPDX-License-Identifier: MIT */
/*
 * Access log (--access-log FILE): one JSON line per request. Workers never
 * write the file: each pushes a fixed-size record into its own
 * single-producer ring (a few stores, no lock, no syscall); a logger thread
 * drains the rings every 100 ms, formats and appends. A full ring drops the
 * record and counts it (prefixgate_access_log_dropped_total): the request
 * path never waits for a disk.
 */
#ifndef PG_ACCESSLOG_H
#define PG_ACCESSLOG_H

#include <stdbool.h>
#include <stdint.h>
#include "gateway.h"
#include "lib/account.h"

enum pg_alog_outcome {
	PG_ALOG_OK = 0,            /* the backend's whole response was forwarded */
	PG_ALOG_CLIENT_ABORT = 1,  /* the client went away first */
	PG_ALOG_BACKEND_ERROR = 2, /* the backend failed mid-response */
	PG_ALOG_GATEWAY = 3,       /* answered by the gateway (4xx/5xx of its own) */
};

/* Text fields of a record, cut to these sizes (bytes). */
#define PG_ALOG_METHOD 16
#define PG_ALOG_PATH   160
#define PG_ALOG_CLIENT 46
#define PG_ALOG_ID     128 /* PG_REQUEST_ID_MAX (forward.h) */

struct pg_alog_rec {
	uint64_t wall_ms; /* request start, CLOCK_REALTIME */
	uint64_t key_hash;
	uint64_t bytes_in;  /* request bytes sent to the backend */
	uint64_t bytes_out; /* response bytes sent to the client, spliced ones too */
	uint32_t route_us;  /* first byte of the request -> backend chosen */
	uint32_t total_us;  /* first byte of the request -> its end */
	uint32_t ttft_us;   /* first byte of the request -> first response byte
	                     * from the backend (0: none came) */
	uint32_t queue_us;  /* waited in the gateway (flow control; 0: not) */
	uint16_t status;    /* response status (0: none was sent) */
	uint16_t backend;   /* backend id (0: none) */
	uint16_t prefill;   /* prefill/decode: its prefill instance's id (0: none) */
	uint8_t decision;   /* enum pg_decision */
	uint8_t key_source; /* enum pg_key_source */
	uint8_t outcome;    /* enum pg_alog_outcome */
	uint8_t attempts;
	/* method, path (target without its query: queries can carry secrets),
	 * client address, X-Request-Id; each *_len bytes of its array */
	uint8_t method_len, path_len, client_len, id_len, tenant_len;
	char method[PG_ALOG_METHOD];
	char path[PG_ALOG_PATH];
	char client[PG_ALOG_CLIENT];
	char id[PG_ALOG_ID];
	char tenant[24]; /* flow control's label of its tenant (lib/flow.h); never a token */
	/* An instance answered: the tokens it used, each exact or estimated
	 * (lib/account.h) */
	bool used;
	struct pg_use use;
	/* A TLS client's protocol and cipher (OpenSSL's static names: no copy,
	 * no lifetime); NULL for a plain one. */
	const char *tls_version, *tls_cipher;
};

/* The logger: the file, one ring per worker, the thread (gw->alog). */
struct pg_alog;

/* pg_alog_start's answer when the file cannot be opened for appending:
 * the configuration is wrong (prefixgate exits 2). */
#define PG_ALOG_EFILE (-2)

/* Open path for appending and start the logger as gw->alog, with one ring
 * per worker (gw->nworkers must be set). No-op, gw->alog NULL, when path is
 * NULL. 0, PG_ALOG_EFILE, or -1 (out of memory, no thread). */
int pg_alog_start(struct pg_gateway *gw, const char *path, char *err, size_t errlen);
/* Drain what is left, stop the logger, close the file; gw->alog is NULL
 * after. Call once the workers have stopped. */
void pg_alog_stop(struct pg_gateway *gw);
/* Is the access log on? (Workers skip building records when not.) */
static inline bool pg_alog_on(const struct pg_alog *l)
{
	return l != NULL;
}
/* Worker `worker` hands one record to l (never blocks; drops and counts
 * when its ring is full; nothing when l is NULL). */
void pg_alog_record(struct pg_alog *l, unsigned worker, const struct pg_alog_rec *r);
/* Records dropped because a ring was full (0 when l is NULL). */
uint64_t pg_alog_dropped(const struct pg_alog *l);

#endif /* PG_ACCESSLOG_H */
