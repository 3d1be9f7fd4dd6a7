/* SPDX-License-Identifier: MIT */
/*
 * An admin API reply (admin.h answers a request with one; the handlers of
 * admin_backends.h and admin_pools.h fill them).
 */
#ifndef PG_ADMIN_REPLY_H
#define PG_ADMIN_REPLY_H

#include "lib/buf.h"

struct pg_admin_reply {
	int status;               /* HTTP status */
	const char *content_type; /* static string */
	const char *allow;        /* for 405: the methods allowed, else NULL */
	struct pg_buf body;       /* owned: pg_buf_free() it */
};

/* r answers status with {"error":msg} (application/json). Returns status. */
int pg_admin_reply_error(struct pg_admin_reply *r, int status, const char *msg);

#endif /* PG_ADMIN_REPLY_H */
