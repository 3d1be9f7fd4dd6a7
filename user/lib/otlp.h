/* SPDX-License-Identifier: MIT */
/*
 * OpenTelemetry spans and their OTLP/HTTP JSON encoding (the body of a
 * POST to a collector's /v1/traces, Content-Type: application/json;
 * https://opentelemetry.io/docs/specs/otlp/#json-protobuf-encoding): ids as
 * lowercase hex, 64-bit integers as decimal strings, enums as numbers.
 * Pure: no I/O; the body is appended to a growable buffer.
 */
#ifndef PG_OTLP_H
#define PG_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/buf.h"
#include "lib/trace.h"

#define PG_OTLP_ATTRS_MAX 16 /* attributes of one span, at most */

/* SpanKind (trace.proto). */
enum pg_otlp_kind {
	PG_OTLP_INTERNAL = 1,
	PG_OTLP_SERVER = 2,
	PG_OTLP_CLIENT = 3,
};

/* Status.StatusCode (trace.proto). */
enum pg_otlp_status { PG_OTLP_UNSET = 0, PG_OTLP_OK = 1, PG_OTLP_ERROR = 2 };

enum pg_otlp_type { PG_OTLP_STR, PG_OTLP_INT, PG_OTLP_BOOL, PG_OTLP_DOUBLE };

/* One attribute: a key (a static name) and its value of its type. */
struct pg_otlp_attr {
	const char *key;
	uint8_t type;  /* enum pg_otlp_type */
	const char *s; /* PG_OTLP_STR: s[0, slen), any bytes */
	size_t slen;
	int64_t i; /* PG_OTLP_INT; PG_OTLP_BOOL: 0 or 1 */
	double d;  /* PG_OTLP_DOUBLE */
};

struct pg_otlp_span {
	uint8_t trace_id[PG_TRACE_ID_LEN];
	uint8_t span_id[PG_SPAN_ID_LEN];
	uint8_t parent_id[PG_SPAN_ID_LEN];
	bool has_parent;
	const char *name;
	uint8_t kind;              /* enum pg_otlp_kind */
	uint8_t status;            /* enum pg_otlp_status */
	uint64_t start_ns, end_ns; /* Unix time, ns */
	struct pg_otlp_attr attr[PG_OTLP_ATTRS_MAX];
	unsigned nattr;
};

/* Attributes added to s (each dropped, silently, past PG_OTLP_ATTRS_MAX). */
void pg_otlp_str(struct pg_otlp_span *s, const char *key, const char *v, size_t len);
void pg_otlp_int(struct pg_otlp_span *s, const char *key, int64_t v);
void pg_otlp_bool(struct pg_otlp_span *s, const char *key, bool v);
void pg_otlp_double(struct pg_otlp_span *s, const char *key, double v);

/* Who sends the spans: the resource's service.name and
 * service.instance.id (NULL: none), the instrumentation scope's version. */
struct pg_otlp_resource {
	const char *service;
	const char *instance;
	const char *version;
};

/* An ExportTraceServiceRequest of spans[0, n), all of one resource and
 * scope, appended to out. */
void pg_otlp_encode(struct pg_buf *out, const struct pg_otlp_resource *res,
                    const struct pg_otlp_span *spans, size_t n);
/* The same piece by piece: open, each span added (first: true for the
 * first), closed. */
void pg_otlp_open(struct pg_buf *out, const struct pg_otlp_resource *res);
void pg_otlp_add(struct pg_buf *out, const struct pg_otlp_span *s, bool first);
void pg_otlp_close(struct pg_buf *out);

/* Where an OTLP/HTTP collector takes traces: "http://HOST:PORT" (then its
 * path is /v1/traces) or "http://HOST:PORT/PATH" (that path, as given);
 * HOST a name, an IPv4 address or [IPv6]. */
#define PG_OTLP_HOST_MAX 256
#define PG_OTLP_PATH_MAX 256
#define PG_OTLP_PATH     "/v1/traces"
struct pg_otlp_url {
	char host[PG_OTLP_HOST_MAX]; /* without brackets */
	char port[8];
	char path[PG_OTLP_PATH_MAX];
	char hostport[PG_OTLP_HOST_MAX + 10]; /* the Host field's value, as given */
};
/* url into *u: 0, or -1 with err saying what is wrong (https:// is not
 * spoken: a collector beside the gateway is reached over http). */
int pg_otlp_url_parse(const char *url, struct pg_otlp_url *u, char *err, size_t errlen);

#endif /* PG_OTLP_H */
