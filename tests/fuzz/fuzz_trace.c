// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over user/lib/trace.c and user/lib/otlp.c: the input is
 * a client's traceparent value, and the text of a span's attributes and
 * name. Invariants: a value accepted reads back as itself when written
 * (version 00) and names a non-zero trace and parent; whatever the bytes,
 * the OTLP body made of them is JSON that json.c accepts.
 */
#include <string.h>
#include "fuzz.h"
#include "lib/json.h"
#include "lib/otlp.h"
#include "lib/trace.h"

static struct pg_json js;
static struct pg_buf out;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct pg_trace_ctx c;
	struct pg_otlp_resource res = {.service = "prefixgate", .version = "0"};
	struct pg_otlp_span span = {.name = "x", .kind = PG_OTLP_SERVER};
	char tp[PG_TRACEPARENT_LEN], name[64];
	static const uint8_t zero[PG_TRACE_ID_LEN];

	if (pg_traceparent_parse(s, size, &c)) {
		FUZZ_CHECK(size >= PG_TRACEPARENT_LEN);
		FUZZ_CHECK(memcmp(c.trace_id, zero, PG_TRACE_ID_LEN) != 0);
		FUZZ_CHECK(memcmp(c.parent_id, zero, PG_SPAN_ID_LEN) != 0);
		pg_traceparent_format(tp, c.trace_id, c.parent_id, c.flags & PG_TRACE_SAMPLED);
		if (s[0] == '0' && s[1] == '0' && !(c.flags & ~PG_TRACE_SAMPLED))
			FUZZ_CHECK(size == PG_TRACEPARENT_LEN && !memcmp(tp, s, size));
	}
	memcpy(span.trace_id, data, size < PG_TRACE_ID_LEN ? size : PG_TRACE_ID_LEN);
	snprintf(name, sizeof(name), "%.*s", (int)(size < 63 ? size : 63), s);
	span.name = name;
	pg_otlp_str(&span, "bytes", s, size);
	pg_otlp_int(&span, "n", (int64_t)size * -7919);
	pg_otlp_double(&span, "d", size ? (double)data[0] / 3.0 : 0.0);
	pg_buf_reset(&out);
	pg_otlp_encode(&out, &res, &span, 1);
	FUZZ_CHECK(!out.oom);
	FUZZ_CHECK(pg_json_parse(&js, out.p, out.len) == 0);
	return 0;
}
