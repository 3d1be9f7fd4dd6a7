// SPDX-License-Identifier: MIT
/*
 * Pinned keys: the hash, length, source and cache_aware view of a fixed set
 * of bodies, recorded from the key code as it was before its parsing was
 * made cheaper. Any change to json.c or key.c that alters one of these
 * changes where live traffic goes, so it must be a decision, not an
 * accident. Bodies cover what the fast paths distinguish: long ASCII and
 * multi-byte text, escapes, tools, content parts, every completions form,
 * explicit keys, duplicate members, and bodies made unusable far past the
 * key (a late error in the JSON grammar must still give the raw fallback; a
 * late message or token id of the wrong shape, once the key text is
 * complete, is not looked at: rows 16 and 17 below 65536 were the raw
 * fallback until that was decided, doc/routing.md "How it routes"). The blocks of
 * raw keys (source R, and fallbacks) ran to PrefixLength until
 * cache_aware's were made to run past it, as over a text (key.h).
 *
 * On a mismatch the test prints the row as computed, in the table's form.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <xxhash.h>

#include "lib/key.h"

#define BODY_CAP (2u * 1024 * 1024)

struct out {
	char *p;
	size_t len;
};

static void put(struct out *o, const char *s)
{
	size_t n = strlen(s);

	assert_true(o->len + n < BODY_CAP);
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = 0;
}

/* Deterministic text of about n bytes (as written in JSON) in one of a few
 * styles, from seed. */
enum style { ASCII, CJK, ESCAPED, MIXED };

static void text(struct out *o, size_t n, uint64_t seed, enum style st)
{
	static const char *const ascii[] = {"model ", "cache ",  "token ",  "prefix ", "route ",
	                                    "query ", "answer ", "kernel ", "buffer ", "vector "};
	static const char *const cjk[] = {"\xe4\xb8\xad\xe6\x96\x87", "\xe6\x97\xa5\xe6\x9c\xac ",
	                                  "\xc3\xa9t\xc3\xa9 ", "\xf0\x9f\x98\x80",
	                                  "\xe2\x82\xac"
	                                  "5 "};
	static const char *const esc[] = {"\\n", "\\\"q\\\" ", "\\u00e9", "\\ud83d\\ude00", "\\t",
	                                  "\\/", "\\u001e",    "\\\\",    "\\ud800x"};
	size_t end = o->len + n;

	while (o->len < end) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		unsigned r = (unsigned)(seed >> 33);
		enum style s = st == MIXED ? (enum style)(r % 3) : st;

		if (s == ASCII || (s == ESCAPED && r % 4))
			put(o, ascii[(r >> 4) % 10]);
		else if (s == CJK)
			put(o, cjk[(r >> 4) % 5]);
		else
			put(o, esc[(r >> 4) % 9]);
	}
}

/* A chat body: optional tools, a system prompt, then turns of `turn`
 * bytes each until about kib KiB. */
static void chat_body(struct out *o, size_t kib, enum style st, bool tools, uint64_t seed)
{
	o->len = 0;
	put(o, "{\"model\":\"m\",\"max_tokens\":16,");
	if (tools)
		put(o, "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\","
		       "\"parameters\":{\"type\":\"object\",\"required\":[\"q\"],\"properties\":"
		       "{\"q\":{\"type\":\"string\",\"description\":\"caf\\u00e9 \\\"q\\\"\"},"
		       "\"n\":{\"type\":\"integer\",\"minimum\":-1.5e3}}}}}],");
	put(o, "\"messages\":[{\"role\":\"system\",\"content\":\"");
	text(o, 3000, seed, st);
	put(o, "\"}");
	for (unsigned k = 0; o->len < kib * 1024; k++) {
		put(o, k % 2 ? ",{\"role\":\"assistant\",\"content\":\""
		             : ",{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"");
		text(o, k % 2 ? 1200 : 400, seed << 20 | k, st);
		put(o,
		    k % 2 ? "\"}" : "\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}");
	}
	put(o, "],\"stream\":true}");
}

enum body_id {
	B_ASCII_32K,      /* routebench's shape */
	B_ASCII_1M,       /* the same, 1 MiB */
	B_CJK_40K,        /* multi-byte text */
	B_ESCAPED_40K,    /* escapes everywhere */
	B_MIXED_TOOLS,    /* tools, mixed text */
	B_SMALL,          /* a short chat, whole key under every cut */
	B_NULLS,          /* null / missing role and content, dup "messages" */
	B_CACHE_KEY_LAST, /* prompt_cache_key after 32 KiB of messages */
	B_PROMPT_STR,     /* completions: a long string */
	B_PROMPT_STRS,    /* completions: strings */
	B_PROMPT_IDS,     /* completions: token ids */
	B_PROMPT_IDSS,    /* completions: arrays of ids */
	B_LATE_COMMA,     /* unusable: trailing comma 32 KiB in */
	B_LATE_UTF8,      /* unusable: bad UTF-8 in the last message */
	B_LATE_CTRL,      /* unusable: raw control byte late */
	B_LATE_ESCAPE,    /* unusable: bad escape late */
	B_LATE_TYPE,      /* a late message's content is a number: past the key */
	B_LATE_ID,        /* a late token id is a fraction: past the key */
	B_TRAILING,       /* unusable: data after the value */
	B_LATE_NUMBER,    /* unusable: a leading zero in a field after messages */
	B_LATE_DEEP,      /* unusable: a field after messages nested too deep */
	B_TOOLS_AFTER,    /* tools after messages, duplicate names, nesting */
	B_COUNT,
};

static void build(struct out *o, enum body_id id)
{
	size_t at;

	switch (id) {
	case B_ASCII_32K:
		chat_body(o, 32, ASCII, false, 1);
		break;
	case B_ASCII_1M:
		chat_body(o, 1024, ASCII, false, 2);
		break;
	case B_CJK_40K:
		chat_body(o, 40, CJK, false, 3);
		break;
	case B_ESCAPED_40K:
		chat_body(o, 40, ESCAPED, false, 4);
		break;
	case B_MIXED_TOOLS:
		chat_body(o, 48, MIXED, true, 5);
		break;
	case B_SMALL:
		o->len = 0;
		put(o, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi \\u00e9\\u001e\"}]}");
		break;
	case B_NULLS:
		o->len = 0;
		put(o, "{\"messages\":[{\"role\":\"user\",\"content\":\"first, replaced\"}],"
		       "\"tools\":null,\"messages\":[{\"content\":null},{\"role\":null,"
		       "\"content\":\"");
		text(o, 6000, 6, MIXED);
		put(o, "\"},{\"role\":\"user\"}, {\"role\":\"user\",\"content\":[]}]}");
		break;
	case B_CACHE_KEY_LAST:
		chat_body(o, 32, ASCII, false, 7);
		o->len -= 1;
		put(o, ",\"prompt_cache_key\":\"tenant-\\u00e9/42\"}");
		break;
	case B_PROMPT_STR:
		o->len = 0;
		put(o, "{\"prompt\":\"");
		text(o, 20000, 8, MIXED);
		put(o, "\",\"max_tokens\":3}");
		break;
	case B_PROMPT_STRS:
		o->len = 0;
		put(o, "{\"prompt\":[");
		for (unsigned k = 0; k < 40; k++) {
			put(o, k ? ",\"" : "\"");
			text(o, 300, 9 + k, k % 2 ? ASCII : CJK);
			put(o, "\"");
		}
		put(o, "]}");
		break;
	case B_PROMPT_IDS:
	case B_PROMPT_IDSS:
	case B_LATE_ID: {
		uint64_t s = 10;
		char num[32];

		o->len = 0;
		put(o, "{\"prompt\":[");
		for (unsigned k = 0; k < 3000; k++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			if (id != B_PROMPT_IDS && k % 100 == 0)
				put(o, k ? "],[" : "[");
			else if (k)
				put(o, ",");
			snprintf(num, sizeof(num), "%s%u", s >> 63 ? "-" : "",
			         (unsigned)(s >> 40) % 200000);
			put(o, num);
		}
		put(o, id == B_LATE_ID ? ",2.5" : "");
		put(o, id != B_PROMPT_IDS ? "]]}" : "]}");
		break;
	}
	case B_LATE_COMMA:
		chat_body(o, 32, ASCII, false, 11);
		o->len -= 2; /* "]}" of ..."stream":true} -> "...,]}" */
		at = o->len - strlen(",\"stream\":true");
		o->len = at;
		put(o, "],}");
		break;
	case B_LATE_UTF8:
	case B_LATE_CTRL:
	case B_LATE_ESCAPE:
		chat_body(o, 32, CJK, false, 12);
		at = o->len - 200;
		while (o->p[at] == '"' || o->p[at] == '\\' || (unsigned char)o->p[at] >= 0x80)
			at--;
		if (id == B_LATE_UTF8)
			o->p[at] = (char)0xc0;
		else if (id == B_LATE_CTRL)
			o->p[at] = '\x01';
		else
			o->p[at] = '\\';
		break;
	case B_LATE_TYPE:
		chat_body(o, 32, ASCII, false, 13);
		o->len -= strlen("],\"stream\":true}");
		put(o, ",{\"role\":\"user\",\"content\":7}],\"stream\":true}");
		break;
	case B_TRAILING:
		chat_body(o, 32, ASCII, false, 14);
		put(o, " {}");
		break;
	case B_LATE_NUMBER:
		chat_body(o, 32, ASCII, false, 15);
		o->len -= 1;
		put(o, ",\"temperature\":01}");
		break;
	case B_LATE_DEEP:
		chat_body(o, 32, ASCII, false, 16);
		o->len -= 1;
		put(o, ",\"x\":");
		for (unsigned k = 0; k < 257; k++)
			put(o, "[");
		for (unsigned k = 0; k < 257; k++)
			put(o, "]");
		put(o, "}");
		break;
	case B_TOOLS_AFTER:
		chat_body(o, 20, MIXED, false, 17);
		o->len -= 1;
		put(o, ",\"tools\":[{\"b\":2,\"a\":{\"z\":[true,null,{\"\\u0079\":\"\\u00e9\"}],"
		       "\"a\":\"\\u0001\\/\"},\"b\":1,\"\xc3\xa9\":\"\"}]}");
		break;
	default:
		fail();
	}
}

struct pin {
	uint8_t body, api;
	uint32_t plen;
	uint64_t hash;
	uint32_t length;
	uint8_t source, fallback, stream;
	/* pg_key_compute_blocks */
	uint64_t anchor;
	uint32_t anchor_len, nblocks;
	uint64_t chain; /* XXH3-64 of chain[0..nblocks) */
};

#define C PG_API_CHAT
#define P PG_API_COMPLETIONS
#define R PG_API_RAW

/* clang-format off */
static const struct pin pins[] = {
	{0, C, 1024, 0x550d092613b9aae5, 1024, 1, 0, 1, 0x3fdfa7a4dc871d43, 3418, 60, 0xf7cd8d769706dd14},
	{0, C, 4096, 0x715fbe9fc76256e8, 4096, 1, 0, 1, 0x3fdfa7a4dc871d43, 3418, 60, 0xf7cd8d769706dd14},
	{0, C, 65536, 0x3d3ca02228d17703, 31007, 1, 0, 1, 0x3fdfa7a4dc871d43, 3418, 60, 0xf7cd8d769706dd14},
	{0, C, 7, 0x043d0acd2737e7d4, 7, 1, 0, 1, 0xec938c6005d84809, 3016, 60, 0xf7cd8d769706dd14},
	{0, R, 4096, 0x0d762f8ec119337d, 4096, 0, 0, 0, 0x0d762f8ec119337d, 4096, 64, 0x0860d71cb6832835},
	{0, P, 4096, 0x0d762f8ec119337d, 4096, 0, 1, 1, 0x0d762f8ec119337d, 4096, 64, 0x0860d71cb6832835},
	{1, C, 1024, 0xd9ccb977b884bb2c, 1024, 1, 0, 1, 0x07808943412947b6, 3422, 512, 0xad12ec797ff3624b},
	{1, C, 4096, 0x64587c46356b3d8b, 4096, 1, 0, 1, 0x07808943412947b6, 3422, 512, 0xad12ec797ff3624b},
	{1, C, 65536, 0x36d4c76d19949cc2, 65536, 1, 0, 1, 0x07808943412947b6, 3422, 512, 0xad12ec797ff3624b},
	{2, C, 1024, 0x689a5c7027343be5, 1024, 1, 0, 1, 0x9be0530021009b3c, 3419, 75, 0xfe68d5041f6d50ec},
	{2, C, 4096, 0x480a3924fd7f1f1e, 4096, 1, 0, 1, 0x9be0530021009b3c, 3419, 75, 0xfe68d5041f6d50ec},
	{2, C, 65536, 0xa9473bdebdb9719d, 18220, 1, 0, 1, 0x9be0530021009b3c, 3419, 75, 0xfe68d5041f6d50ec},
	{2, C, 7, 0x043d0acd2737e7d4, 7, 1, 0, 1, 0x3bccc8a71705836a, 3019, 75, 0xfe68d5041f6d50ec},
	{3, C, 1024, 0xc5c7f8fc0243de00, 1024, 1, 0, 1, 0x86007317c673a77f, 3025, 67, 0x5d077b6680279e04},
	{3, C, 4096, 0x099f50e86e06cf72, 4096, 1, 0, 1, 0x86007317c673a77f, 3025, 67, 0x5d077b6680279e04},
	{3, C, 65536, 0x690b8cb492d8b858, 33301, 1, 0, 1, 0x86007317c673a77f, 3025, 67, 0x5d077b6680279e04},
	{3, C, 7, 0x043d0acd2737e7d4, 7, 1, 0, 1, 0x74f55167d0c528e4, 2665, 67, 0x5d077b6680279e04},
	{4, C, 1024, 0x3a27f9538efe0c33, 1024, 1, 0, 1, 0xbea02ab20e2f84c1, 3510, 88, 0xe144184897813a71},
	{4, C, 4096, 0xf4f63731cd1caf02, 4096, 1, 0, 1, 0xbea02ab20e2f84c1, 3510, 88, 0xe144184897813a71},
	{4, C, 65536, 0x5b4809fc7c4f1a5a, 37399, 1, 0, 1, 0xbea02ab20e2f84c1, 3510, 88, 0xe144184897813a71},
	{5, C, 1024, 0x356848e1b8e1bf0a, 12, 1, 0, 0, 0x356848e1b8e1bf0a, 13, 0, 0x2d06800538d394c2},
	{5, C, 4096, 0x356848e1b8e1bf0a, 12, 1, 0, 0, 0x356848e1b8e1bf0a, 13, 0, 0x2d06800538d394c2},
	{5, C, 65536, 0x356848e1b8e1bf0a, 12, 1, 0, 0, 0x356848e1b8e1bf0a, 13, 0, 0x2d06800538d394c2},
	{5, C, 7, 0x5da0c8b62ad40e1f, 7, 1, 0, 0, 0x5da0c8b62ad40e1f, 7, 0, 0x2d06800538d394c2},
	{6, C, 1024, 0x18867e77348c9aa7, 1024, 1, 0, 0, 0x644903b71b715e57, 5804, 11, 0x67006ec8c4f4fa0a},
	{6, C, 4096, 0x6df2cc6c6b454940, 4096, 1, 0, 0, 0x644903b71b715e57, 5804, 11, 0x67006ec8c4f4fa0a},
	{6, C, 65536, 0x8aca8d3b8597501a, 4760, 1, 0, 0, 0x644903b71b715e57, 5804, 11, 0x67006ec8c4f4fa0a},
	{7, C, 1024, 0x05ee8c1342286e51, 12, 3, 0, 1, 0x05ee8c1342286e51, 0, 0, 0x2d06800538d394c2},
	{7, C, 4096, 0x05ee8c1342286e51, 12, 3, 0, 1, 0x05ee8c1342286e51, 0, 0, 0x2d06800538d394c2},
	{7, C, 65536, 0x05ee8c1342286e51, 12, 3, 0, 1, 0x05ee8c1342286e51, 0, 0, 0x2d06800538d394c2},
	{8, P, 1024, 0x5974eac22c56d94a, 1024, 4, 0, 0, 0x5974eac22c56d94a, 1249, 37, 0xb273f7275e90a122},
	{8, P, 4096, 0x6751db7fdcf0d579, 4096, 4, 0, 0, 0x6751db7fdcf0d579, 5075, 37, 0xb273f7275e90a122},
	{8, P, 65536, 0xa43279b3e5a4de6b, 15533, 4, 0, 0, 0xa43279b3e5a4de6b, 19234, 37, 0xb273f7275e90a122},
	{8, C, 4096, 0x56ded9b9d2d77cf4, 4096, 0, 1, 0, 0x56ded9b9d2d77cf4, 4096, 39, 0xfdf4f0df538006f1},
	{9, P, 1024, 0x9a0b7eea200f344b, 1024, 4, 0, 0, 0x9a0b7eea200f344b, 1454, 23, 0xe595b94611c87030},
	{9, P, 4096, 0x3886a80e8fadab91, 4096, 4, 0, 0, 0x3886a80e8fadab91, 5609, 23, 0xe595b94611c87030},
	{9, P, 65536, 0x5ff8edb6a27330c7, 8925, 4, 0, 0, 0x5ff8edb6a27330c7, 12166, 23, 0xe595b94611c87030},
	{10, P, 1024, 0x812a69c8dbbb4386, 1024, 4, 0, 0, 0x812a69c8dbbb4386, 1024, 40, 0xa1a7d44649a53103},
	{10, P, 4096, 0x738dbad2c6e57f22, 4096, 4, 0, 0, 0x738dbad2c6e57f22, 4096, 40, 0xa1a7d44649a53103},
	{10, P, 65536, 0x0a6296be5f15302f, 20779, 4, 0, 0, 0x0a6296be5f15302f, 20779, 40, 0xa1a7d44649a53103},
	{11, P, 1024, 0xdb3286aa122b93df, 1024, 4, 0, 0, 0xdb3286aa122b93df, 1024, 40, 0x74008327e2c97828},
	{11, P, 4096, 0xd6b63f9ec9314bdf, 4096, 4, 0, 0, 0xd6b63f9ec9314bdf, 4096, 40, 0x74008327e2c97828},
	{11, P, 65536, 0x7ebbe8b0854dd91b, 20808, 4, 0, 0, 0x7ebbe8b0854dd91b, 20808, 40, 0x74008327e2c97828},
	{12, C, 1024, 0x1f4649b745427b39, 1024, 0, 1, 0, 0x1f4649b745427b39, 1024, 64, 0xc5c8155db1b006de},
	{12, C, 4096, 0xbed79be9019a5c5c, 4096, 0, 1, 0, 0xbed79be9019a5c5c, 4096, 64, 0xc5c8155db1b006de},
	{12, C, 65536, 0x5391316e354d1cc9, 33141, 0, 1, 0, 0x5391316e354d1cc9, 33141, 64, 0xc5c8155db1b006de},
	{13, C, 1024, 0x9c4c28fd100487a4, 1024, 0, 1, 0, 0x9c4c28fd100487a4, 1024, 64, 0xa6fb3d68a0936a14},
	{13, C, 4096, 0x17091f8eb17074bb, 4096, 0, 1, 0, 0x17091f8eb17074bb, 4096, 64, 0xa6fb3d68a0936a14},
	{13, C, 65536, 0xc3dba733bd85eb33, 33148, 0, 1, 0, 0xc3dba733bd85eb33, 33148, 64, 0xa6fb3d68a0936a14},
	{14, C, 1024, 0x9c4c28fd100487a4, 1024, 0, 1, 0, 0x9c4c28fd100487a4, 1024, 64, 0xa6fb3d68a0936a14},
	{14, C, 4096, 0x17091f8eb17074bb, 4096, 0, 1, 0, 0x17091f8eb17074bb, 4096, 64, 0xa6fb3d68a0936a14},
	{14, C, 65536, 0xba33bec6a24ffade, 33148, 0, 1, 0, 0xba33bec6a24ffade, 33148, 64, 0xa6fb3d68a0936a14},
	{15, C, 1024, 0x9c4c28fd100487a4, 1024, 0, 1, 0, 0x9c4c28fd100487a4, 1024, 64, 0xa6fb3d68a0936a14},
	{15, C, 4096, 0x17091f8eb17074bb, 4096, 0, 1, 0, 0x17091f8eb17074bb, 4096, 64, 0xa6fb3d68a0936a14},
	{15, C, 65536, 0xb9994355513a4450, 33148, 0, 1, 0, 0xb9994355513a4450, 33148, 64, 0xa6fb3d68a0936a14},
	{16, C, 1024, 0xe6fa9cc6020a02e0, 1024, 1, 0, 1, 0x94d9d40f9845c91b, 3420, 60, 0x9f08e3d2b313d72e},
	{16, C, 4096, 0xbe2ed030a17e6f53, 4096, 1, 0, 1, 0x94d9d40f9845c91b, 3420, 60, 0x9f08e3d2b313d72e},
	{16, C, 65536, 0x228ad6ead4f3a992, 33167, 0, 1, 1, 0x228ad6ead4f3a992, 33167, 64, 0x36da246edb061859},
	{17, P, 1024, 0xdb3286aa122b93df, 1024, 4, 0, 0, 0xdb3286aa122b93df, 1024, 40, 0x74008327e2c97828},
	{17, P, 4096, 0xd6b63f9ec9314bdf, 4096, 4, 0, 0, 0xd6b63f9ec9314bdf, 4096, 40, 0x74008327e2c97828},
	{17, P, 65536, 0x73f4488e0bbaf241, 20855, 0, 1, 0, 0x73f4488e0bbaf241, 20855, 40, 0xded646965dac7095},
	{18, C, 1024, 0xb68ba48439e6ca75, 1024, 0, 1, 0, 0xb68ba48439e6ca75, 1024, 64, 0x47a3bf18bd24aa55},
	{18, C, 4096, 0x00d6aa0749dd7465, 4096, 0, 1, 0, 0x00d6aa0749dd7465, 4096, 64, 0x47a3bf18bd24aa55},
	{18, C, 65536, 0x75ae11346fb23dad, 33155, 0, 1, 0, 0x75ae11346fb23dad, 33155, 64, 0x47a3bf18bd24aa55},
	{19, C, 4096, 0x4f946c5916b4de09, 4096, 0, 1, 0, 0x4f946c5916b4de09, 4096, 64, 0x9e3d45224a2bdc1c},
	{20, C, 4096, 0xd7bec0717dbaada6, 4096, 0, 1, 0, 0xd7bec0717dbaada6, 4096, 65, 0x9bc01ed42a0cb44d},
	{21, C, 1024, 0x54efd3f16d8a9e7b, 1024, 1, 0, 1, 0x00cbde0d31ff1d6e, 3404, 37, 0xff2814b912f9f279},
	{21, C, 4096, 0x99bd5d469fe43638, 4096, 1, 0, 1, 0x00cbde0d31ff1d6e, 3404, 37, 0xff2814b912f9f279},
	{21, C, 65536, 0xb6b7f5982470feeb, 15538, 1, 0, 1, 0x00cbde0d31ff1d6e, 3404, 37, 0xff2814b912f9f279},
};
/* clang-format on */

static void check(const struct out *o, const struct pin *want, bool *ok)
{
	static struct pg_key_blocks kb;
	struct pg_str nohdr = {"", 0};
	struct pg_key k, kk;
	struct pin got = {.body = want->body, .api = want->api, .plen = want->plen};

	pg_key_compute(want->api, nohdr, o->p, o->len, true, want->plen, &k, NULL, 0, NULL);
	pg_key_compute_blocks(want->api, nohdr, o->p, o->len, true, want->plen, &kk, &kb);
	assert_true(k.hash == kk.hash && k.length == kk.length && k.source == kk.source);
	got.hash = k.hash;
	got.length = k.length;
	got.source = k.source;
	got.fallback = k.fallback;
	got.stream = k.stream;
	got.anchor = kb.anchor;
	got.anchor_len = kb.anchor_len;
	got.nblocks = kb.n;
	got.chain = XXH3_64bits(kb.chain, sizeof(kb.chain[0]) * kb.n);
	if (got.hash != want->hash || got.length != want->length || got.source != want->source ||
	    got.fallback != want->fallback || got.stream != want->stream ||
	    got.anchor != want->anchor || got.anchor_len != want->anchor_len ||
	    got.nblocks != want->nblocks || got.chain != want->chain) {
		*ok = false;
		printf("# \t{%u, %c, %u, 0x%016llx, %u, %u, %u, %u, 0x%016llx, %u, %u, "
		       "0x%016llx},\n",
		       got.body, "RCP"[got.api], got.plen, (unsigned long long)got.hash, got.length,
		       got.source, got.fallback, got.stream, (unsigned long long)got.anchor,
		       got.anchor_len, got.nblocks, (unsigned long long)got.chain);
	}
}

static void test_pins(void **state)
{
	struct out o = {.p = malloc(BODY_CAP)};
	bool ok = true;
	int built = -1;

	(void)state;
	assert_non_null(o.p);
	for (size_t i = 0; i < sizeof(pins) / sizeof(pins[0]); i++) {
		if (pins[i].body != built) {
			build(&o, (enum body_id)pins[i].body);
			built = pins[i].body;
		}
		check(&o, &pins[i], &ok);
	}
	free(o.p);
	if (!ok)
		fail_msg("keys differ from the pinned ones (rows as computed above)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pins),
	};

	return cmocka_run_group_tests_name("key_pins", tests, NULL, NULL);
}
