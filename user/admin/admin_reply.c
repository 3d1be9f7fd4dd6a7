// SPDX-License-Identifier: MIT
/* Admin API replies (admin_reply.h). */
#include <string.h>
#include "admin/admin_reply.h"

int pg_admin_reply_error(struct pg_admin_reply *r, int status, const char *msg)
{
	r->status = status;
	r->content_type = "application/json";
	r->body.len = 0;
	pg_buf_puts(&r->body, "{\"error\":");
	pg_buf_json_str(&r->body, msg, strlen(msg));
	pg_buf_puts(&r->body, "}\n");
	return status;
}
