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

bool pg_early_keeps_client(const struct pg_frame *rest)
{
	/* A chunked body's size is unknown until its last chunk. */
	return rest->kind == PG_FRAME_LENGTH && rest->remaining <= PG_DISCARD_MAX;
}

enum pg_after pg_after_answer(bool keep_alive, bool owed, const struct pg_frame *rest)
{
	if (!keep_alive || (owed && !pg_early_keeps_client(rest)))
		return PG_AFTER_CLOSE;
	return owed ? PG_AFTER_DISCARD : PG_AFTER_NEXT;
}
