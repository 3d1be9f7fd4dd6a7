/* SPDX-License-Identifier: MIT */
/*
 * The admin API's members (admin.c dispatches to these): GET /backends[?pool=],
 * POST /backends, DELETE /backends/ADDR:PORT. Control thread only.
 */
#ifndef PG_ADMIN_BACKENDS_H
#define PG_ADMIN_BACKENDS_H

#include "admin/admin_reply.h"
#include "gateway.h"
#include "lib/http.h"

int pg_admin_backends_get(struct pg_gateway *gw, struct pg_str query, struct pg_admin_reply *r);
int pg_admin_backends_post(struct pg_gateway *gw, const char *body, size_t len,
                           struct pg_admin_reply *r);
/* addr: the target after /backends/, percent-encoded or not. */
int pg_admin_backend_delete(struct pg_gateway *gw, struct pg_str addr, struct pg_admin_reply *r);

/* Percent-decode s into a new NUL-terminated string (plus_space: '+' is a
 * space, as in query strings); *n gets its length (a %00 makes it differ
 * from strlen). NULL if out of memory. Invalid escapes are kept as is. */
char *pg_admin_url_decode(struct pg_str s, bool plus_space, size_t *n);

#endif /* PG_ADMIN_BACKENDS_H */
