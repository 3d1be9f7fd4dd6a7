/* SPDX-License-Identifier: MIT */
/*
 * The pieces workload.c and wl_trace.c build request bodies from, appended
 * to a pg_buf (lib/buf.h; an allocation failure sets its oom), and the tags
 * of the random streams their text is drawn from. Pure.
 */
#ifndef PGLOAD_BODY_H
#define PGLOAD_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "pgload.h"

/* Tags that separate the random streams derived from --seed. */
enum {
	TAG_SYSTEM = 1,
	TAG_DOC,
	TAG_QUESTION,
	TAG_PICK,
	TAG_UNIQUE_SYS,
	TAG_UNIQUE_DOC,
	TAG_CONV,
	TAG_TURN,
	TAG_FIXED,
	TAG_TOOLS,
	TAG_TARGET,
	TAG_TRACE_BLOCK, /* a trace block id's text */
	TAG_TRACE_PAD,   /* a trace request's text beyond its block ids */
};

/* nbytes of the word text for key (pg_wl_text). */
void pg_body_text(struct pg_buf *b, size_t nbytes, uint64_t key);
/* {"model":M,"messages":[ */
void pg_body_open(struct pg_buf *b, const struct pg_opts *o);
/* ],"max_tokens":N and the stream fields (--no-stream: "stream":false), } */
void pg_body_close(struct pg_buf *b, const struct pg_opts *o, unsigned max_tokens);
/* /v1/completions: {"model":M,"prompt":" */
void pg_body_prompt_open(struct pg_buf *b, const struct pg_opts *o);
/* ","max_tokens":N and the stream fields, } */
void pg_body_prompt_close(struct pg_buf *b, const struct pg_opts *o, unsigned max_tokens);
/* {"role":ROLE,"content":" (after a comma unless first) */
void pg_body_msg_open(struct pg_buf *b, const char *role, bool first);
/* "} */
void pg_body_msg_close(struct pg_buf *b);
/* agentic: the "tools" member, then the opening of "messages" with the
 * system message (o->system_tokens x 4 bytes of system). Everything in it
 * comes from --seed alone. */
void pg_body_tools_head(struct pg_buf *b, const struct pg_opts *o, const char *system);

#endif /* PGLOAD_BODY_H */
