// SPDX-License-Identifier: MIT
/*
 * Boundary decisions (boundary.h). Pure.
 */
#include "lib/boundary.h"

bool pg_reuse_ok(const struct pg_reuse *r)
{
	return r->request_complete && r->request_flushed && !r->early && r->resp_reusable &&
	       !r->head_request && r->open && r->member && r->room;
}

bool pg_early_keeps_client(enum pg_body_kind body, uint64_t body_left)
{
	return body == PG_BODY_LENGTH && body_left <= PG_DISCARD_MAX;
}
