// SPDX-License-Identifier: MIT
/*
 * libFuzzer target over user/lib/jsonedit.c: the input's first byte picks
 * up to four edits (set or delete, of names the document may or may not
 * hold, duplicates and escaped spellings included), the rest is the
 * document. Every object the parser accepts, edited, must be what the
 * reference of jsonedit_ref.h says: a valid object whose members are the
 * input's with the edits applied, and byte for byte the input when no edit
 * applied. A non-object is refused with nothing written.
 */
#include <string.h>
#include "fuzz.h"
#include "jsonedit_ref.h"

static struct pg_json js;
static struct pg_buf out;

static const struct pg_jedit menu[8] = {
    {"max_tokens", 10, "1", 1},
    {"stream", 6, NULL, 0},
    {"kv_transfer_params", 18, "{\"do_remote_decode\":true}", 25},
    {"a", 1, NULL, 0},
    {"stream_options", 14, NULL, 0},
    {"b", 1, "[null, \"x\"]", 11},
    {"\"", 1, "0", 1},
    {"bootstrap_room", 14, "4611686018427387904", 19},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pg_jedit e[4];
	size_t n = 0;
	const char *err;

	if (!size)
		return 0;
	for (unsigned i = 0; i < 4; i++)
		if (data[0] >> (2 * i) & 1)
			e[n++] = menu[(data[0] >> (2 * i + 1) & 1) * 4 + i];
	if (pg_json_parse(&js, (const char *)data + 1, size - 1))
		return 0;
	pg_buf_reset(&out);
	if (js.tok[0].type != PG_JSON_OBJECT) {
		FUZZ_CHECK(pg_json_edit(&js, e, n, &out) == -1 && out.len == 0);
		return 0;
	}
	FUZZ_CHECK(pg_json_edit(&js, e, n, &out) == 0);
	err = jedit_check((const char *)data + 1, size - 1, e, n, out.p, out.len);
	if (err)
		fprintf(stderr, "jsonedit: %s\n", err);
	FUZZ_CHECK(!err);
	return 0;
}
