/* SPDX-License-Identifier: MIT */
/*
 * The admin HTTP API (doc/operations.md "Admin API"), as a request -> reply function
 * with no sockets, so it is unit-tested and fuzzed directly. The listener
 * and connections live in admin_listener.c, which calls pg_admin_handle() on the
 * control thread (membership changes must happen there).
 *
 *   GET    /health                 {"status":"ok","backends":N,"healthy":M}
 *   GET    /backends               [{"id","address","healthy","draining",
 *                                    "in_flight","requests","failures",...,
 *                                    "peer_in_flight"}]
 *   POST   /backends               {"address":"host:port"} -> 201 member;
 *                                  400 malformed, 409 already a member
 *   DELETE /backends/host:port     202 draining; 404 not a member
 *   POST   /route[?path=P][&key=K] dry run of a request body; P picks the API
 *                                  (default: none, i.e. raw-bytes key as for
 *                                  /invocations), K = X-Prefixgate-Key.
 *                                  200 choice, 503 no usable backend
 *   GET    /routing                SageMaker RoutingConfig JSON
 *   PUT    /routing                RoutingConfig body -> 200 new config;
 *                                  400 naming the field
 *   GET    /fleet                  {"gateway_id","load_mode","share",
 *                                   "nats_connected","peers":[{"id","age_ms",
 *                                   "seq"}]} (fleet/fleet.h)
 *   GET    /metrics                Prometheus text format 0.0.4 (metrics.h)
 *   GET    /config                 the configuration as a configuration file
 *                                  (text/plain; admin_config.c)
 *
 * Unknown paths 404, known paths with another method 405 (with Allow),
 * bodies above PG_ADMIN_BODY_MAX 413. Every JSON reply is
 * application/json; errors are {"error":"..."}.
 */
#ifndef PG_ADMIN_H
#define PG_ADMIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include "admin/admin_reply.h"
#include "gateway.h"
#include "lib/buf.h"
#include "lib/http.h"

/* Largest request body the admin API takes (a /route dry-run body: as large
 * as the gateway buffers to extract a key). */
#define PG_ADMIN_BODY_MAX (16u * 1024 * 1024)

/*
 * Answer one admin request. method and path as parsed by http.h (path
 * without the query), query: the text after '?' (len 0 if none), body/len:
 * the whole request body (decoded). Fills *out (body zero-initialised by the
 * caller or not: it is reset) and returns out->status. Runs on the control
 * thread: it may change membership (members/members.h) and the routing config.
 * Never sends traffic; the /route dry run changes no counters.
 */
int pg_admin_handle(struct pg_gateway *gw, struct pg_str method, struct pg_str path,
                    struct pg_str query, const char *body, size_t len, struct pg_admin_reply *out);

/*
 * HTTP framing of one admin exchange, without sockets: the caller appends
 * received bytes to in and calls pg_admin_input(), which appends to out the
 * bytes to send: "100 Continue" when the client expects it, and, once the
 * request (head and Content-Length or chunked body) is whole, the complete
 * reply with "Connection: close". Malformed requests get their 4xx
 * (http.h), bodies over PG_ADMIN_BODY_MAX 413. Zero-initialise; free with
 * pg_admin_conn_free().
 */
struct pg_admin_conn {
	struct pg_buf in;   /* bytes received */
	size_t scan;        /* pg_http_head_ready position */
	size_t ch_pos;      /* chunked: bytes of in fed to the decoder */
	struct pg_frame ch; /* chunked: decoder (valid once the head is parsed) */
	struct pg_buf body; /* chunked: the decoded body */
	bool head_done;     /* head parsed: ch initialised */
	bool continued;     /* "100 Continue" queued */
};

/* True once the whole reply is in out: read no more requests, send out and
 * close. False: out may have gained "100 Continue"; wait for more bytes. */
bool pg_admin_input(struct pg_gateway *gw, struct pg_admin_conn *c, struct pg_buf *out);
void pg_admin_conn_free(struct pg_admin_conn *c);

/* Has the request head arrived whole and been accepted (well-formed,
 * authorized), so that only its body, if any, is still awaited? False
 * before; also false for a request answered at its head with an error
 * (pg_admin_input returned true for it). */
bool pg_admin_head_complete(const struct pg_admin_conn *c);

/* With an admin token (--admin-token), does req carry "Authorization:
 * Bearer TOKEN" (scheme case-insensitive)? Compared in constant time. True
 * when no token is configured. pg_admin_input answers 401 otherwise, as
 * soon as the head is parsed. */
bool pg_admin_authorized(const struct pg_gateway *gw, const struct pg_http_request *req);

#endif /* PG_ADMIN_H */
