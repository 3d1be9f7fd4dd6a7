// SPDX-License-Identifier: MIT
/*
 * The JSON pieces of pgload's request bodies (body.h): the envelope, the
 * messages, word text, and agentic's "tools" array.
 */
#include "body.h"

#include <stdio.h>

#include "rng.h"
#include "workload.h"

void pg_body_text(struct pg_buf *b, size_t nbytes, uint64_t key)
{
	char *d = pg_buf_extend(b, nbytes);

	if (d)
		pg_wl_text(d, nbytes, key);
}

void pg_body_open(struct pg_buf *b, const struct pg_opts *o)
{
	pg_buf_puts(b, "{\"model\":\"");
	pg_buf_puts(b, o->model);
	pg_buf_puts(b, "\",\"messages\":[");
}

/* end, then "max_tokens" and the stream fields, then the closing brace. */
static void body_tail(struct pg_buf *b, const struct pg_opts *o, unsigned max_tokens,
                      const char *end)
{
	char tail[160];

	snprintf(tail, sizeof(tail), "%s,\"max_tokens\":%u%s}", end, max_tokens,
	         o->stream ? ",\"stream\":true,\"stream_options\":{\"include_usage\":true}"
	                   : ",\"stream\":false");
	pg_buf_puts(b, tail);
}

void pg_body_close(struct pg_buf *b, const struct pg_opts *o, unsigned max_tokens)
{
	body_tail(b, o, max_tokens, "]");
}

void pg_body_prompt_open(struct pg_buf *b, const struct pg_opts *o)
{
	pg_buf_puts(b, "{\"model\":\"");
	pg_buf_puts(b, o->model);
	pg_buf_puts(b, "\",\"prompt\":\"");
}

void pg_body_prompt_close(struct pg_buf *b, const struct pg_opts *o, unsigned max_tokens)
{
	body_tail(b, o, max_tokens, "\"");
}

void pg_body_msg_open(struct pg_buf *b, const char *role, bool first)
{
	pg_buf_puts(b, first ? "{\"role\":\"" : ",{\"role\":\"");
	pg_buf_puts(b, role);
	pg_buf_puts(b, "\",\"content\":\"");
}

void pg_body_msg_close(struct pg_buf *b)
{
	pg_buf_puts(b, "\"}");
}

/* Object member name text: words joined by '_' (no escaping needed). */
static void put_ident(struct pg_buf *b, size_t nbytes, uint64_t key)
{
	char *d = pg_buf_extend(b, nbytes);

	if (!d)
		return;
	pg_wl_text(d, nbytes, key);
	for (size_t i = 0; i < nbytes; i++)
		if (d[i] == ' ')
			d[i] = '_';
}

void pg_body_tools_head(struct pg_buf *b, const struct pg_opts *o, const char *system)
{
	static const char *const params[2] = {"query", "limit"};
	static const char *const types[2] = {"string", "integer"};
	char num[96];

	pg_buf_puts(b, "\"tools\":[");
	for (unsigned k = 0; k < o->tools; k++) {
		uint64_t base = (uint64_t)k << 8;

		snprintf(num, sizeof(num), "%s{\"type\":\"function\",\"function\":{\"name\":\"t%u_",
		         k ? "," : "", k);
		pg_buf_puts(b, num);
		put_ident(b, 12, pg_mix(o->seed, TAG_TOOLS, base));
		pg_buf_puts(b, "\",\"description\":\"");
		pg_body_text(b, (size_t)o->tool_tokens * 4, pg_mix(o->seed, TAG_TOOLS, base + 1));
		pg_buf_puts(b, "\",\"parameters\":{\"type\":\"object\",\"properties\":{");
		for (int p = 0; p < 2; p++) {
			pg_buf_puts(b, p ? ",\"" : "\"");
			pg_buf_puts(b, params[p]);
			pg_buf_puts(b, "\":{\"type\":\"");
			pg_buf_puts(b, types[p]);
			pg_buf_puts(b, "\",\"description\":\"");
			pg_body_text(b, 64, pg_mix(o->seed, TAG_TOOLS, base + 2 + (uint64_t)p));
			pg_buf_puts(b, "\"}");
		}
		pg_buf_puts(b, "},\"required\":[\"query\"]}}}");
	}
	pg_buf_puts(b, "],\"messages\":[");
	pg_body_msg_open(b, "system", true);
	pg_buf_append(b, system, (size_t)o->system_tokens * 4);
	pg_body_msg_close(b);
}
